//! Partitioned reduction within a node through the segment
//! (`shm_partition`, Reduce and Allreduce; seed 003's data partitioning,
//! with copy-in). The vector is cut into chunks of the segment's chunk
//! area and each chunk into `p` slices of whole elements; rank `i`
//! combines slice `i`. Two steps per chunk:
//! 1. every rank copies into its area the slices the others combine (all
//!    but its own, which it reads from its send buffer; with MPI_IN_PLACE
//!    the whole chunk, as the result overwrites its input), publishes and
//!    waits for everyone;
//! 2. rank `i` folds slice `i` of every input straight into its receive
//!    buffer and streams the result slice into its other area; everyone
//!    (Reduce: the root) copies the others' result slices out.
//!
//! A Reduce's non-roots fold into their other area only, and everyone
//! copies in with the stores the root picks ([`stores::root_pick`]; the
//! others wait for the root's end of its previous call). Each rank
//! copies `(p-1)/p` of the vector in, combines `1/p` and copies `(p-1)/p`
//! out. Copying in only the others' slices and folding into the receive
//! buffer (first written: the whole chunk in, folded in the area with
//! ordinary stores) brought the time from 1.12 times `shm_flat`'s to 1.05
//! (2 ranks, 2 MiB; docs/measurements.md).
//!
//! Trace, Allreduce p = 2, one chunk AB (rank 0 combines A, rank 1 B):
//! step 1, rank 0 copies B0 into its area and rank 1 A1, both publish and
//! wait; step 2, rank 0 computes A = A0 ∘ A1 (A0 from its send buffer)
//! into its receive buffer and its other area, rank 1 B likewise, both
//! publish; rank 0 copies B out of rank 1's area, rank 1 A out of rank
//! 0's.
//!
//! Order: [`super::reduction`]'s fold, bitwise the same result as the
//! other node reductions.
//!
//! Limitations: one node; two synchronisations of all ranks per chunk, so
//! the flat reduction wins for small vectors; a chunk of fewer than `p`
//! elements leaves some ranks without a slice. Memory: the segment's two
//! chunk areas per rank. Cost per chunk of `c` bytes:
//! `2 t_sync + 2 (p-1)/p c β_copy + (p-1)/p c γ` (a Reduce's non-roots
//! copy nothing out).
//! Seed: 003 (data-partitioned reduction in shared memory, DPML's
//! intra-node stage).

use super::reduction::{chunk_len, fold, fold_out, slice_bytes, vector_len};
use super::{NodeCall, Team};
use crate::adapt::stores;
use crate::exec::{Buffers, Combiner};
use crate::shm::team::{Mismatch, Via};

/// Partitioned reduction with copy-in (see the module documentation).
pub fn partition<C: Combiner + ?Sized>(
    team: &mut Team<'_>,
    bufs: &mut Buffers<'_>,
    unit: usize,
    root: Option<usize>,
    combiner: &C,
) -> Result<(), Mismatch> {
    let n = vector_len(bufs);
    let chunk = chunk_len(team, unit);
    let (me, p) = (team.rank, team.size);
    let gets_result = |r: usize| root.is_none_or(|root| root == r);
    // The largest copy in: all but one slice of a chunk.
    let copy = chunk.min(n) - slice_bytes(0, p, chunk.min(n), unit).len();
    let rooted = root.and_then(|root| stores::root_pick(team, n, root, copy));
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
        if off == 0 {
            team.check_others(s, Via::Area)?;
        }
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
        rooted.record(team);
    }
    Ok(())
}

/// [`partition`], as the registry runs it.
pub fn run_partition(team: &mut Team<'_>, call: NodeCall<'_>, combiner: &dyn Combiner) -> Result<(), Mismatch> {
    let (mut bufs, unit, root) = call.into_reduction();
    partition(team, &mut bufs, unit, root, combiner)
}
