//! Reduce and Allreduce within a node, flat or by zero copy as the
//! buffers are cold or hot (`shm_flat_zcopy`; vectors from 32 KiB at 2
//! ranks). On vectors that come cold from memory the flat copy-in wins,
//! on vectors still in the caches, as loops of calls on the same buffers
//! meet them, zero copy does (2 ranks, 128 KiB, Open MPI: cold 31 against
//! 35 us; a loop of calls on the same buffers 14 against 20 for a Reduce,
//! 12 against 20 for an Allreduce; docs/measurements.md). Every rank
//! votes in zero copy's first step, in which it publishes its vectors
//! anyway: for zero copy if it reduces from its last reduction's input
//! buffer again, has peer memory access and a core of its own; zero copy
//! runs if every rank voted for it, else the flat copy-in.
//!
//! Trace, Allreduce p = 2, one buffer pair every call: the first call
//! goes flat (no rank has a last buffer), the next ones by zero copy;
//! with new buffers every call, or one rank's new, all flat.
//!
//! Order: both ways fold in [`super::reduction`]'s order, so the result
//! is bitwise the same either way.
//!
//! Limitations: one node; a rank judges its buffer by its address only
//! (a buffer reused after the caches lost it counts as hot); a flat run
//! follows a change of rank 0's timings only at its end. Memory: the two
//! ways', one word per rank for the last input, and a count per size
//! class. Cost: the chosen way's ([`super::reduce_flat`],
//! [`super::reduce_zcopy`]); the flat way pays the vote's
//! synchronisation on top, except within a flat run.
//!
//! Where a machine's cross-memory attach is slow, hot buffers do not
//! make zero copy pay: on an EPYC VM (Firecracker, nested paging) a
//! `process_vm_readv` costs 1.1 us before its first byte and 3.1 us for
//! 32 KiB that memcpy moves in 0.6, and a hot 8 KiB Reduce took 2.5 us
//! by zero copy against 1.2 flat (docs/measurements.md). So, with
//! PCOLL_SHM_ADAPT, rank 0 also times the two ways per size class
//! ([`crate::adapt::choice::TimedChoice::paying_changes`]) and votes for
//! zero copy only where its timings favour it. One rank for every call,
//! whatever the root: with each Reduce's root deciding, roots rotating at
//! 2 ranks, the two ranks came to prefer different ways and the calls
//! alternated, each paying for the change (8 KiB: 2.9 us, against 1.9
//! flat and 2.9 by zero copy alone).
//!
//! Where rank 0's timings favour flat, the vote's step alone cost a hot
//! call a fifth of its time against `shm_flat` (Zen 3 VM, 2 ranks, 8 KiB
//! Allreduce: 2.2-2.8 us against 1.8-2.3). So calls come in runs of
//! [`super::host_runs::RUN`] per size class, alike on every rank (every
//! rank sees the same sizes): the run's first call agrees, rank 0 saying
//! in the vote's step whether the run goes flat (flat is in use in its
//! timings); if so the run's other calls go flat with no vote, rank 0
//! timing nothing. A class whose timings explore zero copy, or favour
//! it, votes on every call of the run, as above.
//!
//! Runs whose calls come back to back or reduce from their last input
//! buffers again on every rank (a third bit of the opening call's vote,
//! each rank's [`super::host_runs::Pace`] or buffer) spread their flat
//! steps through the chunk areas ([`Team::spread`]): on hot buffers, back
//! to back or between barriers, a short step's place otherwise comes
//! back while its reader still holds the lines (2 ranks, 32 KiB
//! Allreduce, cores sharing a cache: back to back 2.7-3.0 us against
//! 4.7-4.9, between barriers 2.5-2.6 against 4.4-5.3;
//! docs/measurements.md); cold synchronised calls, which lost a tenth
//! spread, keep the places.
//!
//! `shm_flat_ring` and `shm_flat_binomial` hand hot calls to a schedule
//! over the host MPI instead of zero copy ([`HostWay`]): the ring, for
//! every run of calls all ranks vote hot for; the binomial tree, for a
//! Reduce, only where every rank's calls also come back to back
//! ([`super::host_runs::BACK_TO_BACK_NS`]), which a tree over an eager
//! point-to-point pipelines and the node layer does not
//! (docs/node-layer.md).
//!
//! Seed: 003 (the zero-copy partitioning); the choice by the buffers is
//! pcoll's own.

use std::fmt;
use std::time::{Duration, Instant};

use super::host_runs::HostRuns;
use super::reduce_flat::flat;
use super::reduce_zcopy::combine_across;
use super::reduction::{publish_vectors_voting, Ballot, Vote};
use super::{HostWay, NodeCall, Team};
use crate::adapt::choice::{size_class, Alternative, CLASSES};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::{Mismatch, Spread};

/// The way a call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Flat,
    ZeroCopy,
}

impl Alternative for Way {
    /// Flat first: a class's warm-up call, which no rank times, is one
    /// whose buffers cannot yet be hot.
    const BOTH: [Way; 2] = [Way::Flat, Way::ZeroCopy];
}

impl fmt::Display for Way {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if *self == Way::Flat { "flat" } else { "zero copy" })
    }
}

/// Message bytes from which the two ways are timed: the built-in rules'
/// smallest zero-copy reduction (8 KiB at 2 ranks).
pub const TIMED_FROM: usize = 8 << 10;

/// The runs of calls ([`super::host_runs`]), the same on every rank: per
/// size class, also whether its current run goes flat.
#[derive(Clone, Copy, Debug, Default)]
pub struct Runs {
    /// The runs' counts, and which go to the host's schedule (all ranks
    /// voted hot in their first call, where the algorithm has one).
    pub host: HostRuns,
    flat: [bool; CLASSES],
    /// Whether the current run spreads its flat steps through the chunk
    /// areas' spans ([`Team::spread`]): every rank's calls came back to
    /// back, or reduced from its last input buffer again, when it opened.
    spread: [bool; CLASSES],
    /// Calls that went flat within a flat run, with no vote.
    pub flat_without_vote: u64,
    /// Calls that went flat with their steps spread.
    pub spread_calls: u64,
}

impl Runs {
    /// Runs a call by the host's schedule, the algorithm's hot way.
    fn by_host(&mut self, host: &mut dyn HostWay, bufs: &mut Buffers<'_>) -> Way {
        self.host.run(host, bufs);
        Way::ZeroCopy
    }
}

/// The flat way, its steps spread where the run of `class` does so (to
/// the call's end: [`Team::spread`]).
fn flat_in_run<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    class: usize,
    combiner: &C,
) -> Result<bool, Mismatch> {
    let runs = &mut team.state.memory.reduction_runs;
    // Only where each of two writers reads the other's lines does the
    // narrower span pay ([`Spread::Places`]).
    team.spread = match (runs.spread[class], root) {
        (false, _) => Spread::Off,
        (true, None) => Spread::Places,
        (true, Some(_)) => Spread::Wide,
    };
    runs.spread_calls += u64::from(team.spread != Spread::Off);
    flat(team, bufs, unit, root, combiner)
}

/// Zero copy where every rank reduces from its last input buffer again
/// (and can, and, adapting, the deciding rank's timings favour zero
/// copy), else flat; returns the way taken. With `host` (`shm_flat_ring`)
/// the hot way is the host's schedule instead of zero copy, and a call
/// that all ranks voted hot for sends the rest of its run there with no
/// vote: either way is right for any buffers, so only the runs' starts
/// need to agree, and the host's schedule synchronises its calls itself.
/// A host way for calls back to back (`shm_flat_binomial`) takes a run
/// only where every rank's call is hot and came back to back; rank 0's
/// timings, which compare flat and zero copy, have no say in it.
pub fn flat_or_zero_copy<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    host: Option<&mut dyn HostWay>,
    combiner: &C,
) -> Result<Way, Mismatch> {
    let within = host.as_deref().and_then(|host| host.back_to_back_within());
    let len = bufs.send.unwrap_or(&*bufs.recv).len();
    let class = size_class(TIMED_FROM, len);
    // The pace is watched on every call where a host way needs it, else
    // only on the calls up to a run's opening, which votes on spreading
    // the run (two clock readings a call: 50 ns on the Zen 3 VM).
    let memory = &mut team.state.memory;
    let watched = within.is_some() || memory.reduction_runs.host.leads_to_opening(class);
    if watched {
        let window = within.unwrap_or(Duration::from_nanos(team.settings.back_to_back_ns));
        memory.reduction_pace.starts(window);
    }
    let way = choose_and_run(team, bufs, unit, root, host, within, combiner);
    if watched {
        team.state.memory.reduction_pace.ends();
    }
    way
}

/// [`flat_or_zero_copy`]; `within`, where the host way takes only calls
/// that start that soon after this rank's last one ended.
fn choose_and_run<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    mut host: Option<&mut dyn HostWay>,
    within: Option<Duration>,
    combiner: &C,
) -> Result<Way, Mismatch> {
    let input = bufs.send.unwrap_or(&*bufs.recv);
    let len = input.len();
    let class = size_class(TIMED_FROM, len);
    let hot = super::same_buffer_again(&mut team.state.memory.reduction_input, input.as_ptr());
    let memory = &mut team.state.memory;
    let runs = &mut memory.reduction_runs;
    let opens = runs.host.opens(class);
    if !opens && runs.flat[class] {
        runs.flat_without_vote += 1;
        flat_in_run(team, bufs, unit, root, class, combiner)?;
        return Ok(Way::Flat);
    }
    if let Some(host) = host.as_deref_mut().filter(|_| !opens && runs.host.by_host(class)) {
        return Ok(runs.by_host(host, bufs));
    }
    let can = hot && !team.settings.oversubscribed;
    let back_to_back = within.is_some() && can && memory.reduction_pace.back_to_back();
    let decides = team.rank == 0 && memory.adaptation.enabled;
    let pick = decides.then(|| memory.reduction_way.pick(len));
    let favoured = pick.is_none_or(|pick| pick.method == Way::ZeroCopy);
    let hot_way = team.peers.is_some() || (host.is_some() && within.is_none());
    let vote = can && favoured && hot_way;
    // Rank 0's word on the run: flat where flat is its class's method in
    // use (not while it tries zero copy), unless it asks for the host.
    let flat_run = opens.then(|| !back_to_back && pick.is_some_and(|pick| pick.method == Way::Flat && pick.in_use()));
    let spread = opens && !team.settings.oversubscribed && (hot || memory.reduction_pace.back_to_back());
    let ballot = Ballot { zero_copy: vote, back_to_back, spread };
    let Vote { step: s, all, flat_run } = publish_vectors_voting(team, bufs, ballot, flat_run)?;
    let (zero_copy, back_to_back) = (all.zero_copy, all.back_to_back);
    let runs = &mut team.state.memory.reduction_runs;
    if opens {
        runs.flat[class] = flat_run;
        runs.spread[class] = all.spread;
    }
    // Every rank knows the vote's outcome: all of them switch together.
    let by_host = host.is_some() && if within.is_some() { back_to_back } else { zero_copy };
    if opens || by_host {
        if by_host && !runs.host.by_host(class) {
            log::debug!("{len} B on hot vectors everywhere, this run goes to the host's schedule");
        }
        runs.host.set_by_host(class, by_host);
    }
    // From the moment all have voted: their lateness is no way's.
    let start = Instant::now();
    let mut tried_stores = false;
    let way = if let Some(host) = host.filter(|_| by_host) {
        team.finish(s);
        team.state.memory.reduction_runs.by_host(host, bufs)
    } else if zero_copy {
        combine_across(team, s, bufs, unit, root, combiner)?;
        Way::ZeroCopy
    } else {
        team.finish(s);
        tried_stores = flat_in_run(team, bufs, unit, root, class, combiner)?;
        Way::Flat
    };
    // A call that went the other way (a peer's buffer was new), or to a
    // host way the timings did not choose, times nothing of the picked way's;
    // nor does a flat call that tried other stores.
    let timed = !(by_host && within.is_some() || tried_stores);
    if let Some(pick) = pick.filter(|pick| pick.method == way && timed) {
        let choice = &mut team.state.memory.reduction_way;
        if let Some(change) = choice.record(pick, len, start.elapsed()) {
            log::debug!("shm_flat_zcopy of {} B and more on hot buffers, now: {change}", choice.class_bytes(&pick));
        }
    }
    Ok(way)
}

/// [`flat_or_zero_copy`], as the registry runs it (`shm_flat_zcopy`, and
/// `shm_flat_ring`, whose calls come with the host's ring).
pub fn run(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let NodeCall::Reduce { mut bufs, unit, root, host } = call else { super::mismatch() };
    flat_or_zero_copy(team, &mut bufs, unit, root, host, combiner).map(drop)
}
