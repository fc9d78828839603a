"""tnt.Model: a model on tnt's data-parallel trainer, with Keras's compile / fit / evaluate /
predict. Every rank runs the same script and makes the same calls in the same order (they issue
collectives); batch sizes are global (Tarantella's convention), split over the ranks."""

import tomllib

from . import _tnt
from . import callbacks as _callbacks
from . import data as _data
from . import losses as _losses
from . import optimizers as _optimizers
from . import options as _options
from .errors import ConfigError, DataError

# The sections whose keys compile takes; fit takes the others (run keys: tnt/options.py).
_COMPILE_SECTIONS = ("optimizer", "schedule")
_FIT_SECTIONS = ("train", "data", "distribution", "checkpoint", "output", "callbacks")
# Run keys of tnt-train's own doing, not fit's: its data set, its threads (tnt.init here), what it
# writes after training (Model.save_weights here), sentence pairs.
_NOT_FIT = {"train.loss", "train.metrics", "train.threads", "data.dataset", "data.path", "data.labels_path",
            "data.test_path", "data.test_labels_path", "data.train_size", "data.test_size", "data.shape",
            "data.classes", "data.seed", "data.image_fit", "distribution.transport", "output.save_weights",
            "output.save_architecture", "data.max_chars", "data.tokenizer", "data.merges", "data.bucket_batches",
            "train.label_smoothing"}
# Keras's own arguments stand for these keys.
_KERAS_KEYS = {"train.global_batch", "train.micro_batch", "train.epochs", "train.validation_frequency",
               "train.eval_batch", "output.progress"}
_FIT_KEYWORDS = {"seed": "train.seed"}


class Model:
    """Build one with Model.from_zoo, Model.from_toml or tnt.Sequential."""

    def __init__(self, model_toml, seed=42):
        self._trainer = _tnt.Trainer(model_toml, int(seed))
        self._seed = int(seed)
        spec = tomllib.loads(self._trainer.model_toml())
        self.name = spec.get("name", "model")
        self.input_shape = tuple(spec["input"])
        self._compile_settings = None
        self._metrics = []
        self._eval_settings = []
        self.stop_training = False
        self.history = None

    @classmethod
    def from_zoo(cls, name, input_shape=None, classes=10, seed=42):
        """A zoo model (lenet5, mlp, resnet20, resnet50): input_shape (C, H, W), default the zoo's."""
        return cls(_tnt.zoo_model_toml(name, list(input_shape or ()), int(classes)), seed)

    @classmethod
    def from_toml(cls, path, seed=42):
        """A model file (conf/models/*.toml; compute/README.md lists the layer types)."""
        return cls(_tnt.load_model_toml(str(path)), seed)

    def to_toml(self):
        return self._trainer.model_toml()

    def count_params(self):
        return self._trainer.parameter_count()

    def summary(self, print_fn=print):
        print_fn(f"Model '{self.name}': input {self.input_shape}, {self.count_params()} parameters\n"
                 f"{self.to_toml()}")

    def compile(self, optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=("accuracy",), **options):
        """optimizer: a tnt.optimizers object or name; loss: a tnt.losses object or name; metrics:
        names ("accuracy", "top_k_accuracy", "top_<k>_accuracy"). Other keyword arguments: the run
        keys of [optimizer] and [schedule] (e.g. scale_with_ranks=True)."""
        metrics = [m if isinstance(m, str) else getattr(m, "name", m) for m in (metrics or [])]
        settings = _optimizers.get(optimizer).settings()
        settings.append(_options.setting("train.loss", _losses.name_of(loss)))
        settings.append(_options.setting("train.metrics", metrics))
        settings += _options.settings_of("compile", options, _COMPILE_SECTIONS)
        self._trainer.compile(settings)
        self._compile_settings = settings
        self._metrics = metrics

    def _require_compiled(self, what):
        if self._compile_settings is None:
            raise ConfigError(f"Model.{what}: compile the model first")

    def _source(self, x, y, x_name="x", y_name="y", labelled=True):
        if labelled and y is None and not isinstance(x, (_data.Dataset, _tnt.Source)):
            raise DataError(f"{y_name}: no labels for the samples of {x_name}")
        if isinstance(x, _data.Dataset):
            if y is not None:
                raise ConfigError(f"{y_name}: a data set brings its own labels; pass y=None")
            return x.handle
        if isinstance(x, _tnt.Source):
            return x
        return _data.source(x, y, self.input_shape, x_name, y_name)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None, validation_data=None,
            shuffle=True, validation_freq=1, validation_batch_size=None, micro_batch_size=None, **options):
        """Trains on x, y (NumPy arrays, or a tnt.data data set as x) in global batches of batch_size.
        Other keyword arguments are the run keys of fit's sections (Model.fit_options() lists them),
        e.g. max_steps, seed, mean, std, checkpoint_path, resume, terminate_on_nan, csv, timeline.
        Returns a History; the same on every rank."""
        self._require_compiled("fit")
        train = self._source(x, y)
        validation = None
        if isinstance(validation_data, (tuple, list)) and len(validation_data) == 2:
            validation = self._source(validation_data[0], validation_data[1], "validation_data[0]",
                                      "validation_data[1]")
        elif isinstance(validation_data, (_data.Dataset, _tnt.Source)):
            validation = self._source(validation_data, None, "validation_data", "validation_data")
        elif validation_data is not None:
            raise ConfigError("validation_data: give (x_val, y_val) or a tnt.data data set")
        if verbose not in (0, 1, 2):
            raise ConfigError(f"fit: verbose={verbose!r}; expected 0 (silent), 1 (progress bar) or 2 (one line per "
                              "epoch)")
        keras = {"train.global_batch": batch_size, "train.micro_batch": micro_batch_size, "train.epochs": epochs,
                 "train.validation_frequency": validation_freq if validation is not None else 0,
                 "train.eval_batch": validation_batch_size, "output.progress": verbose == 1,
                 "train.seed": self._seed}
        for name in list(options):
            if name in _FIT_KEYWORDS:
                keras[_FIT_KEYWORDS[name]] = options.pop(name)
        fit_settings = [_options.setting(path, value) for path, value in keras.items() if value is not None]
        for name in options:
            entry = _options.KEYS.get(name)
            if entry is not None and entry[0] in _NOT_FIT:
                raise TypeError(f"fit() got the keyword argument '{name}', which fit does not take (run key "
                                f"{entry[0]}: the data are x and y here)")
            if entry is not None and entry[0] in _KERAS_KEYS:
                raise TypeError(f"fit() got the keyword argument '{name}': use Keras's (batch_size, "
                                "micro_batch_size, epochs, validation_freq, validation_batch_size, verbose)")
        fit_settings += _options.settings_of("fit", options, _FIT_SECTIONS)
        user = []
        for callback in callbacks or []:
            if isinstance(callback, _callbacks._Builtin):
                fit_settings += callback.settings()
            elif isinstance(callback, _callbacks.Callback):
                callback.set_model(self)
                user.append(callback)
            else:
                raise TypeError(f"callbacks: {callback!r} is not a tnt.callbacks.Callback")
        if verbose == 2:
            user.append(_EpochLine(epochs))
            user[-1].set_model(self)
        self.stop_training = False
        # evaluate and predict normalise as fit did.
        self._eval_settings = [s for s in fit_settings if s.startswith(("data.mean=", "data.std="))]
        figures = self._trainer.fit(train, validation, self._compile_settings + fit_settings, bool(shuffle), user,
                                    self)
        self.history = _callbacks.History(figures["epochs"], figures["steps"], figures["seconds"],
                                          figures["samples_per_second"])
        return self.history

    @staticmethod
    def fit_options():
        """fit's keyword arguments from the run keys, with their help (besides Keras's own)."""
        return _options.describe(_FIT_SECTIONS, _NOT_FIT | _KERAS_KEYS)

    @staticmethod
    def compile_options():
        """compile's keyword arguments from the run keys (besides optimizer, loss and metrics)."""
        return _options.describe(_COMPILE_SECTIONS)

    def _eval_options(self, function, batch_size, options):
        settings = list(self._eval_settings)
        if batch_size is not None:
            settings.append(_options.setting("train.eval_batch", batch_size))
        allowed = {"mean", "std", "distribute_validation_dataset"}
        for name in options:
            if name not in allowed:
                raise TypeError(f"{function}() got an unexpected keyword argument '{name}' (also: "
                                f"{', '.join(sorted(allowed))})")
        settings += _options.settings_of(function, options, ("data", "distribution"))
        return settings

    def evaluate(self, x=None, y=None, batch_size=None, verbose=0, return_dict=False, **options):
        """The loss and the compiled metrics over x, y, each rank taking its share (the same figures
        on every rank). Keras's return: the loss, or [loss, metric...]; return_dict=True: a dict."""
        self._require_compiled("evaluate")
        logs = self._trainer.evaluate(self._source(x, y), self._eval_options("evaluate", batch_size, options))
        if verbose and _tnt.rank() == 0:
            print(" - ".join(f"{k}: {v:.4f}" for k, v in logs.items() if k != "count"))
        if return_dict:
            return logs
        if not self._metrics:
            return logs["loss"]
        return [logs["loss"]] + [logs[m] for m in self._metrics]

    def predict(self, x, batch_size=None, on_all_ranks=False, **options):
        """Class probabilities (N, K) for x, in its order, computed by all ranks: on the master rank
        (the others get (0, K)), or on every rank with on_all_ranks=True."""
        source = self._source(x, None, labelled=False)
        return self._trainer.predict(source, self._eval_options("predict", batch_size, options), bool(on_all_ranks))

    def save_weights(self, path):
        """The master rank writes the weights (no optimizer state); every rank must call it."""
        self._trainer.save_weights(str(path))

    def load_weights(self, path):
        """Weights of any checkpoint with weights, read by the master rank, on every rank."""
        self._trainer.load_weights(str(path))

    def save_checkpoint(self, path):
        """A full checkpoint (weights, optimizer state), written by the master rank."""
        self._trainer.save_checkpoint(str(path))

    def export_onnx(self, path, output=None):
        """The inference graph with the current weights as ONNX, written by the master rank (every
        rank must call it); output "softmax", "sigmoid" or "none", by default what predict gives."""
        self._trainer.export_onnx(str(path), output or "")


class _EpochLine(_callbacks.Callback):
    """verbose=2: one line per epoch, as Keras prints it."""

    def __init__(self, epochs):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        figures = " - ".join(f"{k}: {v:.4f}" for k, v in (logs or {}).items())
        print(f"Epoch {epoch + 1}/{self.epochs} - {figures}", flush=True)


class Sequential(Model):
    """A chain of tnt.layers, built into the same ModelSpec as a model TOML file."""

    def __init__(self, layers, input_shape=None, name="sequential", seed=42):
        from . import layers as _layers
        self.layers = list(layers)
        shape = input_shape
        for layer in self.layers:
            if isinstance(layer, _layers.Input):
                shape = layer.shape
        if shape is None:
            raise ConfigError("Sequential: give input_shape=(C, H, W) or a tnt.layers.Input first")
        super().__init__(_layers.model_toml(name, shape, self.layers), seed)
