"""Checks that pcoll lives within a small /dev/shm and with many
communicators (issue 33), run by ctests/run.py among its extra checks, once
per MPI. Each job runs in a private mount namespace whose /dev/shm is a
tmpfs of 64 MiB, the default of a Docker container (`unshare -m`; needs
root, else the checks are skipped with a warning), and afterwards nothing
of pcoll's may be left there:

  - the C tests t_allreduce, t_bcast, t_reduce, t_gatherv and t_comms at 2
    ranks pass (before: SIGBUS inside MPI_Allreduce from about ten
    communicators, the pages of a segment found missing only when
    touched);
  - ctests/x_comms.c keeps 200 communicators alive and runs every
    collective on each, results checked: beyond pcoll's budget of /dev/shm
    the communicators run its point-to-point algorithms, with one warning
    per process (never more, in any of these jobs);
  - x_comms creates, uses and frees 300 communicators in a row, results
    checked, where each new one takes the segment its predecessor of the
    same ranks left (also with the machine's own /dev/shm);
  - PCOLL_SHM_FRAGMENT=16M with PCOLL_SHM_SLOTS=4096 (each accepted alone)
    stops the job at MPI_Init with a message naming both (before: a stall
    and a 5.9 GB file in /dev/shm).

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`. Python standard library only.
"""

import os
import re
import subprocess

import selection_checks

RANKS = 2
PROGRAMS = ["t_allreduce", "t_bcast", "t_reduce", "t_gatherv", "t_comms"]
SHM_SIZE = "64m"
LEFT = "small_shm_checks: left in /dev/shm:"
# Mounts the small /dev/shm, runs the launcher, then says what is left.
SCRIPT = ('mount -t tmpfs -o size=%s tmpfs /dev/shm || exit 97; "$@"; rc=$?; '
          'echo "%s $(ls -A /dev/shm | tr "\\n" " ")" >&2; exit $rc' % (SHM_SIZE, LEFT))
PREFIX = ["unshare", "-m", "--propagation", "private", "sh", "-c", SCRIPT, "sh"]
SEGMENT = re.compile(r"\bpcoll-\d+-\d+-[0-9a-f]{16}\b")
# pcoll's warning that a communicator runs without the node layer
NO_SEGMENT = "node layer: no shared segment for a communicator"



def run(r, mpi, lib, exes, res):
    """All the checks for one MPI; `lib` is the libpcoll.so built for it,
    `exes` the test programs run.py built."""
    try:
        ok = subprocess.run(PREFIX[:4] + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        ok = False
    if not ok:
        r.warn("no private mount namespace (unshare -m needs root): the small /dev/shm checks do not run")
        return
    x_comms = os.path.join(r.HERE, "build", mpi, "x_comms")
    built, text = r.compile_prog(mpi, os.path.join(r.HERE, "x_comms.c"), x_comms)
    if not built:
        res.add(False, "compile %s x_comms" % mpi, text)
        x_comms = None
    for prog in PROGRAMS:
        exe = exes.get((prog, "preload"))
        if exe:
            check(r, mpi, lib, res, exe, [], {"CTEST_TIMEOUT": "280"}, "ctest %s: OK" % prog, prog)
    if x_comms:
        check(r, mpi, lib, res, x_comms, ["live", "200"], {}, "x_comms: OK",
              "x_comms live 200 (200 communicators alive, each used)")
        check(r, mpi, lib, res, x_comms, ["cycles", "300"], {}, "x_comms: OK",
              "x_comms cycles 300 (created, used, freed)")
        check(r, mpi, lib, res, x_comms, ["cycles", "300"], {}, "x_comms: OK",
              "x_comms cycles 300 (created, used, freed)", small=False)
        check_oversized(r, mpi, lib, res, x_comms)


def launch(r, mpi, lib, exe, argv, env, small=True):
    tenv = {"LD_PRELOAD": lib}
    tenv.update(env)
    return r.run_mpi(mpi, RANKS, exe, tenv, 300, argv, PREFIX if small else ())


def leftovers(err):
    """pcoll's segments left in the small /dev/shm, and whether the listing
    was there at all."""
    lines = [ln for ln in err.split("\n") if ln.startswith(LEFT)]
    return (SEGMENT.findall(lines[-1]) if lines else []), bool(lines)


def check(r, mpi, lib, res, exe, argv, env, marker, what, small=True):
    result = launch(r, mpi, lib, exe, argv, env, small)
    rc, out, err, _ = result
    problems = []
    if rc is None:
        problems.append("the job hung (no end within 300 s)")
    elif rc != 0 or marker not in out:
        problems.append("expected the job to pass (exit 0, %r)" % marker)
    if "Bus error" in out + err or "signal 7" in out + err:
        problems.append("SIGBUS")
    warnings = err.count(NO_SEGMENT)
    if warnings > RANKS:
        problems.append("%d warnings %r: expected at most one per process" % (warnings, NO_SEGMENT))
    if small:
        left, listed = leftovers(err)
        if left or not listed:
            problems.append("left in /dev/shm: %s" % " ".join(left) if listed else "no listing of /dev/shm")
    where = "/dev/shm of %s" % SHM_SIZE if small else "the machine's /dev/shm"
    selection_checks.report(r, res, mpi, not problems, "ranks=%d %s in %s" % (RANKS, what, where), problems,
                            result, env)


def check_oversized(r, mpi, lib, res, exe):
    env = {"PCOLL_SHM_FRAGMENT": "16M", "PCOLL_SHM_SLOTS": "4096"}
    result = launch(r, mpi, lib, exe, ["live", "2"], env)
    rc, out, err, _ = result
    problems = []
    if rc is None:
        problems.append("the job hung (no end within 300 s)")
    elif rc == 0 or "x_comms: OK" in out:
        problems.append("expected the job to stop at MPI_Init (non-zero exit, no 'x_comms: OK')")
    if "PCOLL_SHM_SLOTS=4096 and PCOLL_SHM_FRAGMENT=16M make a shared segment" not in err:
        problems.append("expected on stderr: PCOLL_SHM_SLOTS=4096 and PCOLL_SHM_FRAGMENT=16M make a shared "
                        "segment ...")
    left, listed = leftovers(err)
    if left or not listed:
        problems.append("left in /dev/shm: %s" % " ".join(left) if listed else "no listing of /dev/shm")
    selection_checks.report(r, res, mpi, not problems,
                            "ranks=%d PCOLL_SHM_FRAGMENT=16M PCOLL_SHM_SLOTS=4096 is refused at MPI_Init in "
                            "/dev/shm of %s, naming both" % (RANKS, SHM_SIZE), problems, result, env)
