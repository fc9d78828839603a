"""tnt.comm_world() on NumPy arrays, run on every rank of a tnt-launch job (tests/python/CMakeLists.txt)."""
import numpy as np

import tnt

rank, size = tnt.get_rank(), tnt.get_size()
comm = tnt.comm_world()
assert (comm.rank, comm.size) == (rank, size), (comm.rank, comm.size, rank, size)
assert tnt.is_master_rank() == (rank == 0)

# allreduce: in place, the sum over ranks, for every dtype, above and below the small-message size.
for dtype in (np.float32, np.float64, np.int32, np.int64):
    for n in (7, 300_000):
        a = (np.arange(n) % 1000 + 1000 * rank).astype(dtype)
        returned = comm.allreduce(a)
        assert returned is a, "allreduce works in place and returns its array"
        expected = size * (np.arange(n) % 1000) + 1000 * sum(range(size))
        assert np.array_equal(a, expected.astype(dtype)), (dtype, n, a[:5], expected[:5])
m = np.array([rank, -rank], dtype=np.float64)
comm.allreduce(m, op="max")
assert list(m) == [size - 1, 0], m
m = np.array([rank, -rank], dtype=np.float64)
comm.allreduce(m, op="min")
assert list(m) == [0, -(size - 1)], m

# A 2-D array reduces as its elements.
grid = np.full((3, 4), rank + 1, dtype=np.float32)
comm.allreduce(grid)
assert np.all(grid == size * (size + 1) / 2)

# broadcast from every root.
for root in range(size):
    b = np.full(5, rank, dtype=np.int64)
    comm.broadcast(b, root=root)
    assert np.all(b == root), (root, b)

# allgather: every rank's array, in rank order.
g = comm.allgather(np.array([rank, rank * 10], dtype=np.int32))
assert g.shape == (size, 2) and [list(r) for r in g] == [[r, r * 10] for r in range(size)], g

comm.barrier()

# Refusals that name what is wrong, on every rank alike (no collective is issued).
try:
    comm.allreduce(np.zeros((4, 4), dtype=np.float32)[:, 1])
    raise AssertionError("a strided view was reduced")
except ValueError as e:
    assert "C-contiguous" in str(e), e
try:
    comm.allreduce(np.zeros(3, dtype=np.complex64))
    raise AssertionError("complex numbers were reduced")
except TypeError as e:
    assert "complex64" in str(e), e
try:
    comm.broadcast(np.zeros(3), root=size)
    raise AssertionError("a root outside the job was taken")
except ValueError as e:
    assert "root" in str(e), e
# tnt's errors are Python exceptions of tnt's classes, with tnt's message.
try:
    tnt.init(threads=tnt._tnt.threads() + 1)
    raise AssertionError("a second init with other threads was taken")
except tnt.ConfigError as e:
    assert "already joined" in str(e), e

comm.barrier()
print(f"rank {rank} of {size}: comm_world ok", flush=True)
