//! Reduce and Allreduce within a node, through the shared segment.
//!
//! - **flat** (small vectors, latency): each rank copies its vector (in
//!   chunks of the segment's chunk area) into its area and publishes; then
//!   every rank (Allreduce) or the root (Reduce) combines all areas. One
//!   synchronisation per chunk. Cost per chunk: `c + (p-1) t_flag + p c_γ`.
//!   An Allreduce moves wider chunks (PCOLL_SHM_ALLREDUCE_CHUNK) and picks
//!   its copy-in stores by timing its calls ([`stores`]); a Reduce cuts
//!   its vector into about four chunks, so that the root combines one
//!   while the others copy in the next ([`reduce_chunk`]), and (here
//!   and in **partition**) copies in with the stores its root picks
//!   ([`stores::announce`], one more synchronisation per call).
//! - **partition** (seed 003's data partitioning, copy-in): every rank
//!   copies into its area the slices the others combine (all but its own
//!   slice `i`, which it reads from its send buffer), then combines slice
//!   `i` of every input straight into its receive buffer and streams the
//!   result slice into its other area; everyone copies the others' result
//!   slices out (Reduce: the root). Each rank copies `(p-1)/p` of the
//!   vector in, combines `1/p` and copies `(p-1)/p` out. Two
//!   synchronisations per chunk. (Copying the whole chunk in and folding
//!   into the area with ordinary stores, as first written, took 1.12
//!   times as long as `flat` with 2 ranks at 2 MiB, and 2.1-2.3 times
//!   where the virtual CPUs are far apart; now 1.04-1.05 in the first.)
//! - **zero copy** (partitioned over cross-memory attach, no copy-in): rank
//!   `i` reads slice `i` of its peers' input buffers straight from their
//!   memory, combines, and writes the result slice straight into every
//!   peer's receive buffer (Reduce: the root's). Two synchronisations per
//!   call; each rank moves `2 (p-1)/p n` bytes and combines `n/p`.
//!
//! Trace, flat Allreduce, p = 2: both copy into their area, publish, wait
//! for the other, compute x0 ∘ x1 from the two areas.
//!
//! Order: every element is combined as `x0 ∘ (x1 ∘ (... ∘ x(p-1)))` (a
//! fold from the last rank), whatever the algorithm and the chunking, so
//! the three give bitwise the same result on every rank, and it is in rank
//! order (exact for non-commutative operators).
//!
//! Limitations: one node. Memory: the segment's areas; zero copy uses
//! `p` sub-chunks of scratch. Seed: 003 (data-partitioned reduction in
//! shared memory, DPML's intra-node stage).

use std::ops::Range;

use super::{NodeCall, Team};
use crate::adapt::stores::{self, Stopwatch, Stores};
use crate::exec::{Buffers, Combiner};
use crate::shm::prefetch;

/// Default bytes of a zero-copy sub-chunk ([`super::Sizes::sub_chunk`],
/// per peer in scratch): large enough to amortise a system call, small
/// enough to stay in cache.
pub const SUB_CHUNK: usize = 256 << 10;

/// `out = part(0) ∘ (part(1) ∘ (... ∘ part(p-1)))`.
pub fn fold<'p, C: Combiner + ?Sized>(p: usize, part: impl Fn(usize) -> &'p [u8], out: &mut [u8], combiner: &C) {
    match p {
        0 => {}
        1 => out.copy_from_slice(part(0)),
        _ => {
            combiner.combine_into(part(p - 2), part(p - 1), out);
            for r in (0..p - 2).rev() {
                combiner.combine(part(r), out);
            }
        }
    }
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

/// Chunks of a flat Reduce: the root combines one chunk while the others
/// copy in the next, so the call takes about one chunk's copy-in plus the
/// root's combining. About [`REDUCE_DEPTH`] chunks per vector shorten that
/// first copy-in; more cost a synchronisation each (2 ranks, Open MPI and
/// MPICH hosts: 128 KiB 18.4-19.1 us in 32 KiB chunks against 20.5-21.1 in
/// one of 64 KiB and 21.6 in 16 KiB ones; 2 MiB unchanged in 64 KiB
/// chunks). At least [`super::Sizes::reduce_chunk_floor`] bytes, at most
/// the segment's chunk; the segment's chunk where ranks outnumber cores,
/// which cannot overlap their copies with the root's combining.
fn reduce_chunk(team: &Team<'_>, n: usize, unit: usize) -> usize {
    if team.settings.oversubscribed {
        return chunk_len(team, unit);
    }
    let floor = team.state.memory.sizes.reduce_chunk_floor;
    whole_elements((n / REDUCE_DEPTH).max(floor).min(team.seg.geo.chunk), unit)
}

/// Chunks a flat Reduce cuts its vector into (see [`reduce_chunk`]).
const REDUCE_DEPTH: usize = 4;
/// Default least bytes of a flat Reduce's chunk
/// ([`super::Sizes::reduce_chunk_floor`]): 16 KiB.
pub const REDUCE_CHUNK_FLOOR: usize = 16 << 10;

/// The most bytes of whole `unit`-byte elements in `bytes` (at least one).
fn whole_elements(bytes: usize, unit: usize) -> usize {
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

/// Flat reduction; the result goes to every rank (`root` None) or to the
/// root only. An Allreduce moves wider chunks and, from
/// [`crate::adapt::Adaptation::from`] bytes, copies in with the stores its timings
/// favour ([`stores`]).
pub fn flat<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) {
    let n = vector_len(bufs);
    let chunk = match root {
        None => whole_elements(team.seg.geo.allreduce_chunk, unit),
        Some(_) => reduce_chunk(team, n, unit),
    };
    let adaptation = &team.state.memory.adaptation;
    let adapts = root.is_none() && adaptation.enabled && n >= adaptation.from() && team.streams(chunk.min(n));
    let pick = adapts.then(|| team.state.memory.adaptation.allreduce_stores.pick(n));
    let rooted = root.and_then(|root| stores::announce(team, n, root, chunk.min(n)));
    let mut stopwatch = Stopwatch::new(adapts);
    let me = team.rank;
    let folds = root.is_none_or(|r| r == me);
    // A rank that folds reads its own part from its send buffer, where the
    // copy-in just read it (not from its area, which a streaming copy-in
    // left in memory); without one (MPI_IN_PLACE) the input is the output,
    // so it folds a copy. A Reduce root's area is then read by no one.
    let writes_area = !(root == Some(me) && bufs.send.is_some());
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let s = team.next_step();
        // Whether an Allreduce's chunk travels in lines ([`Team::put_lines`],
        // never where the stores are timed; the same on every rank).
        let lines = root.is_none() && pick.is_none() && crate::shm::team::in_lines(len);
        if writes_area {
            let input = &bufs.send.unwrap_or(&*bufs.recv)[off..off + len];
            match pick {
                Some(pick) => stopwatch.time(|| team.put_stored(s, input, pick.method == Stores::Streaming)),
                None if lines => team.put_lines(s, input),
                None => team.put_stored(s, input, stores::streams(rooted.as_ref(), team, len)),
            }
        }
        team.publish(s);
        if folds {
            // Misses on the lines the fold touches overlap the wait for
            // the others' data.
            match bufs.send {
                // A Reduce root: the wait covers the others' copy-in.
                Some(send) if !writes_area => {
                    prefetch::small(&bufs.recv[off..off + len], prefetch::LONG_WAIT);
                    prefetch::small(&send[off..off + len], prefetch::LONG_WAIT);
                }
                // The others copied in while this rank did; what it
                // copied in is in cache already.
                _ => prefetch::small(&bufs.recv[off..off + len], prefetch::SHORT_WAIT),
            }
            let mut copies = std::mem::take(&mut team.state.memory.line_copies);
            if lines {
                // Every chunk out of its lines, this rank's too if it has
                // no send buffer to read it from.
                copies.resize(team.size * len, 0);
                for (r, copy) in copies.chunks_exact_mut(len).enumerate() {
                    if r != me || bufs.send.is_none() {
                        team.wait_lines(r, s, copy);
                    }
                }
            } else {
                team.wait_others_data(s, len);
            }
            let part = |r: usize| match bufs.send {
                Some(send) if r == me => &send[off..off + len],
                _ if lines => &copies[r * len..(r + 1) * len],
                _ => team.area_bytes(r, s, len),
            };
            let ahead = team.settings.ahead;
            stopwatch.time(|| fold_out(team.size, part, &mut bufs.recv[off..off + len], unit, ahead, combiner));
            team.state.memory.line_copies = copies;
        }
        team.finish(s);
        off += len;
    }
    if let Some(pick) = pick {
        let choice = &mut team.state.memory.adaptation.allreduce_stores;
        if let Some(change) = choice.record(pick, n, stopwatch.total) {
            log::debug!("shm_flat Allreduce of {} B and more: copies in now with {change}", choice.class_bytes(&pick));
        }
    }
    if let Some(rooted) = rooted {
        rooted.record(team, n);
    }
}

/// Partitioned reduction with copy-in (see the module documentation).
pub fn partition<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) {
    let n = vector_len(bufs);
    let chunk = chunk_len(team, unit);
    let (me, p) = (team.rank, team.size);
    let gets_result = |r: usize| root.is_none_or(|root| root == r);
    // The largest copy in: all but one slice of a chunk.
    let copy = chunk.min(n) - slice_bytes(0, p, chunk.min(n), unit).len();
    let rooted = root.and_then(|root| stores::announce(team, n, root, copy));
    let mut off = 0;
    while off < n {
        let len = chunk.min(n - off);
        let bytes = |j: usize| slice_bytes(j, p, len, unit);
        let mine = bytes(me);
        // Step 1: the slices the others combine into this rank's area. Its
        // own slice it combines straight from its send buffer; with
        // MPI_IN_PLACE that is the receive buffer, which the result
        // overwrites, so the slice goes to the area too.
        let s = team.next_step();
        team.writable(s);
        {
            let input = &bufs.send.unwrap_or(&*bufs.recv)[off..off + len];
            let area = team.my_area_bytes(s, len);
            let pieces = if bufs.send.is_some() { [0..mine.start, mine.end..len] } else { [0..len, len..len] };
            for piece in pieces.into_iter().filter(|piece| !piece.is_empty()) {
                let stream = stores::streams(rooted.as_ref(), team, piece.len());
                crate::shm::stream::copy_with(&mut area[piece.clone()], &input[piece], stream);
            }
        }
        team.publish(s);
        team.wait_all_ready(s);
        // Step 2: this rank's slice of the result, into its receive buffer
        // if it gets the result, and into its other area for the others.
        let t = team.next_step();
        team.writable(t);
        let others_need = (0..p).any(|r| r != me && gets_result(r));
        let part = |r: usize| match bufs.send {
            Some(send) if r == me => &send[off + mine.start..off + mine.end],
            _ => &team.area_bytes(r, s, len)[mine.clone()],
        };
        if gets_result(me) {
            let out = &mut bufs.recv[off + mine.start..off + mine.end];
            fold_out(p, part, out, unit, team.settings.ahead, combiner);
            if others_need {
                let stream = stores::streams(rooted.as_ref(), team, out.len());
                crate::shm::stream::copy_with(&mut team.my_area_bytes(t, len)[mine.clone()], out, stream);
            }
        } else {
            fold(p, part, &mut team.my_area_bytes(t, len)[mine.clone()], combiner);
        }
        team.finish(s);
        team.publish(t);
        if gets_result(me) {
            for j in (0..p).filter(|&j| j != me) {
                team.wait_ready(j, t);
                let theirs = bytes(j);
                let result = &team.area_bytes(j, t, len)[theirs.clone()];
                crate::shm::stream::copy_out(
                    &mut bufs.recv[off + theirs.start..off + theirs.end],
                    result,
                    false,
                    team.settings.ahead,
                );
            }
        }
        team.finish(t);
        off += len;
    }
    if let Some(rooted) = rooted {
        rooted.record(team, n);
    }
}

/// Published words of the zero-copy reduction.
pub(crate) const INPUT: usize = 0;
pub(crate) const OUTPUT: usize = 1;

/// Zero copy's first step: publish where this rank's input and output
/// vectors are (words [`INPUT`] and [`OUTPUT`]) and wait until every rank
/// has. Returns the step, which stays open while peers read those words.
pub(crate) fn publish_vectors(team: &mut Team<'_>, bufs: &mut Buffers<'_>) -> u64 {
    let s = team.next_step();
    team.writable(s);
    team.set_word(s, INPUT, bufs.send.unwrap_or(&*bufs.recv).as_ptr() as u64);
    team.set_word(s, OUTPUT, bufs.recv.as_mut_ptr() as u64);
    team.publish(s);
    team.wait_all_ready(s);
    s
}

/// Partitioned reduction over zero copy: the team must have
/// [`Team::peers`]; `bufs.scratch` holds [`zero_copy_scratch`] bytes for
/// the team's [`super::Sizes::sub_chunk`].
pub fn zero_copy<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let n = vector_len(bufs);
    let (me, p) = (team.rank, team.size);
    let s = publish_vectors(team, bufs);
    // This rank's slice, in sub-chunks: read the peers' parts, combine,
    // write the result where it belongs. Scratch: this rank's own part (a
    // copy with MPI_IN_PLACE, where it is also the output), a result
    // buffer, then one part per rank.
    let mine = slice_bytes(me, p, n, unit);
    let sub = (team.state.memory.sizes.sub_chunk / unit).max(1) * unit;
    let (own, rest) = bufs.scratch.split_at_mut(sub);
    let (result, remote) = rest.split_at_mut(sub);
    let mut at = mine.start;
    while at < mine.end {
        let len = sub.min(mine.end - at);
        for r in (0..p).filter(|&r| r != me) {
            peers.read(r, team.word(r, s, INPUT) as usize + at, &mut remote[r * sub..r * sub + len]);
        }
        let mine = own_part(bufs.send, bufs.recv, own, at, len);
        let part = |r: usize| if r == me { mine } else { &remote[r * sub..r * sub + len] };
        let out: &mut [u8] =
            if root.is_none_or(|r| r == me) { &mut bufs.recv[at..at + len] } else { &mut result[..len] };
        fold_out(p, part, out, unit, team.settings.ahead, combiner);
        for r in (0..p).filter(|&r| r != me && root.is_none_or(|root| root == r)) {
            peers.write(r, team.word(r, s, OUTPUT) as usize + at, out);
        }
        at += len;
    }
    // Step 2: every rank has read its peers' inputs and written its slice,
    // so every buffer is final and may be handed back.
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    team.wait_all_ready(t);
    team.finish(t);
}

/// Bytes `at..at + len` of this rank's input, for a fold whose output is
/// its receive buffer: the send buffer itself, or with MPI_IN_PLACE (the
/// input is the output) a copy in `own`.
pub(crate) fn own_part<'a>(send: Option<&'a [u8]>, recv: &[u8], own: &'a mut [u8], at: usize, len: usize) -> &'a [u8] {
    match send {
        Some(send) => &send[at..at + len],
        None => {
            own[..len].copy_from_slice(&recv[at..at + len]);
            &own[..len]
        }
    }
}

/// Scratch bytes [`zero_copy`] needs for `p` ranks and sub-chunks of
/// `sub_chunk` bytes.
pub fn zero_copy_scratch(p: usize, sub_chunk: usize) -> usize {
    (p + 2) * sub_chunk
}

/// [`flat`], as the registry runs it.
pub fn run_flat(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) {
    let (mut bufs, unit, root) = call.into_reduction();
    flat(team, &mut bufs, unit, root, combiner)
}

/// [`partition`], as the registry runs it.
pub fn run_partition(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) {
    let (mut bufs, unit, root) = call.into_reduction();
    partition(team, &mut bufs, unit, root, combiner)
}

/// [`zero_copy`], as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) {
    let (mut bufs, unit, root) = call.into_reduction();
    zero_copy(team, &mut bufs, unit, root, combiner)
}
