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
//! (a buffer reused after the caches lost it counts as hot). Memory: the
//! two ways', and one word per rank for the last input. Cost: the chosen
//! way's ([`super::reduce_flat`], [`super::reduce_zcopy`]); the flat way
//! pays the vote's synchronisation on top.
//! Seed: 003 (the zero-copy partitioning); the choice by the buffers is
//! pcoll's own.

use super::reduce_flat::flat;
use super::reduce_zcopy::combine_across;
use super::reduction::publish_vectors_voting;
use super::{NodeCall, Team};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

/// The way a call went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Flat,
    ZeroCopy,
}

/// Zero copy where every rank reduces from its last input buffer again
/// (and can), else flat; returns the way taken.
pub fn flat_or_zero_copy<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) -> Result<Way, Mismatch> {
    let input = bufs.send.unwrap_or(&*bufs.recv).as_ptr();
    let hot = super::same_buffer_again(&mut team.state.memory.reduction_input, input);
    let vote = hot && team.peers.is_some() && !team.settings.oversubscribed;
    let (s, zero_copy) = publish_vectors_voting(team, bufs, vote)?;
    if zero_copy {
        combine_across(team, s, bufs, unit, root, combiner)?;
        return Ok(Way::ZeroCopy);
    }
    team.finish(s);
    flat(team, bufs, unit, root, combiner)?;
    Ok(Way::Flat)
}

/// [`flat_or_zero_copy`], as the registry runs it.
pub fn run(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let (mut bufs, unit, root) = call.into_reduction();
    flat_or_zero_copy(team, &mut bufs, unit, root, combiner).map(drop)
}
