//! Zero-copy Bcast within a node over cross-memory attach (`shm_zcopy`;
//! large messages, and one of the `shm` Bcast's methods): the root
//! and the readers publish their buffers; reader `j` reads all but the
//! last `1/p` of the message straight from the root's buffer while the
//! root writes that last part into reader `j`: every rank copies about
//! `(p-1)/p` of the message, at the same time. With two ranks each copies
//! half. A last step, which every rank publishes once done, tells that
//! every buffer is final.
//!
//! Trace, p = 3, root 0, 9 bytes: every rank publishes its buffer and
//! waits for the others; ranks 1 and 2 each read bytes 0..6 from rank 0's
//! buffer while rank 0 writes bytes 6..9 into rank 1's, then rank 2's;
//! all publish the last step and wait for each other.
//!
//! Limitations: one node, with zero copy (PCOLL_SHM_ZCOPY, cross-memory
//! attach allowed); every copy is a system call, so small messages pay
//! more than they save; the root writes into each reader in turn while
//! they read, so it needs every rank on a core at once (where ranks
//! outnumber cores the `shm` Bcast takes the pipeline,
//! [`super::bcast_timed`]). Memory: two published words per rank. Cost,
//! `β_x` per byte of a cross-memory copy: `2 t_sync + (p-1)/p m β_x` on
//! every rank at once.
//! Seed: none (pcoll's own: cross-memory attach in place of seed 002's
//! copies through the segment, for large messages).

use super::bcast_queue_zcopy::{as_root_says, Route};
use super::{NodeCall, Team};
use crate::exec::Combiner;
use crate::shm::team::{Mismatch, Via};

/// Published words of the first step: every rank's buffer address, and
/// the root's route ([`Route`]).
const BUFFER: usize = 0;
pub(super) const METHOD: usize = 1;

/// Publishes this rank's buffer as step `s`, with the root's `method`
/// word where it has one.
pub(super) fn offer(team: &mut Team<'_>, data: &mut [u8], s: u64, method: Option<u64>) {
    team.writable(s);
    team.set_word(s, BUFFER, data.as_mut_ptr() as u64);
    if let Some(method) = method {
        team.set_word(s, METHOD, method);
    }
    team.publish(s);
}

/// The zero-copy broadcast; the team must have [`Team::peers`]. In the
/// first step every rank publishes its buffer (a reader once it has
/// checked the root's head: a reader of another call, in an erroneous
/// program, follows the root's call instead, see the driver's dispatch,
/// and must not have offered its buffer) and waits for the others.
pub fn zero_copy(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    as_root_says(team, data, root, Route::ZeroCopy)
}

/// Zero copy after its first step `s`. The root writes only into
/// readers whose head it checked (a reader of another call published no
/// buffer of this call's length), serves the others, and reports the
/// first such reader at the end.
pub(super) fn copy_across(team: &mut Team<'_>, data: &mut [u8], root: usize, s: u64) -> Result<(), Mismatch> {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let (p, me, n) = (team.size, team.rank, data.len());
    // The root writes the last 1/p into each reader; the readers read the
    // rest from the root.
    let split = n - n / p;
    let mut mismatch = None;
    if me == root {
        for r in (0..p).filter(|&r| r != root) {
            match team.check(r, s, Via::Area, team.mine()) {
                Ok(()) => peers.write(r, team.word(r, s, BUFFER) as usize + split, &data[split..]),
                Err(m) => mismatch = mismatch.or(Some(m)),
            }
        }
    } else {
        peers.read(root, team.word(root, s, BUFFER) as usize, &mut data[..split]);
    }
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    team.wait_all_ready(t);
    team.finish(t);
    mismatch.map_or(Ok(()), Err)
}

/// [`zero_copy`], as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    zero_copy(team, data, root)
}
