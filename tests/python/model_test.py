"""tnt.Model on NumPy arrays on every rank of a tnt-launch job: fit's History, evaluate, predict,
save/load weights, and the GIL released while tnt trains (tests/python/CMakeLists.txt).

    model_test.py WORKDIR
"""
import os
import sys
import threading

import numpy as np

import tnt

workdir = sys.argv[1]
rank, size = tnt.get_rank(), tnt.get_size()
comm = tnt.comm_world()

# Learnable classes: class c lights up row block c of the image.
rng = np.random.default_rng(3)
labels = rng.integers(0, 10, 600).astype(np.int64)
images = rng.integers(0, 60, (600, 28, 28)).astype(np.uint8)
for i, c in enumerate(labels):
    images[i, 2 * c:2 * c + 3, :] = 255

model = tnt.Model.from_zoo("lenet5", seed=5)
model.compile(optimizer=tnt.optimizers.SGD(learning_rate=0.02, momentum=0.9), metrics=["accuracy"])

# A Python thread keeps counting while fit trains: only possible if fit releases the GIL. The
# count is read from on_train_begin to on_train_end, so only the time inside tnt counts.
ticks, done = [0], threading.Event()


def count():
    while not done.is_set():
        ticks[0] += 1


class TicksDuringTraining(tnt.callbacks.Callback):
    run_on_all_ranks = True

    def on_train_begin(self, logs=None):
        self.begin = ticks[0]

    def on_train_end(self, logs=None):
        self.during = ticks[0] - self.begin


during = TicksDuringTraining()
counter = threading.Thread(target=count)
counter.start()
history = model.fit(images[:500], labels[:500], batch_size=50, epochs=3, validation_data=(images[500:], labels[500:]),
                    verbose=0, callbacks=[during])
done.set()
counter.join()
assert during.during > 1000, f"the GIL was held during fit: a Python thread counted only {during.during} times"
assert isinstance(history, tnt.callbacks.History)
assert history.epoch == [0, 1, 2] and history.steps == 30, (history.epoch, history.steps)
for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
    assert len(history.history[key]) == 3, history.history
assert history.history["val_accuracy"][-1] > 0.7, history.history  # chance: 0.1

# evaluate: the same figures on every rank, equal to fit's last validation.
loss, accuracy = model.evaluate(images[500:], labels[500:], batch_size=40)
both = comm.allgather(np.array([loss, accuracy]))
assert np.all(both == both[0]), both
assert abs(accuracy - history.history["val_accuracy"][-1]) < 1e-12, (accuracy, history.history)
figures = model.evaluate(images[500:], labels[500:], return_dict=True)
assert set(figures) >= {"loss", "accuracy"}, figures

# predict: rows in input order on the master, or on every rank.
p = model.predict(images[500:])
assert p.shape == ((100, 10) if rank == 0 else (0, 10)), p.shape
everywhere = model.predict(images[500:], on_all_ranks=True)
assert everywhere.shape == (100, 10) and np.allclose(everywhere.sum(axis=1), 1, atol=1e-5)
small_batches = model.predict(images[500:], on_all_ranks=True, batch_size=7)
assert np.allclose(small_batches, everywhere, atol=1e-5)
if rank == 0:
    assert np.array_equal(p, everywhere)
    assert abs((p.argmax(axis=1) == labels[500:]).mean() - accuracy) < 1e-12

# A built-in data set as x: read by tnt as tnt-train reads it (its own labels).
on_files = model.evaluate(tnt.data.FashionMNIST(split="test", size=300), return_dict=True)
assert on_files["count"] == 300, on_files
try:
    model.evaluate(tnt.data.FashionMNIST(split="test", size=300), labels[:300])
    raise AssertionError("labels beside a data set were taken")
except tnt.ConfigError as e:
    assert "brings its own labels" in str(e), e

# save_weights / load_weights: another model (other seed) predicts the same after loading.
path = os.path.join(workdir, f"model_test_{size}.weights")
model.save_weights(path)
other = tnt.Model.from_zoo("lenet5", seed=6)
other.compile(optimizer="sgd")
assert not np.array_equal(other.predict(images[500:], on_all_ranks=True), everywhere)
other.load_weights(path)
assert np.array_equal(other.predict(images[500:], on_all_ranks=True), everywhere)

# export_onnx (C++'s Trainer::export_onnx): the master writes the inference graph, ending in a
# Softmax for this cross-entropy model unless told otherwise; every rank calls it.
onnx_path = os.path.join(workdir, f"model_test_{size}.onnx")
for output, softmax in ((None, True), ("none", False)):
    model.export_onnx(onnx_path, output=output)
    if rank == 0:
        with open(onnx_path, "rb") as f:
            assert (b"Softmax" in f.read()) == softmax, output
try:
    model.export_onnx(onnx_path, output="tanh")
    raise AssertionError("an unknown ONNX output was taken")
except tnt.ConfigError as e:
    assert "use none, softmax or sigmoid" in str(e), e

# tnt's own callbacks, configured from Python, run in C++ (files on the master rank).
csv_path = os.path.join(workdir, f"model_test_{size}.csv")
best_path = os.path.join(workdir, f"model_test_{size}.best")
for path in (csv_path, best_path):
    if rank == 0 and os.path.exists(path):
        os.remove(path)
comm.barrier()
history = model.fit(images[:500], labels[:500], batch_size=50, epochs=4, validation_data=(images[500:], labels[500:]),
                    verbose=0, callbacks=[tnt.callbacks.CSVLogger(csv_path),
                                          tnt.callbacks.ModelCheckpoint(best_path, save_weights_only=True),
                                          tnt.callbacks.EarlyStopping(monitor="loss", baseline=0.0)])
# EarlyStopping with a baseline no epoch beats stops at the first epoch it may (the second, as
# Keras's), on every rank.
assert history.epoch == [0, 1], history.epoch
if rank == 0:
    rows = open(csv_path).read().splitlines()
    assert rows[0].startswith("epoch") and len(rows) == 3, rows
    assert os.path.exists(best_path)
try:
    model.fit(images, labels, batch_size=50, callbacks=[tnt.callbacks.EarlyStopping(patience=-1)])
    raise AssertionError("a negative patience was taken")
except tnt.ConfigError as e:
    assert "patience" in str(e), e

# compile's and fit's errors are tnt's, as Python exceptions naming the setting.
try:
    model.fit(images, labels, batch_size=0, verbose=0)
    raise AssertionError("batch size 0 was taken")
except tnt.ConfigError as e:
    assert "global batch" in str(e), e
try:
    model.fit(images, labels, batch_size=10, no_such_option=1)
    raise AssertionError("an unknown keyword argument was taken")
except TypeError as e:
    assert "no_such_option" in str(e), e
try:
    other.load_weights(os.path.join(workdir, "missing.weights"))
    raise AssertionError("a missing weights file was taken")
except tnt.Error as e:
    assert "missing.weights" in str(e), e
comm.barrier()
print(f"rank {rank}: model ok", flush=True)
