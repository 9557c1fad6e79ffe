"""Checks of the selection and trust features (issue 7), run by ctests/run.py
among its extra checks, once per MPI:

  - a malformed PCOLL_TUNE stops the job at MPI_Init, naming the variable,
    the line and the column;
  - PCOLL_STATS_FILE: the job-wide summary goes to the file (calls per
    collective and algorithm, fallbacks by reason), not to stderr;
  - PCOLL_VERIFY=abort on correct algorithms: every call compared, none
    differs (floating-point sums and products within their tolerance);
  - PCOLL_VERIFY with the library variant built with the cargo feature
    test-wrong-algorithm and its corrupting Allreduce forced: the report
    names collective, communicator size, count, datatype, rank and element,
    and =abort stops the job; the normal library has no such algorithm;
  - PCOLL_REPRODUCIBLE=1: ctests/x_repro.c prints the same hashes of float
    sums and products under several forced algorithms, PCOLL_RANKS_PER_NODE
    layouts and chunk sizes (and other ones without it, so the data does
    tell orders apart);
  - pcoll tune at 2 ranks with a tiny time budget writes a rules file that
    a following run picks up (PCOLL_LOG=debug names its rules).

The helpers (launching, compiling, reporting) are run.py's, passed in as
the module `r`.  Python standard library only.
"""

import os
import re
import shutil
import subprocess
import tempfile

RANKS = 3  # reproducibility and verification: not a power of two


def run(r, mpi, lib, exes, args, res):
    """All the checks for one MPI; `lib` is the libpcoll.so built for it."""
    x_repro = compile_x_repro(r, mpi, res)
    if not x_repro:
        return
    tmp = tempfile.mkdtemp(prefix="pcoll-ctests-")
    try:
        check_bad_tune(r, mpi, lib, x_repro, res)
        check_stats_file(r, mpi, lib, x_repro, tmp, res)
        check_verify(r, mpi, lib, x_repro, exes, res)
        check_wrong_algorithm(r, mpi, lib, x_repro, res)
        check_reproducible(r, mpi, lib, x_repro, res)
        check_tune(r, mpi, lib, x_repro, tmp, res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_x_repro(r, mpi, res):
    """ctests/x_repro.c built for `mpi`: its path, or None (a failure
    counted)."""
    x_repro = os.path.join(r.HERE, "build", mpi, "x_repro")
    ok, text = r.compile_prog(mpi, os.path.join(r.HERE, "x_repro.c"), x_repro)
    if not ok:
        res.add(False, "compile %s x_repro" % mpi, text)
        return None
    return x_repro


def launch(r, mpi, nranks, exe, lib, env, timeout=300):
    tenv = {"LD_PRELOAD": lib}
    tenv.update(env)
    return r.run_mpi(mpi, nranks, exe, tenv, timeout)


def report(r, res, mpi, ok, line, problems, run_result, env):
    rc, out, err, secs = run_result
    details = ""
    if not ok:
        details = "env: %s\n%s\n%s" % (" ".join("%s=%s" % kv for kv in sorted(env.items())),
                                        "\n".join(problems), r.failure_details(rc, out, err, 30, 30))
    res.add(ok, "%s %s (%.1fs)" % (mpi, line, secs), details, mpi, secs)


def check_bad_tune(r, mpi, lib, exe, res):
    env = {"PCOLL_TUNE": "bcast binomial; reduce p<x binomial"}
    result = launch(r, mpi, 2, exe, lib, env, 60)
    rc, out, err, _ = result
    problems = []
    if rc in (0, None):
        problems.append("expected a non-zero exit")
    want = "PCOLL_TUNE line 1, column 24: expected a number"
    if "invalid PCOLL_TUNE=" not in err or want not in err or 'found "p<x"' not in err:
        problems.append("expected on stderr: invalid PCOLL_TUNE=..., %r and found \"p<x\"" % want)
    if "x_repro: initialised" in out:
        problems.append("the job got past MPI_Init: the configuration must be rejected there")
    report(r, res, mpi, not problems, "ranks=2 a malformed PCOLL_TUNE stops the job at MPI_Init", problems,
           result, env)


SUMMARY_ROW = re.compile(r"^pcoll\s+(allreduce|reduce|bcast|gatherv)\s+(\S+)\s+(\d+)\s", re.M)
FALLBACK_ROW = re.compile(r"^pcoll\s+fallback\s+(\S+)\s+(\d+)\s+\S+\s+(.*)$", re.M)


def summary_rows(text):
    """{(collective, algorithm): calls} and {(collective, reason): calls}."""
    rows, fallbacks = {}, {}
    for coll, alg, calls in SUMMARY_ROW.findall(text):
        rows[(coll, alg)] = rows.get((coll, alg), 0) + int(calls)
    for coll, calls, reason in FALLBACK_ROW.findall(text):
        fallbacks[(coll, reason.strip())] = int(calls)
    return rows, fallbacks


def check_stats_file(r, mpi, lib, exe, tmp, res):
    path = os.path.join(tmp, "stats-%s.txt" % mpi)
    # every call counted: the communicator set up at the first
    env = {"PCOLL_STATS_FILE": path, "PCOLL_REDUCE": "mpi", "PCOLL_SETUP_AFTER": "0"}
    result = launch(r, mpi, 2, exe, lib, env)
    rc, out, err, _ = result
    problems = []
    text = open(path).read() if os.path.exists(path) else ""
    rows, fallbacks = summary_rows(text)
    if rc != 0:
        problems.append("the program failed")
    if not text.startswith("pcoll summary: 2 ranks on 1 node, host MPI: "):
        problems.append("no job-wide summary for 2 ranks in %s: %r" % (path, text[:200]))
    # x_repro: 16 Allreduce and 32 Reduce calls per rank
    allreduce = sum(c for (coll, alg), c in rows.items() if coll == "allreduce" and alg != "mpi")
    if allreduce != 32:
        problems.append("expected 32 allreduce calls run by pcoll algorithms, the summary has %d" % allreduce)
    if fallbacks.get(("reduce", "forced mpi")) != 64 or rows.get(("reduce", "mpi")) != 64:
        problems.append("expected 64 reduce calls the host ran, as fallbacks for the reason 'forced mpi'")
    if "pcoll summary" in err:
        problems.append("the summary went to stderr too")
    report(r, res, mpi, not problems, "ranks=2 PCOLL_STATS_FILE holds the summary with fallbacks by reason",
           problems, result, env)


VERIFY_TOTAL = re.compile(r"PCOLL_VERIFY: (\d+) calls compared with the host MPI, (\d+) differed \(all ranks\)")


def check_verify(r, mpi, lib, exe, exes, res):
    """Correct algorithms under PCOLL_VERIFY=abort: nothing differs."""
    programs = [("x_repro", exe, {})]
    for prog in ("t_bcast", "t_gatherv"):
        if (prog, "preload") in exes:
            programs.append((prog, exes[(prog, "preload")], {"CTEST_BIG": "0", "CTEST_SHARD": "0/4"}))
    for prog, path, extra in programs:
        env = {"PCOLL_VERIFY": "abort"}
        env.update(extra)
        result = launch(r, mpi, RANKS, path, lib, env)
        rc, out, err, _ = result
        totals = VERIFY_TOTAL.findall(err)
        problems = []
        if rc != 0:
            problems.append("the program failed or PCOLL_VERIFY aborted it")
        if len(totals) != 1 or int(totals[0][0]) == 0 or int(totals[0][1]) != 0:
            problems.append("expected one line 'PCOLL_VERIFY: N calls compared with the host MPI, 0 differed "
                            "(all ranks)' with N > 0, got %s" % totals)
        report(r, res, mpi, not problems, "ranks=%d PCOLL_VERIFY=abort %s: no mismatch" % (RANKS, prog), problems,
               result, env)


def build_variant(r, mpi, features):
    script = os.path.join(r.ROOT, "scripts", "build.sh")
    p = subprocess.run(["bash", script, mpi, features], cwd=r.ROOT, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=3000)
    lines = p.stdout.decode("utf-8", "replace").strip().split("\n")
    if p.returncode != 0 or not os.path.exists(lines[-1].strip()):
        return None, p.stderr.decode("utf-8", "replace")[-3000:]
    return lines[-1].strip(), None


def check_wrong_algorithm(r, mpi, lib, exe, res):
    wrong, err = build_variant(r, mpi, "test-wrong-algorithm")
    if not wrong:
        res.add(False, "%s build with the feature test-wrong-algorithm" % mpi, err, mpi)
        return
    env = {"PCOLL_ALLREDUCE": "wrong_for_tests", "PCOLL_VERIFY": "1"}
    result = launch(r, mpi, 2, exe, wrong, env)
    rc, out, err, _ = result
    # x_repro's first Allreduce longer than one element: 7 doubles, summed;
    # wrong_for_tests corrupts the last element at the last rank
    want = ("PCOLL_VERIFY: mismatch in allreduce: comm_size=2 count=7 datatype=MPI_DOUBLE op=MPI_SUM rank=1 "
            "(world rank 1) element=6: pcoll gave ")
    problems = []
    if want not in err:
        problems.append("expected the report %r" % want)
    if "algorithm wrong_for_tests[] (forced)" not in err:
        problems.append("the report does not name the algorithm and why it ran")
    totals = VERIFY_TOTAL.findall(err)
    if len(totals) != 1 or int(totals[0][1]) == 0:
        problems.append("expected the final count of calls that differed, more than 0: %s" % totals)
    if rc is None:
        problems.append("hang")
    report(r, res, mpi, not problems, "ranks=2 PCOLL_VERIFY=1 reports the corrupted element of wrong_for_tests",
           problems, result, env)

    env = {"PCOLL_ALLREDUCE": "wrong_for_tests", "PCOLL_VERIFY": "abort"}
    result = launch(r, mpi, 2, exe, wrong, env)
    rc, out, err, _ = result
    problems = []
    if rc in (0, None) or "PCOLL_VERIFY=abort: aborting the job" not in err or want not in err:
        problems.append("expected the report, 'PCOLL_VERIFY=abort: aborting the job' and a non-zero exit")
    report(r, res, mpi, not problems, "ranks=2 PCOLL_VERIFY=abort stops the job at the mismatch", problems,
           result, env)

    env = {"PCOLL_ALLREDUCE": "wrong_for_tests"}
    result = launch(r, mpi, 2, exe, lib, env, 60)
    rc, out, err, _ = result
    ok = rc not in (0, None) and 'invalid PCOLL_ALLREDUCE="wrong_for_tests"' in err
    report(r, res, mpi, ok, "ranks=2 the normal library has no wrong_for_tests", ["expected it to be refused"],
           result, env)


def repro_configs():
    """(name, env, algorithms one of which must run Allreduce)."""
    on = {"PCOLL_REPRODUCIBLE": "1"}
    with_on = lambda extra: dict(on, **extra)
    return [
        ("auto", with_on({}), None),
        ("ranks_per_node=1", with_on({"PCOLL_RANKS_PER_NODE": "1"}), {"ordered"}),
        ("ranks_per_node=2 forced hier", with_on({"PCOLL_RANKS_PER_NODE": "2", "PCOLL_ALLREDUCE": "hier",
                                                  "PCOLL_REDUCE": "hier"}), {"ordered"}),
        ("forced ring, rabenseifner", with_on({"PCOLL_ALLREDUCE": "ring", "PCOLL_REDUCE": "rabenseifner"}),
         None),
        ("forced shm_partition, shm_zcopy", with_on({"PCOLL_ALLREDUCE": "shm_partition",
                                                     "PCOLL_REDUCE": "shm_zcopy"}), {"shm_partition"}),
        ("forced shm_flat, chunk 4K", with_on({"PCOLL_ALLREDUCE": "shm_flat", "PCOLL_REDUCE": "shm_flat",
                                               "PCOLL_SHM_CHUNK": "4K"}), {"shm_flat"}),
        ("forced ordered, not reproducible", {"PCOLL_ALLREDUCE": "ordered", "PCOLL_REDUCE": "ordered"},
         {"ordered"}),
    ]


def check_reproducible(r, mpi, lib, exe, res):
    outputs, algorithms = {}, set()
    for name, env, expected in repro_configs():
        env = dict(env, PCOLL_STATS="1")
        result = launch(r, mpi, RANKS, exe, lib, env)
        rc, out, err, _ = result
        lines = [ln for ln in out.split("\n") if ln.startswith(("allreduce ", "reduce "))]
        rows, _ = summary_rows(err)
        ran = {alg for (coll, alg) in rows if coll in ("allreduce", "reduce") and alg != "mpi"}
        algorithms |= ran
        problems = []
        if rc != 0 or "x_repro: OK" not in out:
            problems.append("x_repro failed (ranks of an Allreduce disagree?)")
        if len(lines) != 48:
            problems.append("expected 48 result lines, got %d" % len(lines))
        if expected and not (expected & ran):
            problems.append("expected %s to run, the summary shows %s" % (", ".join(sorted(expected)),
                                                                          ", ".join(sorted(ran))))
        if env.get("PCOLL_REPRODUCIBLE") and ran - CANONICAL:
            problems.append("non-canonical algorithms ran: %s" % ", ".join(sorted(ran - CANONICAL)))
        if "ring" in name and "PCOLL_REPRODUCIBLE=1 and the forced ring" not in err:
            problems.append("no warning that the forced ring was replaced")
        outputs[name] = lines
        report(r, res, mpi, not problems, "ranks=%d x_repro %s runs %s" % (RANKS, name, ", ".join(sorted(ran))),
               problems, result, env)
    first_name, first = next(iter(outputs.items()))
    differ = ["%s: %s" % (n, next((a, b) for a, b in zip(first, o) if a != b)) for n, o in outputs.items()
              if o != first and len(o) == len(first)]
    res.add(not differ and len(set(map(len, outputs.values()))) == 1,
            "%s ranks=%d PCOLL_REPRODUCIBLE=1: bitwise the same sums and products in %d configurations (%s)" % (
                mpi, RANKS, len(outputs), ", ".join(sorted(algorithms))),
            "differs from %r:\n%s" % (first_name, "\n".join(differ)), mpi)
    # the data tells orders apart: other algorithms give other bits
    env = {"PCOLL_ALLREDUCE": "recursive_doubling", "PCOLL_REDUCE": "binomial"}
    result = launch(r, mpi, RANKS, exe, lib, env)
    lines = [ln for ln in result[1].split("\n") if ln.startswith(("allreduce ", "reduce "))]
    ok = result[0] == 0 and len(lines) == len(first) and lines != first
    report(r, res, mpi, ok, "ranks=%d x_repro without PCOLL_REPRODUCIBLE: recursive_doubling and binomial give "
           "other bits" % RANKS, ["the data does not tell combination orders apart"], result, env)


CANONICAL = {"ordered", "shm_flat", "shm_flat_zcopy", "shm_partition", "shm_zcopy"}


def check_tune(r, mpi, lib, exe, tmp, res):
    tool, err, _ = r.build_lib("tool")
    if not tool:
        res.add(False, "%s build the pcoll tool" % mpi, err or "", mpi)
        return
    rules = os.path.join(tmp, "tuned-%s.rules" % mpi)
    cmd = [tool, "tune", "--mpi", mpi, "--ranks", "2", "--colls", "allreduce,bcast", "--sizes", "8,64K", "--time",
           "0.02", "--lib", lib, "--out", rules, "--timeout", "300"]
    env = r.base_env()
    if mpi == "openmpi":
        env.update(r.ompi_extra_env())
    rc, out, err, secs = r.run_cmd(cmd, env, 900)
    text = open(rules).read() if os.path.exists(rules) else ""
    problems = []
    if rc != 0:
        problems.append("pcoll tune failed")
    if not text.startswith("# pcoll tune, ") or "# job: 2 ranks on 1 node(s)" not in text:
        problems.append("no header naming the date and job shape")
    if not re.search(r"^allreduce p=2 nodes=1 ", text, re.M) or not re.search(r"^bcast p=2 nodes=1 ", text, re.M):
        problems.append("no rules for allreduce and bcast at p=2")
    details = "" if not problems else "%s\n%s\n%s" % (" ".join(cmd), "\n".join(problems),
                                                       r.failure_details(rc, out, err, 30, 30) + "\n" + text)
    res.add(not problems, "%s pcoll tune --ranks 2 writes %s (%.1fs)" % (mpi, os.path.basename(rules), secs),
            details, mpi, secs)
    if problems:
        return
    env = {"PCOLL_TUNE_FILE": rules, "PCOLL_LOG": "debug"}
    result = launch(r, mpi, 2, exe, lib, env)
    used = re.findall(r"PCOLL_TUNE_FILE rule(?:, line \d+| chose mpi)", result[2])
    ok = result[0] == 0 and bool(used)
    report(r, res, mpi, ok, "ranks=2 the next run picks the tuned rules up (%s)" % (used[0] if used else "none"),
           ["expected 'PCOLL_TUNE_FILE rule, line N' (or '... rule chose mpi') in the debug log\n" + text], result,
           env)
