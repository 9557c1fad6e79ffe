//! Flat reduction within a node (`shm_flat`, Reduce and Allreduce; small
//! vectors, latency): each rank copies its vector, chunk by chunk, into
//! its chunk area and publishes; every rank (Allreduce) or the root
//! (Reduce) waits for the others' chunks and folds them all into its
//! receive buffer, its own part read from its send buffer. One
//! synchronisation per chunk.
//! - A chunk of up to `LINES * INLINE` bytes travels in the lines of a
//!   slot instead of a chunk area ([`Team::put_lines`]).
//! - An Allreduce moves wider chunks (PCOLL_SHM_ALLREDUCE_CHUNK), and
//!   from [`crate::adapt::Adaptation::allreduce_from`] bytes every rank
//!   copies in with the stores node rank 0's timings favour
//!   ([`stores::LeaderChoice`]).
//! - A Reduce cuts its vector into about four chunks, so that the root
//!   folds one while the others copy in the next (`reduce_chunk`), and
//!   the others copy in with the stores the root picks
//!   ([`stores::root_pick`]: they wait for the root's end of its previous
//!   call, not for its arrival). The root writes nothing into its area:
//!   no one reads it.
//! - A Reduce's other rank whose vector is one chunk goes straight to its
//!   copy-in and publish.
//! - A Reduce root that is the last rank or the last but one, where the
//!   others' chunk is not in yet, copies its own part into its receive
//!   buffer while it waits, taking the misses of both its buffers then,
//!   and combines the others' chunks into it
//!   ([`super::reduction::fold_onto_own`]): it reads two vectors where the
//!   fold reads three (2 ranks, cold, MPICH host: 8 KiB 2.20 against 2.98
//!   us, 32 KiB 7.21 against 8.93; docs/node-layer.md). Other roots
//!   prefetch up to 16 KiB of their buffers instead: their own part sits
//!   inside the fold's order, where only a temporary could hold it.
//!
//! Trace, Reduce p = 3, root 0, a vector of two chunks a b: ranks 1 and 2
//! copy a into an area and publish; rank 0 waits for them and folds
//! a0 ∘ (a1 ∘ a2) into its receive buffer (a0 from its send buffer) while
//! 1 and 2 copy b into their other areas; then rank 0 folds b. Allreduce,
//! p = 2: both copy into their area, publish, wait for the other, compute
//! x0 ∘ x1 from the two areas.
//!
//! Order: [`super::reduction`]'s fold, bitwise the same result as the
//! other node reductions.
//!
//! Limitations: one node; every rank of an Allreduce folds the whole
//! vector, and a Reduce root folds it alone, so the partitioned
//! algorithms win for large vectors. Memory: the segment's chunk areas;
//! a rank that folds an Allreduce chunk sent in lines keeps `p` copies of
//! it ([`super::NodeMemory::line_copies`]). Cost per chunk of `c` bytes:
//! `c β_copy + (p-1) t_flag + (p-1) c γ` (copy-in, the others' flags, the
//! fold); a Reduce overlaps the others' copy-in of a chunk with the
//! root's fold of the previous one: about `(n/4) β_copy + (p-1) n γ`.
//! Seed: none (the shared-memory baseline that seed 003's partitioning
//! improves on for large vectors).

use super::reduction::{chunk_len, fold_onto_own, fold_out, own_part_first, vector_len, whole_elements};
use super::{NodeCall, Team};
use crate::adapt::stores::{self, LeaderCall, LeaderChoice, RootPick, Stopwatch, Stores};
use crate::exec::{Buffers, Combiner};
use crate::shm::prefetch;
use crate::shm::team::Mismatch;

/// Chunks of a flat Reduce: the root combines one chunk while the others
/// copy in the next, so the call takes about one chunk's copy-in plus the
/// root's combining. About [`REDUCE_DEPTH`] chunks per vector shorten that
/// first copy-in; more cost a synchronisation each (2 ranks, 128 KiB:
/// about a tenth faster in 32 KiB chunks than in 64 KiB or 16 KiB ones;
/// docs/measurements.md). At least [`super::Sizes::reduce_chunk_floor`]
/// bytes, at most the segment's chunk; the segment's chunk where ranks
/// outnumber cores, which cannot overlap their copies with the root's
/// combining.
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

/// Flat reduction; the result goes to every rank (`root` None) or to the
/// root only. An Allreduce moves wider chunks and, from
/// [`crate::adapt::Adaptation::allreduce_from`] bytes, copies in with the
/// stores node rank 0's timings favour ([`stores`]). Returns whether the
/// call tried stores other than those in use (a warm-up, a trial or an
/// exploration of [`stores`], as the rank that picked them knows it: node
/// rank 0, or a Reduce's root), so that a caller timing the flat way
/// leaves out such a call: ordinary stores tried where streaming ones are
/// in use took 3-5 times as long (Intel MPI host, cores apart, 4-16 KiB).
pub fn flat<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) -> Result<bool, Mismatch> {
    let n = vector_len(bufs);
    let chunk = match root {
        None => whole_elements(team.seg.geo.allreduce_chunk, unit),
        Some(_) => reduce_chunk(team, n, unit),
    };
    // A Reduce's other rank with one chunk: the copy-in and publish the
    // loop below reaches after some 150 instructions more.
    if let Some(root) = root.filter(|&root| root != team.rank && n > 0 && n <= chunk) {
        let rooted = stores::root_pick(team, n, root, n);
        let s = team.next_step();
        copy_in(team, s, &bufs.send.unwrap_or(&*bufs.recv)[..n], None, rooted.as_ref());
        team.publish(s);
        team.finish(s);
        return Ok(false);
    }
    let adaptation = &team.state.memory.adaptation;
    // Below the other copies' threshold too, where PCOLL_SHM_STREAM would
    // stream copies of that many bytes.
    let streams = team.streams(chunk.min(n).max(adaptation.from()));
    let adapts = root.is_none() && adaptation.enabled && n >= adaptation.allreduce_from() && streams;
    let leader = adapts.then(|| LeaderChoice::start(team, n));
    let timed = leader.and_then(|call| call.timed);
    let rooted = root.and_then(|root| stores::root_pick(team, n, root, chunk.min(n)));
    let tries_stores = timed.is_some_and(|pick| !pick.in_use()) || rooted.as_ref().is_some_and(|r| r.tries());
    let mut stopwatch = Stopwatch::new(timed.is_some());
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
        // Whether the chunk travels in lines ([`Team::put_lines`], never
        // where an Allreduce times its stores; the same on every rank).
        let lines = leader.is_none() && crate::shm::team::in_lines(len);
        let started = stopwatch.start();
        if writes_area {
            copy_in(team, s, &bufs.send.unwrap_or(&*bufs.recv)[off..off + len], leader, rooted.as_ref());
        }
        team.publish(s);
        if folds {
            // Misses on the lines the fold touches overlap the wait for
            // the others' data.
            let mut own_placed = false;
            match bufs.send {
                // A Reduce root whose others' chunk is not in yet: its own
                // part copied into place takes its buffers' misses during
                // the wait, and the fold then reads one vector fewer (see
                // the module documentation).
                Some(send) if !writes_area && own_part_first(team.size, me) && !team.others_ready(s) => {
                    crate::exec::copy::copy(&mut bufs.recv[off..off + len], &send[off..off + len]);
                    own_placed = true;
                }
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
                        team.wait_lines(r, s, copy)?;
                    }
                }
            } else {
                team.wait_others_data(s, len)?;
            }
            if off == 0 {
                team.check_others(s, team.via(len, lines))?;
            }
            let part = |r: usize| match bufs.send {
                Some(send) if r == me => &send[off..off + len],
                _ if lines => &copies[r * len..(r + 1) * len],
                _ => team.area_bytes(r, s, len),
            };
            let ahead = team.settings.ahead;
            let out = &mut bufs.recv[off..off + len];
            if !(own_placed && fold_onto_own(team.size, me, part, out, combiner)) {
                fold_out(team.size, part, out, unit, ahead, combiner);
            }
            stopwatch.stop(started);
            team.state.memory.line_copies = copies;
        }
        team.finish(s);
        off += len;
    }
    if let Some(pick) = timed {
        let choice = &mut team.state.memory.adaptation.allreduce_stores;
        if let Some(change) = choice.record(pick, n, stopwatch.total) {
            log::debug!("shm_flat Allreduce of {} B and more: copies in now with {change}", choice.class_bytes(&pick));
        }
    }
    if let Some(rooted) = rooted {
        rooted.record(team);
    }
    Ok(tries_stores)
}

/// Copies a chunk into this rank's slot or area for step `s` with the
/// stores of its call: those the Allreduce's leader timed, the slot's
/// lines, or those the Reduce's root picked (else [`Team::streams`]).
fn copy_in(team: &mut Team<'_>, s: u64, input: &[u8], leader: Option<LeaderCall>, rooted: Option<&RootPick>) {
    match leader {
        Some(call) => team.put_stored(s, input, call.stores == Stores::Streaming),
        None if crate::shm::team::in_lines(input.len()) => team.put_lines(s, input),
        None => team.put_stored(s, input, stores::streams(rooted, team, input.len())),
    }
}

/// [`flat`], as the registry runs it.
pub fn run_flat(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let (mut bufs, unit, root) = call.into_reduction();
    flat(team, &mut bufs, unit, root, combiner).map(drop)
}
