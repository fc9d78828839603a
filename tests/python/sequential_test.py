"""tnt.Sequential of tnt.layers builds the ModelSpec a model TOML file does (tests/python/CMakeLists.txt)."""
import os
import sys

import numpy as np

import tnt

L = tnt.layers
root = sys.argv[1]

# LeNet-5 in Keras's words is conf/models/lenet5.toml: the same initial weights from the same seed,
# and the same weights after the same training.
lenet = tnt.Sequential([
    L.Input((1, 28, 28)),
    L.Conv2D(6, 5, padding="same", kernel_initializer="he_normal", activation="relu"),
    L.MaxPooling2D(2),
    L.Conv2D(16, 5, kernel_initializer="he_normal"),
    L.ReLU(),
    L.MaxPooling2D(2),
    L.Flatten(),
    L.Dense(120, activation="relu"),
    L.Dense(84, activation="relu"),
    L.Dense(10),
], name="lenet5", seed=9)
from_file = tnt.Model.from_toml(os.path.join(root, "conf/models/lenet5.toml"), seed=9)
assert lenet.count_params() == from_file.count_params() == 61706, (lenet.count_params(), from_file.count_params())
rng = np.random.default_rng(0)
x = rng.random((96, 1, 28, 28), dtype=np.float32)
y = rng.integers(0, 10, 96)
for model in (lenet, from_file):
    model.compile(optimizer=tnt.optimizers.SGD(0.05, momentum=0.9), metrics=["accuracy"])
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
assert np.array_equal(lenet.predict(x, on_all_ranks=True), from_file.predict(x, on_all_ranks=True))

# A residual network with batch normalisation and dropout learns a simple rule.
residual = tnt.Sequential([
    L.Conv2D(8, 3, padding="same", use_bias=False),
    L.BatchNormalization(),
    L.ReLU(),
    L.Residual([L.Conv2D(8, 3, padding="same", use_bias=False), L.BatchNormalization(), L.ReLU(),
                L.Conv2D(8, 3, padding="same", use_bias=False), L.BatchNormalization()]),
    L.GlobalAveragePooling2D(),
    L.Dropout(0.1),
    L.Dense(2),
], input_shape=(3, 8, 8))
residual.compile(optimizer=tnt.optimizers.Adam(0.01), metrics=["accuracy"])
xs = rng.random((256, 3, 8, 8), dtype=np.float32)
ys = (xs[:, 0].mean(axis=(1, 2)) > xs[:, 1].mean(axis=(1, 2))).astype(np.int32)
history = residual.fit(xs, ys, batch_size=32, epochs=6, verbose=0)
assert history.history["loss"][-1] < 0.8 * history.history["loss"][0], history.history

# Bad layers are refused, naming what is wrong.
for build, needle, error in [
        (lambda: L.Conv2D(4, "x"), "kernel_size", TypeError),
        (lambda: L.Dense(4, kernel_initializer="zeros"), "kernel_initializer 'zeros'", ValueError),
        (lambda: tnt.Sequential([L.Dense(4)]), "input_shape", tnt.ConfigError),
        (lambda: tnt.Sequential([L.Flatten(), L.Dense(4, activation="softmax")], input_shape=(1, 4, 4)), "logits",
         ValueError),
        (lambda: tnt.Sequential([L.Activation("nope"), L.Flatten(), L.Dense(2)], input_shape=(1, 4, 4)), "nope",
         tnt.ConfigError)]:
    try:
        build()
    except error as e:
        assert needle in str(e), f"'{needle}' not in: {e}"
    else:
        raise AssertionError(f"took a layer it should refuse ({needle})")
tnt.comm_world().barrier()
print(f"rank {tnt.get_rank()}: sequential ok", flush=True)
