#!/usr/bin/env python3
"""Runs the pcoll correctness tests (ctests/t_*.c, and the Fortran tests
ctests/f_*.F90 built with ctests/fref.c) under MPICH and Open MPI.

For each MPI: builds libpcoll.so (scripts/build.sh <mpi>), builds every
ctests/t_*.c twice (plain, used with LD_PRELOAD; and linked with -lpcoll
before the MPI library), then runs the matrix

    {preload, link} x configurations x rank counts x programs

where the configurations are PCOLL_ENABLE=0, the defaults (auto), and
"forced" configurations in which each collective's i-th algorithm (as listed
by `pcoll algorithms`) is forced, so that every algorithm runs at least once.
Runs are sequential (2 cores), each with a timeout (a timeout is reported as
a hang and the whole process tree is killed).  The Fortran programs run
with PCOLL_STATS=1 (except with PCOLL_ENABLE=0), and their summary must be
job-wide and, above one rank, show every collective run by a pcoll
algorithm (the forced one, when one is forced).  Also checks that a bogus
PCOLL_ALLREDUCE value is rejected with a clear message, that PCOLL_STATS=1
prints a summary, and that the link-time build really resolves the MPI
collectives to libpcoll; then the checks of ctests/selection_checks.py
(malformed rules, PCOLL_STATS_FILE, PCOLL_VERIFY, PCOLL_REPRODUCIBLE,
pcoll tune).

Ends with the line "N passed, N failed"; exit code 0 only if nothing failed.

Usage: python3 ctests/run.py [--quick] [--mpi mpich|openmpi|both]
                             [--ranks 1,2,3,4,5,7,8] [--lib-mpich PATH]
                             [--lib-openmpi PATH] [--programs t_a,t_b]
                             [--timeout S] [--full] [--list] [--avoid-host-bugs]

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
import time

import selection_checks

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MPIS = {
    "mpich": {"cc": "mpicc.mpich", "fc": "mpif90.mpich", "run": "mpiexec.mpich"},
    "openmpi": {"cc": "mpicc.openmpi", "fc": "mpif90.openmpi", "run": "mpirun.openmpi"},
}
ALL_RANKS = [1, 2, 3, 4, 5, 7, 8]
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
        self.time_by_mpi = {}

    def add(self, ok, line, details="", mpi=None, secs=0.0):
        if mpi:
            self.time_by_mpi[mpi] = self.time_by_mpi.get(mpi, 0.0) + secs
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
                extra["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
    except OSError:
        pass
    return extra


def launch_cmd(mpi, nranks, exe, tenv):
    if mpi == "mpich":
        cmd = [MPIS[mpi]["run"], "-n", str(nranks)]
        for k, v in tenv.items():
            cmd += ["-genv", k, v]
    else:
        cmd = [MPIS[mpi]["run"], "--allow-run-as-root", "--oversubscribe", "-np", str(nranks)]
        for k, v in tenv.items():
            cmd += ["-x", "%s=%s" % (k, v)]
    return cmd + [exe]


def run_mpi(mpi, nranks, exe, tenv, timeout):
    env = base_env()
    full = dict(tenv)
    if mpi == "openmpi":
        for k, v in ompi_extra_env().items():
            full.setdefault(k, v)
    # the launcher's own environment carries the same variables (except
    # LD_PRELOAD: the launcher itself must not be preloaded)
    for k, v in full.items():
        if k != "LD_PRELOAD":
            env[k] = v
    return run_cmd(launch_cmd(mpi, nranks, exe, full), env, timeout)


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


def compile_prog(mpi, src, exe, libdir=None):
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
        cmd += ["-L" + libdir, "-lpcoll", "-Wl,-rpath," + libdir]
    cmd += ["-lm"]
    p = subprocess.run(cmd, cwd=HERE, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode == 0, " ".join(cmd) + "\n" + p.stdout.decode("utf-8", "replace")


def needed_libs(exe):
    try:
        p = subprocess.run(["readelf", "-d", exe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    return re.findall(r"\(NEEDED\).*\[(.*?)\]", p.stdout.decode("utf-8", "replace"))


def get_algorithms(res):
    """{collective: [forcing values]} from `<tool> algorithms`, or None."""
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
    algs = {}
    for ln in p.stdout.decode("utf-8", "replace").split("\n"):
        f = ln.split()
        if len(f) == 2 and f[0] in COLLS:
            algs.setdefault(f[0], [])
            if f[1] not in algs[f[0]]:
                algs[f[0]].append(f[1])
    if p.returncode != 0 or not algs:
        res.add(False, "pcoll algorithms", "exit %d, output:\n%s%s" % (
            p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")))
        return None
    res.add(True, "pcoll algorithms (%s)" % ", ".join("%s: %s" % (c, " ".join(a)) for c, a in algs.items()))
    return algs


# ---------------------------------------------------------------- the matrix

SUMMARY_HEAD = re.compile(r"^pcoll summary: (\d+) ranks, host MPI: (.*)$", re.M)
SUMMARY_LINE = re.compile(r"^pcoll\s+(allreduce|reduce|bcast|gatherv)\s+(\S+)\s+(\d+)\s", re.M)


def summary_problems(err, nranks, cenv):
    """What is wrong with the PCOLL_STATS=1 summary of a Fortran or
    large-count run ([] if nothing): it must be job-wide (every rank's MPI_Init reached
    pcoll) and, above one rank, show each collective run by a pcoll
    algorithm, the forced one if one is forced (the calls reached pcoll)."""
    head = SUMMARY_HEAD.search(err)
    if not head:
        return ["no 'pcoll summary' on stderr with PCOLL_STATS=1: the calls did not reach pcoll"]
    problems = []
    if int(head.group(1)) != nranks or "this rank only" in head.group(2):
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


def make_configs(algs, have_lib):
    """[(name, env, kind)] with kind in stock, disabled, auto, forced."""
    if not have_lib:
        return [("stock", {}, "stock")]
    cfgs = [("disabled", {"PCOLL_ENABLE": "0"}, "disabled"), ("auto", {}, "auto")]
    if algs:
        n = max(len(v) for v in algs.values())
        for i in range(n):
            env, parts = {}, []
            for c in COLLS:
                if c in algs and algs[c]:
                    a = algs[c][i % len(algs[c])]
                    env[COLL_ENV[c]] = a
                    parts.append("%s=%s" % (SHORT[c], a))
            cfgs.append(("f%d(%s)" % (i, ",".join(parts)), env, "forced"))
    return cfgs


def plan(mpi, programs, ranks, cfgs, have_lib, quick, full):
    """The list of runs (mode, cfg, nranks, program, extra_env) for one MPI.

    Budget rules (2 cores; MPICH busy-polls, so oversubscribed MPICH runs
    cost milliseconds per collective):
      - preload x {auto, every forced config} x every rank count x every
        program: the most valuable part;
      - PCOLL_ENABLE=0 (pure forwarding) only at 2 and 3 ranks;
      - the link-time build only with auto at 1 and 3 ranks (what it adds is
        symbol resolution, not algorithm coverage);
      - under MPICH above 2 ranks, the type/op sweeps are sharded over the
        auto and forced configurations (CTEST_SHARD=i/n: every configuration
        runs all "core" cases, and together they run every type/op pair at
        every rank count), and the communicator loop is shortened.
    """
    runs = []
    modes = ["preload", "link"] if have_lib else ["plain"]
    main_cfgs = [c for c in cfgs if c[2] in ("auto", "forced", "stock")]
    for nr in ranks:
        for mode in modes:
            for ci, (cname, cenv, kind) in enumerate(cfgs):
                if not full:
                    if mode == "link" and not (kind == "auto" and nr in (1, 3)):
                        continue
                    if kind == "disabled" and nr not in (2, 3):
                        continue
                    if quick and kind == "forced" and ci != 2:
                        continue
                for prog in programs:
                    extra = {}
                    if mpi == "mpich" and nr > 2 and not full:
                        if kind in ("auto", "forced", "stock"):
                            idx = [c[0] for c in main_cfgs].index(cname)
                            nsh = len(main_cfgs)
                            if quick:
                                nsh = max(nsh, 4)
                            extra["CTEST_SHARD"] = "%d/%d" % (idx, nsh)
                        else:
                            extra["CTEST_SHARD"] = "0/%d" % max(len(main_cfgs), 4)
                        extra["CTEST_NCOMMS"] = "40"
                    runs.append((mode, cname, cenv, kind, nr, prog, extra))
    return runs


def run_matrix(args, res):
    programs = args.programs
    for mpi in args.mpis:
        if not shutil.which(MPIS[mpi]["cc"]) or not shutil.which(MPIS[mpi]["run"]):
            res.add(False, "%s: %s / %s not found" % (mpi, MPIS[mpi]["cc"], MPIS[mpi]["run"]))
            continue
        log("")
        log("==== %s" % mpi)
        t_mpi = time.time()
        # the library
        lib = getattr(args, "lib_" + mpi)
        if args.no_lib:
            lib = None
        elif lib:
            lib = os.path.abspath(lib)
            if not os.path.exists(lib):
                res.add(False, "%s: --lib-%s %s does not exist" % (mpi, mpi, lib))
                continue
        else:
            t0 = time.time()
            lib, err, missing = build_lib(mpi)
            if lib:
                res.add(True, "build %s (%s) (%.1fs)" % (mpi, lib, time.time() - t0))
            elif missing:
                warn("%s; running the tests against stock %s without pcoll" % (err, mpi))
            else:
                res.add(False, "build %s" % mpi, err)
                warn("running the tests against stock %s without pcoll" % mpi)
        have_lib = lib is not None
        if have_lib:
            log("library: %s" % lib)
        cfgs = make_configs(args.algs if have_lib else None, have_lib)

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

        if have_lib and not args.list:
            extra_checks(mpi, lib, exes, args, res)

        runs = plan(mpi, programs, args.ranks, cfgs, have_lib, args.quick, args.full)
        log("%s: %d runs planned" % (mpi, len(runs)))
        if args.list:
            for r in runs:
                log("  %s ranks=%d cfg=%s %s %s" % (r[0], r[4], r[1], r[5], " ".join("%s=%s" % kv for kv in r[6].items())))
            continue
        for mode, cname, cenv, kind, nr, prog, extra in runs:
            exe = exes.get((prog, mode))
            if not exe:
                continue  # its compilation failure is already counted
            tenv = dict(cenv)
            tenv.update(extra)
            tenv["CTEST_TIMEOUT"] = str(max(10, args.timeout - 15))
            if kind in ("stock", "disabled") or args.avoid_host_bugs:
                # these runs reach the host's own collectives: MPICH's
                # MPI_Reduce segfaults with MPI_IN_PLACE at a non-zero root
                # above ~2 KiB, and both hosts get MPI_MIN/MPI_MAX wrong on
                # some unsigned types (see ctests/common.h)
                tenv["CTEST_AVOID_HOST_BUGS"] = "1"
            if mode == "preload":
                tenv["LD_PRELOAD"] = lib
            # the Fortran programs, and under MPICH (MPI-4) t_large_count, whose
            # collectives are all MPI_*_c: the summary proves they reached pcoll
            summarised = is_fortran(prog) or (prog == "t_large_count" and mpi == "mpich")
            check_summary = summarised and kind in ("auto", "forced")
            if check_summary:
                tenv["PCOLL_STATS"] = "1"
            if is_fortran(prog) and nr % 2 == 1:
                tenv["CTEST_INIT_THREAD"] = "1"  # MPI_Init_thread instead of MPI_Init
            rc, out, err, secs = run_mpi(mpi, nr, exe, tenv, args.timeout)
            ok = rc == 0 and ("ctest %s: OK" % prog) in out
            problems = summary_problems(err, nr, cenv) if ok and check_summary else []
            ok = ok and not problems
            line = "%s %s ranks=%d cfg=%s %s (%.1fs)" % (mpi, mode, nr, cname, prog, secs)
            if extra.get("CTEST_SHARD"):
                line += " [shard %s]" % extra["CTEST_SHARD"]
            details = ""
            if not ok:
                details = "env: %s\n" % " ".join("%s=%s" % kv for kv in sorted(tenv.items()))
                details += "".join(p + "\n" for p in problems)
                details += failure_details(rc, out, err)
                if rc is None:
                    line += " HANG (timeout %ds)" % args.timeout
            res.add(ok, line, details, mpi, secs)
        log("%s: matrix time %.0fs (wall, incl. builds: %.0fs)" % (mpi, res.time_by_mpi.get(mpi, 0.0),
                                                                   time.time() - t_mpi))


def extra_checks(mpi, lib, exes, args, res):
    """Bogus forcing value, PCOLL_STATS summary, link-time resolution."""
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
            missing = [a for a in args.algs["allreduce"] if a not in err]
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
    selection_checks.run(sys.modules[__name__], mpi, lib, exes, args, res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small subset for development")
    ap.add_argument("--full", action="store_true", help="no budget cuts: every mode/config/rank count, no sharding")
    ap.add_argument("--mpi", default="both", choices=["mpich", "openmpi", "both"])
    ap.add_argument("--ranks", default=None, help="comma separated rank counts (default 1,2,3,4,5,7,8)")
    ap.add_argument("--lib-mpich", default=None, help="use this libpcoll.so for MPICH instead of building")
    ap.add_argument("--lib-openmpi", default=None, help="use this libpcoll.so for Open MPI instead of building")
    ap.add_argument("--no-lib", action="store_true", help="test stock MPI only (checks the tests themselves)")
    ap.add_argument("--programs", default=None, help="comma separated subset of the t_* programs")
    ap.add_argument("--timeout", type=int, default=180, help="seconds per run (default 180)")
    ap.add_argument("--list", action="store_true", help="print the planned runs and exit")
    ap.add_argument("--avoid-host-bugs", action="store_true",
                    help="set CTEST_AVOID_HOST_BUGS=1 in every run, not only where MPI_X is the host's own "
                         "(PCOLL_ENABLE=0, stock): tolerates the host MPI's known bugs even where pcoll "
                         "forwards calls to it")
    args = ap.parse_args()

    args.mpis = ["mpich", "openmpi"] if args.mpi == "both" else [args.mpi]
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
    run_matrix(args, res)

    log("")
    for mpi in args.mpis:
        if mpi in res.time_by_mpi:
            log("time %s: %.0fs in runs" % (mpi, res.time_by_mpi[mpi]))
    log("total wall time: %.0fs" % (time.time() - t0))
    if res.failures:
        log("failures:")
        for f in res.failures:
            log("  " + f)
    log("%d passed, %d failed" % (res.passed, res.failed))
    return 0 if res.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
