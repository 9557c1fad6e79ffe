//! Configuration and the per-call decision: which algorithm runs a call, or
//! whether it goes to the host MPI, and why.
//!
//! Precedence: `PCOLL_<COLL>` (a forced algorithm or `mpi`), then the rules
//! of PCOLL_TUNE, then those of PCOLL_TUNE_FILE, then the built-in rules
//! ([`defaults`]), then the collective's general algorithm.
//!
//! PCOLL_REPRODUCIBLE=1 narrows the choice for reductions to canonical
//! algorithms (see [`crate::algos::Algorithm::canonical`]): rules naming
//! others, or `mpi`, are passed over, the built-in rules are the
//! reproducible ones, and a forced algorithm that is not canonical (or
//! cannot run the call) is replaced as if nothing were forced. Only a
//! forced `mpi` still runs the host MPI's collective.

pub mod config;
pub mod defaults;
pub mod multinode;
pub mod rules;
pub mod settings;
pub mod wire;

use crate::algos::{self, Algorithm, Params};
use crate::core::call::CallDesc;
use config::{Choice, Config};
use rules::{CallShape, Rules, Target};
use std::fmt;

/// Where a rule came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSource {
    Tune,
    TuneFile,
    BuiltIn,
    /// The built-in rules of PCOLL_REPRODUCIBLE=1.
    Reproducible,
}

/// Why a call runs the way it does (shown in the debug log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// `PCOLL_<COLL>=<algorithm>`.
    Forced,
    /// `PCOLL_<COLL>=mpi`.
    ForcedMpi,
    /// A rule chose it; `line` is the rule's line.
    Rule { source: RuleSource, line: usize },
    /// No rule matched: the collective's general algorithm.
    Fallback,
    /// The forced algorithm cannot run this call; the host MPI runs it.
    Unsupported(&'static str),
    /// PCOLL_REPRODUCIBLE=1: the forced algorithm (named) is not
    /// canonical or cannot run the call (why); the rules chose another.
    Replaced { forced: &'static str, why: &'static str },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced => f.write_str("forced"),
            Reason::ForcedMpi => f.write_str("forced mpi"),
            Reason::Rule { source: RuleSource::Tune, line } => write!(f, "PCOLL_TUNE rule, line {line}"),
            Reason::Rule { source: RuleSource::TuneFile, line } => write!(f, "PCOLL_TUNE_FILE rule, line {line}"),
            Reason::Rule { source: RuleSource::BuiltIn, line } => write!(f, "built-in rule, line {line}"),
            Reason::Rule { source: RuleSource::Reproducible, line } => {
                write!(f, "built-in reproducible rule, line {line}")
            }
            Reason::Fallback => f.write_str("no rule matched"),
            Reason::Unsupported(why) => write!(f, "forced algorithm cannot run this call: {why}"),
            Reason::Replaced { forced, why } => {
                write!(f, "PCOLL_REPRODUCIBLE=1: replaces the forced {forced} ({why})")
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Decision {
    /// pcoll runs the call with this algorithm.
    Run(&'static Algorithm, Params, Reason),
    /// The host MPI's own collective runs it.
    Host(Reason),
    /// The choice depends on the Gatherv layout, which this rank lacks.
    NeedsLayout,
}

/// Decides how to run one call. `bytes` is what rules compare with (see
/// [`rules`]); `None` for a Gatherv where this rank does not know the
/// layout. Depends only on `cfg` and on what every rank knows alike, so
/// every rank decides alike.
pub fn decide(cfg: &Config, desc: &CallDesc, bytes: Option<usize>) -> Decision {
    decide_with(cfg, &cfg.choices[desc.coll.index()], desc, bytes)
}

/// [`decide`] with the collective's choice given (a benchmark's or a
/// tuner's override of the configured one).
pub fn decide_with(cfg: &Config, choice: &Choice, desc: &CallDesc, bytes: Option<usize>) -> Decision {
    let canonical_only = cfg.reproducible && desc.coll.is_reduction();
    match choice {
        Choice::Mpi => Decision::Host(Reason::ForcedMpi),
        Choice::Force(algo, params) => match (algo.check)(desc) {
            Ok(()) if algo.canonical || !canonical_only => Decision::Run(algo, *params, Reason::Forced),
            Err(why) if !canonical_only => Decision::Host(Reason::Unsupported(why)),
            // Reproducible: another canonical algorithm, never the host.
            verdict => {
                let why = verdict.err().unwrap_or("not canonical");
                match by_rules(cfg, desc, bytes, canonical_only) {
                    Decision::Run(a, p, _) => Decision::Run(a, p, Reason::Replaced { forced: algo.name, why }),
                    other => other,
                }
            }
        },
        Choice::Auto => by_rules(cfg, desc, bytes, canonical_only),
    }
}

/// The rules' choice: PCOLL_TUNE, PCOLL_TUNE_FILE, the built-in rules (the
/// reproducible ones when `canonical_only`), the general algorithm.
fn by_rules(cfg: &Config, desc: &CallDesc, bytes: Option<usize>, canonical_only: bool) -> Decision {
    let call = CallShape {
        coll: desc.coll,
        procs: desc.size,
        bytes,
        commutative: desc.commutative,
        nodes: desc.topo.nodes,
        mpi: cfg.host_mpi,
    };
    let runs = |a: &Algorithm| (a.canonical || !canonical_only) && (a.check)(desc).is_ok();
    let accepts = |t: &Target| match t {
        Target::Mpi => !canonical_only,
        Target::Algo(a, _) => runs(a),
    };
    let built_in = if canonical_only {
        (defaults::reproducible_rules(), RuleSource::Reproducible)
    } else {
        (defaults::rules(), RuleSource::BuiltIn)
    };
    let sources: [(Option<&Rules>, RuleSource); 3] = [
        (cfg.tune.as_ref(), RuleSource::Tune),
        (cfg.tune_file.as_ref(), RuleSource::TuneFile),
        (Some(built_in.0), built_in.1),
    ];
    for (rules, source) in sources {
        let Some(rules) = rules else { continue };
        match rules.pick(&call, accepts) {
            Err(()) => return Decision::NeedsLayout,
            Ok(Some((_, rule))) => {
                let reason = Reason::Rule { source, line: rule.line };
                return match &rule.target {
                    Target::Mpi => Decision::Host(reason),
                    Target::Algo(a, p) => Decision::Run(a, *p, reason),
                };
            }
            Ok(None) => {}
        }
    }
    // The registry lists each collective's general-purpose algorithm
    // first; it accepts every call (reproducible: `ordered` does).
    let algo = algos::for_coll(desc.coll)
        .find(|&a| runs(a))
        .expect("every collective has an algorithm that accepts every call");
    Decision::Run(algo, algo.default_params(), Reason::Fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;
    use rules::HostMpi;

    /// The algorithm the rules run under host MPI `mpi` for `d` on one
    /// node with a segment and zero copy.
    fn on_one_node(mpi: Option<HostMpi>, d: CallDesc) -> &'static str {
        let d = CallDesc { topo: Topo { shm: true, zcopy: true, chunk: 1 << 16, ..Topo::default() }, ..d };
        match decide(&Config { host_mpi: mpi, ..Config::default() }, &d, Some(d.bytes)) {
            Decision::Run(a, _, _) => a.name,
            other => panic!("{other:?}"),
        }
    }

    fn desc(coll: Coll, size: usize, bytes: usize) -> CallDesc {
        CallDesc {
            coll,
            rank: 0,
            size,
            root: 0,
            bytes,
            unit: 8,
            commutative: true,
            in_place: false,
            topo: Topo::default(),
        }
    }

    fn cfg(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_vars(&vars).unwrap()
    }

    #[test]
    fn precedence_forced_then_tune_then_defaults() {
        let d = desc(Coll::Allreduce, 4, 64);
        let tuned = cfg(&[("PCOLL_TUNE", "allreduce bytes<1K reduce_bcast")]);
        let Decision::Run(a, _, reason) = decide(&tuned, &d, Some(64)) else { panic!() };
        assert_eq!((a.name, reason), ("reduce_bcast", Reason::Rule { source: RuleSource::Tune, line: 1 }));
        assert_eq!(reason.to_string(), "PCOLL_TUNE rule, line 1");
        let forced = cfg(&[("PCOLL_TUNE", "allreduce reduce_bcast"), ("PCOLL_ALLREDUCE", "ring")]);
        assert!(matches!(decide(&forced, &d, Some(64)), Decision::Run(a, _, Reason::Forced) if a.name == "ring"));
        // A large call falls through PCOLL_TUNE to the built-in rules.
        assert!(matches!(
            decide(&tuned, &d, Some(1 << 20)),
            Decision::Run(_, _, Reason::Rule { source: RuleSource::BuiltIn, .. })
        ));
        let host = cfg(&[("PCOLL_TUNE", "bcast mpi")]);
        assert!(matches!(decide(&host, &desc(Coll::Bcast, 4, 1), Some(1)), Decision::Host(Reason::Rule { .. })));
    }

    #[test]
    fn a_forced_algorithm_that_cannot_run_goes_to_the_host() {
        let d = CallDesc { commutative: false, ..desc(Coll::Allreduce, 4, 64) };
        let c = cfg(&[("PCOLL_ALLREDUCE", "ring")]);
        assert!(matches!(decide(&c, &d, Some(64)), Decision::Host(Reason::Unsupported(_))));
    }

    #[test]
    fn gatherv_without_the_layout_needs_it_only_for_byte_rules() {
        let d = desc(Coll::Gatherv, 64, 8);
        let by_size = cfg(&[("PCOLL_TUNE", "gatherv p>=8 linear")]);
        assert!(matches!(decide(&by_size, &d, None), Decision::Run(a, ..) if a.name == "linear"));
        let by_bytes = cfg(&[("PCOLL_TUNE", "gatherv bytes<1K linear")]);
        assert!(matches!(decide(&by_bytes, &d, None), Decision::NeedsLayout));
    }

    #[test]
    fn a_reduction_on_one_node_at_two_ranks_runs_flat_small_then_by_the_window_a_large_reduce_by_the_buffers() {
        let node = Topo { shm: true, chunk: 1 << 16, ..Topo::default() };
        let pick = |coll: Coll, p: usize, bytes: usize| {
            let d = CallDesc { topo: node, ..desc(coll, p, bytes) };
            match decide(&Config::default(), &d, Some(bytes)) {
                Decision::Run(a, _, _) => a.name,
                other => panic!("{other:?}"),
            }
        };
        let sizes =
            [1 << 10, (8 << 10) - 8, 8 << 10, 16 << 10, 512 << 10, (512 << 10) + 8, 4 << 20, (16 << 20) - 8, 16 << 20];
        let at_two = |coll| -> Vec<_> { sizes.map(|bytes| pick(coll, 2, bytes)).into() };
        let (flat, either, window) = ("shm_flat", "shm_flat_zcopy", "shm_window");
        assert_eq!(at_two(Coll::Reduce), [flat, flat, window, window, window, either, either, either, flat]);
        assert_eq!(at_two(Coll::Allreduce), [flat, flat, window, window, window, window, window, window, window]);
        assert_eq!(pick(Coll::Reduce, 4, 32 << 10), flat);
        assert_eq!(pick(Coll::Reduce, 4, (64 << 10) - 8), flat);
        assert_eq!(pick(Coll::Allreduce, 4, 8 << 10), flat);
        assert_eq!(pick(Coll::Allreduce, 4, 32 << 10), flat);
    }

    #[test]
    fn a_reduce_at_two_ranks_under_intel_mpi_hands_hot_calls_back_to_back_outside_the_window_to_the_binomial_tree() {
        let pick = |mpi, p, bytes| on_one_node(mpi, desc(Coll::Reduce, p, bytes));
        let sizes = [(16 << 10) - 8, 16 << 10, 256 << 10, (256 << 10) + 8];
        let intel = sizes.map(|bytes| pick(Some(HostMpi::Intel), 2, bytes));
        assert_eq!(intel, ["shm_window", "shm_window_binomial", "shm_window_binomial", "shm_window"]);
        for other in [None, Some(HostMpi::Mpich), Some(HostMpi::Mvapich), Some(HostMpi::OpenMpi)] {
            assert_eq!(sizes.map(|bytes| pick(other, 2, bytes)), ["shm_window"; 4], "{other:?}");
        }
        assert_eq!(pick(Some(HostMpi::Intel), 3, 32 << 10), "shm_flat");
    }

    #[test]
    fn a_bcast_at_two_ranks_takes_the_ways_with_the_window_from_8_kib_under_every_host() {
        let pick = |mpi, p, bytes| on_one_node(mpi, desc(Coll::Bcast, p, bytes));
        let sizes = [(8 << 10) - 8, 8 << 10, (16 << 10) - 8, 24 << 10, 256 << 10, (256 << 10) + 8];
        let want = ["shm_pipeline", "shm_queue_zcopy", "shm_queue_zcopy", "shm", "shm", "shm"];
        for mpi in [None, Some(HostMpi::Intel), Some(HostMpi::Mpich), Some(HostMpi::Mvapich), Some(HostMpi::OpenMpi)] {
            assert_eq!(sizes.map(|bytes| pick(mpi, 2, bytes)), want, "{mpi:?}");
            assert_eq!(pick(mpi, 3, 12 << 10), "shm_queue", "{mpi:?}");
            assert_eq!(pick(mpi, 3, 32 << 10), "shm", "{mpi:?}");
        }
    }

    #[test]
    fn an_allreduce_at_two_ranks_goes_through_the_window_from_8_kib_on_every_host() {
        let pick =
            |mpi, p, bytes, commutative| on_one_node(mpi, CallDesc { commutative, ..desc(Coll::Allreduce, p, bytes) });
        let sizes = [(8 << 10) - 8, 8 << 10, 64 << 10, 1 << 20, 16 << 20];
        let want = ["shm_flat", "shm_window", "shm_window", "shm_window", "shm_window"];
        for mpi in [None, Some(HostMpi::Intel), Some(HostMpi::Mpich), Some(HostMpi::Mvapich), Some(HostMpi::OpenMpi)] {
            for commutative in [true, false] {
                assert_eq!(sizes.map(|bytes| pick(mpi, 2, bytes, commutative)), want, "{mpi:?} {commutative}");
            }
            assert_eq!(pick(mpi, 3, 512 << 10, true), "shm_flat", "{mpi:?}");
        }
    }

    #[test]
    fn a_bcast_on_one_node_at_two_ranks_goes_through_the_queue_from_8_kib_or_zero_copy_when_hot() {
        let node = Topo { shm: true, zcopy: true, chunk: 1 << 16, ..Topo::default() };
        let pick = |p: usize, bytes: usize| {
            let d = CallDesc { topo: node, ..desc(Coll::Bcast, p, bytes) };
            match decide(&Config::default(), &d, Some(bytes)) {
                Decision::Run(a, _, _) => a.name,
                other => panic!("{other:?}"),
            }
        };
        let at_two: Vec<_> = [4 << 10, 8 << 10, 16 << 10, (24 << 10) - 1, 24 << 10, 32 << 10, 1 << 20]
            .map(|bytes| pick(2, bytes))
            .into();
        let want = ["shm_pipeline", "shm_queue_zcopy", "shm_queue_zcopy", "shm_queue_zcopy", "shm", "shm", "shm"];
        assert_eq!(at_two, want);
        assert_eq!(pick(4, 32 << 10), "shm");
        let without_zero_copy = |bytes: usize| {
            let d = CallDesc { topo: Topo { zcopy: false, ..node }, ..desc(Coll::Bcast, 2, bytes) };
            match decide(&Config::default(), &d, Some(bytes)) {
                Decision::Run(a, _, _) => a.name,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(without_zero_copy(8 << 10), "shm_queue");
        assert_eq!(without_zero_copy(32 << 10), "shm_queue");
    }

    #[test]
    fn across_nodes_dpml_from_64_kib_whether_or_not_the_leaders_can_make_a_window() {
        let spread = Topo { nodes: 2, shm: true, chunk: 1 << 16, ..Topo::default() };
        let pick = |topo: Topo, bytes: usize| match decide(
            &Config::default(),
            &CallDesc { topo, ..desc(Coll::Allreduce, 4, bytes) },
            Some(bytes),
        ) {
            Decision::Run(a, _, _) => a.name,
            other => panic!("{other:?}"),
        };
        assert_eq!(pick(spread, (64 << 10) - 8), "hier");
        for one_sided in [true, false] {
            for bytes in [64 << 10, 1 << 20, 8 << 20, 1 << 30] {
                assert_eq!(pick(Topo { one_sided, ..spread }, bytes), "dpml", "{bytes} B, one_sided={one_sided}");
            }
        }
    }

    #[test]
    fn reproducible_reductions_run_only_canonical_algorithms() {
        let name = |d: Decision| match d {
            Decision::Run(a, _, reason) => (a.name, reason.to_string()),
            other => panic!("{other:?}"),
        };
        let repro = cfg(&[("PCOLL_REPRODUCIBLE", "1")]);
        // Several nodes (or no segment): ordered, whatever the size.
        let spread = Topo { nodes: 2, ..Topo::default() };
        for bytes in [8, 1 << 20] {
            let d = CallDesc { topo: spread, ..desc(Coll::Allreduce, 4, bytes) };
            assert_eq!(name(decide(&repro, &d, Some(bytes))), ("ordered", "built-in reproducible rule, line 4".into()));
        }
        // One node with a segment: the node layer.
        let node = Topo { shm: true, chunk: 1 << 16, ..Topo::default() };
        let d = CallDesc { topo: node, ..desc(Coll::Reduce, 4, 64) };
        assert_eq!(name(decide(&repro, &d, Some(64))).0, "shm_flat");
        let d = CallDesc { topo: node, ..desc(Coll::Reduce, 4, 1 << 20) };
        assert_eq!(name(decide(&repro, &d, Some(1 << 20))).0, "shm_partition");
        // A forced algorithm that is not canonical is replaced, saying so;
        // canonical ones and mpi stay.
        let d = desc(Coll::Allreduce, 4, 64);
        let forced = cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_ALLREDUCE", "ring")]);
        let (algo, why) = name(decide(&forced, &d, Some(64)));
        assert_eq!((algo, why.as_str()), ("ordered", "PCOLL_REPRODUCIBLE=1: replaces the forced ring (not canonical)"));
        // So is a canonical one that cannot run the call, instead of the host.
        let forced = cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_ALLREDUCE", "shm_flat")]);
        let (algo, why) = name(decide(&forced, &d, Some(64)));
        assert_eq!(algo, "ordered");
        assert!(why.starts_with("PCOLL_REPRODUCIBLE=1: replaces the forced shm_flat (no shared segment"), "{why}");
        let forced = cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_ALLREDUCE", "ordered")]);
        assert!(matches!(decide(&forced, &d, Some(64)), Decision::Run(a, _, Reason::Forced) if a.name == "ordered"));
        let forced = cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_ALLREDUCE", "mpi")]);
        assert!(matches!(decide(&forced, &d, Some(64)), Decision::Host(Reason::ForcedMpi)));
        // Rules: non-canonical targets and mpi are passed over.
        let tuned =
            cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_TUNE", "allreduce ring; allreduce mpi\nallreduce ordered")]);
        assert_eq!(name(decide(&tuned, &d, Some(64))), ("ordered", "PCOLL_TUNE rule, line 2".into()));
        // Other collectives are not affected.
        let b = desc(Coll::Bcast, 4, 64);
        let bcast = cfg(&[("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_BCAST", "chain")]);
        assert!(matches!(decide(&bcast, &b, Some(64)), Decision::Run(a, _, Reason::Forced) if a.name == "chain"));
        // Without the setting nothing changes.
        assert_ne!(name(decide(&cfg(&[]), &d, Some(64))).0, "ordered");
    }
}
