"""Checks that libpcoll.so binds the MPI library of the process and never
loads one of its own (issue 30), run by ctests/run.py among its extra
checks, once per MPI:

  - the library names no MPI library (no NEEDED entry: a distribution's
    name, such as Debian's libmpich.so.12, would load a second MPI beside a
    program's libmpi.so.12 from another distribution), and leaves no MPI
    symbol for the loader to resolve (nm -D --undefined-only);
  - ctests/x_hostlib.c, built as a program and preloaded: its collectives
    are right, pcoll's summary shows a pcoll algorithm, and every rank
    maps exactly one MPI library (/proc/self/maps);
  - the same, built as a shared library that ctests/x_loader.c (a program
    without MPI) opens with RTLD_LOCAL, as Python imports mpi4py: MPI is
    then outside the global scope, where a PMPI reference of a preloaded
    library cannot reach it;
  - under the wheels (which come with mpi4py): ctests/py_mpi4py.py at 2 and
    3 ranks, stock and preloaded: every result right, the same results with
    and without pcoll, and pcoll's summary shows each of the four
    collectives run by a pcoll algorithm (under MPICH 5, mpi4py 4 calls the
    large-count entry points, MPI_Allreduce_c, ...).

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os
import re
import subprocess

import selection_checks

RANKS = 2
PROGRAM = "x_hostlib"
PYTHON_RANKS = (2, 3)
COLLECTIVES = ("allreduce", "reduce", "bcast", "gatherv")
# What an MPI library or one of its parts is called, in NEEDED entries and
# symbol names.
MPI_LIBRARY = re.compile(r"mpi|mpich|open-(pal|rte)|pmix|ucp|ucs|ucx", re.I)
MPI_SYMBOL = re.compile(r"^(P?MPI_|ompi_|MPIR_|MPIX_|mpi_)", re.I)


def run(r, mpi, lib, res):
    check_names_no_mpi(r, mpi, lib, res)
    bdir = os.path.join(r.HERE, "build", mpi)
    programs = build(r, mpi, bdir, res)
    if programs:
        program, loader, shared = programs
        check_run(r, mpi, lib, [program], "as a program", res)
        check_run(r, mpi, lib, [loader, shared], "as a library opened with RTLD_LOCAL (as Python imports mpi4py)", res)
    if r.MPIS[mpi].get("wheel"):
        for nranks in PYTHON_RANKS:
            check_mpi4py(r, mpi, lib, nranks, res)


def output(cmd):
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def check_names_no_mpi(r, mpi, lib, res):
    problems = []
    needed = r.needed_libs(lib)
    if needed is None:
        problems.append("readelf -d %s failed" % lib)
    else:
        problems += ["NEEDED %s names an MPI library" % n for n in needed if MPI_LIBRARY.search(n)]
    rc, text = output(["nm", "-D", "--undefined-only", lib])
    if rc != 0:
        problems.append("nm -D --undefined-only %s failed:\n%s" % (lib, text))
    else:
        undefined = [line.split()[-1] for line in text.splitlines() if line.strip()]
        problems += ["%s is left for the loader to resolve" % s for s in undefined if MPI_SYMBOL.match(s)]
    res.add(not problems, "%s build: no MPI library NEEDED (%s) and no MPI symbol undefined" % (
        mpi, " ".join(needed or [])), "\n".join(problems), mpi)


def build(r, mpi, bdir, res):
    """The program, the loader and the shared library, or None."""
    src = os.path.join(r.HERE, PROGRAM + ".c")
    program = os.path.join(bdir, PROGRAM)
    shared = os.path.join(bdir, "lib%s.so" % PROGRAM)
    loader = os.path.join(bdir, "x_loader")
    cc = r.MPIS[mpi]["cc"]
    for cmd in ([cc, "-O2", "-Wall", "-Wextra", "-DX_HOSTLIB_MAIN", "-o", program, src],
                [cc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-o", shared, src],
                ["cc", "-O2", "-Wall", "-Wextra", "-o", loader, os.path.join(r.HERE, "x_loader.c")]):
        rc, text = output(cmd)
        if rc != 0:
            res.add(False, "%s compile %s" % (mpi, os.path.basename(cmd[-1])), " ".join(cmd) + "\n" + text, mpi)
            return None
    return program, loader, shared


def check_run(r, mpi, lib, argv, how, res):
    env = {"LD_PRELOAD": lib, "PCOLL_STATS": "1"}
    result = r.run_mpi(mpi, RANKS, argv[0], env, 120, argv=argv[1:])
    rc, out, err, _ = result
    problems = []
    if rc != 0 or out.count("%s: OK" % PROGRAM) != RANKS:
        problems.append("expected exit 0 and '%s: OK' from each of %d ranks" % (PROGRAM, RANKS))
    # (the launchers may interleave the ranks' lines mid-line: nothing here
    # relies on line ends)
    mapped = re.findall(r"x_hostlib: rank (\d+) maps (\d+) MPI libraries:", out)
    if len(mapped) != RANKS or any(n != "1" for _, n in mapped):
        problems.append("expected every rank to map exactly one MPI library: %s" % mapped)
    ran = re.findall(r"^pcoll\s+allreduce\s+(\S+)\s+\d+", err, re.M)
    if not [a for a in ran if a != "mpi"]:
        problems.append("expected pcoll's summary to show an Allreduce algorithm of pcoll's: %s" % ran)
    if "panicked" in err:
        problems.append("pcoll panicked")
    libs = sorted(set(re.findall(r"/\S*?lib(?:mpi|mpich)\.so[.\d]*\d", out)))
    selection_checks.report(r, res, mpi, not problems, "preload ranks=%d %s %s: results right, one MPI library "
                            "mapped (%s)" % (RANKS, PROGRAM, how, " ".join(libs)), problems, result, env)


def check_mpi4py(r, mpi, lib, nranks, res):
    python = os.path.join(os.path.dirname(r.MPIS[mpi]["run"]), "python")
    argv = [os.path.join(r.HERE, "py_mpi4py.py")]
    stock = r.run_mpi(mpi, nranks, python, {}, 300, argv=argv)
    env = {"LD_PRELOAD": lib, "PCOLL_STATS": "1"}
    result = r.run_mpi(mpi, nranks, python, env, 300, argv=argv)
    problems = []
    digests = {}
    for name, (rc, out, _, _) in (("stock", stock), ("with pcoll", result)):
        if rc != 0 or out.count("py_mpi4py: OK") != nranks:
            problems.append("%s: expected exit 0 and 'py_mpi4py: OK' from each of %d ranks" % (name, nranks))
        digests[name] = dict(re.findall(r"py_mpi4py: rank (\d+) digest ([0-9a-f]{16})", out))
    if digests["stock"] != digests["with pcoll"]:
        problems.append("results differ from stock's: %s" % digests)
    err = result[2]
    for coll in COLLECTIVES:
        ran = re.findall(r"^pcoll\s+%s\s+(\S+)\s+\d+" % coll, err, re.M)
        if not [a for a in ran if a != "mpi"]:
            problems.append("expected pcoll's summary to show %s run by a pcoll algorithm: %s" % (coll, ran))
    if "panicked" in err:
        problems.append("pcoll panicked")
    if problems and stock[0] != 0:
        problems.append("stock run:\n" + r.failure_details(*stock[:3]))
    selection_checks.report(r, res, mpi, not problems, "preload ranks=%d mpi4py (py_mpi4py.py: Allreduce, Reduce, "
                            "Bcast, Gatherv on numpy arrays, MPI.IN_PLACE, the object versions): results right, "
                            "the same as stock's, all four collectives run by pcoll" % nranks, problems, result, env)
