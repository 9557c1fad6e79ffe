//! pcoll's built-in rules, in the tuning grammar ([`super::rules`]): what
//! runs a call when nothing is forced and no PCOLL_TUNE / PCOLL_TUNE_FILE
//! rule matches. Derived from the cost model (`pcoll model`) and from
//! measurements on a 2-core machine (`scripts/bench.sh`); `pcoll tune`
//! writes a file of the same form for a given machine and job shape.

use once_cell::sync::Lazy;

use super::rules::Rules;

/// The rules, first match wins.
pub const DEFAULT_RULES: &str = "\
# One node with a shared segment: the node layer. Measured at 2 ranks
# (pcoll_bench --candidates, both MPIs): on vectors that come cold from
# memory the flat paths win every size at 2 ranks, ahead of Rabenseifner
# over the host's single-copy point-to-point (2 MiB: 520-590 against
# 560-700 us) and of zero copy; on vectors still in the caches (loops on
# the same buffers) zero copy wins at 2 ranks from 8 KiB (8 KiB: 1.7-2.2
# against 2.3-2.4 us, osu and b2b, Intel MPI and Open MPI 5 hosts; at
# 4 KiB flat, 1.5-1.6 against 1.7-2.1; 128 KiB: 11-12 against 19-22),
# with more ranks from 16 KiB, so shm_flat_zcopy for a Reduce, which
# takes zero copy where every rank reduces from its last call's buffer
# (an Allreduce at 2 ranks goes through the window, below). With more
# ranks the partitioned zero copy spreads the work of large vectors.
allreduce nodes=1 bytes<8K shm_flat
allreduce nodes=1 p>2 bytes<16K shm_flat
# At 2 ranks from 8 KiB, shm_window: the halves through the window, each
# rank storing only into lines its own cache holds, cold or hot, on every
# host (Intel MPI's too, whose point-to-point moves hot vectors faster
# than pcoll's other node ways). EPYC VM, both ways in one job, us,
# shm_window / shm_flat_zcopy (Intel MPI: / the ring over its
# point-to-point): Open MPI 5 host 128 KiB b2b 6.6 / 9.4, sync 20.7 /
# 24.3, 2 MiB sync 352 / 501, 16 MiB b2b 2459 / 3119; Intel MPI host
# 128 KiB b2b 6.6 / 9.3 / 8.6, 1 MiB osu 75.9 / 104.7 / 85.4, 2 MiB
# sync 406 / 392 / 1159. Below 8 KiB the flat way's lines win cold (4
# KiB sync 1.63 against 1.79). docs/measurements.md.
allreduce nodes=1 p<3 shm_window
allreduce nodes=1 bytes<1M shm_flat
allreduce nodes=1 shm_zcopy
allreduce nodes=1 shm_partition
# A Reduce at 2 ranks: flat on cold vectors at every size, zero copy on
# hot ones from 8 KiB to 8 MiB, by shm_flat_zcopy (128 KiB: 11-14 against
# 15-20 us; up to 128 KiB the root reads its peer's whole vector and lets
# the peer go before it combines: 8 KiB b2b 1.57-2.01 against 2.42-2.53
# us, osu 1.39-1.70 against 1.58-1.65, Open MPI 5 and MPICH; at 4 KiB
# flat stays, osu 1.05-1.25 against 1.09-1.60; at 16 MiB flat 2.0-2.3
# against 2.6-5.0 ms, as the root's half goes across twice). The
# partitioned copy-in sends the root's half across and the result back,
# which pays only where the two vCPUs share a cache, cold (32 KiB 5.6
# against 6.0 us); on hot buffers flat is a third faster there (32 KiB
# 2.9 against 4.1), and where the vCPUs are far apart 1.5-3 times (32
# KiB: sync 7.4 against 11.6, osu 3.2 against 9.1; both MPIs;
# docs/measurements.md).
reduce nodes=1 bytes<8K shm_flat
# At 2 ranks from 8 KiB to the window's 512 KiB, shm_window: where roots
# alternate, the non-root's vector through the window the hot Bcasts
# use, the root combining each piece as it lands, the non-root finding
# the root's head there already (it came early: it wrote the last call);
# a fixed root's calls (the non-root would store into lines the root
# read last) as shm_flat_zcopy. EPYC VM, 2 ranks, roots
# rotating back to back, both ways in one job, us, shm_window /
# shm_flat_zcopy: hot 8 KiB 0.45-0.62 / 1.11-1.48, 128 KiB 4.7-11.0 /
# 8.1-14.1, 512 KiB 18.6-33.0 / 25.0-42.4 (MPICH, Open MPI, Intel MPI);
# cold 8 KiB 2.2-2.4 / 1.9-2.2, 32 KiB 6.1-6.4 / 6.0-6.6, 512 KiB
# 71-81 / 74-89 (docs/measurements.md).
#
# Under Intel MPI from 16 to 256 KiB, the rest of those calls by
# shm_flat_binomial: hot calls that come back to back go by the binomial
# tree over Intel's point-to-point, which pipelines them (a non-root
# returns once its vector is sent and starts the next call), the others
# as shm_flat_zcopy. EPYC VM, jobs alternating, roots rotating, ratio to
# Intel's stock back to back on hot buffers 0.99-1.21 against
# shm_flat_zcopy's 0.60-0.84 (shm_window: 1.7-1.8); between barriers
# (osu), cold (sync, b2b-cold) as shm_flat_zcopy. At 512 KiB
# shm_flat_zcopy is ahead back to back too (1.16 against 1.01); at 8
# KiB shm_flat_binomial was back to back (1.82 against 1.60) but not
# between barriers (0.81 against 1.04; docs/measurements.md).
reduce nodes=1 p<3 mpi=intel bytes>=16K bytes<=256K shm_window_binomial
reduce nodes=1 p<3 bytes<=512K shm_window
reduce nodes=1 p<3 bytes<16M shm_flat_zcopy
reduce nodes=1 p>2 bytes<64K shm_flat
reduce nodes=1 p<3 shm_flat
reduce nodes=1 shm_zcopy
reduce nodes=1 shm_partition
# Bcast: the queue from 8 KiB (2.3 against 2.5 us by the pipeline), and
# at 2 ranks below 24 KiB on cold buffers, where it beats or ties zero
# copy (16 KiB sync: 3.75-3.82 against 3.85-4.23 us); from 16 KiB on a
# root's buffer still in the caches, zero copy on a Xeon VM (32 KiB, one
# buffer in a loop: 2.7-3.4 against 4.4-5.6 us), the queue on a Zen 3
# VM (16 KiB: 1.25 against 3.2-3.5), so shm_queue_zcopy, whose root
# takes the queue for a new buffer and times both ways for its last
# one from 16 KiB (at 2 ranks from 8 KiB, below). From 24 KiB shm, whose root times zero copy
# against the queue, and from 256 KiB against the pipeline: on a Xeon VM
# zero copy won hot and cold (cold, sync, 32 KiB: 5.6-5.9 against
# 6.9-7.3 us, three hosts), on an EPYC VM the queue did (the same: 4.1
# against 6.2 us; back to back 3.2 against 4.4) except between barriers
# from 64 KiB (docs/measurements.md).
# At 2 ranks shm_pipeline sends hot messages from 2 KiB through the
# window where their root did not write the last window call: back to
# back with roots alternating, EPYC VM, Intel host, cores near, 2 / 4 / 6
# KiB 0.30-0.32 / 0.43-0.46 / 0.58 us against 0.40-0.49 / 0.99-1.02 /
# 1.26-1.37 by the pipeline (stock 0.46-0.64 / 1.16-1.37 / 1.06-1.23);
# between barriers, cold and synchronised as before (docs/measurements.md).
bcast nodes=1 bytes<8K shm_pipeline
# At 2 ranks from 8 KiB shm_queue_zcopy, on every host: back to back
# with roots alternating its window beats the queue, and under Intel MPI
# handing the runs to its point-to-point (shm_queue_binomial), which
# lost to Intel's stock at 8 KiB in that state; between barriers and
# cold it ties the queue. EPYC VM, 2 ranks near, jobs alternating, us at
# 8 / 12 KiB, shm_queue_zcopy against the rule's way before: b2b Open
# MPI 5 host 0.49-0.66 / 0.69-0.85 against 0.79-1.12 / 0.81-0.91 (the
# queue), Intel host 0.48-0.49 / 0.67-0.69 against 0.96-1.19 / 0.94-1.12
# (stock 0.84-0.87 / 1.03-1.04); osu, sync, b2b-cold within each
# other's spread (docs/measurements.md).
bcast nodes=1 p<3 bytes<24K shm_queue_zcopy
bcast nodes=1 bytes<16K shm_queue
# From 16 KiB under Intel MPI too, shm_queue_zcopy (above) and shm: back
# to back with roots alternating, their window beats handing the runs to
# Intel's point-to-point (shm_binomial, which pipelines them). EPYC VM,
# Intel host, 2 ranks near, b2b, jobs alternating, us, Intel's stock /
# shm_binomial / shm: 16 KiB 1.24 / 1.06 / 0.89-0.94, 32 KiB 1.96 /
# 1.54-1.56 / 1.35-1.57, 128 KiB 5.22-5.36 / 3.93-3.99 / 3.76-4.46, 256
# KiB 6.95-7.49 / 7.04 / 7.01-7.42; cores apart both 1.21-1.33 times
# faster than stock to 128 KiB, 0.98-0.99 at 256 KiB (docs/measurements.md).
bcast nodes=1 shm
bcast nodes=1 p<3 bytes<48K shm_queue
bcast nodes=1 shm_queue
# Gatherv: one rule whatever the sizes (only the root knows them); the
# root picks copy-in or zero copy per call.
gatherv nodes=1 shm
# Several nodes: the node layer within nodes, point-to-point between.
# From 64 KiB DPML, at every size: SALaR (forced, or by a PCOLL_TUNE
# rule) pays two MPI_Win_fence per 64 KiB chunk. Across 2 hosts over TCP
# (scripts/bench.sh --cluster, docs/benchmark.md) 4 MiB took 86.8 ms
# against 6.1 for dpml (MPICH) and 17.8 against 7.1 (Open MPI) on the
# unshaped link; it won only where the link is slow (1 Gbit/s: 39.3
# against 51.3 ms, MPICH; a tie under Open MPI).
allreduce nodes>=2 bytes<64K hier
allreduce nodes>=2 dpml
reduce nodes>=2 hier
bcast nodes>=2 hier
gatherv nodes>=2 hier
# No segment (PCOLL_SHM=0), or what the node rules cannot run:
# point-to-point. Allreduce: recursive doubling while latency dominates;
# then halving and doubling (seed 004's split for the extra ranks of a
# non-power-of-two p).
allreduce bytes<16K recursive_doubling
allreduce rabenseifner
# Reduce: a binomial tree for small vectors, halving + gather for large.
reduce bytes<16K binomial
reduce rabenseifner
# Bcast: binomial for small messages; scatter + allgather for large ones
# (ring allgather unless p is a power of two, where recursive doubling
# moves no extra bytes).
bcast p<3 binomial
bcast bytes<64K binomial
bcast p=4 scatter_allgather
bcast p=8 scatter_allgather
bcast p=16 scatter_allgather
bcast scatter_allgather_ring
# Gatherv: linear at small p, seed 001's binomial tree above.
gatherv p<8 linear
gatherv binomial
";

/// The rules for reductions under PCOLL_REPRODUCIBLE=1, which only
/// canonical algorithms may run: on one node the node layer, elsewhere
/// (and where the node layer cannot run) `ordered`, which runs any call.
pub const REPRODUCIBLE_RULES: &str = "\
allreduce bytes<16K shm_flat
allreduce shm_zcopy
allreduce shm_partition
allreduce ordered
reduce bytes<16K shm_flat
reduce shm_zcopy
reduce shm_partition
reduce ordered
";

static RULES: Lazy<Rules> =
    Lazy::new(|| Rules::parse(DEFAULT_RULES, "built-in").expect("the built-in rules parse (tested)"));

static REPRODUCIBLE: Lazy<Rules> = Lazy::new(|| {
    Rules::parse(REPRODUCIBLE_RULES, "built-in reproducible").expect("the reproducible rules parse (tested)")
});

pub fn rules() -> &'static Rules {
    &RULES
}

pub fn reproducible_rules() -> &'static Rules {
    &REPRODUCIBLE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_rules_parse() {
        if let Err(e) = Rules::parse(DEFAULT_RULES, "built-in") {
            panic!("{e}");
        }
        assert!(!rules().rules.is_empty());
    }

    #[test]
    fn reproducible_rules_name_only_canonical_reductions() {
        use super::super::rules::Target;
        for rule in &reproducible_rules().rules {
            assert!(rule.coll.is_reduction(), "line {}", rule.line);
            assert!(matches!(rule.target, Target::Algo(a, _) if a.canonical), "line {}", rule.line);
        }
    }
}
