//! Configuration and the per-call decision: which algorithm runs a call, or
//! whether it goes to the host MPI, and why.
//!
//! Precedence: PCOLL_<COLL> (a forced algorithm or `mpi`), then the rules
//! of PCOLL_TUNE, then those of PCOLL_TUNE_FILE, then the built-in rules
//! ([`defaults`]), then the collective's general algorithm.

pub mod config;
pub mod defaults;
pub mod rules;
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
}

/// Why a call runs the way it does (shown in the debug log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// PCOLL_<COLL>=<algorithm>.
    Forced,
    /// PCOLL_<COLL>=mpi.
    ForcedMpi,
    /// A rule chose it; `line` is the rule's line.
    Rule { source: RuleSource, line: usize },
    /// No rule matched: the collective's general algorithm.
    Fallback,
    /// The forced algorithm cannot run this call; the host MPI runs it.
    Unsupported(&'static str),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced => f.write_str("forced"),
            Reason::ForcedMpi => f.write_str("forced mpi"),
            Reason::Rule { source: RuleSource::Tune, line } => write!(f, "PCOLL_TUNE rule, line {line}"),
            Reason::Rule { source: RuleSource::TuneFile, line } => write!(f, "PCOLL_TUNE_FILE rule, line {line}"),
            Reason::Rule { source: RuleSource::BuiltIn, line } => write!(f, "built-in rule, line {line}"),
            Reason::Fallback => f.write_str("no rule matched"),
            Reason::Unsupported(why) => write!(f, "forced algorithm cannot run this call: {why}"),
        }
    }
}

#[derive(Clone, Debug)]
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
    match choice {
        Choice::Mpi => return Decision::Host(Reason::ForcedMpi),
        Choice::Force(algo, params) => {
            return match (algo.check)(desc) {
                Ok(()) => Decision::Run(algo, params.clone(), Reason::Forced),
                Err(why) => Decision::Host(Reason::Unsupported(why)),
            }
        }
        Choice::Auto => {}
    }
    let call =
        CallShape { coll: desc.coll, procs: desc.size, bytes, commutative: desc.commutative, nodes: desc.topo.nodes };
    let accepts = |t: &Target| match t {
        Target::Mpi => true,
        Target::Algo(a, _) => (a.check)(desc).is_ok(),
    };
    let sources: [(Option<&Rules>, RuleSource); 3] = [
        (cfg.tune.as_ref(), RuleSource::Tune),
        (cfg.tune_file.as_ref(), RuleSource::TuneFile),
        (Some(defaults::rules()), RuleSource::BuiltIn),
    ];
    for (rules, source) in sources {
        let Some(rules) = rules else { continue };
        match rules.pick(&call, accepts) {
            Err(()) => return Decision::NeedsLayout,
            Ok(Some((_, rule))) => {
                let reason = Reason::Rule { source, line: rule.line };
                return match &rule.target {
                    Target::Mpi => Decision::Host(reason),
                    Target::Algo(a, p) => Decision::Run(a, p.clone(), reason),
                };
            }
            Ok(None) => {}
        }
    }
    // The registry lists each collective's general-purpose algorithm
    // first; it accepts every call.
    let algo = algos::for_coll(desc.coll)
        .find(|a| (a.check)(desc).is_ok())
        .expect("every collective has an algorithm that accepts every call");
    Decision::Run(algo, algo.default_params(), Reason::Fallback)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::call::Topo;
    use crate::core::types::Coll;

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
}
