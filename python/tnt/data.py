"""Data for fit, evaluate and predict: NumPy arrays, and tnt's built-in data sets.

Arrays are read in place where they already have tnt's form: features uint8 (pixels, scaled to
[0, 1] by tnt exactly as tnt-train scales the data set files) or float32, C-contiguous, with
samples of the model's input shape (C, H, W; also (H, W) for one channel, or flat); labels int32
class indices. Anything else that holds numbers is brought to that form once, with a note in the
log saying why it was copied; what cannot be (no numbers, samples of another size, one-hot or
fractional labels, a label count other than the samples') is refused with a tnt.DataError
naming the array, before any training.
"""

import gzip
import os

import numpy as np

from . import _tnt
from .errors import DataError


def _note(text):
    if _tnt.rank() == 0:
        _tnt.log_info(text)


def _megabytes(a):
    return f"{a.nbytes / 2**20:.1f} MiB" if a.nbytes >= 2**20 else f"{a.nbytes / 2**10:.1f} KiB"


def features(name, x, input_shape):
    """x as tnt reads it: (N,) + input_shape, uint8 or float32, C-contiguous."""
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except Exception as e:  # noqa: BLE001 (any object: say what it is)
            raise DataError(f"{name}: not an array ({type(x).__name__}): {e}") from None
        _note(f"{name}: a {type(x).__name__} converted to a NumPy array")
    if x.dtype.kind not in "uifb" or x.dtype.itemsize > 8:
        raise DataError(f"{name}: dtype {x.dtype} holds no real numbers; give uint8 pixels or float32 values")
    if x.ndim < 1 or x.shape[0] == 0:
        raise DataError(f"{name}: no samples (shape {x.shape})")
    input_shape = tuple(int(d) for d in input_shape)
    sample = tuple(x.shape[1:])
    per_sample = int(np.prod(input_shape))
    if len(input_shape) == 3 and sample == (input_shape[1], input_shape[2], input_shape[0]) and \
            sample != input_shape and input_shape[0] > 1:
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        _note(f"{name}: channels-last samples {sample} transposed to {input_shape} (channels first), one copy of "
              f"{_megabytes(x)}")
        sample = input_shape
    if int(np.prod(sample)) != per_sample:
        raise DataError(f"{name}: samples of shape {sample} ({int(np.prod(sample))} values) do not fit the model's "
                        f"input {input_shape} ({per_sample} values)")
    if x.dtype != np.uint8 and x.dtype != np.float32:
        kind = "scaled to [0, 1]" if x.dtype == np.uint8 else "as values, not scaled (only uint8 pixels are)"
        x = np.ascontiguousarray(x, dtype=np.float32)
        _note(f"{name}: dtype converted to float32 ({kind}), one copy of {_megabytes(x)}")
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
        _note(f"{name}: a non-contiguous view copied to contiguous memory, one copy of {_megabytes(x)}")
    # A view of the same memory (reshape of a C-contiguous array copies nothing).
    return x.reshape((x.shape[0],) + input_shape)


def labels(name, y, samples, features_name):
    """y as tnt reads it: int32 class indices, shape (samples,), C-contiguous."""
    if not isinstance(y, np.ndarray):
        try:
            y = np.asarray(y)
        except Exception as e:  # noqa: BLE001
            raise DataError(f"{name}: not an array ({type(y).__name__}): {e}") from None
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        hint = " (one-hot labels: pass y.argmax(axis=1))" if y.ndim == 2 else ""
        raise DataError(f"{name}: labels of shape {y.shape}; expected class indices of shape (N,){hint}")
    if y.shape[0] != samples:
        raise DataError(f"{name} has {y.shape[0]} labels but {features_name} has {samples} samples")
    if y.dtype.kind not in "uif":
        raise DataError(f"{name}: dtype {y.dtype}; expected integer class indices")
    if y.dtype.kind == "f" and not np.array_equal(y, np.floor(y)):
        raise DataError(f"{name}: fractional labels; expected integer class indices")
    if y.size and (y.min() < 0 or y.max() > np.iinfo(np.int32).max):
        raise DataError(f"{name}: labels must lie in [0, classes), found {y.min()} to {y.max()}")
    if y.dtype != np.int32 or not y.flags.c_contiguous:
        y = np.ascontiguousarray(y, dtype=np.int32)
        _note(f"{name}: labels converted to contiguous int32, one copy of {_megabytes(y)}")
    return y


def source(x, y, input_shape, x_name="x", y_name="y"):
    """A tnt source reading the arrays in place (after the checks above); y None: labels 0."""
    x = features(x_name, x, input_shape)
    if y is not None:
        y = labels(y_name, y, x.shape[0], x_name)
        classes = int(y.max()) + 1 if y.size else 1
    else:
        classes = 1
    return _tnt.array_source(x, y, classes, x_name)


class Dataset:
    """A built-in data set's split, read by tnt as tnt-train reads it (found under $TNT_DATA_DIR or
    /usr/share/datasets: dataset/README.md)."""

    kind = ""

    def __init__(self, split="train", path="", size=0):
        self.handle = _tnt.dataset_source(self.kind, split, path, size)


class FashionMNIST(Dataset):
    kind = "fashion-mnist"


class MNIST(Dataset):
    kind = "mnist"


class CIFAR10(Dataset):
    kind = "cifar10"


def _read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def _load_idx_set(name):
    files = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    folder = _tnt.locate_dataset(name, files)

    def read(base):
        plain = os.path.join(folder, base)
        return _read_idx(plain if os.path.exists(plain) else plain + ".gz")

    return (read(files[0]), read(files[1])), (read(files[2]), read(files[3]))


class fashion_mnist:  # noqa: N801 (Keras's keras.datasets.fashion_mnist)
    @staticmethod
    def load_data():
        """((x_train, y_train), (x_test, y_test)): uint8 images (N, 28, 28) and uint8 labels, the
        very bytes tnt-train reads."""
        return _load_idx_set("fashion-mnist")


class mnist:  # noqa: N801
    @staticmethod
    def load_data():
        return _load_idx_set("mnist")
