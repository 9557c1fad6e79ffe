//! Bcast within a node by the method the root's timings favour (`shm`;
//! from 16-24 KiB). Which method wins depends on the machine: zero copy
//! ([`super::bcast_zcopy`]) costs a system call and pins pages, the queue
//! ([`super::bcast_queue`]) and the pipeline through the chunk areas
//! ([`super::bcast_pipeline`]) copy twice, and writing into lines a reader
//! on another core still holds costs several times a read. So, with
//! PCOLL_SHM_ADAPT, the root times two methods per size class
//! ([`crate::adapt::choice`]) and names the faster in the call's first
//! step, which every rank follows:
//! - from [`TIMED_FROM`] bytes (PCOLL_SHM_BCAST_TIMED), zero copy against
//!   the pipeline for messages from a buffer new to the root (16 MiB, 2
//!   ranks: either took up to a third longer than the other in some
//!   state of one VM);
//! - below, from a sixteenth of it, and at any size from there for
//!   messages the root broadcasts from its last Bcast's buffer (hot),
//!   zero copy against the queue (2 ranks, 32 KiB, back to back on hot
//!   buffers: on a Xeon VM zero copy 2.7-3.4 against 4.4-5.6 us, on an
//!   EPYC VM the queue 3.2 against 4.4), timed apart for hot messages (on
//!   the Xeon VM zero copy won them where the queue won cold ones, 16-32
//!   KiB; see [`super::bcast_queue_zcopy`]). Hot from 256 KiB the
//!   pipeline lost to both: its two chunk areas come back to the reader
//!   while its L2 holds them, the queue, larger than L2, does not (EPYC
//!   VM, 2 ranks, back to back, 512 KiB, a 4 MiB queue: queue 27.5-28.8
//!   us, zero copy 42, pipeline 47-52); on new buffers the pipeline stays
//!   ahead of the queue from 512 KiB (`sync`: 47 against 51 us).
//! - below a sixteenth of [`TIMED_FROM`], hot or not, the queue, untimed:
//!   zero copy's two meetings of all ranks (the buffers' addresses, the
//!   copies' end) cost more there than the queue's second copy, and its
//!   root returns only with the last reader, where the queue's returns
//!   once its copy is in. The root's times, which run to the slowest
//!   reader's end, favoured zero copy at 8 KiB all the same (2 ranks, hot
//!   messages between barriers, averaged over ranks: 1.47-1.52 us
//!   against 0.97-1.04 through the queue, stock 1.09-1.14;
//!   docs/measurements.md).
//!
//! Where the queue is picked for a hot message that fits the window and
//! whose root was not the last window call's, the copies go through the
//! window all roots share ([`super::window`]; 2 ranks, roots
//! alternating back to back: the root writes lines it has just read
//! rather than lines its reader's cache holds); timed as the queue.
//!
//! Both times run from the root's arrival (zero copy, the pipeline) or
//! the queue's being empty (the queue) to every reader's having its copy,
//! so they include the slowest rank's copying: a zero copy or pipeline
//! Bcast ends with a step all publish when done; for a timed queue call
//! the root waits for its readers to count out of the queue, which it
//! otherwise does not ([`QUEUE_TIMED_EVERY`]). Without PCOLL_SHM_ADAPT:
//! zero copy. Where ranks outnumber cores: always the pipeline.
//!
//! Trace, p = 2, root 0, calls of 2 MiB from new buffers: the first call
//! of the size class warms up with zero copy, the second times zero copy,
//! the third the pipeline (after the first step both ranks finish it,
//! run the pipeline and meet at a barrier); from then on the root names
//! the faster, and the other once in [`crate::adapt::choice::EXPLORE`]
//! calls. Calls of 32 KiB: warm-up and a timed call through the queue,
//! then zero copy (its first call after the queue not counted), and so
//! on; the same again, at either size, for calls from the root's last
//! buffer.
//!
//! Limitations: one node, with zero copy; each root times for itself, per
//! communicator; a timed pipeline takes a step and a barrier more than
//! `shm_pipeline`, a timed queue call waits for the readers; the root
//! judges hot by its own buffer only. Memory: a few words per size class
//! ([`super::NodeMemory::bcast_method`], [`super::NodeMemory::bcast_way`],
//! [`super::NodeMemory::bcast_hot_way`]). Cost: the chosen method's, plus the
//! other's loss on a few calls in 64.
//! Seed: none (pcoll's own, from measurements on the development VMs).

use std::time::Instant;

use super::bcast_pipeline::pipeline;
use super::bcast_queue::wait_counted_out;
use super::bcast_queue_zcopy::{as_root_says, name_route, take_route, Route};
use super::bcast_zcopy::zero_copy;
use super::window;
use super::{NodeCall, Team};
use crate::adapt::choice::{Alternative, TimedChoice};
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

/// How a smaller broadcast moves the message ([`timed`], below
/// [`TIMED_FROM`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Queue,
    ZeroCopy,
}

impl std::fmt::Display for Way {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Way::Queue => "queue",
            Way::ZeroCopy => "zero copy",
        })
    }
}

impl Alternative for Way {
    const BOTH: [Way; 2] = [Way::Queue, Way::ZeroCopy];
}

/// Where the root's classes for [`Way`] start: a sixteenth of where it
/// times the pipeline (16 KiB by default, the smallest message the rules
/// give `shm`), so that the classes below [`TIMED_FROM`] are four.
pub fn way_classes_from(timed_from: usize) -> usize {
    (timed_from >> 4).max(1)
}

/// A root's choice of [`Way`] (one for hot messages, one for the others),
/// given where it times the pipeline.
pub fn way_choice(timed_from: usize) -> TimedChoice<Way> {
    TimedChoice::paying_changes(way_classes_from(timed_from))
}

/// The queue in use is timed on one call in this many: a timed call's
/// root waits for its readers, which a queue Bcast's root otherwise does
/// not (it returns once its copies are in), and that wait is what the
/// queue saves a program whose root runs ahead.
pub const QUEUE_TIMED_EVERY: u64 = 8;

/// `shm`: where ranks outnumber cores, the pipeline; without
/// PCOLL_SHM_ADAPT, zero copy; else from the choice's
/// [`crate::adapt::choice::TimedChoice::from`] bytes ([`TIMED_FROM`] by
/// default) zero copy or the pipeline, below it and for messages from
/// the root's last buffer the queue or zero copy, as the root's timings
/// favour. The team must have [`Team::peers`].
pub fn timed(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    let n = data.len();
    if team.settings.oversubscribed {
        // Zero copy needs every reader on a core at once, and the root
        // writes into each in turn (4 ranks on 2 cores, 2 MiB: the
        // pipeline in about 60% of zero copy's time); timings there are
        // too noisy to choose by (docs/measurements.md).
        return pipeline(team, data, root);
    }
    if !team.state.memory.adaptation.enabled {
        return zero_copy(team, data, root);
    }
    // In either role: a root that read into this buffer in the last call
    // has it in its caches too.
    let hot = super::same_buffer_again(&mut team.state.memory.bcast_buffer, data.as_ptr());
    // A reader follows the root's word there, whichever route it names.
    if team.rank != root || n < team.state.memory.bcast_method.from() || hot {
        return timed_way(team, data, root, hot);
    }
    let pick = team.state.memory.bcast_method.pick(n);
    let route = match pick.method {
        Method::ZeroCopy => Route::ZeroCopy,
        Method::Pipeline => Route::Pipeline,
    };
    let (s, route) = name_route(team, data, root, route)?;
    // From the moment all have arrived: their lateness is no method's.
    let start = Instant::now();
    take_route(team, data, root, s, route)?;
    let choice = &mut team.state.memory.bcast_method;
    if let Some(change) = choice.record(pick, n, start.elapsed()) {
        log::debug!("shm Bcast of {} B and more from this root, now: {change}", choice.class_bytes(&pick));
    }
    Ok(())
}

/// The root's way for messages below [`TIMED_FROM`] and for `hot` ones
/// of any size (from its last Bcast's buffer), and for
/// `shm_queue_zcopy`'s hot messages: the queue or zero copy, as its
/// timings of such messages favour (below the classes of its choice, the
/// queue), the queue's copies of hot ones
/// through the window where it suits the call ([`window::suits`]);
/// a reader follows the root's word. The team must have [`Team::peers`].
pub(super) fn timed_way(team: &mut Team<'_>, data: &mut [u8], root: usize, hot: bool) -> Result<(), Mismatch> {
    if team.rank != root {
        return as_root_says(team, data, root, Route::Queue);
    }
    let n = data.len();
    // Below the way's classes, the queue (module doc).
    if n < team.state.memory.bcast_way(hot).from() {
        return as_root_says(team, data, root, queue_route(team, root, n, hot));
    }
    let pick = team.state.memory.bcast_way(hot).pick(n);
    let queue = pick.method == Way::Queue;
    // Timing zero copy costs nothing: it ends in a step all publish.
    let timed = !queue || pick.sampled(QUEUE_TIMED_EVERY);
    if timed && queue {
        // Earlier calls' copies out are not this call's.
        wait_copied_out(team);
    }
    let route = if queue { queue_route(team, root, n, hot) } else { Route::ZeroCopy };
    let start = Instant::now();
    as_root_says(team, data, root, route)?;
    if timed {
        if queue {
            wait_copied_out(team);
        }
        let choice = team.state.memory.bcast_way(hot);
        if let Some(change) = choice.record(pick, n, start.elapsed()) {
            let kind = if hot { "hot " } else { "" };
            log::debug!("shm Bcast of {kind}{} B and more from this root, now: {change}", choice.class_bytes(&pick));
        }
    }
    Ok(())
}

/// The queue's route for a message of `n` bytes from `root`: through the
/// window where the message is `hot` and the window suits the call.
fn queue_route(team: &Team<'_>, root: usize, n: usize, hot: bool) -> Route {
    if hot && window::suits(team, root, n) {
        Route::Window
    } else {
        Route::queue(hot)
    }
}

/// Waits until the readers of every queue and window call so far have
/// their copies.
fn wait_copied_out(team: &Team<'_>) {
    wait_counted_out(team);
    window::wait_read(team);
}

/// [`timed`], as the registry runs it.
pub fn run_timed(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    timed(team, data, root)
}
