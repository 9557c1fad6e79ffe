//! The per-call decision and plan: which algorithm runs a call (through
//! [`crate::select`] with the collective's current choice), with what
//! parameters, and for a multi-node composition its node stages and the
//! algorithm between the nodes, all fixed before the call runs.

use super::runtime::Runtime;
use super::thread::PerThread;
use super::Host;
use crate::algos::multinode::StagePlan;
use crate::algos::{Algorithm, Impl, Params};
use crate::core::call::CallDesc;
use crate::select::config::Choice;
use crate::select::{self, Decision, Reason, RuleSource};
use std::sync::atomic::{AtomicBool, Ordering};

/// A call pcoll runs itself: what it is and which algorithm runs it.
pub struct Planned {
    pub desc: CallDesc,
    pub algo: &'static Algorithm,
    pub params: Params,
    pub reason: Reason,
    /// A multi-node composition's node stages and inter-node algorithm.
    pub stages: Option<StagePlan>,
}

/// A decision and what it was made from (the thread's last, see
/// [`decide`]).
pub(super) struct LastDecision {
    choice: *const Choice,
    desc: CallDesc,
    bytes: Option<usize>,
    decision: Decision,
}

/// How to run a call ([`select::decide_with`] with [`Runtime::choice`]).
/// The thread's last decision is remembered with what it was made from,
/// so a loop of calls of one shape does not read the rules again (27-55
/// ns a call at 2 ranks). The configuration is fixed for the job, and
/// every choice lives at its own address for good: equal inputs make the
/// same decision.
pub fn decide<H: Host>(rt: &Runtime, t: &PerThread<H>, desc: &CallDesc, bytes: Option<usize>) -> Decision {
    let choice = rt.choice(desc.coll);
    let same = |last: &&LastDecision| std::ptr::eq(last.choice, choice) && last.bytes == bytes && last.desc == *desc;
    if let Some(decision) = t.decision.borrow().as_ref().filter(same).map(|l| l.decision) {
        return decision;
    }
    let decision = select::decide_with(&rt.cfg, choice, desc, bytes);
    *t.decision.borrow_mut() = Some(LastDecision { choice, desc: desc.clone(), bytes, decision });
    decision
}

/// Warned once per collective that a forced algorithm cannot run a call.
static WARNED_UNSUPPORTED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];
/// Warned once per collective that PCOLL_REPRODUCIBLE replaced a forced algorithm.
static WARNED_REPLACED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];

/// Why the host runs a call of a collective set to `mpi` (`PCOLL_<COLL>`,
/// `pcoll_set_algorithm`), in the log and the statistics.
pub const FORCED_MPI: &str = "forced mpi";

/// What the host MPI is told why it runs a call, for the log.
fn host_reason(reason: Reason) -> &'static str {
    match reason {
        Reason::Unsupported(why) => why,
        Reason::Rule { source: RuleSource::Tune, .. } => "a PCOLL_TUNE rule chose mpi",
        Reason::Rule { source: RuleSource::TuneFile, .. } => "a PCOLL_TUNE_FILE rule chose mpi",
        Reason::Rule { source: RuleSource::BuiltIn, .. } => "a built-in rule chose mpi",
        Reason::Forced | Reason::ForcedMpi | Reason::Fallback => FORCED_MPI,
        Reason::Rule { source: RuleSource::Reproducible, .. } | Reason::Replaced { .. } => {
            unreachable!("reproducible rules choose canonical algorithms, never the host")
        }
    }
}

/// Turns a decision into a plan and logs why; `Err(why)`: the host MPI
/// runs the call.
pub fn plan(rt: &Runtime, desc: CallDesc, decision: Decision) -> Result<Planned, &'static str> {
    let (algo, params, reason) = match decision {
        Decision::Run(algo, params, reason) => (algo, params, reason),
        Decision::Host(reason) => {
            if let Reason::Unsupported(why) = reason {
                if !WARNED_UNSUPPORTED[desc.coll.index()].swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{}: the forced algorithm cannot run a call ({why}); the host MPI runs such calls",
                        desc.coll
                    );
                }
            }
            return Err(host_reason(reason));
        }
        Decision::NeedsLayout => unreachable!("only a Gatherv without its layout asks for it"),
    };
    if let Reason::Replaced { forced, why } = reason {
        if !WARNED_REPLACED[desc.coll.index()].swap(true, Ordering::Relaxed) {
            log::warn!(
                "{}: PCOLL_REPRODUCIBLE=1 and the forced {forced} cannot be used ({why}); canonical algorithms \
                 run such calls instead ({} this one)",
                desc.coll,
                algo.name
            );
        }
    }
    log::debug!(
        "{} comm_size={} root={} bytes={}: {}{:?} ({reason})",
        desc.coll,
        desc.size,
        desc.root,
        desc.bytes,
        algo.name,
        &params[..],
    );
    let stages = matches!(algo.imp, Impl::Hier(_)).then(|| select::multinode::plan_stages(&rt.cfg, &desc));
    Ok(Planned { desc, algo, params, reason, stages })
}
