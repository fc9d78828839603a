"""Losses. tnt's models end in logits (no softmax layer): each loss applies its own softmax or
sigmoid, as Keras's losses do with from_logits=True."""


class Loss:
    name = ""

    def __init__(self, from_logits=True):
        if not from_logits:
            raise ValueError(f"{type(self).__name__}(from_logits=False): tnt's models output logits and the loss "
                             "applies the softmax or sigmoid itself; end the model without one")


class SparseCategoricalCrossentropy(Loss):
    name = "sparse_categorical_crossentropy"


class BinaryCrossentropy(Loss):
    name = "binary_crossentropy"


class MeanSquaredError(Loss):
    name = "mean_squared_error"


def name_of(loss):
    if isinstance(loss, Loss):
        return loss.name
    if isinstance(loss, str):
        return loss
    raise TypeError(f"loss {loss!r}: give a tnt.losses object or a loss name")
