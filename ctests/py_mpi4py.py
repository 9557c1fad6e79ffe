"""The mpi4py test program (run by ctests/binding_checks.py under the
wheels, preloaded and stock): what a Python user calls. Buffer-based
comm.Allreduce, Reduce, Bcast and Gatherv on numpy arrays (float64, int32,
int8; with MPI.IN_PLACE where MPI allows it; every root), and the
lowercase object versions (pickled, which reach MPI as bytes). Each rank
checks every result against the value numpy computes from the inputs
(exact: integers, and floats whose sums are exact), then prints
"py_mpi4py: rank R digest D" (a hash of every result, which must be the
same with and without pcoll) and "py_mpi4py: OK".
"""

import hashlib
import sys

import numpy as np
from mpi4py import MPI

COUNTS = (1, 7, 1000, 100000)
DTYPES = (np.float64, np.int32, np.int8)
REPEAT = 3  # pcoll plans a call from the second on a communicator


def inputs(rank, count, dtype):
    base = np.arange(count, dtype=np.int64) % 50 + rank
    return base.astype(dtype)


def main():
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    digest = hashlib.sha256()
    wrong = []

    def check(what, got, want):
        digest.update(np.ascontiguousarray(got).tobytes())
        if not np.array_equal(got, want):
            wrong.append(what)

    everyone = lambda count, dtype: [inputs(r, count, dtype) for r in range(size)]
    for count in COUNTS:
        for dtype in DTYPES:
            mine, all_inputs = inputs(rank, count, dtype), everyone(count, dtype)
            with np.errstate(over="ignore"):
                total = np.sum(all_inputs, axis=0, dtype=dtype)
            for _ in range(REPEAT):
                out = np.empty_like(mine)
                comm.Allreduce(mine, out, op=MPI.SUM)
                check("Allreduce %d %s" % (count, dtype.__name__), out, total)
                inplace = mine.copy()
                comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.MAX)
                check("Allreduce in place %d %s" % (count, dtype.__name__), inplace, np.max(all_inputs, axis=0))
            for root in range(size):
                out = np.zeros_like(mine)
                comm.Reduce(mine, out if rank == root else None, op=MPI.SUM, root=root)
                if rank == root:
                    check("Reduce root %d %d %s" % (root, count, dtype.__name__), out, total)
                buf = mine.copy() if rank == root else np.zeros_like(mine)
                comm.Bcast(buf, root=root)
                check("Bcast root %d %d %s" % (root, count, dtype.__name__), buf, inputs(root, count, dtype))
                counts = [count + r for r in range(size)]
                displs = [sum(counts[:r]) for r in range(size)]
                send = inputs(rank, counts[rank], dtype)
                recv = np.zeros(sum(counts), dtype=dtype) if rank == root else None
                comm.Gatherv(send, [recv, counts, displs, MPI._typedict[np.dtype(dtype).char]] if rank == root
                             else None, root=root)
                if rank == root:
                    want = np.concatenate([inputs(r, counts[r], dtype) for r in range(size)])
                    check("Gatherv root %d %d %s" % (root, count, dtype.__name__), recv, want)
    # the object versions (pickles: MPI_BYTE / MPI_CHAR buffers underneath)
    for root in range(size):
        value = {"rank": rank, "data": list(range(rank, rank + 5))}
        got = comm.bcast(value if rank == root else None, root=root)
        check("bcast object root %d" % root, np.array(got["data"]), np.arange(root, root + 5))
        gathered = comm.gather(value, root=root)
        if rank == root:
            check("gather object root %d" % root, np.array([g["rank"] for g in gathered]), np.arange(size))
    check("allreduce object", np.array(comm.allreduce(rank + 1)), np.array(size * (size + 1) // 2))
    reduced = comm.reduce(rank + 1, op=MPI.MAX, root=0)
    if rank == 0:
        check("reduce object", np.array(reduced), np.array(size))
    print("py_mpi4py: rank %d digest %s" % (rank, digest.hexdigest()[:16]), flush=True)
    if wrong:
        print("py_mpi4py: rank %d wrong: %s" % (rank, ", ".join(wrong[:10])), flush=True)
        return 1
    print("py_mpi4py: OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
