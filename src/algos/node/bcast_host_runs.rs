//! Bcast within a node by `shm`'s ways ([`super::bcast_timed`]) or by
//! the queue ([`super::bcast_queue`]), but runs of calls that come back
//! to back go by the binomial tree over the host MPI (`shm_binomial`,
//! `shm_queue_binomial`; forced, or by a PCOLL_TUNE rule: the rules gave
//! them Intel MPI's calls at 2 ranks of 8-256 KiB until the window of
//! `shm_queue_zcopy` and `shm` beat them). Back to back, a tree over an eager point-to-point pipelines the calls: the
//! root returns once its message is sent and starts the next call, which
//! the node layer's steps do not let it (EPYC VM, Intel MPI, 2 ranks,
//! rotating roots on hot buffers, 32 KiB: binomial 1.7 us, `shm` 2.6,
//! Intel's stock 2.3); between barriers and on cold buffers the node
//! layer wins (32 KiB between barriers: 4.1 against 15.5 by binomial;
//! docs/measurements.md).
//!
//! Calls come in runs per size class ([`super::host_runs`]). In a run's
//! first call the root says in a step of its own whether the run goes to
//! the host: where its buffer is the one of its last Bcast (hot), it has
//! a core of its own and its calls came back to back (its last
//! [`super::host_runs::BACK_TO_BACK_STREAK`] started within
//! PCOLL_SHM_BACK_TO_BACK of the end of the one before, in any role).
//! The root alone decides: between barriers its gaps were 410 ns or more
//! in 95% of calls, back to back 100-250 ns in 75%.
//!
//! Trace, p = 2, 32 KiB on one buffer per rank, roots alternating, back
//! to back: calls 0-15 go by the node way (call 0's root has no last
//! buffer and no streak), call 16's root says "host" and calls 16-31 go
//! by the host's binomial tree, with no step in the segment; and so on
//! while the calls stay back to back.
//!
//! Limitations: one node (`shm_binomial`: with zero copy); the root
//! judges the calls by its own pace and buffer; a reader of another call
//! (an erroneous program) cannot follow a root's call of these
//! algorithms, and a root in a run sends to readers that may not receive.
//! Memory: the runs' counts and the pace, as well as the node way's.
//! Cost: the node way's, plus a step in a run's first call; in a run, the
//! host's binomial tree.
//! Seed: none (pcoll's own, from measurements under Intel MPI).

use super::bcast_queue::configured_queue;
use super::bcast_timed::timed;
use super::host_runs::{BACK_TO_BACK_STREAK, RUN};
use super::{HostWay, NodeCall, Team};
use crate::adapt::choice::size_class;
use crate::exec::{Buffers, Combiner};
use crate::shm::team::{Mismatch, Via};

/// Where the size classes of the runs start: the smallest message the
/// rules give these algorithms.
pub const CLASSES_FROM: usize = 8 << 10;

/// A Bcast within the node: the way of the calls that stay there.
pub type NodeWay = fn(&mut Team<'_>, &mut [u8], usize) -> Result<(), Mismatch>;

/// The root's word in a run's first call: 1 where the run goes to the host.
const BY_HOST: usize = 0;

/// `node_way`'s Bcast, with runs of calls back to back handed to `host`.
pub fn node_or_host(
    team: &mut Team<'_>,
    data: &mut [u8],
    root: usize,
    host: Option<&mut dyn HostWay>,
    node_way: NodeWay,
) -> Result<(), Mismatch> {
    let Some(host) = host else { return node_way(team, data, root) };
    let within = host.back_to_back_within();
    let memory = &mut team.state.memory;
    let class = size_class(CLASSES_FROM, data.len());
    // Only the calls that lead up to a run's first call are watched: two
    // clock reads on every call cost a Bcast between barriers 0.06-0.1 us
    // (16-64 KiB, 2 ranks; 1.2-5 us a call).
    let position = memory.bcast_runs.position(class);
    let leads_up = position >= RUN - BACK_TO_BACK_STREAK;
    match within {
        Some(_) if position == RUN - BACK_TO_BACK_STREAK => memory.bcast_pace.restart(),
        Some(within) if leads_up || position == 0 => memory.bcast_pace.starts(within),
        _ => {}
    }
    let opens = memory.bcast_runs.opens(class);
    let by_host = if opens {
        let hot = memory.bcast_buffer == data.as_ptr() as usize;
        let paced = within.is_none() || memory.bcast_pace.back_to_back();
        let wants = team.rank == root && hot && paced && !team.settings.oversubscribed;
        let by_host = root_says(team, root, wants)?;
        if by_host != team.state.memory.bcast_runs.by_host(class) {
            let way = if by_host { "the host's binomial tree (back to back)" } else { "the node" };
            log::debug!("Bcast of {} B: this run goes by {way}", data.len());
        }
        team.state.memory.bcast_runs.set_by_host(class, by_host);
        by_host
    } else {
        memory.bcast_runs.by_host(class)
    };
    let result = if by_host {
        // The host's way brings its own scratch where it needs any.
        let mut bufs = Buffers { send: None, recv: data, scratch: &mut [] };
        team.state.memory.bcast_runs.run(host, &mut bufs);
        Ok(())
    } else {
        node_way(team, data, root)
    };
    // Whichever way ran (`shm`'s adapts by it, or not at all).
    team.state.memory.bcast_buffer = data.as_ptr() as usize;
    if within.is_some() && leads_up {
        team.state.memory.bcast_pace.ends();
    }
    result
}

/// A step in which the root says `by_host` (read on the root only); every
/// rank learns it. A reader of another call (an erroneous program) finds
/// the root's head wrong.
fn root_says(team: &mut Team<'_>, root: usize, by_host: bool) -> Result<bool, Mismatch> {
    let s = team.next_step();
    if team.rank == root {
        team.writable(s);
        team.set_word(s, BY_HOST, u64::from(by_host));
        team.publish(s);
    } else {
        team.wait_ready(root, s);
        team.check(root, s, Via::Area, team.mine())?;
    }
    let by_host = team.word(root, s, BY_HOST) == 1;
    team.finish(s);
    Ok(by_host)
}

/// [`node_or_host`] with `shm`'s ways, as the registry runs it.
pub fn run_shm(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let NodeCall::Bcast { data, root, host } = call else { super::mismatch() };
    node_or_host(team, data, root, host, timed)
}

/// [`node_or_host`] with the queue, as the registry runs it.
pub fn run_queue(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let NodeCall::Bcast { data, root, host } = call else { super::mismatch() };
    node_or_host(team, data, root, host, configured_queue)
}
