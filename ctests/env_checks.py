"""Checks that the environment cannot crash or stop a job it should not, and
that ranks started with different settings stop instead of hanging (issue
33), run by ctests/run.py among its extra checks, once per MPI, on
ctests/x_repro.c (which says "x_repro: initialised" once MPI_Init has
returned, and "x_repro: OK" at the end):

  - a variable whose value is not UTF-8 (no PCOLL_ one) leaves the job
    running;
  - an unknown PCOLL_ name (the typo PCOLL_ALREDUCE) leaves the job running
    with a warning that suggests PCOLL_ALLREDUCE; PCOLL_LIB_MPICH and
    PCOLL_LIB_OPENMPI, which scripts/bench.sh reads, pass without a word;
  - PCOLL_ENABLE=0 reads nothing else: an invalid PCOLL_SHM does not stop
    it;
  - one rank started with PCOLL_ALLREDUCE=mpi (through a wrapper script
    that sets it at world rank 1 only; before the check, that rank called
    the host's Allreduce while the others ran pcoll's, and the job hung):
    the job stops at MPI_Init, with a message naming PCOLL_ALLREDUCE.

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os

import selection_checks

RANKS = 3

# Sets PCOLL_ALLREDUCE=mpi at world rank 1 only (MPICH's Hydra says the rank in
# PMI_RANK, Open MPI in OMPI_COMM_WORLD_RANK), then runs the program
# preloaded with the library in CTEST_PCOLL_LIB: the shell itself is not.
WRAPPER = """#!/bin/sh
rank=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-unknown}}
if [ "$rank" = 1 ]; then
    export PCOLL_ALLREDUCE=mpi
fi
export LD_PRELOAD="$CTEST_PCOLL_LIB"
exec "$@"
"""


def run(r, mpi, lib, res):
    """All the checks for one MPI; `lib` is the libpcoll.so built for it."""
    exe = selection_checks.compile_x_repro(r, mpi, res)
    if not exe:
        return
    check_not_utf8(r, mpi, lib, exe, res)
    check_unknown_name(r, mpi, lib, exe, res)
    check_disabled(r, mpi, lib, exe, res)
    check_different_settings(r, mpi, lib, exe, os.path.join(os.path.dirname(exe), "rank1_allreduce_mpi.sh"), res)


def ran_through(result, program="x_repro"):
    """Problems, if the job of `program` (which says "<program>: OK" at its
    end) did not run to its end."""
    rc, out, err, _ = result
    problems = []
    if rc != 0 or "%s: OK" % program not in out:
        problems.append("expected the job to run to its end (exit 0, '%s: OK')" % program)
    if "panicked" in err:
        problems.append("pcoll panicked")
    return problems


def stopped(result, timeout):
    """Problems, if the job did not stop (non-zero exit) within `timeout` s."""
    rc = result[0]
    if rc is None:
        return ["the job hung (no end within %d s)" % timeout]
    if rc == 0:
        return ["expected the job to stop (non-zero exit)"]
    return []


def check_not_utf8(r, mpi, lib, exe, res):
    # b"caf\xe9" (Latin-1): Python passes the lone surrogate on as the byte
    env = {"CTEST_NOT_UTF8": "caf\udce9"}
    result = selection_checks.launch(r, mpi, RANKS, exe, lib, env, 120)
    problems = ran_through(result)
    selection_checks.report(r, res, mpi, not problems,
                            "ranks=%d a variable that is not UTF-8 leaves the job running" % RANKS, problems,
                            result, {"CTEST_NOT_UTF8": "caf\\xe9"})


def check_unknown_name(r, mpi, lib, exe, res):
    env = {"PCOLL_ALREDUCE": "ring", "PCOLL_LIB_MPICH": "/nowhere/libpcoll.so",
           "PCOLL_LIB_OPENMPI": "/nowhere/libpcoll.so"}
    result = selection_checks.launch(r, mpi, RANKS, exe, lib, env, 120)
    err = result[2]
    problems = ran_through(result)
    want = "PCOLL_ALREDUCE is not a pcoll variable and is ignored; did you mean PCOLL_ALLREDUCE?"
    if want not in err:
        problems.append("expected the warning %r on stderr" % want)
    if "PCOLL_LIB_" in err:
        problems.append("PCOLL_LIB_MPICH and PCOLL_LIB_OPENMPI are scripts' variables: expected no word of them")
    selection_checks.report(r, res, mpi, not problems,
                            "ranks=%d an unknown PCOLL_ name leaves the job running and suggests the nearest"
                            % RANKS, problems, result, env)


def check_disabled(r, mpi, lib, exe, res):
    env = {"PCOLL_ENABLE": "0", "PCOLL_SHM": "bogus", "PCOLL_ALREDUCE": "ring"}
    result = selection_checks.launch(r, mpi, RANKS, exe, lib, env, 120)
    problems = ran_through(result)
    if "PCOLL_SHM" in result[2] or "PCOLL_ALREDUCE" in result[2]:
        problems.append("with PCOLL_ENABLE=0, expected no word of the other variables")
    selection_checks.report(r, res, mpi, not problems,
                            "ranks=%d PCOLL_ENABLE=0 reads no other variable (PCOLL_SHM=bogus)" % RANKS,
                            problems, result, env)


def check_different_settings(r, mpi, lib, exe, wrapper, res):
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    os.chmod(wrapper, 0o755)
    env = {"CTEST_PCOLL_LIB": lib}
    result = r.run_mpi(mpi, RANKS, wrapper, env, 60, [exe])
    _, out, err, _ = result
    problems = stopped(result, 60)
    if "different settings" not in err or "PCOLL_ALLREDUCE (rank " not in err:
        problems.append("expected on stderr: the ranks were started with different settings ... "
                        "PCOLL_ALLREDUCE (rank ...")
    if "x_repro: initialised" in out:
        problems.append("the job got past MPI_Init: the settings must be compared there")
    selection_checks.report(r, res, mpi, not problems,
                            "ranks=%d PCOLL_ALLREDUCE=mpi at rank 1 only stops the job at MPI_Init, naming it"
                            % RANKS, problems, result, {"PCOLL_ALLREDUCE": "mpi at world rank 1"})
