"""Checks of the benchmark programs in bench/ (the tables of issues 30 and
34 rest on them), run by ctests/run.py once per MPI, Debian's and the
wheels' (scripts/bench.sh runs them under all of them): pcoll_bench.c,
kernels.c and comm_cycles.c compile without a warning with the MPI's own
compiler; pcoll_bench, preloaded at 2 ranks, runs a few sizes in each of
its timing modes (sync, osu, b2b with the roots rotating back to back,
b2b-cold) with every collective resolving to pcoll, and finds at every
point pcoll's result equal to the stock MPI's and its send buffer
intact (back to back, its Bcasts and Gatherv blocks through the window
all writers share); comm_cycles' communicator cycles give right
Allreduce results.
Nothing here looks at a time: speed is the benchmark's business, and
kernels.c (half a minute) runs only under scripts/bench.sh --kernels;
the kernels' results are the C tests' and cargo's.

The helpers (launching, reporting) are run.py's, passed in as the module
`r`.  Python standard library only.
"""

import os
import re
import subprocess

MODES = ("sync", "osu", "b2b", "b2b-cold")
# a step in a slot, a chunk area's, and zero copy or pieces
SIZES = "8,8192,262144"
COLLS = ("Allreduce", "Reduce", "Bcast", "Gatherv")
# back to back, roots rotating on hot buffers, the shm Bcast's root and
# the 2-rank Gatherv's owner read the last call: their summary lines
WINDOW = "hot messages through the window"
GATHERV_WINDOW = "hot blocks through the window"


def compile_bench(r, mpi, name, exe, libs):
    """bench/<name> with the MPI's compiler; (ok, what to report)."""
    src = os.path.join(r.ROOT, "bench", name)
    cmd = [r.MPIS[mpi]["cc"], "-O2", "-Wall", "-Wextra", "-I", os.path.join(r.ROOT, "include"), "-o", exe, src]
    p = subprocess.run(cmd + libs, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.decode("utf-8", "replace")
    return p.returncode == 0 and "warning" not in text, " ".join(cmd + libs) + "\n" + text


def run(r, mpi, lib, res):
    """The checks for one MPI; `lib` is the libpcoll.so built for it."""
    bdir = os.path.join(r.HERE, "build", mpi)
    exes = {}
    for name, libs in (("pcoll_bench.c", ["-ldl"]), ("kernels.c", ["-ldl", "-lm"]), ("comm_cycles.c", [])):
        exe = os.path.join(bdir, "bench_" + name[:-2])
        ok, text = compile_bench(r, mpi, name, exe, libs)
        res.add(ok, "%s bench/%s compiles without warnings" % (mpi, name), "" if ok else text, mpi)
        if ok:
            exes[name] = exe
    if "pcoll_bench.c" in exes:
        for mode in MODES:
            argv = ["--sizes", SIZES, "--iters", "5", "--warmup", "1", "--mode", mode]
            env = {"LD_PRELOAD": lib, "PCOLL_LOG": "info"}
            rc, out, err, secs = r.run_mpi(mpi, 2, exes["pcoll_bench.c"], env, 120, argv)
            problems = []
            if rc != 0 or not re.search(r"(^|\s)0 point\(s\) failed the check", out):
                problems.append("expected exit 0 and '0 point(s) failed the check'")
            if not re.search(r"^# barrier: the last rank leaves the host's barrier \d+\.\d+ us after rank 0", out, re.M):
                problems.append("expected the line '# barrier: the last rank leaves the host's barrier ... us after "
                                "rank 0' (2 ranks on one node)")
            if mode == "b2b" and WINDOW not in err:
                problems.append("expected the summary's line '... %s' (Bcasts of 256 KiB, roots rotating)" % WINDOW)
            if mode == "b2b" and GATHERV_WINDOW not in err:
                problems.append("expected the summary's line '... %s' (Gathervs of 8 KiB, roots rotating)"
                                % GATHERV_WINDOW)
            providers = {}
            for line in out.splitlines():
                if line.startswith("#   MPI_") and " -> " in line:
                    name, path = line[1:].split(" -> ", 1)
                    providers[name.strip()] = path.strip()
            for coll in COLLS:
                provider = providers.get("MPI_" + coll)
                if not provider or os.path.realpath(provider) != os.path.realpath(lib):
                    problems.append("MPI_%s resolves to %s, not %s" % (coll, provider or "?", lib))
            details = "" if not problems else "\n".join(problems) + "\n" + r.failure_details(rc, out, err, 20, 30)
            res.add(not problems, "%s preload ranks=2 bench/pcoll_bench --mode %s: pcoll's results at %s bytes "
                    "equal the stock MPI's (%.1fs)" % (mpi, mode, SIZES, secs), details, mpi, secs)
    if "comm_cycles.c" in exes:
        argv = ["--cycles", "40", "--blocks", "4"]
        rc, out, err, secs = r.run_mpi(mpi, 2, exes["comm_cycles.c"], {"LD_PRELOAD": lib}, 120, argv)
        ok = rc == 0 and " ok" in out and "WRONG" not in out
        details = "" if ok else ("expected exit 0 and every row ok\n" + r.failure_details(rc, out, err, 20, 30))
        res.add(ok, "%s preload ranks=2 bench/comm_cycles: Allreduces on communicators dup'ed and freed in turn "
                "(%.1fs)" % (mpi, secs), details, mpi, secs)
