"""NumPy inputs of fit / evaluate / predict: read in place when they have tnt's form, copied once
with a note in the log when they hold numbers in another form, refused naming the array
otherwise, always before any training (tests/python/CMakeLists.txt; any number of ranks).

    inputs_test.py
"""
import contextlib
import os
import sys
import tempfile

import numpy as np

import tnt

rank = tnt.get_rank()
rng = np.random.default_rng(2)
x = rng.integers(0, 256, (120, 28, 28)).astype(np.uint8)
y = rng.integers(0, 10, 120).astype(np.int32)
model = tnt.Model.from_zoo("lenet5", seed=3)
model.compile(optimizer="sgd")
probe = x[:16]
before = model.predict(probe, on_all_ranks=True)


@contextlib.contextmanager
def captured_log():
    """What tnt logs to stderr (file descriptor 2) meanwhile, as text in the yielded list."""
    sys.stderr.flush()
    saved = os.dup(2)
    out = []
    with tempfile.TemporaryFile(mode="w+") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield out
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            out.append(f.read())


def fit(xs, ys, **options):
    return model.fit(xs, ys, batch_size=24, epochs=1, verbose=0, **options)


def refused(what, xs, ys, *needles, error=tnt.DataError, **options):
    try:
        fit(xs, ys, **options)
    except error as e:
        for needle in needles:
            assert needle in str(e), f"{what}: '{needle}' not in: {e}"
    else:
        raise AssertionError(f"{what}: fit took it")


# In place: uint8 or float32, C-contiguous; (N, H, W) and (N, H, W, 1) are views of the same memory.
assert np.shares_memory(tnt.data.features("x", x, (1, 28, 28)), x)
assert np.shares_memory(tnt.data.features("x", x.reshape(120, 28, 28, 1), (1, 28, 28)), x)
floats = x.astype(np.float32) / 255
assert np.shares_memory(tnt.data.features("x", floats, (1, 28, 28)), floats)
assert np.shares_memory(tnt.data.labels("y", y, 120, "x"), y)

# Refused, naming the array and what is wrong, before any step (the weights stay as they were).
refused("no labels", x, None, "y: no labels for the samples of x")
refused("labels of another length", x, y[:100], "y has 100 labels but x has 120 samples")
refused("samples of another shape", rng.random((120, 32, 32)), y, "x: samples of shape (32, 32)", "(1, 28, 28)")
refused("complex features", x.astype(np.complex64), y, "x: dtype complex64")
refused("object features", np.array([None] * 120, dtype=object), y, "x: dtype object")
refused("one-hot labels", x, np.eye(10, dtype=np.float32)[y], "y: labels of shape (120, 10)", "argmax")
refused("fractional labels", x, y + 0.5, "y: fractional labels")
refused("negative labels", x, y - 1, "y: labels must lie in [0, classes)")
refused("validation labels of another length", x, y, "validation_data[1] has 10 labels but validation_data[0] has 20",
        validation_data=(x[:20], y[:10]))
refused("more classes than outputs", x, np.full(120, 12), "12", "10 outputs", error=tnt.ConfigError)
assert np.array_equal(model.predict(probe, on_all_ranks=True), before), "a refused fit changed the weights"

# Copied once, with a note in the log (on the master rank), and trained on.
cases = [("float64 features", x.astype(np.float64) / 255, y, "x: dtype converted to float32"),
         ("non-contiguous features", np.asfortranarray(x), y, "x: a non-contiguous view copied"),
         ("int64 labels", x, y.astype(np.int64), "y: labels converted to contiguous int32"),
         ("whole float labels", x, y.astype(np.float32), "y: labels converted to contiguous int32"),
         ("a list of labels", x, [int(v) for v in y], "y: labels converted to contiguous int32")]
for what, xs, ys, note in cases:
    with captured_log() as log:
        history = fit(xs, ys)
    assert history.steps == 5, (what, history.steps)
    if rank == 0:
        assert note in log[0], f"{what}: no note '{note}' in the log: {log[0]!r}"

# The same samples as uint8 pixels or as the floats tnt makes of them train to the same weights.
a = tnt.Model.from_zoo("lenet5", seed=4)
b = tnt.Model.from_zoo("lenet5", seed=4)
for m, xs in ((a, x), (b, x.astype(np.float32) * np.float32(1.0 / 255.0))):
    m.compile(optimizer="sgd")
    m.fit(xs, y, batch_size=24, epochs=1, verbose=0)
assert np.array_equal(a.predict(probe, on_all_ranks=True), b.predict(probe, on_all_ranks=True))
tnt.comm_world().barrier()
print(f"rank {rank}: inputs ok", flush=True)
