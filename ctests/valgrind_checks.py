"""Checks of what docs/debugging.md tells valgrind users (issue 33), run by
ctests/run.py among its extra checks, once per MPI, on ctests/x_valgrind.c
(a 1 MiB Bcast and a 1 MiB Allreduce into buffers never written, each
result checked with memcheck's VALGRIND_CHECK_MEM_IS_DEFINED) at 2 ranks
under valgrind:

  - with PCOLL_SHM_ZCOPY=0, the advice: no "Uninitialised byte(s) found
    during client check request" (the MPI's own reports, which it makes
    without pcoll too, do not count), and the right values;
  - the reason for the advice: with the zero-copy algorithms forced, the
    check does see the bytes a peer wrote (process_vm_writev) as
    undefined. This part runs only where zero copy works (the PCOLL_STATS
    summary shows shm_zcopy; kernels that restrict ptrace turn it off).

Skipped, with a warning, where valgrind is not installed (scripts/setup.sh
installs it). The helpers (launching, compiling, reporting) are run.py's,
passed in as the module `r`.  Python standard library only.
"""

import os
import shutil

import env_checks
import selection_checks

RANKS = 2
TIMEOUT = 120
REPORT = "Uninitialised byte(s) found during client check request"


def run(r, mpi, lib, res):
    """Both checks for one MPI; `lib` is the library built for it."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        r.warn("valgrind is not installed: the checks of docs/debugging.md's advice do not run")
        return
    exe = os.path.join(r.HERE, "build", mpi, "x_valgrind")
    ok, text = r.compile_prog(mpi, os.path.join(r.HERE, "x_valgrind.c"), exe)
    if not ok:
        res.add(False, "compile %s x_valgrind" % mpi, text, mpi)
        return
    check_without_zero_copy(r, mpi, lib, valgrind, exe, res)
    check_zero_copy(r, mpi, lib, valgrind, exe, res)


def under_valgrind(r, mpi, lib, valgrind, exe, env):
    tenv = {"LD_PRELOAD": lib, "PCOLL_STATS": "1"}
    tenv.update(env)
    return r.run_mpi(mpi, RANKS, valgrind, tenv, TIMEOUT, ["-q", exe])


def check_without_zero_copy(r, mpi, lib, valgrind, exe, res):
    env = {"PCOLL_SHM_ZCOPY": "0"}
    result = under_valgrind(r, mpi, lib, valgrind, exe, env)
    err = result[2]
    problems = env_checks.ran_through(result, "x_valgrind")
    if REPORT in err:
        problems.append("valgrind takes %d received buffer(s) for uninitialised: %r" % (err.count(REPORT), REPORT))
    selection_checks.report(r, res, mpi, not problems, "ranks=%d under valgrind, PCOLL_SHM_ZCOPY=0: no false "
                            "'uninitialised' report" % RANKS, problems, result, env)


def check_zero_copy(r, mpi, lib, valgrind, exe, res):
    env = {"PCOLL_BCAST": "shm_zcopy", "PCOLL_ALLREDUCE": "shm_zcopy"}
    result = under_valgrind(r, mpi, lib, valgrind, exe, env)
    err = result[2]
    rows, _ = selection_checks.summary_rows(err)
    if not any(alg == "shm_zcopy" for _, alg in rows):
        r.warn("%s: zero copy does not run here (ptrace restricted?): the valgrind check of zero copy's reports "
               "does not run" % mpi)
        return
    problems = env_checks.ran_through(result, "x_valgrind")
    if REPORT not in err:
        problems.append("expected %r: zero copy's writes are invisible to valgrind (if pcoll now marks them "
                        "defined, docs/debugging.md and this check should say so)" % REPORT)
    selection_checks.report(r, res, mpi, not problems, "ranks=%d under valgrind, zero copy forced: the false "
                            "'uninitialised' reports docs/debugging.md explains" % RANKS, problems, result, env)
