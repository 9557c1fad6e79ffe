"""pcoll under Slurm across two hosts (issue 31): run by ctests/run.py after
the cluster checks, once for both of Debian's MPIs. `scripts/slurm.sh up`
brings up the 2 hosts of scripts/cluster.sh with a slurmctld in pcoll-h0, a
slurmd in each host and one munged (docs/cluster.md, "Slurm"); then, for
each MPI with a library, one job of t_allreduce at 2 hosts x 2 ranks, as a
user on a cluster launches it:

  srun --time=2 -N 2 --ntasks-per-node=2 --mpi=pmi2 (MPICH) or --mpi=pmix (Open MPI)
       --export=ALL,LD_PRELOAD=<libpcoll-<mpi>.so>,PCOLL_STATS=1 t_allreduce

(through `scripts/slurm.sh srun`, which runs srun inside pcoll-h0), each
rank first printing its hostname (a /bin/sh wrapper that then execs the
program). The job must exit 0, rank 0 must print "ctest t_allreduce: OK"
(every result checked against the host MPI's), ranks 0-1 must be on one
host and 2-3 on the other, and pcoll's job-wide summary must report the 4
ranks on 2 nodes with Allreduce calls run by a multi-node algorithm (as
cluster_checks.summary_problems checks). The type/op sweep is sharded
(CTEST_SHARD=0/SHARDS) to keep the job short. After `slurm.sh down` no Slurm
daemon or munged of ours may be left (ps) and neither /run/pcoll-slurm nor
/run/pcoll-cluster.

The MPIs' settings are those of `cluster.sh launch` (TCP on the cluster's
interface), in srun's environment (--export=ALL passes them on): for MPICH
UCX_TLS=tcp,self,sm and UCX_NET_DEVICES=eth0; for Open MPI ob1 with the
tcp, self and vader BTLs on 10.213.0.0/24, osc sm,pt2pt, yield when idle,
the run-as-root switches, and plm_rsh_agent=/bin/false so that Open MPI
fails rather than tries ssh or rsh (under srun it needs neither: the ranks
get their wire-up from Slurm's PMIx server in slurmstepd).

MPICH 4.0.2's finalize hang (see cluster_checks.py and docs/cluster.md)
happens under srun too: a job that outlives rank 0's summary by
FINALIZE_GRACE seconds has its ranks' stacks taken with gdb, and only
that known hang after an otherwise passing run is a WARNING; the job is
then ended. Every srun has a Slurm time limit (--time) and the harness
ends a job after RUN_TIMEOUT seconds whatever it does.

Skipped, with a "SKIP slurm checks: <why>" warning line, only where the
cluster checks skip too: not root, or no namespaces on this machine.
Slurm or munge missing is a FAIL (scripts/setup.sh installs them), and so
is a cluster or a Slurm already up (not ours to take down). `slurm.sh
down` runs at the end whatever happens.

Python standard library only; run.py's helpers come in as the module `r`,
and the hang handling is cluster_checks.py's.
"""

import os
import re
import shutil
import subprocess
import time
import uuid

import cluster_checks as cc

HOSTS = 2
RANKS_PER_HOST = 2
PROG = "t_allreduce"
SHARDS = 4  # CTEST_SHARD=0/SHARDS: a quarter of the type/op sweep
STATE_DIR = "/run/pcoll-slurm"  # scripts/slurm.sh's
CLUSTER_DIR = "/run/pcoll-cluster"  # scripts/cluster.sh's
SRUN_MINUTES = 2  # srun --time: Slurm ends the job (its limit is checked every 30 s or so)
RUN_TIMEOUT = 150  # seconds: the harness ends the job first
FINALIZE_GRACE = cc.FINALIZE_GRACE
MPI_PLUGIN = {"mpich": "pmi2", "openmpi": "pmix"}
TOOLS = ("slurmctld", "slurmd", "srun", "sinfo", "scontrol", "munged")
HOST_LINE = re.compile(r"^slurm rank (\d+) on (\S+)$", re.M)
WRAPPER = 'echo "slurm rank $SLURM_PROCID on $(hostname)" >&2; exec "$0"'


def script(r):
    return os.path.join(r.ROOT, "scripts", "slurm.sh")


def mpi_env(r, mpi):
    """The MPI's settings across the hosts (those of cluster.sh launch)."""
    if mpi == "mpich":
        return {"UCX_TLS": "tcp,self,sm", "UCX_NET_DEVICES": "eth0"}
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "tcp,self,vader", "OMPI_MCA_osc": "sm,pt2pt",
           "OMPI_MCA_btl_tcp_if_include": "10.213.0.0/24", "OMPI_MCA_oob_tcp_if_include": "10.213.0.0/24",
           "OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_plm_rsh_agent": "/bin/false"}
    env.update(r.ompi_extra_env())
    return env


def srun_args(mpi, lib, exe):
    return ["srun", "--time=%d" % SRUN_MINUTES, "-N", str(HOSTS), "--ntasks-per-node=%d" % RANKS_PER_HOST,
            "--mpi=%s" % MPI_PLUGIN[mpi], "--export=ALL,LD_PRELOAD=%s,PCOLL_STATS=1" % lib,
            "/bin/sh", "-c", WRAPPER, exe]


def describe(mpi):
    return "%s slurm %dx%d (%d ranks) srun --mpi=%s %s [shard 0/%d]" % (
        mpi, HOSTS, RANKS_PER_HOST, HOSTS * RANKS_PER_HOST, MPI_PLUGIN[mpi], PROG, SHARDS)


def list_plan(r, args):
    for mpi in [m for m in args.mpis if m in MPI_PLUGIN]:
        r.log("%s: 1 slurm run planned (2 hosts, scripts/slurm.sh; root only)" % mpi)
        r.log("  [slurm] %s PCOLL_STATS=1 CTEST_SHARD=0/%d" % (describe(mpi), SHARDS))


def slurm(r, *words, timeout=120):
    p = subprocess.run(["bash", script(r)] + list(words), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def launch(r, mpi, lib, exe, tenv, done):
    """Runs the job through slurm.sh srun; see cluster_checks.watch."""
    token = uuid.uuid4().hex
    env = r.base_env()
    env.update(tenv)
    env["CTEST_CLUSTER_RUN"] = token  # how cluster_checks finds the ranks
    cmd = ["bash", script(r)] + srun_args(mpi, lib, exe)
    return cc.watch(r, mpi, cmd, env, token, exe, HOSTS * RANKS_PER_HOST, done, RUN_TIMEOUT)


def host_problems(err):
    """Ranks 0..R-1 on one host, R..2R-1 on another (srun's block layout)."""
    where = {int(k): h for k, h in HOST_LINE.findall(err)}
    n = HOSTS * RANKS_PER_HOST
    if sorted(where) != list(range(n)):
        return ["the ranks printed their hosts for ranks %s, expected 0..%d" % (sorted(where), n - 1)]
    by_node = [sorted({where[k] for k in range(i * RANKS_PER_HOST, (i + 1) * RANKS_PER_HOST)}) for i in range(HOSTS)]
    names = [b[0] for b in by_node if len(b) == 1]
    if len(names) != HOSTS or len(set(names)) != HOSTS:
        return ["ranks not %d per host on %d different hosts: %s" % (
            RANKS_PER_HOST, HOSTS, ", ".join("rank %d on %s" % kv for kv in sorted(where.items())))]
    return []


def run_job(r, mpi, lib, exe, algs, res):
    tenv = dict(mpi_env(r, mpi), CTEST_SHARD="0/%d" % SHARDS, CTEST_TIMEOUT=str(RUN_TIMEOUT - 30))

    def done(out, err):
        return ("ctest %s: " % PROG) in out and bool(r.SUMMARY_LINE.search(err))

    rc, out, err, secs, st = launch(r, mpi, lib, exe, tenv, done)
    nranks = HOSTS * RANKS_PER_HOST
    multi = [a for a, s in (algs or {}).get("allreduce", []) if s == "multi-node"]
    problems = []
    if ("ctest %s: OK" % PROG) not in out:
        problems.append("no 'ctest %s: OK' from rank 0" % PROG)
    problems += host_problems(err)
    problems += cc.summary_problems(r, err, nranks, "allreduce", multi)
    head = r.SUMMARY_HEAD.search(err)
    hosts = ", ".join("%s:%s" % kv for kv in sorted(HOST_LINE.findall(err)))
    line = "%s: ranks on %s; %s" % (describe(mpi), hosts or "?", head.group(0) if head else "no summary")
    cc.report(r, res, mpi, "slurm", line, tenv, problems, (rc, out, err, secs, st), nranks)


def leftovers():
    """Processes of ours still running (zombies aside): Slurm daemons,
    sruns and munged whose command line or environment names the state
    dir."""
    left = []
    want = STATE_DIR.encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                if f.read().rsplit(b") ", 1)[-1][:1] == b"Z":
                    continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        name = os.path.basename(cmd.split(b"\0")[0]).decode("utf-8", "replace")
        if not name.startswith(("slurmctld", "slurmd", "slurmstepd", "munged", "srun")):
            continue
        env = b""
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = f.read()
        except OSError:
            pass
        if want in cmd or want in env:
            left.append("%s %s" % (d, name))
    return left


def run(r, args, res, built):
    """built: {mpi: (libpcoll.so, {(prog, mode): exe}, build dir)}."""
    r.log("")
    r.log("==== slurm: %d hosts x %d ranks (scripts/slurm.sh)" % (HOSTS, RANKS_PER_HOST))
    built = {m: b for m, b in built.items() if m in MPI_PLUGIN}
    if not built:
        res.warning("SKIP slurm checks: no MPI with a pcoll library to test")
        return
    why = cc.cannot_run(r)  # root, the cluster's tools, namespaces
    if why:
        res.warning("SKIP slurm checks: %s" % why)
        return
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        res.add(False, "slurm: %s missing: scripts/setup.sh installs Slurm and munge (apt-get install slurmctld "
                "slurmd slurm-client munge)" % ", ".join(missing))
        return
    for d, what in ((STATE_DIR, "Slurm"), (CLUSTER_DIR, "a cluster")):
        if os.path.exists(d):
            res.add(False, "slurm: %s is already up or left over (%s): not ours to use or take down; "
                    "scripts/slurm.sh down and scripts/cluster.sh down remove it" % (what, d))
            return
    t0 = time.time()
    old_term = cc.interrupt_on_term()
    try:
        rc, text = slurm(r, "up")
        r.log(text.strip())
        if rc != 0:
            res.add(False, "slurm: scripts/slurm.sh up (%.0fs)" % (time.time() - t0), text)
            return
        r.log("slurm up in %.1fs" % (time.time() - t0))
        for mpi, (lib, exes, bdir) in built.items():
            exe = exes.get((PROG, "preload"))
            if not exe:
                exe = os.path.join(bdir, PROG)
                ok, out = r.compile_prog(mpi, r.source(PROG), exe)
                if not ok:
                    res.add(False, "compile %s %s" % (mpi, PROG), out, mpi)
                    continue
                exes[(PROG, "preload")] = exe
            run_job(r, mpi, lib, exe, args.algs, res)
    finally:
        rc, text = cc.shielded(old_term, lambda: slurm(r, "down"))
        r.log(text.strip())
        left = leftovers()
        dirs = [d for d in (STATE_DIR, CLUSTER_DIR) if os.path.exists(d)]
        ok = rc == 0 and not left and not dirs
        res.add(ok, "slurm: scripts/slurm.sh down leaves no daemon, %s or %s" % (STATE_DIR, CLUSTER_DIR),
                "" if ok else "exit %d; still running: %s; still there: %s\n%s" % (
                    rc, ", ".join(left) or "-", ", ".join(dirs) or "-", text))
        r.log("slurm checks: wall time %.0fs (with up and down)" % (time.time() - t0))
