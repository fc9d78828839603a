"""Rank 1 dies in the middle of fit (os._exit from a callback that runs on every rank): the
other ranks' fit raises tnt.JobError naming rank 1 (tests/python/CMakeLists.txt)."""
import os

import numpy as np

import tnt


class DieOnRank1(tnt.callbacks.Callback):
    run_on_all_ranks = True

    def on_train_batch_end(self, batch, logs=None):
        if batch == 3 and tnt.get_rank() == 1:
            os._exit(7)


x = np.random.default_rng(0).random((400, 1, 28, 28), dtype=np.float32)
y = np.zeros(400, np.int32)
model = tnt.Model.from_zoo("lenet5")
model.compile()
model.fit(x, y, batch_size=40, epochs=50, callbacks=[DieOnRank1()], verbose=0)
