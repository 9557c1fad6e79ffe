//! Bcast within a node by zero copy or the pipeline, as the root's timings
//! favour (`shm`; large messages). Zero copy ([`super::bcast_zcopy`]) and
//! the pipeline through the chunk areas ([`super::bcast_pipeline`]) each
//! win in some states of a virtual machine and lose in others (16 MiB, 2
//! ranks: either took up to a third longer than the other;
//! docs/measurements.md), so from [`TIMED_FROM`] bytes, with
//! PCOLL_SHM_ADAPT, the root times both ([`crate::adapt::choice`]). The
//! root names the method in the first step, which every rank publishes
//! (zero copy needs their buffers anyway), and times the call from there
//! to a last step that all ranks publish when done, so both methods'
//! times include the slowest rank's copying. Smaller messages, or without
//! PCOLL_SHM_ADAPT: zero copy. Where ranks outnumber cores: always the
//! pipeline (see [`timed`]).
//!
//! Trace, p = 2, root 0, calls of 2 MiB: the first call of the size class
//! warms up with zero copy, the second times zero copy, the third the
//! pipeline (after the first step both ranks finish it, run the pipeline
//! and meet at a barrier); from then on the root names the faster, and
//! the other once in [`crate::adapt::choice::EXPLORE`] calls.
//!
//! Limitations: one node, with zero copy; each root times for itself, per
//! communicator; a timed pipeline takes a step and a barrier more than
//! `shm_pipeline`. Memory: a few words per size class
//! ([`super::NodeMemory::bcast_method`]). Cost: the chosen method's, plus
//! the other's loss on one call in 64.
//! Seed: none (pcoll's own, from measurements on the development VM).

use std::time::Instant;

use super::bcast_pipeline::pipeline;
use super::bcast_zcopy::{announce, copy_across, zero_copy, METHOD};
use super::{NodeCall, Team};
use crate::adapt::choice::Alternative;
use crate::exec::Combiner;
use crate::shm::team::Mismatch;

/// How a large broadcast moves the message ([`timed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    ZeroCopy,
    Pipeline,
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::ZeroCopy => "zero copy",
            Method::Pipeline => "pipeline",
        })
    }
}

/// Message bytes from which [`timed`] times the methods, by default
/// (PCOLL_SHM_BCAST_TIMED):
/// below, either wins by 1-2 us at most (2 ranks, 128 KiB), about what
/// the pipeline's two extra steps cost, so timing cannot gain.
pub const TIMED_FROM: usize = 256 << 10;

impl Alternative for Method {
    const BOTH: [Method; 2] = [Method::ZeroCopy, Method::Pipeline];
}

/// `shm`: where ranks outnumber cores, the pipeline; else from the
/// choice's [`crate::adapt::choice::TimedChoice::from`] bytes
/// ([`TIMED_FROM`] by default; with PCOLL_SHM_ADAPT), zero copy or the
/// pipeline as the root's timings favour; else zero copy. The team must
/// have [`Team::peers`].
pub fn timed(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    let n = data.len();
    if team.settings.oversubscribed {
        // Zero copy needs every reader on a core at once, and the root
        // writes into each in turn (4 ranks on 2 cores, 2 MiB: the
        // pipeline in about 60% of zero copy's time); timings there are
        // too noisy to choose by (docs/measurements.md).
        return pipeline(team, data, root);
    }
    if !team.state.memory.adaptation.enabled || n < team.state.memory.bcast_method.from() {
        return zero_copy(team, data, root);
    }
    let pick = (team.rank == root).then(|| team.state.memory.bcast_method.pick(n));
    let s = announce(team, data, root, pick.map(|pick| pick.method))?;
    // From the moment all have arrived: their lateness is no method's.
    let start = Instant::now();
    match Method::BOTH[team.word(root, s, METHOD) as usize] {
        Method::ZeroCopy => copy_across(team, data, root, s)?,
        Method::Pipeline => {
            team.finish(s);
            pipeline(team, data, root)?;
            // The root's time then includes the readers' last copy-out.
            team.barrier();
        }
    }
    if let Some(pick) = pick {
        let choice = &mut team.state.memory.bcast_method;
        if let Some(change) = choice.record(pick, n, start.elapsed()) {
            log::debug!("shm Bcast of {} B and more from this root, now: {change}", choice.class_bytes(&pick));
        }
    }
    Ok(())
}

/// [`timed`], as the registry runs it.
pub fn run_timed(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    timed(team, data, root)
}
