"""Checks that each build names its MPI family and that the library built
for one family says so under the other (issue 33), run by ctests/run.py
among its extra checks, once per MPI, on ctests/x_repro.c (which says
"x_repro: initialised" once MPI_Init has returned, and "x_repro: OK" at
the end):

  - the library's SONAME is libpcoll-<mpi>.so.0 (readelf -d), and
    scripts/build.sh put libpcoll-<mpi>.so and libpcoll-<mpi>.so.0 next to
    it, the same file;
  - a program linked with -lpcoll-<mpi> asks for libpcoll-<mpi>.so.0 and
    runs;
  - the program, built with this MPI's compiler and run under its
    launcher, with the OTHER family's library preloaded (built by
    scripts/build.sh, or --lib-<other>): the job stops at MPI_Init, within
    a timeout, with a non-zero exit status and the message that names the
    library to use. Before the check, it stopped with a cryptic error of
    the host (an invalid communicator, an invalid argument). Skipped, with
    a warning, when the other MPI is not installed.

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os
import re
import shutil
import subprocess

import env_checks
import selection_checks

RANKS = 2
NAMES = {"mpich": "MPICH", "openmpi": "Open MPI"}


def run(r, mpi, lib, args, res):
    """All the checks for one MPI; `lib` is the library built for it."""
    check_names(r, mpi, lib, res)
    exe = selection_checks.compile_x_repro(r, mpi, res)
    if not exe:
        return
    check_linked_by_family_name(r, mpi, lib, exe, res)
    other = next(m for m in NAMES if m != mpi)
    other_lib = other_library(r, other, args, res)
    if other_lib:
        check_other_family(r, mpi, other, other_lib, exe, res)


def soname(lib):
    p = subprocess.run(["readelf", "-d", lib], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    found = re.search(r"\(SONAME\).*\[(.*?)\]", p.stdout.decode("utf-8", "replace"))
    return found.group(1) if found else None


def check_names(r, mpi, lib, res):
    want = "libpcoll-%s.so.0" % mpi
    problems = []
    name = soname(lib)
    if name != want:
        problems.append("%s: SONAME %s, expected %s" % (lib, name, want))
    for family_name in ("libpcoll-%s.so" % mpi, want):
        path = os.path.join(os.path.dirname(lib), family_name)
        if not (os.path.exists(path) and os.path.samefile(path, lib)):
            problems.append("%s is not the library %s" % (path, lib))
    res.add(not problems, "%s build: SONAME %s, and the file under its family's names" % (mpi, name),
            "\n".join(problems), mpi)


def check_linked_by_family_name(r, mpi, lib, exe, res):
    exe_l = exe + "_family"
    ok, text = r.compile_prog(mpi, os.path.join(r.HERE, "x_repro.c"), exe_l, os.path.dirname(lib), "pcoll-" + mpi)
    if not ok:
        res.add(False, "compile %s x_repro linked with -lpcoll-%s" % (mpi, mpi), text, mpi)
        return
    needed = r.needed_libs(exe_l) or []
    result = r.run_mpi(mpi, RANKS, exe_l, {}, 120)
    problems = env_checks.ran_through(result)
    if "libpcoll-%s.so.0" % mpi not in needed:
        problems.append("expected libpcoll-%s.so.0 among the NEEDED entries: %s" % (mpi, needed))
    selection_checks.report(r, res, mpi, not problems, "link ranks=%d x_repro linked with -lpcoll-%s runs "
                            "(NEEDED: %s)" % (RANKS, mpi, " ".join(needed)), problems, result, {})


def other_library(r, other, args, res):
    """The library built for the other MPI (--lib-<other>, or built now), or
    None (a failure counted, or a warning if that MPI is not installed)."""
    given = getattr(args, "lib_" + other)
    if given:
        return os.path.abspath(given)
    if not shutil.which(r.MPIS[other]["cc"]):
        r.warn("%s is not installed: the check of its library under the other MPI does not run" % other)
        return None
    lib, err, _ = r.build_lib(other)
    if not lib:
        res.add(False, "build %s (for the check under the other MPI)" % other, err)
    return lib


def check_other_family(r, mpi, other, other_lib, exe, res):
    result = selection_checks.launch(r, mpi, RANKS, exe, other_lib, {}, 60)
    _, out, err, _ = result
    problems = env_checks.stopped(result, 60)
    want = ("this library was built for %s (libpcoll-%s.so) but the program runs under %s"
            % (NAMES[other], other, NAMES[mpi]), "preload or link libpcoll-%s.so instead" % mpi)
    if not all(w in err for w in want):
        problems.append("expected on stderr: pcoll: %s (...): %s" % want)
    if "x_repro: initialised" in out:
        problems.append("the job got past MPI_Init: the family must be checked there")
    selection_checks.report(r, res, mpi, not problems, "preload ranks=%d the library built for %s stops the job, "
                            "naming libpcoll-%s.so" % (RANKS, other, mpi), problems, result,
                            {"LD_PRELOAD": other_lib})
