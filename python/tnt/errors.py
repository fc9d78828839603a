"""tnt's errors as Python exceptions; the compiled module raises these with tnt's message."""


class Error(RuntimeError):
    """Any failure tnt reports (tnt::Error)."""


class ConfigError(Error, ValueError):
    """A setting that cannot be used as written: a keyword argument, a model, a run key."""


class DataError(Error, ValueError):
    """Input data that cannot be used: a file, or a NumPy array of the wrong dtype or shape."""


class JobError(Error):
    """The job cannot go on: a peer was lost or refused us; the message names the rank."""


class NonFiniteError(Error):
    """fit stopped on every rank at one step: its loss or reduced gradient was NaN or infinite."""


class Preempted(Error):
    """fit stopped on every rank after SIGTERM or SIGUSR1 (after writing the checkpoint)."""


__all__ = ["Error", "ConfigError", "DataError", "JobError", "NonFiniteError", "Preempted"]
