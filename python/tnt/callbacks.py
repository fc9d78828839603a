"""Callbacks: tnt's own (the run file's [callbacks.*] sections) and the user's, in Python.

A user callback subclasses Callback and overrides the hooks it needs, under Keras's names. It
runs on the master rank only, unless its class sets run_on_all_ranks = True. Setting
self.model.stop_training = True in a hook stops training on every rank at the same step (the
request rides the step's agreement, Note [Run control]): after the next step from
on_train_batch_end, before the next step from on_epoch_begin / on_epoch_end.

on_train_batch_end runs on the trainer's metrics thread with the GIL taken; a callback that does
not override it costs nothing per step.
"""

from . import options as _options


class Callback:
    run_on_all_ranks = False

    def __init__(self):
        self.model = None

    def set_model(self, model):
        self.model = model

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs)

    def on_batch_end(self, batch, logs=None):
        pass


class History:
    """What fit returns: history[name] is a list with one value per epoch; epoch the epoch numbers."""

    def __init__(self, epochs, steps, seconds, samples_per_second):
        self.epoch = list(range(len(epochs)))
        self.history = {}
        for logs in epochs:
            for name, value in logs.items():
                self.history.setdefault(name, []).append(value)
        self.steps = steps
        self.seconds = seconds
        self.samples_per_second = samples_per_second

    def __repr__(self):
        return f"History(epochs={len(self.epoch)}, steps={self.steps}, keys={sorted(self.history)})"


class _Builtin:
    """One of tnt's C++ callbacks, configured through its run-file section."""

    section = ""

    def __init__(self, **options):
        self._settings = [f"callbacks.{self.section}.enabled=true"]
        for name, value in options.items():
            if value is None:
                continue
            try:
                self._settings.append(_options.setting(f"callbacks.{self.section}.{name}", value))
            except KeyError:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument '{name}'") from None

    def settings(self):
        return list(self._settings)


class EarlyStopping(_Builtin):
    section = "early_stopping"

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, mode="auto", baseline=None,
                 restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor=monitor, min_delta=min_delta, patience=patience, mode=mode, baseline=baseline,
                         restore_best_weights=restore_best_weights, start_from_epoch=start_from_epoch)


class ReduceLROnPlateau(_Builtin):
    section = "reduce_lr_on_plateau"

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, mode="auto", min_delta=1e-4, cooldown=0,
                 min_lr=0.0):
        super().__init__(monitor=monitor, factor=factor, patience=patience, mode=mode, min_delta=min_delta,
                         cooldown=cooldown, min_lr=min_lr)


class ModelCheckpoint(_Builtin):
    section = "model_checkpoint"

    def __init__(self, filepath, monitor="val_loss", save_best_only=False, save_weights_only=False, mode="auto",
                 every_epochs=1, initial_value_threshold=None):
        super().__init__(filepath=filepath, monitor=monitor, save_best_only=save_best_only,
                         save_weights_only=save_weights_only, mode=mode, every_epochs=every_epochs,
                         initial_value_threshold=initial_value_threshold)


class TensorBoard(_Builtin):
    section = "tensorboard"

    def __init__(self, log_dir="logs", update_freq=0):
        super().__init__(log_dir=log_dir, update_freq=0 if update_freq == "epoch" else update_freq)


class CSVLogger(_Builtin):
    section = "csv_logger"

    def __init__(self, filename, separator=",", append=False):
        super().__init__(filename=filename, separator=separator, append=append)


class RemoteMonitor(_Builtin):
    section = "remote_monitor"

    def __init__(self, root="http://localhost:9000", path="/publish/epoch/end/", field="data", send_as_json=False,
                 timeout=5.0):
        super().__init__(url=root + path, field=field, send_as_json=send_as_json, timeout=timeout)


class LearningRateScheduler(_Builtin):
    """Epoch e trains at rates[e] (the last one after the list): the run file's form of Keras's
    schedule function, which the master rank would otherwise have to evaluate for every rank."""

    section = "learning_rate_scheduler"

    def __init__(self, rates):
        super().__init__(rates=[float(r) for r in rates])
