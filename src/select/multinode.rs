//! The plan of a multi-node call's stages ([`StagePlan`]), made with the
//! call's plan so that a composition decides nothing while it runs.
//!
//! - Node stages: a reduction is flat up to [`NODE_FLAT_MAX`] bytes, else
//!   partitioned, by zero copy where every node allows it; a broadcast is
//!   pipelined up to [`NODE_PIPELINE_MAX`] bytes, else the timed `shm`
//!   (zero copy or the pipeline) where zero copy works.
//! - Between nodes: the point-to-point algorithm the configured rules
//!   choose for a call among the nodes' representatives, for every size
//!   such a call can have (the rules' byte thresholds cut the sizes into
//!   pieces with one choice each); a Gatherv between them is linear (only
//!   the root has the layout of the nodes' blocks).

use super::config::Config;
use super::{decide, defaults, Decision};
use crate::algos::multinode::{BetweenPlan, StagePlan};
use crate::algos::{self, Algorithm, Params};
use crate::core::call::{CallDesc, Topo};
use crate::core::types::Coll;

/// Above this many bytes the node stages reduce in partitions rather than
/// flat: partitioning pays once each rank's slice outweighs a second
/// synchronisation.
pub const NODE_FLAT_MAX: usize = 16 << 10;
/// Above this many bytes the node broadcast may go by zero copy.
pub const NODE_PIPELINE_MAX: usize = 64 << 10;

/// The stages of a multi-node call `desc` (a composition's).
pub fn plan_stages(cfg: &Config, desc: &CallDesc) -> StagePlan {
    let node = |coll: Coll, name: &str| algos::find(coll, name).expect("the node algorithms are registered");
    let node_reduce = match desc.bytes {
        n if n <= NODE_FLAT_MAX => node(Coll::Reduce, "shm_flat"),
        _ if desc.topo.zcopy => node(Coll::Reduce, "shm_zcopy"),
        _ => node(Coll::Reduce, "shm_partition"),
    };
    let node_bcast = match desc.bytes {
        n if n > NODE_PIPELINE_MAX && desc.topo.zcopy => node(Coll::Bcast, "shm"),
        _ => node(Coll::Bcast, "shm_pipeline"),
    };
    StagePlan { node_reduce, node_bcast, between: plan_between(cfg, desc) }
}

/// The point-to-point algorithm between the nodes of `desc`, by size.
fn plan_between(cfg: &Config, desc: &CallDesc) -> BetweenPlan {
    if desc.coll == Coll::Gatherv {
        let linear = general(desc.coll);
        return BetweenPlan::new([(0, linear, linear.default_params())]);
    }
    let rule_sets =
        [cfg.tune.as_ref(), cfg.tune_file.as_ref(), Some(defaults::rules()), Some(defaults::reproducible_rules())];
    let mut from: Vec<usize> = rule_sets.into_iter().flatten().flat_map(|rules| rules.byte_bounds()).collect();
    from.push(0);
    from.sort_unstable();
    from.dedup();
    BetweenPlan::new(from.into_iter().map(|bytes| {
        let (algo, params) = between(cfg, desc, bytes);
        (bytes, algo, params)
    }))
}

/// The choice for one call of `bytes` between the nodes of `desc`: the
/// rules' point-to-point algorithm, else the collective's general one.
fn between(cfg: &Config, desc: &CallDesc, bytes: usize) -> (&'static Algorithm, Params) {
    let nodes = desc.topo.nodes;
    let call = CallDesc {
        rank: 0,
        size: nodes,
        root: 0,
        bytes,
        in_place: false,
        // Between nodes only point-to-point algorithms run.
        topo: Topo { nodes, ..Topo::default() },
        ..*desc
    };
    match decide(cfg, &call, Some(bytes)) {
        Decision::Run(algo, params, _) if algo.schedule().is_some() => (algo, params),
        _ => {
            let algo = general(desc.coll);
            (algo, algo.default_params())
        }
    }
}

/// The collective's general algorithm (the registry lists it first).
fn general(coll: Coll) -> &'static Algorithm {
    algos::for_coll(coll).next().expect("each collective has an algorithm")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(coll: Coll, bytes: usize, zcopy: bool) -> CallDesc {
        let topo = Topo { nodes: 3, contiguous: true, shm: true, zcopy, chunk: 1 << 16, one_sided: true };
        CallDesc { coll, rank: 0, size: 6, root: 0, bytes, unit: 8, commutative: true, in_place: false, topo }
    }

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_vars(&vars).unwrap()
    }

    #[test]
    fn node_stages_follow_the_size_and_zero_copy() {
        let names = |bytes, zcopy| {
            let plan = plan_stages(&Config::default(), &desc(Coll::Allreduce, bytes, zcopy));
            (plan.node_reduce.name, plan.node_bcast.name)
        };
        assert_eq!(names(NODE_FLAT_MAX, true), ("shm_flat", "shm_pipeline"));
        assert_eq!(names(NODE_FLAT_MAX + 8, true), ("shm_zcopy", "shm_pipeline"));
        assert_eq!(names(NODE_FLAT_MAX + 8, false), ("shm_partition", "shm_pipeline"));
        assert_eq!(names(NODE_PIPELINE_MAX + 8, true), ("shm_zcopy", "shm"));
        assert_eq!(names(NODE_PIPELINE_MAX + 8, false), ("shm_partition", "shm_pipeline"));
    }

    /// The plan gives, at every size, what deciding then would give.
    #[test]
    fn the_plan_between_nodes_agrees_with_the_rules_at_every_size() {
        let tuned = cfg(&[(
            "PCOLL_TUNE",
            "allreduce bytes<=1000 reduce_bcast; allreduce bytes=4096 ring; bcast bytes>77 chain",
        )]);
        let forced = cfg(&[("PCOLL_REDUCE", "rabenseifner")]);
        for c in [Config::default(), tuned, forced] {
            for coll in Coll::ALL {
                let d = desc(coll, 8, true);
                let plan = plan_between(&c, &d);
                let mut sizes: Vec<usize> =
                    (0..70).map(|i| 1usize << (i % 35)).chain([999, 1000, 1001, 4095, 4096, 4097, 77, 78]).collect();
                sizes.sort_unstable();
                for bytes in sizes {
                    let (want, want_params) = if coll == Coll::Gatherv {
                        let g = general(coll);
                        (g, g.default_params())
                    } else {
                        between(&c, &d, bytes)
                    };
                    let (got, params) = plan.for_bytes(bytes);
                    assert!(
                        std::ptr::eq(got, want) && *params == want_params,
                        "{coll} {bytes} B: {got:?} against {want:?}"
                    );
                }
            }
        }
        let tuned = cfg(&[("PCOLL_TUNE", "allreduce bytes<=1000 reduce_bcast; allreduce bytes=4096 ring")]);
        let plan = plan_between(&tuned, &desc(Coll::Allreduce, 8, true));
        assert_eq!(plan.for_bytes(1000).0.name, "reduce_bcast");
        assert_eq!(plan.for_bytes(4096).0.name, "ring");
        assert_ne!(plan.for_bytes(4097).0.name, "ring");
    }

    /// The plan relies on the checks of point-to-point algorithms not
    /// depending on the call's bytes.
    #[test]
    fn point_to_point_checks_do_not_depend_on_the_bytes() {
        for algo in algos::ALGORITHMS.iter().filter(|a| a.schedule().is_some()) {
            for commutative in [false, true] {
                let d = |bytes| CallDesc {
                    commutative,
                    bytes,
                    topo: Topo { nodes: 3, ..Topo::default() },
                    ..desc(algo.coll, 0, false)
                };
                let at_zero = (algo.check)(&d(0)).is_ok();
                for bytes in [1, 8, 1000, 1 << 20, 1 << 30] {
                    assert_eq!((algo.check)(&d(bytes)).is_ok(), at_zero, "{algo:?} at {bytes} B");
                }
            }
        }
    }
}
