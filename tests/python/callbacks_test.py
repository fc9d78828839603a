"""User callbacks in Python on every rank of a tnt-launch job (tests/python/CMakeLists.txt).

    callbacks_test.py stop              hooks, master-only default, stop_training on every rank alike
    callbacks_test.py raise HOOK        a callback raises in HOOK: the script must die of it
"""
import sys

import numpy as np

import tnt

rank, size = tnt.get_rank(), tnt.get_size()
comm = tnt.comm_world()
rng = np.random.default_rng(1)
x = rng.random((400, 1, 28, 28), dtype=np.float32)
y = rng.integers(0, 10, 400).astype(np.int32)


def make_model():
    model = tnt.Model.from_zoo("lenet5", seed=1)
    model.compile(optimizer=tnt.optimizers.SGD(learning_rate=0.01))
    return model


def same_everywhere(value, what):
    values = comm.allgather(np.array([value], dtype=np.int64))[:, 0]
    assert np.all(values == values[0]), f"{what} differs between ranks: {list(values)}"
    return int(values[0])


class Recorder(tnt.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin",))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_train_batch_end(self, batch, logs=None):
        assert set(logs) >= {"loss", "accuracy"}, logs
        self.calls.append(("batch_end", batch))

    def on_epoch_end(self, epoch, logs=None):
        assert set(logs) >= {"loss", "accuracy", "val_loss", "val_accuracy"}, logs
        self.calls.append(("epoch_end", epoch))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end",))


class StopAtBatch(tnt.callbacks.Callback):
    """Asks to stop in on_batch_end (Keras's older name) of `batch`, on the ranks in `ranks`."""

    run_on_all_ranks = True

    def __init__(self, batch, ranks):
        super().__init__()
        self.batch, self.ranks = batch, ranks

    def on_batch_end(self, batch, logs=None):
        if batch == self.batch and tnt.get_rank() in self.ranks:
            self.model.stop_training = True


class StopAtEpochEnd(tnt.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        self.model.stop_training = True


def check_stop():
    # Every hook, in Keras's order, on the master only (the default).
    recorder = Recorder()
    model = make_model()
    history = model.fit(x, y, batch_size=40, epochs=2, validation_data=(x[:80], y[:80]), callbacks=[recorder],
                        verbose=0)
    if rank == 0:
        expected = [("train_begin",)]
        for epoch in range(2):
            expected += [("epoch_begin", epoch)] + [("batch_end", b) for b in range(10)] + [("epoch_end", epoch)]
        expected += [("train_end",)]
        assert recorder.calls == expected, recorder.calls
        assert recorder.model is model
    else:
        assert recorder.calls == [], f"a master-only callback ran on rank {rank}: {recorder.calls[:3]}"
    assert history.steps == 20

    # A request from on_batch_end of batch 4 stops every rank after the next step: 6 steps. The
    # last rank alone asks, then the master alone: the decision is the same everywhere.
    for askers in ({size - 1}, {0}):
        model = make_model()
        history = model.fit(x, y, batch_size=40, epochs=3, callbacks=[StopAtBatch(4, askers)], verbose=0)
        steps = same_everywhere(history.steps, "steps trained")
        assert steps == 6, f"stopped after {steps} steps, expected 6 (ranks {askers} asked at batch 4)"

    # From on_epoch_end: no step of the next epoch.
    model = make_model()
    history = model.fit(x, y, batch_size=40, epochs=3, callbacks=[StopAtEpochEnd()], verbose=0)
    assert same_everywhere(history.steps, "steps trained") == 10, history.steps
    assert len(history.epoch) == 1, history.epoch
    print(f"rank {rank}: callbacks ok", flush=True)


class Raiser(tnt.callbacks.Callback):
    def __init__(self, hook):
        super().__init__()
        self.hook = hook

    def on_train_batch_end(self, batch, logs=None):
        if self.hook == "on_train_batch_end" and batch == 3:
            raise ValueError("boom from the user's callback in on_train_batch_end")

    def on_epoch_end(self, epoch, logs=None):
        if self.hook == "on_epoch_end":
            raise ValueError("boom from the user's callback in on_epoch_end")


if sys.argv[1] == "stop":
    check_stop()
else:
    make_model().fit(x, y, batch_size=40, epochs=3, callbacks=[Raiser(sys.argv[2])], verbose=0)
    print(f"rank {rank}: fit returned", flush=True)
