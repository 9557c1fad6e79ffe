# shellcheck shell=bash disable=SC2034 # EXTRA_ENV and STATUS belong to bench.sh
# scripts/bench_cluster.sh -- `scripts/bench.sh --cluster N [--link RATE,DELAY]`,
# sourced by bench.sh (it uses bench.sh's settings and functions), not run
# alone. On N hosts of scripts/cluster.sh (up N --link RATE,DELAY; none:
# the veths unshaped), for each MPI (mpich, openmpi) at 1 rank per host
# (and at 2 with --oversubscribed):
# 1. fits the cost model across the hosts: PCOLL_CALIBRATE=1, in
#    CALIBRATIONS runs, the median of each parameter (world ranks 0 and 1
#    are on different hosts, so pcoll's transport is timed over the link);
# 2. times pcoll's choice and every multi-node and point-to-point
#    algorithm against the stock MPI (bench.sh's run_candidates);
# 3. prices the same points with that model (`pcoll predict`), at 1 rank
#    per host only: the model has no cost of its own for the node stages,
#    which at 1 rank per host have nothing to do;
# 4. prints the tables, each cell measured/predicted (bench/algos_table.py).
# Results: bench/out/cluster-<N>-<link>/ (algos-*.csv and .txt, model-<mpi>.txt,
# predicted.csv, cluster.txt). The cluster is taken down at the end, or
# when the script stops early.

CLUSTER_SH="$ROOT/scripts/cluster.sh"
CALIBRATIONS=3

# Seconds a job may stay in MPI_Finalize after pcoll_bench's last line.
FINALIZE_GRACE=10

# run_across FILE CMD...: runs the job CMD (a cluster.sh launch) with its
# output in FILE and on stdout, and returns its status; bench.sh's run_one
# runs its jobs so across hosts. MPICH 4.0.2 over UCX sometimes hangs in
# MPI_Finalize (docs/cluster.md) after pcoll_bench has written all its
# results: a job still there FINALIZE_GRACE seconds after the last line
# is ended (cluster.sh ends its ranks on every host) and counts as done.
run_across() {
    local file=$1 pid waited=0
    shift
    : >"$file"  # before tail opens it
    timeout -k 10 "$RUN_TIMEOUT" "$@" </dev/null >>"$file" 2>&1 &
    pid=$!
    tail -n +1 -f --pid="$pid" "$file" &
    while kill -0 "$pid" 2>/dev/null; do
        grep -q '^# ratio = stock/pcoll' "$file" && waited=$((waited + 1))
        if [ "$waited" -gt "$FINALIZE_GRACE" ]; then
            kill -TERM "$pid"
            wait "$pid"
            wait
            echo "bench.sh: NOTE: the job hung in MPI_Finalize after its results (MPICH's known hang, docs/cluster.md): ended"
            return 0
        fi
        sleep 1
    done
    wait "$pid"
    local rc=$?
    wait
    return "$rc"
}

# csv_values FILE COLUMN: the column's distinct values in the order they
# first appear, comma-separated.
csv_values() {
    awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
        !seen[$c]++ { printf "%s%s", sep, $c; sep = "," }' "$1"
}

# calibrate MPI DIR: prints the model fitted in CALIBRATIONS runs at 1 rank
# per host, the median of each parameter (key=value,...).
calibrate() {
    local m=$1 dir=$2 k
    EXTRA_ENV=(PCOLL_CALIBRATE=1)
    for ((k = 1; k <= CALIBRATIONS; k++)); do
        say "$m: PCOLL_CALIBRATE=1 across the hosts (run $k of $CALIBRATIONS)" >&2
        run_one "$m" "$CLUSTER" "$dir/calibrate-$m.$k" --colls allreduce --sizes 8 --iters 1 --no-memcpy >&2
        grep -o 'alpha=[^ ]*' "$OUT/$dir/calibrate-$m.$k.txt" | head -n 1
    done | awk -F'[,=]' "$AWK_MEDIAN"'
        { for (i = 1; i < NF; i += 2) { if (!(($i) in v)) keys[++n] = $i; v[$i] = v[$i] " " $(i + 1) } }
        END { for (i = 1; i <= n; i++) printf "%s%s=%s", (i > 1 ? "," : ""), keys[i], median(v[keys[i]]) }'
    EXTRA_ENV=()
}

# predict MPI DIR MODEL: the model's price of every point measured at 1
# rank per host, appended to DIR/predicted.csv.
predict() {
    local m=$1 dir=$2 model=$3 csv coll
    for csv in "$OUT/$dir/algos-$m-$CLUSTER-"*.csv; do
        [ -s "$csv" ] || continue
        coll=${csv##*-}
        coll=${coll%.csv}
        "$TOOL" predict --model "$model" --nodes "$CLUSTER" --coll "$coll" --bytes "$(csv_values "$csv" bytes)" \
            --variants "$(csv_values "$csv" variant | tr , '\n' | grep -vx stock | paste -sd,)" |
            awk -v m="$m" -v n="$CLUSTER" 'NR > 1 { print m "," n "," $0 }' >>"$OUT/$dir/predicted.csv"
    done
}

cluster_down() { bash "$CLUSTER_SH" down >/dev/null || warn "scripts/cluster.sh down failed: run it by hand"; }

cluster_bench() {
    local link=${LINK:-none} dir m rph model per_host=(1) ranks note
    dir="cluster-$CLUSTER-${link//,/-}"
    [ "$OVERSUB" = 1 ] && per_host+=(2)
    # A short time per point and sizes up to 4 MiB: a run across hosts
    # stays within minutes (a 4 MiB Allreduce at 1 Gbit/s takes about
    # 70 ms, and each of some dozen variants runs at least 5 times).
    [ -n "$TIME_PER_POINT" ] || TIME_PER_POINT=0.1
    [[ " ${BENCH_ARGS[*]} " =~ " --"(max-bytes|sizes)" " ]] || BENCH_ARGS+=(--max-bytes 4M)
    rm -rf "${OUT:?}/$dir"
    mkdir -p "$OUT/$dir"
    say "cluster of $CLUSTER hosts, link $link"
    bash "$CLUSTER_SH" up "$CLUSTER" ${LINK:+--link "$LINK"} || { STATUS=1; return; }
    trap cluster_down EXIT
    trap 'exit 130' INT TERM
    echo "mpi,ranks,coll,bytes,variant,pred_us" >"$OUT/$dir/predicted.csv"
    for m in "${MPI_LIST[@]}"; do
        model=$(calibrate "$m" "$dir")
        if [ -n "$model" ]; then
            echo "$model" >"$OUT/$dir/model-$m.txt"
            echo "$m across the hosts: $model"
        else
            warn "$m: PCOLL_CALIBRATE=1 printed no model (bench/out/$dir/calibrate-$m.*.txt): no predictions"
            STATUS=1
        fi
        for rph in "${per_host[@]}"; do
            run_candidates "$m" $((CLUSTER * rph)) "$dir" p2p multi-node
        done
        [ -n "$model" ] && predict "$m" "$dir" "$model"
    done
    cluster_down
    trap - EXIT INT TERM
    {
        for m in "${MPI_LIST[@]}"; do
            [ -s "$OUT/$dir/model-$m.txt" ] && echo "# cost model fitted across the hosts, $m: $(cat "$OUT/$dir/model-$m.txt")"
        done
        for rph in "${per_host[@]}"; do
            ranks=$((CLUSTER * rph))
            note="$CLUSTER hosts x $rph, link $link"
            [ "$ranks" -gt "$CORES" ] &&
                note="$note, OVERSUBSCRIBED: the hosts share this machine's $CORES cores, timings measure the scheduler"
            python3 "$ROOT/bench/algos_table.py" --predicted "$OUT/$dir/predicted.csv" --note "$note" \
                "$OUT/$dir"/algos-*-"$ranks"-*.csv || STATUS=1
        done
    } >"$OUT/$dir/cluster.txt"
    cat "$OUT/$dir/cluster.txt"
}
