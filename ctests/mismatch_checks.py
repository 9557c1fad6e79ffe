"""Checks that erroneous programs get an error and no harm (issue 33), run
by ctests/run.py among its extra checks, once per MPI, on
ctests/x_mismatch.c, for MPI_Bcast, MPI_Reduce, MPI_Allreduce and
MPI_Gatherv from 8 B to 8 MiB:
- ranks that pass different counts: those whose buffers are too small get
  MPI_ERR_TRUNCATE, no byte is written past a buffer (each ends at a guard
  page);
- arguments only one rank sees are invalid (a NULL or aliased receive
  buffer, a root's negative or NULL recvcounts, a sender's negative
  count): that rank gets the host's class, the others complete, with the
  right result where the invalid rank's input was valid;
- no call hangs, and the next Allreduce is right.
At 2 and 3 ranks, with pcoll's built-in choices (its node algorithms on
one node).

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os

import env_checks
import selection_checks

TIMEOUT = 600


def run(r, mpi, lib, res):
    """The checks for one MPI; `lib` is the libpcoll.so built for it."""
    exe = os.path.join(r.HERE, "build", mpi, "x_mismatch")
    ok, text = r.compile_prog(mpi, os.path.join(r.HERE, "x_mismatch.c"), exe)
    if not ok:
        res.add(False, "compile %s x_mismatch" % mpi, text)
        return
    for ranks in (2, 3):
        result = selection_checks.launch(r, mpi, ranks, exe, lib, {}, TIMEOUT)
        problems = env_checks.ran_through(result, "x_mismatch")
        if result[0] is None:
            problems.append("a call hung (no end within %d s)" % TIMEOUT)
        selection_checks.report(r, res, mpi, not problems,
                                "ranks=%d counts that differ between ranks (MPI_ERR_TRUNCATE where a buffer is "
                                "too small, nothing written past a buffer) and arguments invalid at one rank (its "
                                "error, the others complete): no hang, next call right (8 B-8 MiB, four collectives)"
                                % ranks, problems, result, {})
