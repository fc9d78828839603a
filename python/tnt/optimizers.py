"""Optimizers and learning-rate schedules (compute/'s), named as Keras names them."""

from . import options as _options


class _Schedule:
    def __init__(self, **settings):
        self._settings = settings

    def settings(self):
        return [_options.setting(f"schedule.{k}", v) for k, v in self._settings.items() if v is not None]


class schedules:  # noqa: N801 (Keras's tf.keras.optimizers.schedules)
    class PiecewiseConstantDecay(_Schedule):
        def __init__(self, boundaries, values, warmup_steps=0):
            super().__init__(kind="piecewise", boundaries=[int(b) for b in boundaries],
                             values=[float(v) for v in values], warmup_steps=warmup_steps)

    class ExponentialDecay(_Schedule):
        def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, warmup_steps=0):
            super().__init__(kind="exponential", learning_rate=initial_learning_rate, decay_steps=decay_steps,
                             decay_rate=decay_rate, staircase=staircase, warmup_steps=warmup_steps)

    class InverseSqrtDecay(_Schedule):
        """Vaswani et al.'s: peaks at learning_rate after warmup_steps linear steps."""

        def __init__(self, learning_rate, warmup_steps):
            super().__init__(kind="inverse_sqrt", learning_rate=learning_rate, warmup_steps=warmup_steps)


class Optimizer:
    kind = ""

    def __init__(self, learning_rate, **settings):
        self.learning_rate = learning_rate
        self._settings = settings

    def settings(self):
        out = [_options.setting("optimizer.kind", self.kind)]
        out += [_options.setting(f"optimizer.{k}", v) for k, v in self._settings.items() if v is not None]
        if isinstance(self.learning_rate, _Schedule):
            out += self.learning_rate.settings()
        else:
            out += [_options.setting("schedule.kind", "constant"),
                    _options.setting("schedule.learning_rate", self.learning_rate)]
        return out


def _clip(clipnorm, global_clipnorm, clipvalue):
    return {"clipnorm": clipnorm, "global_clipnorm": global_clipnorm, "clipvalue": clipvalue}


class SGD(Optimizer):
    kind = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None, clipnorm=None,
                 global_clipnorm=None, clipvalue=None):
        super().__init__(learning_rate, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                         **_clip(clipnorm, global_clipnorm, clipvalue))


class Adam(Optimizer):
    kind = "adam"

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, weight_decay=None,
                 clipnorm=None, global_clipnorm=None, clipvalue=None):
        super().__init__(learning_rate, beta1=beta_1, beta2=beta_2, epsilon=epsilon, weight_decay=weight_decay,
                         **_clip(clipnorm, global_clipnorm, clipvalue))


class AdamW(Optimizer):
    kind = "adamw"

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 clipnorm=None, global_clipnorm=None, clipvalue=None):
        super().__init__(learning_rate, beta1=beta_1, beta2=beta_2, epsilon=epsilon, weight_decay=weight_decay,
                         **_clip(clipnorm, global_clipnorm, clipvalue))


class RMSprop(Optimizer):
    kind = "rmsprop"

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, weight_decay=None,
                 clipnorm=None, global_clipnorm=None, clipvalue=None):
        super().__init__(learning_rate, rho=rho, momentum=momentum, epsilon=epsilon, weight_decay=weight_decay,
                         **_clip(clipnorm, global_clipnorm, clipvalue))


class Adagrad(Optimizer):
    kind = "adagrad"

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7, weight_decay=None,
                 clipnorm=None, global_clipnorm=None, clipvalue=None):
        super().__init__(learning_rate, initial_accumulator=initial_accumulator_value, epsilon=epsilon,
                         weight_decay=weight_decay, **_clip(clipnorm, global_clipnorm, clipvalue))


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop, "adagrad": Adagrad}


def get(optimizer):
    """An Optimizer from itself or its name ("sgd", "adam", ...)."""
    if isinstance(optimizer, Optimizer):
        return optimizer
    if isinstance(optimizer, str) and optimizer.lower() in _BY_NAME:
        return _BY_NAME[optimizer.lower()]()
    raise TypeError(f"optimizer {optimizer!r}: give a tnt.optimizers object or one of {', '.join(_BY_NAME)}")
