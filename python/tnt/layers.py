"""Layers for tnt.Sequential, named as Keras names them. Each is one layer of a model TOML file
(compute/README.md lists the types and options): Sequential writes the same TOML and tnt reads it
as it reads conf/models/*.toml, so a Python model and a model file are the same ModelSpec."""

import json


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"layer option {v!r}: not a number, string or list")


def _pair(v, name):
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return list(v)
    raise TypeError(f"{name}: expected an int or a pair of ints, got {v!r}")


class Layer:
    def __init__(self, type_, **options):
        self.type = type_
        self.options = {k: v for k, v in options.items() if v is not None}

    def toml(self, table):
        lines = [f"[[{table}]]", f'type = "{self.type}"']
        lines += [f"{k} = {_value(v)}" for k, v in self.options.items()]
        return "\n".join(lines)


class Input:
    """The samples' shape (C, H, W); no layer of its own."""

    def __init__(self, shape):
        self.shape = tuple(shape)


_INITIALIZERS = {"glorot_uniform", "glorot_normal", "he_normal", "he_uniform"}


def _init(name):
    if name not in _INITIALIZERS:
        raise ValueError(f"kernel_initializer '{name}': tnt has {', '.join(sorted(_INITIALIZERS))}")
    return name


def _same_padding(kernel, dilation):
    if any((k - 1) * d % 2 for k, d in zip(kernel, dilation)):
        raise ValueError(f"padding='same' with kernel {kernel}: an even kernel pads unevenly; give the padding")
    return [(k - 1) * d // 2 for k, d in zip(kernel, dilation)]


class Conv2D(Layer):
    def __init__(self, filters, kernel_size, strides=1, padding="valid", dilation_rate=1, groups=1, use_bias=True,
                 kernel_initializer="glorot_uniform", activation=None):
        kernel = _pair(kernel_size, "kernel_size")
        dilation = _pair(dilation_rate, "dilation_rate")
        if padding == "valid":
            pad = [0, 0]
        elif padding == "same":
            if _pair(strides, "strides") != [1, 1]:
                raise ValueError("padding='same' with strides > 1: give the padding in pixels")
            pad = _same_padding(kernel, dilation)
        else:
            pad = _pair(padding, "padding")
        super().__init__("conv2d", filters=int(filters), kernel=kernel, stride=_pair(strides, "strides"), padding=pad,
                         dilation=dilation, groups=int(groups), bias=bool(use_bias),
                         init=_init(kernel_initializer))
        self.activation = activation


class Dense(Layer):
    def __init__(self, units, use_bias=True, kernel_initializer="glorot_uniform", activation=None):
        super().__init__("dense", units=int(units), bias=bool(use_bias), init=_init(kernel_initializer))
        self.activation = activation


class Activation(Layer):
    """relu, leaky_relu, elu, tanh, sigmoid, gelu, swish, linear."""

    def __init__(self, activation, alpha=None):
        super().__init__("activation", function=activation, alpha=alpha)


class ReLU(Activation):
    def __init__(self):
        super().__init__("relu")


class LeakyReLU(Activation):
    def __init__(self, alpha=0.3):
        super().__init__("leaky_relu", float(alpha))


class MaxPooling2D(Layer):
    def __init__(self, pool_size=2, strides=None, padding=0):
        super().__init__("max_pool2d", kernel=int(pool_size), stride=int(strides or 0), padding=int(padding))


class AveragePooling2D(Layer):
    def __init__(self, pool_size=2, strides=None, padding=0):
        super().__init__("avg_pool2d", kernel=int(pool_size), stride=int(strides or 0), padding=int(padding))


class GlobalAveragePooling2D(Layer):
    def __init__(self):
        super().__init__("global_avg_pool2d")


class BatchNormalization(Layer):
    def __init__(self, momentum=0.99, epsilon=1e-3):
        super().__init__("batch_norm", momentum=float(momentum), epsilon=float(epsilon))


class Dropout(Layer):
    def __init__(self, rate, seed=0):
        super().__init__("dropout", rate=float(rate), seed=int(seed))


class Flatten(Layer):
    def __init__(self):
        super().__init__("flatten")


class Residual(Layer):
    """activation(main(x) + shortcut(x)); no shortcut: the identity (ResNet's basic block)."""

    def __init__(self, main, shortcut=(), activation="relu"):
        super().__init__("residual", activation=activation)
        self.main = list(main)
        self.shortcut = list(shortcut)

    def toml(self, table):
        parts = [super().toml(table)]
        parts += [layer_toml for layer in self.main for layer_toml in _expanded(layer, f"{table}.main")]
        parts += [layer_toml for layer in self.shortcut for layer_toml in _expanded(layer, f"{table}.shortcut")]
        return "\n".join(parts)


def _expanded(layer, table):
    """A layer's TOML tables; Keras's activation= argument is one more layer in tnt."""
    out = [layer.toml(table)]
    activation = getattr(layer, "activation", None)
    if activation == "softmax":
        raise ValueError("activation='softmax': tnt's models end in logits and the loss applies the softmax; leave "
                         "it out (predict returns probabilities)")
    if activation not in (None, "linear"):
        out.append(Activation(activation).toml(table))
    return out


def model_toml(name, input_shape, layers):
    """The model TOML text of a chain of layers (Input entries only give the shape)."""
    lines = [f"name = {json.dumps(name)}", f"input = {_value([int(d) for d in input_shape])}", ""]
    for layer in layers:
        if isinstance(layer, Input):
            continue
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential: {layer!r} is not a tnt.layers layer")
        lines += _expanded(layer, "layers")
        lines.append("")
    return "\n".join(lines)
