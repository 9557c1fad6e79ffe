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
# (scripts/bench.sh --algorithms): the flag-based paths win the small
# sizes; from 64 KiB an Allreduce at 2 ranks runs faster as Rabenseifner
# over the host's single-copy point-to-point than through the segment
# (under Open MPI shm_flat is 1.6 times slower there, under MPICH close);
# with more ranks the partitioned zero copy spreads the work.
allreduce nodes=1 bytes<64K shm_flat
allreduce nodes=1 p<3 rabenseifner
allreduce nodes=1 bytes<1M shm_flat
allreduce nodes=1 shm_zcopy
allreduce nodes=1 shm_partition
reduce nodes=1 bytes<64K shm_flat
reduce nodes=1 p<3 shm_flat
reduce nodes=1 shm_zcopy
reduce nodes=1 shm_partition
bcast nodes=1 bytes<8K shm_pipeline
bcast nodes=1 bytes<128K shm_queue
bcast nodes=1 shm_zcopy
bcast nodes=1 shm_queue
# Gatherv: one rule whatever the sizes (only the root knows them); the
# root picks copy-in or zero copy per call.
gatherv nodes=1 shm
# Several nodes: the node layer within nodes, point-to-point between.
allreduce nodes>=2 bytes<64K hier
allreduce nodes>=2 bytes<4M dpml
allreduce nodes>=2 salar
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
