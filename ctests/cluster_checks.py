"""The C tests across two real hosts (issue 31): run by ctests/run.py after
the matrix, once for both MPIs. `scripts/cluster.sh up 2` makes two hosts on
this machine (network, UTS and mount namespaces: their own hostname, their
own /dev/shm, TCP between them; docs/cluster.md), and pcoll finds its nodes
by itself: no PCOLL_RANKS_PER_NODE. Under each MPI, at 1 and at 2 ranks per
host (2 and 4 ranks), with LD_PRELOAD of the library run.py built or was
given for that MPI:

  auto        t_allreduce, t_reduce, t_bcast, t_gatherv with the defaults
              and PCOLL_STATS=1: the job-wide summary must show the
              program's collective run by a multi-node algorithm;
  multi-node  each multi-node algorithm forced in turn (PCOLL_<COLL>=hier,
              dpml, salar, ...; from `pcoll algorithms`), its t_<coll>;
  p2p         at 1 rank per host only, each point-to-point algorithm
              forced in turn, its t_<coll>: with one rank per host all its
              messages cross the network.
  mixed       at 2 ranks per host, t_allreduce with PCOLL_TUNE choosing
              `ordered` (every rank sends to every other) for small vectors
              and `salar` (the leaders' fences) for the rest, so that the
              two alternate on one communicator: its log must show both.
              Under MPICH 4.0.2 this hung until the ranks waiting in the
              segment let MPI progress (a fence flushes every connection;
              src/shm/wait.rs, `driving`).

Every run has PCOLL_LOG=debug. Each rank's first node-layer line (that of
MPI_COMM_WORLD) must say it is rank r%R of R on node r//R of 2 (R ranks
per host): pcoll saw the two hosts, and the ranks on each. A forced run's
log must show calls on all the ranks run by the forced algorithm ("...:
<algorithm>[] (forced)"). The programs check every result against the host
MPI's and rank 0 prints "ctest <prog>: OK". Under MPICH at 2 ranks per
host (four busy-polling ranks on the machine's cores) the type/op sweeps of
t_allreduce and t_reduce are sharded over the configurations of a program
(CTEST_SHARD, as run.py does). After each MPI's runs no pcoll segment
(`pcoll-*`) may be left in either host's /dev/shm (`cluster.sh exec`).
`cluster.sh down` runs at the end whatever happens (a failure, an
exception, Ctrl-C, SIGTERM).

Skipped, with a "SKIP cluster checks: <why>" warning line (counted in the
warnings at the end, not as a pass), when not root, when a tool is missing
or when this machine cannot create namespaces. A cluster that is already up
(another run's, or left over) is a failure: it is not ours to take down.

MPICH 4.0.2's finalize hang (docs/cluster.md): over UCX's TCP transport an
MPICH job sometimes hangs in MPI_Finalize after all its work: one rank
spins in ucp_worker_progress waiting for its endpoints to disconnect
(ucp_disconnect_nb) while the others already wait in the PMI barrier and no
longer progress. It needs no pcoll (1 run in 10 of a 4-call Allreduce
program here), and a rank that comes late to MPI_Finalize makes it likely:
pcoll's summary, gathered to and printed by rank 0 inside MPI_Finalize,
hung most PCOLL_STATS runs at 2x2; in one full run of these checks 9 of the
43 MPICH runs ended in it. Tried and not enough, 4 to 12 runs each with
the summary: MPIR_CVAR_ASYNC_PROGRESS=1, UCX_PROTO_ENABLE=y,
UCX_TLS=tcp,self, UCX_TCP_CONN_NB=y (4 of 12 hung), MPIR_CVAR_NO_LOCAL=1 (1
of 4); MPIR_CVAR_CH4_ROOTS_ONLY_PMI=1 fails MPI_Init; an MPI_Alltoall
connecting every pair right after MPI_Init (4 of 10 hung). This MPICH has
only the ch4:ucx device. So the harness tells the hang apart instead of
retrying or passing it: once rank 0 has printed the program's verdict (and
the summary, where asked for) and the job has not ended FINALIZE_GRACE
seconds later, it takes every rank's stack with gdb. Only if the verdict is
OK, every other check of the run holds, every rank is inside MPI_Finalize
and one of them in ucp_worker_progress is the run reported as a WARNING
naming the MPICH bug, counted neither as passed nor as failed; the job is
then ended. Any other hang, or such a hang after a failed check, is a
FAIL. Open MPI has no such exception.

Python standard library only; the helpers (launching, compiling,
reporting) are run.py's, passed in as the module `r`.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

HOSTS = 2
STATE_DIR = "/run/pcoll-cluster"  # scripts/cluster.sh's: there while a cluster is up
RANKS_PER_HOST = [1, 2]
COLLS = ["allreduce", "reduce", "bcast", "gatherv"]
RUN_TIMEOUT = 150  # seconds per job (PCOLL_CLUSTER_TIMEOUT of cluster.sh launch)
FINALIZE_GRACE = 6  # seconds after the verdict before the stacks are looked at
SHARDED = {"t_allreduce", "t_reduce"}  # the long type/op sweeps
MIN_SHARDS = 2
MPICH_HANG = ("MPICH 4.0.2 hung in MPI_Finalize after the job's work (ucp_disconnect_nb over UCX tcp, "
              "others in the PMI barrier; see docs/cluster.md)")
NODE_LINE = re.compile(r"node layer: rank (\d+) is rank (\d+) of (\d+) on node (\d+) of (\d+) ")
# PCOLL_LOG=debug's line for each call's choice of algorithm
CHOICE_LINE = re.compile(r"\] (allreduce|reduce|bcast|gatherv) comm_size=(\d+) root=\d+ bytes=\d+: (\w+)\[[^\]]*\] \(([^)]*)\)")


def script(r):
    return os.path.join(r.ROOT, "scripts", "cluster.sh")


def cannot_run(r):
    """Why the cluster cannot be made here (None if it can)."""
    if os.geteuid() != 0:
        return "not root (the hosts are network, UTS and mount namespaces)"
    if not os.path.exists(script(r)):
        return "scripts/cluster.sh is missing"
    for tool in ("ip", "tc", "nsenter", "unshare", "mountpoint", "gdb"):
        if not shutil.which(tool):
            return "%s is missing (apt-get install iproute2 util-linux gdb)" % tool
    try:
        p = subprocess.run(["unshare", "--net", "--uts", "--mount", "true"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot create namespaces (%s)" % e
    if p.returncode != 0:
        return "cannot create namespaces (unshare --net --uts --mount: %s)" % p.stdout.decode(
            "utf-8", "replace").strip()
    return None


class Job:
    """One planned run; `expect`: a text its stderr must hold."""

    def __init__(self, section, rpn, prog, cfg_name, env, stats=False, expect=None, ran=()):
        self.section, self.rpn, self.prog, self.cfg_name = section, rpn, prog, cfg_name
        self.env, self.stats, self.expect, self.ran = dict(env), stats, expect, ran


# Open MPI 4.1's one-sided component for ob1 over TCP (osc rdma, which
# cluster.sh's launch chooses unless told otherwise) cannot make a window
# across hosts: pcoll's SALaR must then hand its call to hier and stop
# choosing itself, not abort the job.
NO_WINDOW = "the node leaders could not make SALaR's one-sided window"


def plan(algs, progs, mpi):
    """The runs for one MPI (the same for both, but for sharding and the
    run without Open MPI's pt2pt one-sided component)."""
    algs = algs or {}
    jobs = []
    for rpn in RANKS_PER_HOST:
        for c in COLLS:
            prog = "t_" + c
            if prog not in progs:
                continue
            jobs.append(Job("auto", rpn, prog, "auto", {"PCOLL_STATS": "1", "PCOLL_LOG": "debug"}, True))
            for a, scope in algs.get(c, []):
                if scope == "multi-node" or (scope == "p2p" and rpn == 1):
                    jobs.append(Job(scope, rpn, prog, "%s=%s" % (c, a),
                                    {"PCOLL_" + c.upper(): a, "PCOLL_LOG": "debug"}))
    mixed = ("ordered", "salar")
    if "t_allreduce" in progs and all(any(a == m for a, _ in algs.get("allreduce", [])) for m in mixed):
        jobs.append(Job("mixed", 2, "t_allreduce", "allreduce=ordered,salar",
                        {"PCOLL_TUNE": "allreduce bytes<256 ordered; allreduce salar", "PCOLL_LOG": "debug"},
                        ran=mixed))
    if mpi == "openmpi" and "t_allreduce" in progs and any(a == "salar" for a, _ in algs.get("allreduce", [])):
        jobs.append(Job("multi-node", 2, "t_allreduce", "allreduce=salar osc=sm,rdma",
                        # after the first call the host runs them (forced salar cannot)
                        {"PCOLL_ALLREDUCE": "salar", "PCOLL_LOG": "debug", "OMPI_MCA_osc": "sm,rdma",
                         "CTEST_AVOID_HOST_BUGS": "1"},
                        expect=NO_WINDOW))
    return jobs


def shard(jobs, mpi):
    """Under MPICH above 1 rank per host: the k-th run of a program at that
    layout runs the k-th share of its type/op sweeps."""
    if mpi != "mpich":
        return
    groups = {}
    for j in jobs:
        if j.rpn > 1 and j.prog in SHARDED:
            groups.setdefault((j.rpn, j.prog), []).append(j)
    for members in groups.values():
        n = max(len(members), MIN_SHARDS)
        for k, j in enumerate(members):
            j.env["CTEST_SHARD"] = "%d/%d" % (k, n)


def describe(mpi, j):
    line = "%s cluster %dx%d (%d ranks) %s %s" % (mpi, HOSTS, j.rpn, HOSTS * j.rpn, j.cfg_name, j.prog)
    if "CTEST_SHARD" in j.env:
        line += " [shard %s]" % j.env["CTEST_SHARD"]
    return line


def list_plan(r, args):
    algs = args.algs
    for mpi in [m for m in args.mpis if not r.MPIS[m].get("wheel")]:  # cluster.sh launches Debian's MPIs
        jobs = plan(algs, args.programs, mpi)
        shard(jobs, mpi)
        r.log("%s: %d cluster runs planned (2 hosts, scripts/cluster.sh; root only)" % (mpi, len(jobs)))
        for j in jobs:
            r.log("  [cluster %s] %s %s" % (j.section, describe(mpi, j), " ".join(
                "%s=%s" % kv for kv in sorted(j.env.items()))))


# ---------------------------------------------------------------- running

def rank_pids(token, exe):
    """The job's rank processes: their environment carries the token."""
    want = ("CTEST_CLUSTER_RUN=%s" % token).encode()
    real = os.path.realpath(exe)
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            if os.path.realpath("/proc/%s/exe" % d) != real:
                continue
        except OSError:
            continue
        pids.append(int(d))
    return sorted(pids)


def stacks(pids):
    """{pid: backtrace text} by gdb, all at once."""
    procs = {}
    for p in pids:
        try:
            procs[p] = subprocess.Popen(["gdb", "-p", str(p), "-batch", "-nx", "-ex", "bt"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as e:
            procs[p] = e
    out = {}
    for p, g in procs.items():
        if isinstance(g, OSError):
            out[p] = "gdb failed: %s" % g
            continue
        try:
            text = g.communicate(timeout=60)[0].decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            g.kill()
            text = "gdb timed out: %s" % g.communicate()[0].decode("utf-8", "replace")
        out[p] = "\n".join(ln for ln in text.split("\n") if ln.startswith("#")) or text.strip()
    return out


def known_finalize_hang(mpi, st, nranks):
    """The stacks of MPICH's finalize hang: every rank in MPI_Finalize, one
    of them (at least) in ucp_worker_progress."""
    return (mpi == "mpich" and len(st) == nranks and all("Finalize" in s for s in st.values())
            and any("ucp_worker_progress" in s for s in st.values()))


def end_job(proc, token, exe):
    """Ends the job: its ranks first (the launcher then ends by itself);
    else cluster.sh launch, whose trap ends what is left of the job on every
    host; else everything by SIGKILL."""
    def kill_ranks():
        for p in rank_pids(token, exe):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass

    kill_ranks()
    for sig, secs in ((None, 15), (signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if sig is not None:
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass
            kill_ranks()
        try:
            proc.wait(timeout=secs)
            return
        except subprocess.TimeoutExpired:
            pass


def launch(r, mpi, rpn, exe, tenv, done, timeout=RUN_TIMEOUT):
    """Runs exe on the cluster, RPN ranks per host; see watch."""
    token = uuid.uuid4().hex
    full = dict(tenv, CTEST_CLUSTER_RUN=token)
    cmd = ["bash", script(r), "launch", mpi, str(rpn)] + ["%s=%s" % kv for kv in full.items()] + ["--", exe]
    env = r.base_env()
    env["PCOLL_CLUSTER_TIMEOUT"] = str(timeout + 30)  # the harness ends it first
    return watch(r, mpi, cmd, env, token, exe, HOSTS * rpn, done, timeout)


def watch(r, mpi, cmd, env, token, exe, nranks, done, timeout):
    """Runs cmd, a job of nranks ranks of exe whose environment holds
    CTEST_CLUSTER_RUN=token. done(out, err): whether the job's verdict (and
    everything else it must print) is out. Returns (rc or None, out, err,
    seconds, stacks or None): stacks are taken (and the job ended) when the
    job outlives its verdict by FINALIZE_GRACE seconds or the timeout."""
    tmp = tempfile.mkdtemp(prefix="pcoll-cluster-")
    fo, fe = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    t0 = time.time()
    st = None
    with open(fo, "wb") as o, open(fe, "wb") as e:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=env, cwd=r.ROOT,
                                start_new_session=True)
    try:
        seen = None
        while proc.poll() is None:
            time.sleep(0.25)
            now = time.time()
            if seen is None:
                with open(fo, "rb") as o, open(fe, "rb") as e:
                    if done(o.read().decode("utf-8", "replace"), e.read().decode("utf-8", "replace")):
                        seen = now
            if (seen is not None and now - seen > FINALIZE_GRACE) or now - t0 > timeout:
                if proc.poll() is not None:
                    break
                st = stacks(rank_pids(token, exe))
                if known_finalize_hang(mpi, st, nranks) or now - t0 > timeout:
                    end_job(proc, token, exe)
                    break
                seen = now + 3 * FINALIZE_GRACE  # not that hang (yet): look again later
        rc = proc.returncode
    except BaseException:
        end_job(proc, token, exe)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    secs = time.time() - t0
    with open(fo, "rb") as o, open(fe, "rb") as e:
        out, err = o.read().decode("utf-8", "replace"), e.read().decode("utf-8", "replace")
    shutil.rmtree(tmp, ignore_errors=True)
    if st is not None:
        rc = None
    return rc, out, err, secs, st


def node_problems(err, rpn):
    """Each rank must say, once per communicator spanning the world, that
    it is on node rank//rpn of HOSTS (the first such line of each rank is
    MPI_COMM_WORLD's)."""
    first = {}
    for m in NODE_LINE.finditer(err):
        first.setdefault(int(m.group(1)), m)
    problems = []
    for rank in range(HOSTS * rpn):
        m = first.get(rank)
        if not m:
            problems.append("rank %d printed no 'node layer: rank %d is ... on node N of %d' line (PCOLL_LOG=debug)"
                            % (rank, rank, HOSTS))
            continue
        local, size, node, nodes = (int(m.group(k)) for k in (2, 3, 4, 5))
        want = (rank % rpn, rpn, rank // rpn, HOSTS)
        if (local, size, node, nodes) != want:
            problems.append("rank %d: pcoll saw rank %d of %d on node %d of %d, expected rank %d of %d on node %d "
                            "of %d" % ((rank, local, size, node, nodes) + want))
    return problems


def choices(err, nranks, coll):
    """PCOLL_LOG=debug's choices for `coll` calls on the whole world:
    {(algorithm, why): calls}."""
    chosen = {}
    for c, size, alg, why in CHOICE_LINE.findall(err):
        if c == coll and int(size) == nranks:
            chosen[(alg, why)] = chosen.get((alg, why), 0) + 1
    return chosen


def shown(chosen):
    return ", ".join("%s (%s) %d times" % (a, w, n) for (a, w), n in sorted(chosen.items())) or "no choice"


def forced_problems(err, nranks, coll, forced):
    """PCOLL_LOG=debug must show calls on the whole world run by the forced
    algorithm."""
    chosen = choices(err, nranks, coll)
    if any(alg == forced and why == "forced" for alg, why in chosen):
        return []
    return ["no %s call on the %d ranks was run by the forced %s (PCOLL_LOG=debug shows: %s)" % (
        coll, nranks, forced, shown(chosen))]


def ran_problems(err, nranks, coll, algorithms):
    """PCOLL_LOG=debug must show calls on the whole world run by each of
    `algorithms`."""
    chosen = choices(err, nranks, coll)
    return ["no %s call on the %d ranks was run by %s (PCOLL_LOG=debug shows: %s)" % (coll, nranks, a, shown(chosen))
            for a in algorithms if not any(alg == a for alg, _ in chosen)]


def summary_problems(r, err, nranks, coll, multi):
    head = r.SUMMARY_HEAD.search(err)
    if not head:
        return ["no 'pcoll summary' on stderr with PCOLL_STATS=1"]
    problems = []
    if int(head.group(1)) != nranks or "this rank only" in head.group(3):
        problems.append("the summary is not job-wide for %d ranks: %r" % (nranks, head.group(0)))
    if head.group(2) != str(HOSTS):
        problems.append("the summary does not report the job on %d nodes: %r" % (HOSTS, head.group(0)))
    ran = {a for c, a, calls in r.SUMMARY_LINE.findall(err) if c == coll and a != "mpi" and int(calls) > 0}
    if not ran & set(multi):
        problems.append("the summary shows no %s call run by a multi-node algorithm (%s), only: %s" % (
            coll, ", ".join(multi), ", ".join(sorted(ran)) or "the host MPI"))
    return problems


def run_job(r, mpi, lib, exe, j, algs, res):
    tenv = dict(j.env, LD_PRELOAD=lib, CTEST_TIMEOUT=str(RUN_TIMEOUT - 20))
    if mpi == "openmpi":
        for k, v in r.ompi_extra_env().items():
            tenv.setdefault(k, v)
    verdict = "ctest %s: " % j.prog

    def done(out, err):
        return verdict in out and (not j.stats or bool(r.SUMMARY_LINE.search(err)))

    rc, out, err, secs, st = launch(r, mpi, j.rpn, exe, tenv, done)
    coll = j.prog[2:]
    multi = [a for a, s in (algs or {}).get(coll, []) if s == "multi-node"]
    problems = []
    if ("ctest %s: OK" % j.prog) not in out:
        problems.append("no 'ctest %s: OK' from rank 0" % j.prog)
    problems += node_problems(err, j.rpn)
    if j.stats:
        problems += summary_problems(r, err, HOSTS * j.rpn, coll, multi)
    forced = j.env.get("PCOLL_" + coll.upper())
    if forced:
        problems += forced_problems(err, HOSTS * j.rpn, coll, forced)
    problems += ran_problems(err, HOSTS * j.rpn, coll, j.ran)
    if j.expect and j.expect not in err:
        problems.append("stderr does not say %r" % j.expect)
    report(r, res, mpi, "cluster", describe(mpi, j), tenv, problems, (rc, out, err, secs, st), HOSTS * j.rpn)


def report(r, res, mpi, section, line, tenv, problems, job, nranks):
    """Adds the verdict of a job of nranks ranks: the problems its output
    showed, and its exit code or hang. job: what watch returned. MPICH's
    known finalize hang after an otherwise passing run is a warning,
    counted neither way; any other hang is a problem."""
    rc, out, err, secs, st = job
    hang = st is not None
    known = hang and known_finalize_hang(mpi, st, nranks)
    if not hang and rc != 0:
        problems.append("exit code %s" % rc)
    if hang and not known:
        problems.append("the job hung (ended after %.0fs; not MPICH's known finalize hang, see the stacks)" % secs)
    line = "%s (%.1fs)" % (line, secs)
    details = ""
    if problems or known:
        details = "env: %s\n%s" % (" ".join("%s=%s" % kv for kv in sorted(tenv.items())),
                                   "".join(p + "\n" for p in problems))
        if st:
            details += "".join("-- stack of rank process %d:\n%s\n" % kv for kv in sorted(st.items()))
        details += r.failure_details(rc, out, err, 20, 5)
    if known and not problems:
        res.warning("%s: the program passed, then %s; not counted" % (line, MPICH_HANG))
        res.add_time(mpi, secs, section)
        return
    res.add(not problems, line, details, mpi, secs, section)


def shm_leftovers(r, mpi, res):
    """No pcoll segment in any host's /dev/shm."""
    for i in range(HOSTS):
        host = "pcoll-h%d" % i
        p = subprocess.run(["bash", script(r), "exec", host, "ls -A /dev/shm"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        names = p.stdout.decode("utf-8", "replace").split()
        ours = [n for n in names if n.startswith("pcoll-")]
        others = [n for n in names if n not in ours]
        if others:
            r.log("info: %s: %s:/dev/shm also holds %s" % (mpi, host, " ".join(others)))
        ok = p.returncode == 0 and not ours
        details = "" if ok else "exit %d; left: %s\n%s" % (p.returncode, " ".join(ours) or "-",
                                                           p.stderr.decode("utf-8", "replace"))
        res.add(ok, "%s cluster: no pcoll segment left in %s:/dev/shm after the runs" % (mpi, host), details, mpi)


def cluster(r, *words, timeout=120):
    p = subprocess.run(["bash", script(r)] + list(words), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def interrupt_on_term():
    """Makes SIGTERM raise KeyboardInterrupt, so that the finally clause
    that takes the hosts down runs; returns the handler it replaced."""
    old = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_term)
    return old


def shielded(old_term, fn):
    """fn() with SIGTERM ignored (taking the hosts down is not cut short),
    then the handler old_term back."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        return fn()
    finally:
        signal.signal(signal.SIGTERM, old_term)


def run(r, args, res, built):
    """built: {mpi: (libpcoll.so, {(prog, mode): exe}, build dir)} for the
    MPIs run.py built a library for."""
    r.log("")
    r.log("==== cluster: %d hosts (scripts/cluster.sh)" % HOSTS)
    if not built:
        res.warning("SKIP cluster checks: no MPI with a pcoll library to test")
        return
    why = cannot_run(r)
    if why:
        res.warning("SKIP cluster checks: %s" % why)
        return
    if os.path.exists(STATE_DIR):
        res.add(False, "cluster: a cluster is already up or left over (%s): not ours to use or take down; "
                "scripts/cluster.sh down removes it" % STATE_DIR)
        return
    t0 = time.time()
    old_term = interrupt_on_term()
    try:
        rc, text = cluster(r, "up", str(HOSTS))
        r.log(text.strip())
        if rc != 0:
            res.add(False, "cluster: scripts/cluster.sh up %d" % HOSTS, text)
            return
        for mpi, (lib, exes, bdir) in built.items():
            t_mpi = time.time()
            jobs = plan(args.algs, args.programs, mpi)
            shard(jobs, mpi)
            for j in jobs:
                exe = exes.get((j.prog, "preload"))
                if not exe:
                    exe = os.path.join(bdir, j.prog)
                    ok, out = r.compile_prog(mpi, r.source(j.prog), exe)
                    if not ok:
                        res.add(False, "compile %s %s" % (mpi, j.prog), out, mpi)
                        continue
                    exes[(j.prog, "preload")] = exe
                run_job(r, mpi, lib, exe, j, args.algs, res)
            shm_leftovers(r, mpi, res)
            r.log("%s: cluster checks %.0fs" % (mpi, time.time() - t_mpi))
    finally:
        # always down (also after a failed or interrupted up: it removes
        # whatever is there)
        rc, text = shielded(old_term, lambda: cluster(r, "down"))
        r.log(text.strip())
        if rc != 0:
            res.add(False, "cluster: scripts/cluster.sh down", text)
        r.log("cluster checks: wall time %.0fs (with up and down)" % (time.time() - t0))
