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
//! at 2 ranks up to [`ROOT_TAKES_ALL_UP_TO`] bytes is not partitioned: the
//! root reads its peer's whole input and combines it (rank 0 straight
//! into its receive buffer), as a write into the root's buffer, whose
//! lines the root holds, costs more than the root's read of the same
//! bytes (2 ranks, hot, Open MPI 5 host, 128 KiB: 10.6-13.2 us against
//! 11.4-20.7 partitioned, stock 9.2-11.5; docs/measurements.md).
//!
//! Trace, Allreduce p = 2, vector AB: both publish their buffers and wait
//! for each other; rank 0 reads A1 from rank 1's send buffer, computes
//! A = A0 ∘ A1 into its receive buffer and writes A into rank 1's, while
//! rank 1 does the same for B; both publish the last step, wait for each
//! other and return. Reduce p = 2, root 0: rank 0 reads AB1 into its
//! receive buffer, publishes the last step, which lets rank 1 return, and
//! combines AB0 into it.
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
//! Reduce the root takes alone `2 t_sync + n β_x + n γ` at the root.
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
    if let Some(root) = root.filter(|_| p == 2 && n <= ROOT_TAKES_ALL_UP_TO.min(zero_copy_scratch(p, sub))) {
        if me == root {
            return root_takes_all(team, s, bufs, combiner);
        }
        return last_step(team, s);
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

/// The root of a Reduce at 2 ranks takes the whole vector: it reads its
/// peer's input in one cross-memory copy, lets the peer go (its input is
/// no longer needed), and only then combines, so the peer does not wait
/// for the combine. Rank 0 reads straight into its receive buffer and
/// combines its own input into it; rank 1, or rank 0 under MPI_IN_PLACE,
/// reads into scratch (which the caller made sure holds the vector).
fn root_takes_all<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    s: u64,
    bufs: &mut Buffers<'_>,
    combiner: &C,
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
    match (team.rank, bufs.send) {
        // recv holds rank 1's input: recv = send ∘ recv.
        (0, Some(send)) => combiner.combine(send, bufs.recv),
        // In place at rank 0: scratch = recv ∘ scratch, the result.
        (0, None) => {
            combiner.combine(bufs.recv, &mut bufs.scratch[..n]);
            bufs.recv.copy_from_slice(&bufs.scratch[..n]);
        }
        // Rank 1: rank 0's input comes first.
        (_, Some(send)) => combiner.combine_into(&bufs.scratch[..n], send, bufs.recv),
        (_, None) => combiner.combine(&bufs.scratch[..n], bufs.recv),
    }
    team.wait_all_ready(t);
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

/// [`zero_copy`], as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let (mut bufs, unit, root) = call.into_reduction();
    zero_copy(team, &mut bufs, unit, root, combiner)
}
