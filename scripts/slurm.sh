#!/usr/bin/env bash
# Slurm across the hosts of scripts/cluster.sh: one slurmctld in pcoll-h0,
# one slurmd per host (inside the host's namespaces, `slurmd -N <host>`),
# one munged for authentication, no systemd and nothing in /etc: the
# configuration is in /run/pcoll-slurm and every Slurm command finds it
# through SLURM_CONF. See docs/cluster.md, section "Slurm".
#
# Usage (as root):
#   scripts/slurm.sh up
#       Starts Slurm on the cluster's hosts. If no cluster is up, it first
#       brings up 2 hosts (scripts/cluster.sh up 2) and `down` takes them
#       down again; a cluster that was already up is used as it is and
#       left up. Waits (PCOLL_SLURM_TIMEOUT seconds, default 60) until
#       sinfo shows every node idle. On failure it removes what it made.
#   scripts/slurm.sh srun [SRUN ARGS...]
#   scripts/slurm.sh sinfo|squeue|scancel|sbatch [ARGS...]
#       Runs the Slurm client inside pcoll-h0 (the controller is on the
#       cluster's network only), in the caller's environment and working
#       directory, with SLURM_CONF set.
#   scripts/slurm.sh status
#   scripts/slurm.sh down
#       Stops every Slurm daemon and munged, removes /run/pcoll-slurm and
#       takes down the cluster if `up` brought it up. Safe to run again.
set -euo pipefail

readonly STATE_DIR=/run/pcoll-slurm
readonly CLUSTER_STATE=/run/pcoll-cluster/state # scripts/cluster.sh's, while a cluster is up
readonly NETNS_DIR=/run/netns
readonly PREFIX=pcoll-h
readonly NET=10.213.0
SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF
CLUSTER=$(dirname "$SELF")/cluster.sh
readonly CLUSTER

# shellcheck source=scripts/script_lib.sh
source "$(dirname "$SELF")/script_lib.sh"

require_root() {
  # The daemons run inside the cluster's namespaces (nsenter, unshare,
  # mount), and slurmd must be root to start jobs as their user.
  [[ $(id -u) == 0 ]] || die "must run as root: it enters the cluster's namespaces and starts slurmctld, slurmd and munged as root"
}

require_tools() {
  local t
  for t in slurmctld slurmd sinfo srun scontrol munged nsenter unshare; do
    command -v "$t" >/dev/null 2>&1 ||
      die "$t is missing: scripts/setup.sh installs it (apt-get install slurmctld slurmd slurm-client munge)"
  done
}

host_name() { echo "$PREFIX$1"; }
host_addr() { echo "$NET.$(($1 + 1))"; }

# The number of hosts of the cluster that is up (from cluster.sh's state).
cluster_hosts() {
  local n
  n=$(sed -n 's/^hosts=//p' "$CLUSTER_STATE")
  [[ $n =~ ^[0-9]+$ ]] || die "$CLUSTER_STATE has no hosts=N: run scripts/cluster.sh down"
  echo "$n"
}

# Runs a command inside host i's namespaces, keeping this environment.
in_host() {
  local i=$1 name
  shift
  name=$(host_name "$i")
  nsenter --net="$NETNS_DIR/$name" --uts="/run/pcoll-cluster/$name.uts" \
    --mount="/run/pcoll-cluster/$name.mnt" --wd="$PWD" -- "$@"
}

# --- up --------------------------------------------------------------------

write_conf() {
  local n=$1 i
  # Auth: auth/munge with one munged on its own socket and key here. Its
  # socket is a file, and the hosts share the filesystem, so slurmctld,
  # every slurmd and srun in any host reach the same munged (a Unix socket
  # in the filesystem is not bound to a network namespace). Slurm 22.05
  # still has auth/none, but nothing uses it in practice and 23.x removed
  # it; munge is what a real cluster runs, so the jobs go through the same
  # credential path (cred/munge signs the job step's credential).
  # proctrack/pgid and task/none: no cgroups (no systemd here, and the
  # hosts share this machine's cgroup tree). CPUs=4 with config_overrides:
  # each node takes 4 CPUs whatever the machine has (the hosts share its
  # cores), so 2 ranks per host fit anywhere. SlurmdSpoolDir, the pid and
  # log files take %n, the node name: one per slurmd on the shared
  # filesystem.
  cat >"$STATE_DIR/slurm.conf" <<EOF
# Written by scripts/slurm.sh up; removed by scripts/slurm.sh down.
ClusterName=pcoll
SlurmctldHost=$(host_name 0)($(host_addr 0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE_DIR/munge/munge.socket
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/spool/%n
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd-%n.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
PropagateResourceLimits=NONE
TmpFS=$STATE_DIR/nodetmp
EOF
  # The PMIx plugin's per-job directories (spmix_appdir_<uid>_<job>.<step>,
  # the same name on every node) go to a node-local tmpfs (below), not to
  # the shared /tmp, where one node's cleanup would remove another's.
  echo "PMIxCliTmpDirBase=$STATE_DIR/nodetmp" >"$STATE_DIR/mpi.conf"
  for ((i = 0; i < n; i++)); do
    echo "NodeName=$(host_name "$i") NodeAddr=$(host_addr "$i") CPUs=4 State=UNKNOWN" >>"$STATE_DIR/slurm.conf"
  done
  echo "PartitionName=pcoll Nodes=ALL Default=YES MaxTime=30 State=UP OverSubscribe=YES" >>"$STATE_DIR/slurm.conf"
  # slurmd 22.05 starts its cgroup plugin whatever the proctrack and task
  # plugins are, and fails without a cgroup hierarchy; the hosts' /sys
  # has none (a sysfs of their network namespace), and a real v2 one would
  # want systemd. So each slurmd gets an empty tmpfs there (below) and the
  # v1 plugin, which uses nothing of it with proctrack/pgid and task/none.
  cat >"$STATE_DIR/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
EOF
}

start_munged() {
  mkdir -p "$STATE_DIR/munge"
  chmod 755 "$STATE_DIR/munge" # the socket must be reachable; the key is 0400
  # A fresh 1 KiB key for this cluster only.
  head -c 1024 /dev/urandom >"$STATE_DIR/munge/munge.key"
  chmod 400 "$STATE_DIR/munge/munge.key"
  # --force: munged as root (the Debian service runs it as user munge).
  # It runs outside the hosts; its socket is reached by path from all.
  munged --force --socket="$STATE_DIR/munge/munge.socket" --key-file="$STATE_DIR/munge/munge.key" \
    --pid-file="$STATE_DIR/munge/munged.pid" --log-file="$STATE_DIR/log/munged.log" \
    --seed-file="$STATE_DIR/munge/munged.seed" --num-threads=2 ||
    die "munged did not start (see $STATE_DIR/log/munged.log)"
}

start_daemons() {
  local n=$1 i name
  export SLURM_CONF=$STATE_DIR/slurm.conf
  # slurmctld in pcoll-h0: the hosts have no route out, so the controller
  # must be on the cluster's network. It daemonizes (pid file in the state
  # dir).
  in_host 0 slurmctld -i || die "slurmctld did not start (see $STATE_DIR/log/slurmctld.log)"
  for ((i = 0; i < n; i++)); do
    name=$(host_name "$i")
    mkdir -p "$STATE_DIR/spool/$name" "$STATE_DIR/nodetmp"
    # Each slurmd (and so its jobs) gets an empty /sys/fs/cgroup (see
    # cgroup.conf above) and its own tmpfs on $STATE_DIR/nodetmp, Slurm's
    # TmpFS and the PMIx plugin's directory (see mpi.conf above); /tmp
    # stays shared, like the rest of the filesystem.
    # shellcheck disable=SC2016 # expanded by the inner shell
    in_host "$i" unshare --mount --propagation private -- /bin/sh -euc '
      mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$2"
      mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup /sys/fs/cgroup
      exec slurmd -N "$1"' sh "$name" "$STATE_DIR/nodetmp" ||
      die "slurmd on $name did not start (see $STATE_DIR/log/slurmd-$name.log)"
  done
}

wait_idle() {
  local n=$1 timeout=${PCOLL_SLURM_TIMEOUT:-60} t0 out idle
  [[ $timeout =~ ^[1-9][0-9]*$ ]] || die "PCOLL_SLURM_TIMEOUT must be a positive number of seconds, not '$timeout'"
  t0=$SECONDS
  while :; do
    out=$(in_host 0 env SLURM_CONF="$STATE_DIR/slurm.conf" sinfo -h -N -o '%N %t' 2>&1 || true)
    idle=$(grep -c ' idle$' <<<"$out" || true)
    ((idle == n)) && return 0
    if ((SECONDS - t0 >= timeout)); then
      die "after ${timeout}s not all $n nodes are idle; sinfo: $(tr '\n' ';' <<<"$out") (logs in $STATE_DIR/log)"
    fi
    sleep 1
  done
}

# The last lines of every log, for a failed `up` (down removes them).
show_logs() {
  local f
  for f in "$STATE_DIR"/log/*.log; do
    [[ -s $f ]] || continue
    echo "--- ${f##*/} (last lines):" >&2
    tail -n 8 "$f" >&2
  done
}

cmd_up() {
  (($# == 0)) || die "up takes no arguments"
  require_root
  require_tools
  [[ ! -e $STATE_DIR ]] || die "Slurm is already up or left over ($STATE_DIR): run scripts/slurm.sh down first"
  local own=0 n
  trap 'echo "slurm.sh: up failed; removing what it made" >&2; show_logs; teardown' EXIT
  mkdir -p "$STATE_DIR/log" "$STATE_DIR/ctld"
  if [[ ! -f $CLUSTER_STATE ]]; then
    echo "cluster=ours" >"$STATE_DIR/state"
    own=1
    bash "$CLUSTER" up 2
  else
    echo "cluster=theirs" >"$STATE_DIR/state"
  fi
  n=$(cluster_hosts)
  echo "hosts=$n" >>"$STATE_DIR/state"
  write_conf "$n"
  start_munged
  start_daemons "$n"
  wait_idle "$n"
  trap - EXIT
  echo "slurm up: slurmctld in $(host_name 0), slurmd in $(host_name 0)..$(host_name $((n - 1))), all idle" \
    "($( ((own)) && echo "cluster brought up by slurm.sh" || echo "the cluster that was up"))"
  echo "SLURM_CONF=$STATE_DIR/slurm.conf (scripts/slurm.sh srun ... runs srun in $(host_name 0))"
}

# --- down ------------------------------------------------------------------

# The PIDs of our daemons, whose command line names the state dir
# (munged) or whose SLURM_CONF is ours, and of our jobs: sruns and the
# processes of job steps (SLURM_JOB_ID and our SLURM_CONF; slurmstepd ends
# them too, but one may be gone already).
our_pids() {
  local d stat args envs cmd ours job
  for d in /proc/[0-9]*; do
    [[ ${d#/proc/} == "$$" ]] && continue
    # not a zombie: it has no environment left and is gone but for its parent's wait
    read -r stat 2>/dev/null <"$d/stat" || continue
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]] || continue
    mapfile -d '' args 2>/dev/null <"$d/cmdline" || continue
    ((${#args[@]})) || continue # a kernel thread
    mapfile -d '' envs 2>/dev/null <"$d/environ" || envs=()
    cmd="${args[*]}" ours=0 job=0
    [[ " ${envs[*]} " == *" SLURM_CONF=$STATE_DIR/slurm.conf "* ]] && ours=1
    [[ " ${envs[*]} " == *" SLURM_JOB_ID="* ]] && job=1
    case ${args[0]} in
      slurmctld | */slurmctld | slurmd | */slurmd | slurmstepd* | */slurmstepd | munged | */munged)
        [[ $ours == 1 || $cmd == *"$STATE_DIR"* ]] && echo "${d#/proc/}"
        ;;
      srun | */srun)
        [[ $ours == 1 ]] && echo "${d#/proc/}"
        ;;
      *)
        [[ $ours == 1 && $job == 1 ]] && echo "${d#/proc/}"
        ;;
    esac
  done
  return 0
}

# Ends our processes: TERM, then KILL for those left after 10 s; a few
# rounds, since a slurmstepd or srun may outlive the daemon it served.
end_ours() {
  local pids p i left
  for _ in 1 2 3; do
    mapfile -t pids < <(our_pids)
    ((${#pids[@]})) || return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for i in $(seq 20); do
      left=()
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && left+=("$p"); done
      ((${#left[@]})) || break
      sleep 0.5
    done
    ((${#left[@]} == 0)) || kill -KILL "${left[@]}" 2>/dev/null || true
  done
}

teardown() {
  local left
  end_ours
  if [[ -f $STATE_DIR/state ]] && grep -qx 'cluster=ours' "$STATE_DIR/state"; then
    bash "$CLUSTER" down
  fi
  rm -rf "$STATE_DIR"
  mapfile -t left < <(our_pids)
  ((${#left[@]} == 0)) || echo "slurm.sh: still running after down: ${left[*]}" >&2
}

cmd_down() {
  (($# == 0)) || die "down takes no arguments"
  require_root
  teardown
  echo "slurm down"
}

# --- status and the clients -------------------------------------------------

cmd_status() {
  require_root
  [[ -f $STATE_DIR/state ]] || die "Slurm is not up ($STATE_DIR/state is missing): run scripts/slurm.sh up"
  cat "$STATE_DIR/state"
  echo "daemons: $(our_pids | xargs -r ps -o comm= -p | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/, $//')"
  in_host 0 env SLURM_CONF="$STATE_DIR/slurm.conf" sinfo -N -l
}

cmd_client() {
  require_root
  # Not for the jobs (srun --export=ALL): pcoll warns about PCOLL_ names
  # it does not know.
  unset PCOLL_SLURM_TIMEOUT
  [[ -f $STATE_DIR/slurm.conf ]] || die "Slurm is not up ($STATE_DIR/slurm.conf is missing): run scripts/slurm.sh up"
  SLURM_CONF=$STATE_DIR/slurm.conf in_host 0 "$@"
}

main() {
  local sub=${1:-}
  (($#)) && shift
  case $sub in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    srun | sinfo | squeue | scancel | sbatch | scontrol) cmd_client "$sub" "$@" ;;
    *) usage ;;
  esac
}

main "$@"
