//! Partitioned reduction within a node over cross-memory attach, without
//! copy-in (`shm_zcopy`, Reduce and Allreduce; large vectors): every rank
//! publishes where its input and output vectors are
//! (`reduction::publish_vectors`); rank `i` reads slice `i` of its peers' inputs
//! straight from their memory, folds it with its own, and writes the
//! result slice straight into every peer's receive buffer (Reduce: the
//! root's), in sub-chunks of [`super::Sizes::sub_chunk`] bytes per peer.
//! A last step, which every rank publishes once it is done, tells that
//! every buffer is final and may be handed back. Two synchronisations per
//! call; each rank moves `2 (p-1)/p n` bytes and combines `n/p`. A Reduce
//! at 2 ranks up to `ROOT_TAKES_ALL_UP_TO` bytes is not partitioned: the
//! root reads its peer's whole input and combines it (rank 0 straight
//! into its receive buffer), as a write into the root's buffer, whose
//! lines the root holds, costs more than the root's read of the same
//! bytes (2 ranks, hot, Open MPI 5 host, 128 KiB: 10.6-13.2 us against
//! 11.4-20.7 partitioned, stock 9.2-11.5; docs/measurements.md); nor is
//! an Allreduce at 2 ranks up to `BOTH_TAKE_ALL_UP_TO` bytes, where
//! both ranks do what such a root does.
//!
//! Trace, Allreduce p = 2, vector AB (above 64 KiB): both publish their
//! buffers and wait for each other; rank 0 reads A1 from rank 1's send
//! buffer, computes A = A0 ∘ A1 into its receive buffer and writes A into
//! rank 1's, while rank 1 does the same for B; both publish the last step,
//! wait for each other and return. Reduce p = 2, root 0: rank 0 reads AB1
//! into its receive buffer, publishes the last step, which lets rank 1
//! return, and combines AB0 into it. A small Allreduce p = 2 runs that on
//! both ranks (rank 1 reading AB0 into scratch).
//!
//! Order: [`super::reduction`]'s fold, bitwise the same result as the
//! other node reductions.
//!
//! Limitations: one node, with zero copy (PCOLL_SHM_ZCOPY, cross-memory
//! attach allowed); every cross-memory copy is a system call, so small
//! vectors pay more in calls than they save. Memory: `p + 2` sub-chunks of
//! scratch ([`super::reduction::zero_copy_scratch`]: this rank's own part
//! under MPI_IN_PLACE, a Reduce non-root's result, one part per peer). Cost,
//! `β_x` per byte of a cross-memory copy: `2 t_sync + 2 (p-1)/p n β_x +
//! (p-1)/p n γ` on every rank at once, plus a system call per peer and
//! sub-chunk each way (a Reduce's non-roots write to the root only); a
//! Reduce the root takes alone `2 t_sync + n β_x + n γ` at the root, an
//! Allreduce both take the same on both ranks at once.
//! Seed: 003 (data partitioning, the vectors published in place as in
//! DPML's zero-copy intra-node stage).

use super::reduction::{
    fold_out, own_part, publish_vectors, slice_bytes, vector_len, zero_copy_scratch, INPUT, OUTPUT,
};
use super::{NodeCall, Team};
use crate::exec::{Buffers, Combiner};
use crate::shm::team::Mismatch;

/// Partitioned reduction over zero copy: the team must have
/// [`Team::peers`]; `bufs.scratch` holds
/// [`super::reduction::zero_copy_scratch`] bytes for the team's
/// [`super::Sizes::sub_chunk`].
pub fn zero_copy<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) -> Result<(), Mismatch> {
    let s = publish_vectors(team, bufs)?;
    combine_across(team, s, bufs, unit, root, combiner)
}

/// [`zero_copy`] after its first step `s`, in which every rank published
/// its vectors.
pub(crate) fn combine_across<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    s: u64,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) -> Result<(), Mismatch> {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let n = vector_len(bufs);
    let (me, p) = (team.rank, team.size);
    let sub = (team.state.memory.sizes.sub_chunk / unit).max(1) * unit;
    // At 2 ranks, a vector that scratch holds may go whole to the ranks
    // that want the result.
    let whole = p == 2 && n <= zero_copy_scratch(p, sub);
    match root {
        Some(root) if whole && n <= ROOT_TAKES_ALL_UP_TO => {
            if me == root {
                return take_all(team, s, bufs, combiner, false);
            }
            return last_step(team, s);
        }
        None if whole && n <= BOTH_TAKE_ALL_UP_TO => {
            // Under MPI_IN_PLACE the peer reads this rank's input from its
            // receive buffer.
            return take_all(team, s, bufs, combiner, bufs.send.is_none());
        }
        _ => {}
    }
    // This rank's slice, in sub-chunks: read the peers' parts, combine,
    // write the result where it belongs. Scratch: this rank's own part (a
    // copy with MPI_IN_PLACE, where it is also the output), a result
    // buffer, then one part per rank.
    let mine = slice_bytes(me, p, n, unit);
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
    last_step(team, s)
}

/// This rank, at 2 ranks, takes the whole vector (a Reduce's root, or
/// both ranks of an Allreduce): it reads its peer's input in one
/// cross-memory copy, tells the peer it is done with that input, and only
/// then combines, so the peer waits for no combine of this rank's. Rank 0
/// reads straight into its receive buffer and combines its own input into
/// it; rank 1, or rank 0 under MPI_IN_PLACE, reads into scratch (which
/// the caller made sure holds the vector). Both ranks of an Allreduce
/// compute `input 0 ∘ input 1` element by element, so their results are
/// bitwise the same. Where the peer reads this rank's input from its
/// receive buffer (`peer_reads_recv`), the result goes there only once
/// the peer is done.
fn take_all<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    s: u64,
    bufs: &mut Buffers<'_>,
    combiner: &C,
    peer_reads_recv: bool,
) -> Result<(), Mismatch> {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let peer = 1 - team.rank;
    let n = bufs.recv.len();
    let from = team.word(peer, s, INPUT) as usize;
    let into_recv = team.rank == 0 && bufs.send.is_some();
    let theirs: &mut [u8] = if into_recv { &mut *bufs.recv } else { &mut bufs.scratch[..n] };
    peers.read(peer, from, theirs);
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    if peer_reads_recv {
        team.wait_all_ready(t);
    }
    match (team.rank, bufs.send) {
        // recv holds rank 1's input: recv = send ∘ recv.
        (0, Some(send)) => combiner.combine(send, bufs.recv),
        // In place at rank 0: scratch = recv ∘ scratch, the result.
        (0, None) => {
            combiner.combine(bufs.recv, &mut bufs.scratch[..n]);
            crate::exec::copy::copy(bufs.recv, &bufs.scratch[..n]);
        }
        // Rank 1: rank 0's input comes first.
        (_, Some(send)) => combiner.combine_into(&bufs.scratch[..n], send, bufs.recv),
        (_, None) => combiner.combine(&bufs.scratch[..n], bufs.recv),
    }
    if !peer_reads_recv {
        team.wait_all_ready(t);
    }
    team.finish(t);
    Ok(())
}

/// Step 2: every rank has read its peers' inputs and written its slice,
/// so every buffer is final and may be handed back.
fn last_step(team: &mut Team<'_>, s: u64) -> Result<(), Mismatch> {
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    team.wait_all_ready(t);
    team.finish(t);
    Ok(())
}

/// The largest Reduce at 2 ranks whose root combines the whole vector: a
/// slice the other rank combined would reach the root by a write into
/// its receive buffer, whose lines the root holds (2 ranks, hot: writing
/// 64 KiB there took 9.8 us, reading 128 KiB of the peer's input 6.2).
/// Beyond, the vectors outgrow the root's cache and sharing the work
/// wins: at 256 KiB root alone 21.9-25.0 us against 18.3-22.3 partitioned
/// (Debian's Open MPI, osu), a tie under Open MPI 5. (An Allreduce at 2
/// ranks where each rank combined the whole vector lost at 128 KiB: 15.0-
/// 17.1 against 13.6-15.6 us, all three hosts.)
const ROOT_TAKES_ALL_UP_TO: usize = 128 << 10;

/// The largest Allreduce at 2 ranks where each rank reads its peer's whole
/// vector and combines it, rather than half of it, writing its half of
/// the result into the peer's buffer: no write into the lines the peer
/// holds. Candidates, 2 ranks, hot (`shm_flat_zcopy`, both orders, Open
/// MPI 5 and MPICH hosts): 16 KiB 2.45-3.25 against 3.21-4.21 us
/// partitioned, 64 KiB 6.2-8.0 against 6.5-8.2; at 128 KiB a tie (osu
/// 10.6-11.9 against 10.7-12.8, b2b 11.3-14.2 against 11.3-13.5).
const BOTH_TAKE_ALL_UP_TO: usize = 64 << 10;

/// [`zero_copy`], as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let (mut bufs, unit, root) = call.into_reduction();
    zero_copy(team, &mut bufs, unit, root, combiner)
}
