"""tnt.comm_world() from Python as an HPC code uses it, timed as tnt-bench-allreduce times the
C++ communicator (bench/collectives): float32 sum in place, 3 warm-up calls, iterations for about
--seconds per size, the median over iterations of the slowest rank's time.

    PYTHONPATH=build/python build/bin/tnt-launch -n 2 -- /usr/bin/python3 examples/python/allreduce_timing.py
    build/bin/tnt-launch -n 2 -- build/bin/tnt-bench-allreduce --min 1M --max 1M     # the same in C++
"""
import argparse
import time

import numpy as np

import tnt

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--sizes", default="4096,1048576", help="bytes, comma-separated")
parser.add_argument("--seconds", type=float, default=0.5, help="time per size")
args = parser.parse_args()

comm = tnt.comm_world()
if comm.rank == 0:
    print(f"tnt.comm_world() allreduce from Python, {comm.size} ranks, float32 sum (median over iterations of the "
          "slowest rank)")
    print(f"{'bytes':>12} {'iterations':>10} {'median us':>14} {'busbw GB/s':>16}")
for size in (int(s) for s in args.sizes.split(",")):
    data = np.ones(size // 4, dtype=np.float32)

    def once():
        start = time.perf_counter()
        comm.allreduce(data)
        return time.perf_counter() - start

    estimate = np.array([0.0])
    for _ in range(3):
        estimate[0] = once()
    comm.broadcast(estimate, root=0)
    iterations = int(min(max(args.seconds / max(estimate[0], 1e-7), 5), 2000))
    seconds = np.empty(iterations)
    comm.barrier()
    for i in range(iterations):
        seconds[i] = once()
    comm.allreduce(seconds, op="max")
    median = float(np.median(seconds))
    if comm.rank == 0:
        busbw = 2 * (comm.size - 1) / comm.size * size / median / 1e9
        print(f"{size:>12} {iterations:>10} {median * 1e6:>14.1f} {busbw:>16.3f}", flush=True)
