//! What the node reductions share. Reduce and Allreduce within a node run
//! [`super::reduce_flat`] (small vectors), [`super::reduce_partition`]
//! (through the segment) or [`super::reduce_zcopy`] (over cross-memory
//! attach); the multi-node compositions reuse the same pieces: the fold,
//! the cut of a vector into chunks and slices of whole elements, and zero
//! copy's published vectors and scratch.
//!
//! Order: every element is combined as `x0 ∘ (x1 ∘ (... ∘ x(p-1)))` (a
//! fold from the last rank, [`fold`]), whatever the algorithm and the
//! chunking, so the three give bitwise the same result on every rank, and
//! it is in rank order (exact for non-commutative operators).

use std::ops::Range;

use super::Team;
use crate::exec::{Buffers, Combiner};
use crate::shm::prefetch;
use crate::shm::team::{Mismatch, Via};

/// Default bytes of a zero-copy sub-chunk ([`super::Sizes::sub_chunk`],
/// per peer in scratch): large enough to amortise a system call, small
/// enough to stay in cache.
pub const SUB_CHUNK: usize = 256 << 10;

/// `out = part(0) ∘ (part(1) ∘ (... ∘ part(p-1)))`.
pub fn fold<'p, C: Combiner + ?Sized>(p: usize, part: impl Fn(usize) -> &'p [u8], out: &mut [u8], combiner: &C) {
    match p {
        0 => {}
        1 => crate::exec::copy::copy(out, part(0)),
        _ => {
            combiner.combine_into(part(p - 2), part(p - 1), out);
            for r in (0..p - 2).rev() {
                combiner.combine(part(r), out);
            }
        }
    }
}

/// [`fold`] into `out` that holds `part(root)` already, in the same order
/// exactly, where the root is the last rank (the others go in front of
/// it, each `part(r) ∘ out`) or the last but one (the last rank's part
/// goes behind, [`Combiner::combine_after`], then the others in front);
/// false, `out` untouched, elsewhere.
pub fn fold_onto_own<'p, C: Combiner + ?Sized>(
    p: usize,
    root: usize,
    part: impl Fn(usize) -> &'p [u8],
    out: &mut [u8],
    combiner: &C,
) -> bool {
    let behind = root + 2 == p;
    if root + 1 != p && !(behind && combiner.combine_after(out, part(p - 1))) {
        return false;
    }
    for r in (0..root).rev() {
        combiner.combine(part(r), out);
    }
    true
}

/// Whether a Reduce root's own part may go into its receive buffer first
/// ([`fold_onto_own`]): it is the last rank or the last but one.
pub fn own_part_first(p: usize, root: usize) -> bool {
    root + 2 >= p
}

/// [`fold`] into an application's buffer of `unit`-byte elements, asking
/// for its lines ahead of the stores as `ahead` says
/// ([`prefetch::ahead_of_stores`]) where the combiner is cheap in pieces
/// (a user-defined operator, called through the host MPI, folds the whole
/// vector at once).
pub fn fold_out<'p, C: Combiner + ?Sized>(
    p: usize,
    part: impl Fn(usize) -> &'p [u8],
    out: &mut [u8],
    unit: usize,
    ahead: prefetch::Ahead,
    combiner: &C,
) {
    if combiner.cheap_in_pieces() {
        prefetch::ahead_of_stores(out, unit, ahead, |range, out| fold(p, |r| &part(r)[range.clone()], out, combiner));
    } else {
        fold(p, part, out, combiner);
    }
}

/// The vector's length (the receive buffer is empty at a Reduce non-root).
pub(crate) fn vector_len(bufs: &Buffers<'_>) -> usize {
    bufs.send.map_or(bufs.recv.len(), <[u8]>::len)
}

/// Bytes of the chunks the vector is cut into: whole elements that fit in
/// a chunk.
pub(crate) fn chunk_len(team: &Team<'_>, unit: usize) -> usize {
    whole_elements(team.seg.geo.chunk, unit)
}

/// The most bytes of whole `unit`-byte elements in `bytes` (at least one).
pub(super) fn whole_elements(bytes: usize, unit: usize) -> usize {
    (bytes / unit).max(1) * unit
}

/// Elements `lo..hi` of slice `i` when `count` elements are cut into `p`.
pub(crate) fn slice(i: usize, p: usize, count: usize) -> (usize, usize) {
    (i * count / p, (i + 1) * count / p)
}

/// Bytes of slice `i` when `len` bytes of `unit`-byte elements are cut
/// into `p` (whole elements, as [`slice`] cuts them).
pub(crate) fn slice_bytes(i: usize, p: usize, len: usize, unit: usize) -> Range<usize> {
    let (lo, hi) = slice(i, p, len / unit);
    lo * unit..hi * unit
}

/// Published words of the zero-copy reduction: where a rank's vectors
/// are, its vote for zero copy, and in an agreeing call rank 0's word on
/// the run of calls it opens ([`publish_vectors_voting`]).
pub(crate) const INPUT: usize = 0;
pub(crate) const OUTPUT: usize = 1;
const VOTE: usize = 2;
const FLAT_RUN: usize = 3;

/// Zero copy's first step: publish where this rank's input and output
/// vectors are (words [`INPUT`] and [`OUTPUT`]) and wait until every rank
/// has. Returns the step, which stays open while peers read those words.
pub(crate) fn publish_vectors(team: &mut Team<'_>, bufs: &mut Buffers<'_>) -> Result<u64, Mismatch> {
    let ballot = Ballot { zero_copy: true, ..Ballot::default() };
    publish_vectors_voting(team, bufs, ballot, None).map(|vote| vote.step)
}

/// A rank's votes in zero copy's first step: each holds only if every
/// rank votes for it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ballot {
    /// For zero copy.
    pub zero_copy: bool,
    /// For the host's way for hot calls back to back.
    pub back_to_back: bool,
    /// For spreading the steps of the run this call opens through the
    /// chunk areas' spans ([`Team::spread`]): this rank's calls come back
    /// to back, or it reduces from its last input buffer again.
    pub spread: bool,
}

impl Ballot {
    fn word(self) -> u64 {
        u64::from(self.zero_copy) | u64::from(self.back_to_back) << 1 | u64::from(self.spread) << 2
    }

    fn of(word: u64) -> Ballot {
        Ballot { zero_copy: word & 1 == 1, back_to_back: word & 2 == 2, spread: word & 4 == 4 }
    }
}

/// What [`publish_vectors_voting`] tells every rank alike.
pub(crate) struct Vote {
    /// The published step, open while peers read its words.
    pub step: u64,
    /// What every rank voted for.
    pub all: Ballot,
    /// In an agreeing call: rank 0 said the calls up to the next one go
    /// flat, with no vote.
    pub flat_run: bool,
}

/// [`publish_vectors`] with this rank's `ballot`; also returns what every
/// rank voted for. A rank that votes for nothing knows the answers and
/// waits for no one: where every rank does, the vote costs no
/// synchronisation. In an agreeing call (`flat_run` given) rank 0 also
/// publishes its `flat_run`, and every rank waits for rank 0's step to
/// learn it (the others' `flat_run` counts for nothing).
pub(crate) fn publish_vectors_voting(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    ballot: Ballot,
    flat_run: Option<bool>,
) -> Result<Vote, Mismatch> {
    let s = team.next_step();
    team.writable(s);
    team.set_word(s, INPUT, bufs.send.unwrap_or(&*bufs.recv).as_ptr() as u64);
    team.set_word(s, OUTPUT, bufs.recv.as_mut_ptr() as u64);
    team.set_word(s, VOTE, ballot.word());
    if let Some(flat_run) = flat_run.filter(|_| team.rank == 0) {
        team.set_word(s, FLAT_RUN, u64::from(flat_run));
    }
    team.publish(s);
    let all = if ballot.word() != 0 {
        team.wait_all_ready(s);
        // Every rank checks every head before any touches another's
        // vector: all see the same heads, so all go on or all stop.
        team.check_others(s, Via::Area)?;
        (0..team.size).fold(ballot.word(), |all, r| all & team.word(r, s, VOTE))
    } else {
        if flat_run.is_some() && team.rank != 0 {
            team.wait_ready(0, s);
            team.check(0, s, Via::Area, team.mine())?;
        }
        0
    };
    let flat_run = flat_run.is_some() && team.word(0, s, FLAT_RUN) == 1;
    Ok(Vote { step: s, all: Ballot::of(all), flat_run })
}

/// Bytes `at..at + len` of this rank's input, for a fold whose output is
/// its receive buffer: the send buffer itself, or with MPI_IN_PLACE (the
/// input is the output) a copy in `own`.
pub(crate) fn own_part<'a>(send: Option<&'a [u8]>, recv: &[u8], own: &'a mut [u8], at: usize, len: usize) -> &'a [u8] {
    match send {
        Some(send) => &send[at..at + len],
        None => {
            crate::exec::copy::copy(&mut own[..len], &recv[at..at + len]);
            &own[..len]
        }
    }
}

/// Scratch bytes [`super::reduce_zcopy::zero_copy`] needs for `p` ranks
/// and sub-chunks of `sub_chunk` bytes.
pub fn zero_copy_scratch(p: usize, sub_chunk: usize) -> usize {
    (p + 2) * sub_chunk
}
