"""A long fit for tests/python/signals_driver.py to interrupt: each rank writes WORKDIR/pid.RANK
once it has joined, then trains (with a checkpoint every 20 steps and resume="auto").

    signals_test.py WORKDIR [MAX_STEPS]
"""
import os
import sys

import numpy as np

import tnt

workdir = sys.argv[1]
max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else 0
rank = tnt.get_rank()
rng = np.random.default_rng(0)
x = rng.integers(0, 256, (2000, 28, 28)).astype(np.uint8)
y = rng.integers(0, 10, 2000).astype(np.int32)
model = tnt.Model.from_zoo("lenet5", seed=1)
model.compile(optimizer="sgd")
with open(os.path.join(workdir, f"pid.{rank}"), "w") as f:
    f.write(str(os.getpid()))
history = model.fit(x, y, batch_size=20, epochs=1000, max_steps=max_steps, verbose=0,
                    checkpoint_path=os.path.join(workdir, "run.ckpt"), checkpoint_every_steps=20, resume="auto")
print(f"rank {rank}: fit returned after {history.steps} steps", flush=True)
