"""Checks of include/pcoll.h (issue 32), run by ctests/run.py among its
extra checks, once per MPI: ctests/x_header.c, compiled with the MPI's C
compiler and again as C++ with its C++ compiler, linked with
-lpcoll-<mpi>, runs at one rank and finds pcoll_version() equal to the
header's PCOLL_VERSION_STRING, pcoll_set_algorithm accepting and refusing
what the header says, and pcoll_reduce_local's sums.

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os
import subprocess

CXX = {"mpich": "mpicxx.mpich", "openmpi": "mpicxx.openmpi"}


def compile_with(compiler, mpi, lib, exe, cxx):
    """Builds x_header with `compiler` (as C++ where `cxx`), linked with
    the library by its family name; (ok, command and output)."""
    src = os.path.join(os.path.dirname(__file__), "x_header.c")
    include = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
    libdir = os.path.dirname(lib)
    cmd = [compiler] + (["-x", "c++"] if cxx else []) + ["-O2", "-Wall", "-Wextra", "-I" + include, "-o", exe, src]
    cmd += ["-L" + libdir, "-lpcoll-" + mpi, "-Wl,-rpath," + libdir]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode == 0, " ".join(cmd) + "\n" + p.stdout.decode("utf-8", "replace")


def run(r, mpi, lib, res):
    """The checks for one MPI; `lib` is the libpcoll.so built for it."""
    for lang, compiler in (("C", r.MPIS[mpi]["cc"]), ("C++", CXX[mpi])):
        exe = os.path.join(r.HERE, "build", mpi, "x_header" + ("_cxx" if lang == "C++" else ""))
        ok, text = compile_with(compiler, mpi, lib, exe, lang == "C++")
        if not ok:
            res.add(False, "compile %s x_header as %s against include/pcoll.h" % (mpi, lang), text, mpi)
            continue
        rc, out, err, secs = r.run_mpi(mpi, 1, exe, {}, 60)
        problems = []
        if rc != 0 or "x_header: OK pcoll " not in out:
            problems.append("expected exit 0 and 'x_header: OK pcoll <version>'")
        details = "" if not problems else "\n".join(problems) + "\n" + r.failure_details(rc, out, err, 30, 30)
        res.add(not problems, "%s x_header (%s, linked with -lpcoll-%s): pcoll.h's functions (%.1fs)"
                % (mpi, lang, mpi, secs), details, mpi, secs)
