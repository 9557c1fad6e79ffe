//! Bcast within a node through seed 002's queue, or by zero copy where
//! the root broadcasts from the buffer of its last Bcast (`shm_queue_zcopy`;
//! messages of 8-24 KiB at 2 ranks; with PCOLL_SHM_ADAPT, zero copy only
//! from 16 KiB, [`super::bcast_timed`]). On buffers that come cold from
//! memory the queue wins or ties there (2 ranks, 16 KiB, cold: 3.75-3.82
//! against 3.85-4.23 us on a Xeon VM; 4.3 against 5.3-6.4 for `shm`'s
//! timed choice on a Zen 3 VM). On buffers still in the caches zero copy
//! won on the Xeon VM (32 KiB, a loop of barrier-separated calls on one
//! buffer: 2.7-3.4 against 4.4-5.6) and the queue on the Zen 3 VM, whose
//! cross-memory copies run at a fifth of memcpy's speed (16 KiB between
//! barriers: 1.25 against 3.2-3.5; docs/measurements.md). So, with
//! PCOLL_SHM_ADAPT, the root times the two ways for such hot messages
//! ([`super::bcast_timed`]), the queue's copies going through the window
//! all roots share where the root did not write the last window call
//! ([`super::window`]; 2 ranks, roots alternating back to back, 16
//! / 20 KiB: 0.94-1.11 / 1.09-1.29 against 1.12-1.21 / 1.33-1.39 us
//! through the queue); without, zero copy. The root names its way in the
//! first step, in which it publishes its head anyway; a reader follows
//! it.
//!
//! Trace, p = 2, root 0, 20 KiB, one buffer every call: the first call
//! goes through the queue (the root has no last buffer), the next ones
//! the way the root's timings favour (without PCOLL_SHM_ADAPT, zero
//! copy); with a new buffer every call, all through the queue.
//!
//! Limitations: one node, with zero copy; the root judges from its own
//! buffer only (a reader's cold buffer costs zero copy more than the
//! queue); where ranks outnumber cores, always the queue (zero copy
//! needs every rank on a core at once). Memory: the queue's and the
//! window's, and one word per rank for the last buffer, the timings of
//! hot messages. Cost: the chosen way's, [`super::bcast_queue`],
//! [`super::window`] or [`super::bcast_zcopy`].
//! Seed: 002 (the queue); the choice by the buffer and the window are
//! pcoll's own.

use super::bcast_pipeline::pipeline;
use super::bcast_queue::through_queue;
use super::bcast_timed::timed_way;
use super::bcast_zcopy::{copy_across, offer, METHOD};
use super::window::through_window;
use super::{NodeCall, Team};
use crate::exec::Combiner;
use crate::shm::team::{Mismatch, Via};

/// How a Bcast that the root chooses for everyone moves the message: the
/// root's word in the first step (the `shm` Bcast's ways; the queue
/// through its first slots, or through all of them for a message from
/// the root's last buffer, [`Route::queue`]; the window,
/// [`super::window`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    Queue,
    HotQueue,
    ZeroCopy,
    Pipeline,
    Window,
}

impl Route {
    const ALL: [Route; 5] = [Route::Queue, Route::ZeroCopy, Route::Pipeline, Route::HotQueue, Route::Window];

    /// The queue for a message from the root's last buffer (`hot`) or
    /// another ([`crate::shm::segment::Geometry::queue_sets`]).
    pub(super) fn queue(hot: bool) -> Route {
        if hot {
            Route::HotQueue
        } else {
            Route::Queue
        }
    }

    /// A way through the segment only, which needs no buffer addresses
    /// and no meeting of all ranks after the first step.
    fn is_queue(self) -> bool {
        matches!(self, Route::Queue | Route::HotQueue | Route::Window)
    }

    fn word(self) -> u64 {
        Route::ALL.iter().position(|&r| r == self).unwrap_or(0) as u64
    }

    fn of_word(word: u64) -> Route {
        Route::ALL.get(word as usize).copied().unwrap_or(Route::Queue)
    }
}

/// The fragment of an `m`-byte message from the root's last buffer
/// through the queue, of `slot`-byte slots: two slots for messages that
/// fill four such fragments, up to 512 KiB, half as many notifications
/// as the model's page, whose wait the root's copy of a hot fragment no
/// longer hides (2 ranks, back to back, 512 KiB: 20.2-24.3 against
/// 22.5-25.2 us near, 37-46 against 43-53 cores apart); a slot below,
/// where fewer fragments lose the overlap of the root's copy in with the
/// readers' copies out (8 KiB in one fragment: 1.0-1.4 against 0.8-0.9
/// us), and above, where two-slot fragments ran faster or twice as slow
/// from job to job cores apart (2 MiB: 170-174 or 320-498 against 197-244
/// us; docs/measurements.md).
fn hot_fragment(m: usize, slot: usize) -> usize {
    if (8 * slot..=128 * slot).contains(&m) {
        2 * slot
    } else {
        slot
    }
}

/// The queue, or where the root's buffer is its last one, zero copy or
/// (with PCOLL_SHM_ADAPT) the way the root's timings of such messages
/// favour (the queue's copies through the window where it suits).
pub fn queue_or_zero_copy(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    let hot = super::same_buffer_again(&mut team.state.memory.bcast_buffer, data.as_ptr());
    let zero_copy = hot && team.peers.is_some() && !team.settings.oversubscribed;
    if zero_copy && team.state.memory.adaptation.enabled {
        // A reader there follows the root's word as below.
        return timed_way(team, data, root, true);
    }
    as_root_says(team, data, root, if zero_copy { Route::ZeroCopy } else { Route::queue(hot) })
}

/// The way the root says in the first step (`route`, read on the root
/// only). The team must have [`Team::peers`] where the root may say zero
/// copy.
pub(super) fn as_root_says(team: &mut Team<'_>, data: &mut [u8], root: usize, route: Route) -> Result<(), Mismatch> {
    let (s, route) = name_route(team, data, root, route)?;
    take_route(team, data, root, s, route)
}

/// The first step of [`as_root_says`]: the root publishes its head and
/// `route` (read on the root only), a reader checks the head and reads
/// the route; for zero copy and the pipeline every rank also publishes
/// its buffer and waits until all have (so that a root's timing starts
/// when all have arrived). Returns the step and the route.
pub(super) fn name_route(
    team: &mut Team<'_>,
    data: &mut [u8],
    root: usize,
    route: Route,
) -> Result<(u64, Route), Mismatch> {
    let s = team.next_step();
    let route = if team.rank == root {
        offer(team, data, s, Some(route.word()));
        route
    } else {
        // The root's head before its word: a reader of another call (an
        // erroneous program) takes no part.
        team.wait_ready(root, s);
        team.check(root, s, Via::Area, team.mine())?;
        let route = Route::of_word(team.word(root, s, METHOD));
        if !route.is_queue() {
            offer(team, data, s, None);
        }
        route
    };
    if !route.is_queue() {
        team.wait_all_ready(s);
    }
    Ok((s, route))
}

/// The rest of [`as_root_says`] after its first step `s`. A pipeline
/// ends in a barrier, so that the root's time includes the readers' last
/// copy-out.
pub(super) fn take_route(
    team: &mut Team<'_>,
    data: &mut [u8],
    root: usize,
    s: u64,
    route: Route,
) -> Result<(), Mismatch> {
    match route {
        Route::ZeroCopy => copy_across(team, data, root, s),
        Route::Queue | Route::HotQueue => {
            team.finish(s);
            let queue = team.state.memory.queue;
            let hot = route == Route::HotQueue;
            let fragment = if hot { hot_fragment(data.len(), team.seg.geo.slot_bytes) } else { queue.fragment };
            through_queue(team, data, root, fragment, queue.tree, hot);
            Ok(())
        }
        Route::Window => {
            team.finish(s);
            through_window(team, data, root, s);
            Ok(())
        }
        Route::Pipeline => {
            team.finish(s);
            pipeline(team, data, root)?;
            team.barrier();
            Ok(())
        }
    }
}

/// [`queue_or_zero_copy`], as the registry runs it.
pub fn run(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    queue_or_zero_copy(team, data, root)
}
