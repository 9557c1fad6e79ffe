#!/usr/bin/env bash
# A small "cluster" of hosts on this one machine, to run MPI jobs (with or
# without pcoll) across hosts. Each host is a network namespace with its own
# hostname (UTS namespace) and its own /dev/shm (mount namespace with a
# private tmpfs there; the rest of the filesystem is shared, like a
# cluster's shared home). The hosts are joined by a bridge and veth pairs in
# 10.213.0.0/24, with no route out. See docs/cluster.md.
#
# Usage (as root):
#   scripts/cluster.sh up N [--link RATE,DELAY]
#       N hosts pcoll-h0 .. pcoll-h<N-1> (10.213.0.1 ..), bridge pcollbr0.
#       --link 1gbit,50us: every host sends at RATE with DELAY one way
#       (tc netem), so a ping between two hosts takes about 2*DELAY. A
#       kernel without netem takes only a zero DELAY (rate by tbf).
#   scripts/cluster.sh launch mpich|openmpi RANKS_PER_HOST [VAR=VALUE ...] -- PROGRAM [ARGS]
#       Runs PROGRAM on every host, RANKS_PER_HOST ranks each, through the
#       MPI's own launcher (run from pcoll-h0) over TCP, with each VAR=VALUE
#       in every rank's environment. Exits with the job's status; after
#       PCOLL_CLUSTER_TIMEOUT seconds (default 300) it ends the job's
#       processes on every host and exits 124.
#   scripts/cluster.sh exec HOST COMMAND...
#       Runs COMMAND (one shell command line) on HOST (pcoll-h<i> or its
#       address) inside its namespaces, in a fresh environment, as ssh
#       would; e.g. `exec pcoll-h1 ls -A /dev/shm`.
#   scripts/cluster.sh status
#   scripts/cluster.sh down
#       Removes everything `up` made; ends any process left in the hosts.
#       Safe to run again, or after a failed `up`.
set -euo pipefail

readonly PREFIX=pcoll-h            # host names and network namespaces
readonly BRIDGE=pcollbr0
readonly VETH=pcollv               # host-side veth ends: pcollv0, pcollv1, ...
readonly IFACE=eth0                # the host's interface, the same name in every host
readonly NET=10.213.0              # host i is $NET.(i+1)
readonly SUBNET=$NET.0/24
readonly STATE_DIR=/run/pcoll-cluster
readonly NETNS_DIR=/run/netns      # where `ip netns` keeps its namespaces
readonly MAX_HOSTS=250
SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF

# shellcheck source=scripts/script_lib.sh
source "$(dirname "$SELF")/script_lib.sh"

require_root() {
  # Namespaces, bridges, mounts and tc all need CAP_SYS_ADMIN/CAP_NET_ADMIN.
  [[ $(id -u) == 0 ]] || die "must run as root: it creates network, UTS and mount namespaces, a bridge and mounts"
}

require_tools() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "$t is missing (apt-get install iproute2 util-linux coreutils)"
  done
}

host_name() { echo "$PREFIX$1"; }
host_addr() { echo "$NET.$(($1 + 1))"; }

# --- state -----------------------------------------------------------------

write_state() {
  local n=$1 link=$2
  cat >"$STATE_DIR/state" <<EOF
hosts=$n
link=$link
subnet=$SUBNET
bridge=$BRIDGE
EOF
}

# Reads the state file into HOSTS and LINK; fails if the cluster is not up.
read_state() {
  [[ -f $STATE_DIR/state ]] || die "no cluster is up ($STATE_DIR/state is missing): run scripts/cluster.sh up N first"
  HOSTS='' LINK=''
  local k v
  while IFS='=' read -r k v; do
    case $k in
      hosts) HOSTS=$v ;;
      link) LINK=$v ;;
    esac
  done <"$STATE_DIR/state"
  [[ $HOSTS =~ ^[0-9]+$ ]] || die "$STATE_DIR/state is damaged (no hosts=N): run scripts/cluster.sh down"
}

# --- processes in the cluster's namespaces --------------------------------

# The namespace ids ("net:[4026532...]") of the cluster's hosts.
cluster_ns_ids() {
  local f
  for f in "$NETNS_DIR/$PREFIX"* "$STATE_DIR"/*.mnt "$STATE_DIR"/*.uts; do
    [[ -e $f ]] || continue
    # Only a bind-mounted namespace file is a namespace; an empty file left
    # by a failed `up` is not.
    mountpoint -q "$f" 2>/dev/null || continue
    case $f in
      *.mnt) echo "mnt:[$(stat -L -c %i "$f")]" ;;
      *.uts) echo "uts:[$(stat -L -c %i "$f")]" ;;
      *) echo "net:[$(stat -L -c %i "$f")]" ;;
    esac
  done
}

# PIDs of processes inside any of the cluster's namespaces; with a job tag,
# only those whose environment carries CLUSTER_SH_JOB=<tag>.
cluster_pids() {
  local tag=${1:-} ids p
  ids=$(cluster_ns_ids)
  [[ -n $ids ]] || return 0
  # find prints each /proc/PID/ns/X link with its target, in one process.
  find /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt /proc/[0-9]*/ns/uts -maxdepth 0 -printf '%p %l\n' 2>/dev/null |
    awk -v ids="$ids" -v self=$$ '
      BEGIN { n = split(ids, a, "\n"); for (i = 1; i <= n; i++) want[a[i]] = 1 }
      $2 in want { split($1, f, "/"); if (f[3] != self) print f[3] }' |
    sort -un |
    while read -r p; do
      if [[ -z $tag ]] || tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "CLUSTER_SH_JOB=$tag"; then
        echo "$p"
      fi
    done
}

# Ends the given processes: TERM, then KILL for those still there after 3 s.
end_pids() {
  local pids=("$@") i left
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for i in 1 2 3 4 5 6; do
    left=()
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null && left+=("$p")
    done
    ((${#left[@]})) || return 0
    sleep 0.5
  done
  kill -KILL "${left[@]}" 2>/dev/null || true
}

# --- up --------------------------------------------------------------------

parse_link() {
  local spec=$1 rate delay
  [[ $spec == *,* ]] || die "--link wants RATE,DELAY (e.g. 1gbit,50us), not '$spec'"
  rate=${spec%%,*} delay=${spec#*,}
  [[ $rate =~ ^[0-9]+(\.[0-9]+)?([kKmMgGtT]?(bit|bps))$ ]] ||
    die "--link: rate '$rate' is not a tc rate such as 100mbit, 1gbit, 10gbit"
  [[ $delay =~ ^(0|[0-9]+(\.[0-9]+)?(us|ms|s))$ ]] ||
    die "--link: delay '$delay' is not a tc time such as 0, 50us, 1ms"
}

# Refuses to build over a cluster (or the leftovers of one).
check_nothing_there() {
  local what=()
  [[ -e $STATE_DIR ]] && what+=("$STATE_DIR")
  compgen -G "$NETNS_DIR/$PREFIX*" >/dev/null && what+=("network namespaces $NETNS_DIR/$PREFIX*")
  ip link show "$BRIDGE" >/dev/null 2>&1 && what+=("bridge $BRIDGE")
  ip -o link show | grep -q ": ${VETH}[0-9]*[@:]" && what+=("veths $VETH*")
  ((${#what[@]} == 0)) || die "a cluster is already up or left over (${what[*]}): run scripts/cluster.sh down first"
}

# sysctl inside a host's network namespace (/proc/sys/net is per namespace).
ns_sysctl() {
  nsenter --net="$NETNS_DIR/$(host_name "$1")" -- sysctl -qw "$2"
}

make_state_dir() {
  mkdir -p "$STATE_DIR"
  # Namespace files must be bind-mounted on a mount with private propagation
  # (else the bind could propagate into the very namespace it pins).
  mount --bind "$STATE_DIR" "$STATE_DIR"
  mount --make-private "$STATE_DIR"
  {
    echo "127.0.0.1 localhost"
    local i
    for ((i = 0; i < $1; i++)); do
      echo "$(host_addr "$i") $(host_name "$i")"
    done
  } >"$STATE_DIR/hosts"
  # The launchers' remote-shell agent: MPICH's -launcher-exec and Open
  # MPI's plm_rsh_agent take one executable, called as `agent HOST CMD...`.
  printf '#!/bin/sh\nexec %q rsh "$@"\n' "$SELF" >"$STATE_DIR/rsh"
  chmod 755 "$STATE_DIR/rsh"
}

make_bridge() {
  ip link add "$BRIDGE" type bridge
  # Bridged frames must not go through this machine's iptables (br_netfilter).
  ip link set "$BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 2>/dev/null || true
  # No address at all on the machine's side (not even IPv6 link-local), so
  # the machine itself is not reachable from the hosts nor routes for them.
  sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1"
  ip link set "$BRIDGE" up
}

# A host: network namespace with a veth to the bridge, then UTS and mount
# namespaces pinned by files in $STATE_DIR.
make_host() {
  local i=$1 name netns
  name=$(host_name "$i")
  netns=$NETNS_DIR/$name
  ip netns add "$name"
  ip link add "$VETH$i" type veth peer name "$IFACE" netns "$name"
  sysctl -qw "net.ipv6.conf.$VETH$i.disable_ipv6=1"
  ip link set "$VETH$i" master "$BRIDGE" up
  # IPv4 only, so MPIs do not pick IPv6 link-local addresses.
  ns_sysctl "$i" "net.ipv6.conf.$IFACE.disable_ipv6=1"
  ip -n "$name" addr add "$(host_addr "$i")/24" dev "$IFACE"
  ip -n "$name" link set lo up
  ip -n "$name" link set "$IFACE" up

  touch "$STATE_DIR/$name.uts" "$STATE_DIR/$name.mnt"
  cat /proc/sys/kernel/random/uuid >"$STATE_DIR/$name.boot_id"
  # In the new mount namespace: the hostname; a private /dev/shm; the
  # cluster's hosts file as /etc/hosts; a boot id of its own (UCX takes
  # hosts with the same boot id for one machine and would move data between
  # them by shared memory or CMA, not TCP); a sysfs of this network
  # namespace (UCX and hwloc list interfaces in /sys/class/net); and no
  # copies of the other hosts' namespace files (so each namespace is pinned
  # only by its file here and `down` frees it).
  # shellcheck disable=SC2016 # expanded by the inner shell
  nsenter --net="$netns" -- unshare --uts="$STATE_DIR/$name.uts" --mount="$STATE_DIR/$name.mnt" \
    --propagation private -- /bin/sh -euc '
      hostname "$1"
      mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
      mount --bind "$2/hosts" /etc/hosts
      mount --bind "$2/$1.boot_id" /proc/sys/kernel/random/boot_id
      umount -l /sys
      mount -t sysfs sysfs /sys
      umount -l "$2"
      if mountpoint -q "$3"; then umount -l "$3"; fi
    ' sh "$name" "$STATE_DIR" "$NETNS_DIR"
}

# Whether this kernel has netem (some, e.g. minimal VM kernels, have not):
# tried on the loopback of a throwaway network namespace.
have_netem() {
  unshare --net -- tc qdisc add dev lo root netem delay 1us 2>/dev/null
}

# A DELAY of zero (0, 0us, 0.0ms, ...).
zero_delay() { [[ $1 =~ ^0+(\.0*)?(us|ms|s)?$ ]]; }

# Refuses a link model this kernel cannot apply, before anything is made.
check_link() {
  local delay=${1#*,}
  have_netem && return 0
  zero_delay "$delay" ||
    die "--link $1: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so no DELAY can be added; --link ${1%%,*},0 limits the rate only (tbf)"
}

# The link model on both ends of each veth: the host sends at RATE with
# DELAY; the bridge's port sends to the host at RATE (no delay, so a round
# trip is 2*DELAY). Without netem, a zero DELAY is a plain rate limit (tbf).
apply_link() {
  local i=$1 rate=${2%%,*} delay=${2#*,} ns
  ns=$(host_name "$i")
  if have_netem; then
    # A limit well above netem's default 1000 packets: at 10gbit and 1 ms
    # delay about 850 full-size packets are in flight.
    tc -n "$ns" qdisc add dev "$IFACE" root netem delay "$delay" rate "$rate" limit 100000
    tc qdisc add dev "$VETH$i" root netem rate "$rate" limit 100000
  else
    # The burst holds a 64 KiB GSO packet and then some.
    tc -n "$ns" qdisc add dev "$IFACE" root tbf rate "$rate" burst 256kb latency 10ms
    tc qdisc add dev "$VETH$i" root tbf rate "$rate" burst 256kb latency 10ms
  fi
}

cmd_up() {
  local n=${1:-} link=none i
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > MAX_HOSTS)); then
    die "up wants a number of hosts from 1 to $MAX_HOSTS, not '$n'"
  fi
  shift
  while (($#)); do
    case $1 in
      --link)
        [[ $# -ge 2 ]] || die "--link wants RATE,DELAY (e.g. 1gbit,50us)"
        parse_link "$2"
        link=$2
        shift 2
        ;;
      --link=*)
        parse_link "${1#--link=}"
        link=${1#--link=}
        shift
        ;;
      *) die "up: unknown argument '$1' (usage: up N [--link RATE,DELAY])" ;;
    esac
  done
  require_root
  require_tools ip tc nsenter unshare mountpoint sysctl
  [[ $link == none ]] || check_link "$link"
  check_nothing_there
  # From here on, a failure takes down whatever was made.
  trap 'echo "cluster.sh: up failed; removing what it made" >&2; teardown' EXIT
  make_state_dir "$n"
  make_bridge
  for ((i = 0; i < n; i++)); do
    make_host "$i"
    [[ $link == none ]] || apply_link "$i" "$link"
  done
  write_state "$n" "$link"
  trap - EXIT
  echo "cluster up: $n host(s) $(host_name 0)..$(host_name $((n - 1))) in $SUBNET, link: $link"
}

# --- down ------------------------------------------------------------------

# Removes everything `up` makes, whatever state it is in; never fails on
# what is already gone.
teardown() {
  local pids f name link
  mapfile -t pids < <(cluster_pids)
  if ((${#pids[@]})); then
    echo "cluster.sh: ending ${#pids[@]} process(es) left in the hosts: ${pids[*]}" >&2
    end_pids "${pids[@]}"
  fi
  for f in "$STATE_DIR"/*.uts "$STATE_DIR"/*.mnt; do
    [[ -e $f ]] || continue
    mountpoint -q "$f" && umount "$f"
  done
  for f in "$NETNS_DIR/$PREFIX"*; do
    [[ -e $f ]] || continue
    name=${f##*/}
    [[ $name =~ ^${PREFIX}[0-9]+$ ]] || continue
    ip netns del "$name"
  done
  # Deleting a namespace deletes its veth end and so the pair; these are
  # ones whose namespace was never made or is gone.
  while read -r link; do
    ip link del "$link" 2>/dev/null || true
  done < <(ip -o link show type veth | sed -n "s/^[0-9]*: \(${VETH}[0-9]*\)[@:].*/\1/p")
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE"
  fi
  if [[ -d $STATE_DIR ]]; then
    while mountpoint -q "$STATE_DIR"; do
      umount "$STATE_DIR"
    done
    rm -rf "$STATE_DIR"
  fi
}

cmd_down() {
  (($# == 0)) || die "down takes no arguments"
  require_root
  teardown
  echo "cluster down"
}

# --- status ----------------------------------------------------------------

cmd_status() {
  require_root
  read_state
  local i name n_pids up
  echo "hosts: $HOSTS in $SUBNET on bridge $BRIDGE, link: $LINK"
  for ((i = 0; i < HOSTS; i++)); do
    name=$(host_name "$i")
    up=down
    if mountpoint -q "$STATE_DIR/$name.mnt" && [[ -e $NETNS_DIR/$name ]]; then
      up=$(nsenter --net="$NETNS_DIR/$name" -- cat "/sys/class/net/$IFACE/operstate" 2>/dev/null || echo missing)
    fi
    n_pids=$(nsenter --net="$NETNS_DIR/$name" -- true 2>/dev/null && ip netns pids "$name" | wc -l || echo '?')
    printf '  %-10s %-12s %s %s, %s process(es)\n' "$name" "$(host_addr "$i")" "$IFACE" "$up" "$n_pids"
    if [[ $LINK != none ]]; then
      printf '    host side: %s\n    switch side: %s\n' \
        "$(tc -n "$name" qdisc show dev "$IFACE" 2>/dev/null | head -1)" \
        "$(tc qdisc show dev "$VETH$i" 2>/dev/null | head -1)"
    fi
  done
}

# --- the remote shell ------------------------------------------------------

# `rsh HOST CMD...`, as MPI launchers call ssh/rsh: runs CMD (one shell
# command line, as ssh joins its arguments) on HOST, i.e. inside HOST's
# namespaces, with a fresh environment as sshd would give. The launchers
# run inside pcoll-h0, where the hosts' namespace files are not mounted:
# they are reached through the root of the `launch` process
# (CLUSTER_SH_ROOT_PID), which runs outside.
cmd_rsh() {
  while [[ ${1:-} == -* ]]; do shift; done # ssh options such as -x
  (($# >= 2)) || die "rsh wants HOST COMMAND..."
  local host=$1 i root=''
  shift
  if [[ -n ${CLUSTER_SH_ROOT_PID:-} ]]; then
    root=/proc/$CLUSTER_SH_ROOT_PID/root
  fi
  # HOST may be a name or an address.
  i=$(awk -v h="$host" '$1 == h || $2 == h { sub(/^'"$PREFIX"'/, "", $2); print $2; exit }' "$root$STATE_DIR/hosts")
  [[ $i =~ ^[0-9]+$ ]] || die "rsh: '$host' is not a host of the cluster (see $STATE_DIR/hosts)"
  local name
  name=$(host_name "$i")
  exec nsenter --net="$root$NETNS_DIR/$name" --uts="$root$STATE_DIR/$name.uts" \
    --mount="$root$STATE_DIR/$name.mnt" --wd=/ -- \
    env -i PATH="$PATH" HOME=/root USER=root LOGNAME=root SHELL=/bin/sh \
    ${LANG:+LANG="$LANG"} \
    ${CLUSTER_SH_ROOT_PID:+CLUSTER_SH_ROOT_PID="$CLUSTER_SH_ROOT_PID"} \
    ${CLUSTER_SH_JOB:+CLUSTER_SH_JOB="$CLUSTER_SH_JOB"} \
    /bin/sh -c "$*"
}

# --- launch ----------------------------------------------------------------

cmd_launch() {
  local mpi=${1:-} rpn=${2:-}
  case $mpi in
    mpich | openmpi) ;;
    *) die "launch wants mpich or openmpi, not '$mpi' (usage: launch MPI RANKS_PER_HOST [VAR=VALUE ...] -- PROGRAM [ARGS])" ;;
  esac
  [[ $rpn =~ ^[1-9][0-9]*$ ]] || die "launch: RANKS_PER_HOST must be a positive number, not '$rpn'"
  shift 2
  local vars=()
  while (($#)) && [[ $1 != -- ]]; do
    [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "launch: '$1' is not VAR=VALUE (put the program after --)"
    vars+=("$1")
    shift
  done
  (($# >= 2)) || die "launch: no program (usage: launch MPI RANKS_PER_HOST [VAR=VALUE ...] -- PROGRAM [ARGS])"
  shift
  local timeout=${PCOLL_CLUSTER_TIMEOUT:-300}
  [[ $timeout =~ ^[1-9][0-9]*$ ]] || die "PCOLL_CLUSTER_TIMEOUT must be a positive number of seconds, not '$timeout'"
  require_root
  require_tools nsenter timeout
  read_state

  local i name hosts=() np=$((HOSTS * rpn)) cmd=() v
  for ((i = 0; i < HOSTS; i++)); do
    name=$(host_name "$i")
    if ! mountpoint -q "$STATE_DIR/$name.mnt" || [[ ! -e $NETNS_DIR/$name ]]; then
      die "host $name is not up (its namespaces are missing): run scripts/cluster.sh down, then up"
    fi
    hosts+=("$name")
  done
  local hostlist
  hostlist=$(IFS=,; echo "${hosts[*]}")

  case $mpi in
    mpich)
      require_tools mpiexec.mpich
      # ch4:ucx: TCP between hosts on the cluster's interface, shared
      # memory within a host. Without UCX_NET_DEVICES UCX also offers lo,
      # and without UCX_TLS it tries every transport it has.
      # shellcheck disable=SC2054 # commas are in values
      cmd=(mpiexec.mpich -launcher rsh -launcher-exec "$STATE_DIR/rsh"
        -hosts "$hostlist" -ppn "$rpn" -n "$np"
        -genv UCX_TLS tcp,self,sm -genv UCX_NET_DEVICES "$IFACE")
      for v in "${vars[@]}"; do cmd+=(-genv "${v%%=*}" "${v#*=}"); done
      ;;
    openmpi)
      require_tools mpirun.openmpi
      local slots=()
      for name in "${hosts[@]}"; do slots+=("$name:$rpn"); done
      # ob1 with the TCP BTL between hosts (vader within a host), and both
      # the runtime (oob) and the BTL on the cluster's subnet only. One-sided
      # windows by pt2pt (over ob1) or sm (within a host): osc rdma, the
      # default, needs an RDMA-capable BTL and fails MPI_Win_create across
      # hosts with MPI_ERR_WIN (pcoll's salar makes such a window; an
      # OMPI_MCA_osc=... setting replaces this choice). One
      # orted per host started by mpirun itself (no tree spawn). No binding
      # and yielding when idle: all hosts share this machine's cores.
      # shellcheck disable=SC2054 # commas are in values
      cmd=(mpirun.openmpi --oversubscribe --bind-to none
        --host "$(IFS=,; echo "${slots[*]}")" -np "$np"
        --mca plm_rsh_agent "$STATE_DIR/rsh" --mca plm_rsh_no_tree_spawn 1
        --mca pml ob1 --mca btl tcp,self,vader
        --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET"
        --mca mpi_yield_when_idle 1)
      [[ " ${vars[*]} " == *" OMPI_MCA_osc="* ]] || cmd+=(--mca osc sm,pt2pt)
      for v in "${vars[@]}"; do cmd+=(-x "$v"); done
      ;;
  esac
  cmd+=("$@")

  # Tags the job's processes so a timeout can find them on every host.
  local job
  job=$$-$(date +%s%N)
  local rc=0
  export CLUSTER_SH_ROOT_PID=$$ CLUSTER_SH_JOB=$job
  # Hydra passes its whole environment to the ranks, and pcoll warns about
  # PCOLL_* names it does not know.
  unset PCOLL_CLUSTER_TIMEOUT
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  trap 'end_job "$job"; exit 130' INT TERM
  timeout -k 10 "$timeout" \
    nsenter --net="$NETNS_DIR/${hosts[0]}" --uts="$STATE_DIR/${hosts[0]}.uts" \
    --mount="$STATE_DIR/${hosts[0]}.mnt" --wd="$PWD" -- "${cmd[@]}" </dev/null || rc=$?
  trap - INT TERM
  if ((rc == 124 || rc == 137)); then
    echo "cluster.sh: the job ran past PCOLL_CLUSTER_TIMEOUT=$timeout s; ending its processes on every host" >&2
    end_job "$job"
    return 124
  fi
  return "$rc"
}

end_job() {
  local pids
  mapfile -t pids < <(cluster_pids "$1")
  end_pids "${pids[@]}"
}

main() {
  local sub=${1:-}
  (($#)) && shift
  case $sub in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    launch) cmd_launch "$@" ;;
    status) cmd_status "$@" ;;
    rsh) cmd_rsh "$@" ;;
    exec)
      require_root
      read_state
      cmd_rsh "$@"
      ;;
    -h | --help | help) usage ;;
    *) usage ;;
  esac
}

main "$@"
