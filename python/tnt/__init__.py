"""tnt: data-parallel training on CPU clusters, from Python (python/README.md).

    import tnt
    model = tnt.Model.from_zoo("lenet5")
    model.compile(optimizer=tnt.optimizers.Adam(learning_rate=0.002), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    model.fit(x, y, batch_size=64, epochs=4)   # batch_size: the global batch, split over the ranks

The same script runs alone or as every rank of `tnt-launch -n 4 -- python3 train.py`. The process
joins its job on first use of tnt (tnt.get_rank(), tnt.comm_world(), a Model); call
tnt.init(threads=N) before that to give each rank N compute threads.
"""

import atexit as _atexit
import sys as _sys
import traceback as _traceback

from . import _tnt
from .errors import ConfigError, DataError, Error, JobError, NonFiniteError, Preempted
from . import callbacks, data, layers, losses, optimizers
from .models import Model, Sequential

__all__ = ["init", "get_rank", "get_size", "is_master_rank", "comm_world", "Model", "Sequential", "callbacks",
           "data", "layers", "losses", "optimizers", "Error", "ConfigError", "DataError", "JobError",
           "NonFiniteError", "Preempted"]


def init(threads=None):
    """Joins this process's job (tnt-launch's, mpirun's or srun's environment; alone a job of one
    rank) with `threads` compute threads per rank (default 1). Implicit on first use of tnt."""
    _tnt.init(threads or 0)


def get_rank():
    return _tnt.rank()


def get_size():
    return _tnt.size()


def is_master_rank():
    return _tnt.rank() == 0


def comm_world():
    """The job's communicator, which the trainer shares: allreduce, broadcast, allgather and barrier
    on NumPy arrays (in place where they write)."""
    return _tnt.comm_world()


def _leave():
    if _tnt.joined():
        _tnt.leave()


# Exit statuses as tnt-train's: 3 preempted (rerun with resume="auto"), 130 interrupted.
_PREEMPTED_STATUS = 3
_INTERRUPTED_STATUS = 130


def _excepthook(kind, value, tb):
    # A script that dies of an exception while it belongs to a job leaves at once (as tnt-train
    # does after a failure): the goodbye would wait for peers that may be blocked in a collective
    # this rank will never join. They see a lost peer and end too.
    _traceback.print_exception(kind, value, tb)
    if not _tnt.joined():
        return
    status = 1
    if issubclass(kind, Preempted):
        status = _PREEMPTED_STATUS
    elif issubclass(kind, KeyboardInterrupt):
        status = _INTERRUPTED_STATUS
    if _tnt.size() > 1:
        _tnt.exit_now(status)
    elif status != 1:
        _leave()
        _sys.stdout.flush()
        _tnt.exit_now(status)


_atexit.register(_leave)
_sys.excepthook = _excepthook
