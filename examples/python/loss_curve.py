"""A Keras-style user callback: collects the loss of every step and writes a PNG of the curve
when training ends. It runs on the master rank only (tnt.callbacks.Callback's default), where the
step's loss is already the global one, summed over every rank.

    model.fit(x, y, batch_size=64, callbacks=[LossCurve("loss.png")])
"""
import time

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt  # noqa: E402

import tnt  # noqa: E402


class LossCurve(tnt.callbacks.Callback):
    def __init__(self, path):
        super().__init__()
        self.path = path
        self.losses = []
        self.epoch_ends = []
        self.seconds_in_batch_hook = 0.0

    def on_train_batch_end(self, batch, logs=None):
        start = time.perf_counter()
        self.losses.append(logs["loss"])
        self.seconds_in_batch_hook += time.perf_counter() - start

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_ends.append(len(self.losses))

    def on_train_end(self, logs=None):
        figure, axes = plt.subplots(figsize=(7, 4))
        axes.plot(range(1, len(self.losses) + 1), self.losses, linewidth=0.8, label="training loss (per step)")
        for step in self.epoch_ends:
            axes.axvline(step, color="grey", linewidth=0.5, linestyle=":")
        axes.set_xlabel("optimizer step")
        axes.set_ylabel("loss")
        axes.set_title(f"{self.model.name}: {len(self.losses)} steps on {tnt.get_size()} rank(s)")
        axes.legend()
        figure.tight_layout()
        figure.savefig(self.path, dpi=100)
        plt.close(figure)
        calls = max(len(self.losses), 1)
        print(f"loss curve of {len(self.losses)} steps written to {self.path}; the per-step hook took "
              f"{1e6 * self.seconds_in_batch_hook / calls:.1f} us per call, 1 call per step", flush=True)
