//! Seed 002's queue Bcast within a node, the paper's algorithm as
//! published (`shm_queue`): the root's queue of `s` slots of `f` bytes
//! (PCOLL_SHM_SLOTS, PCOLL_SHM_FRAGMENT), split into `q` sets
//! (PCOLL_SHM_SETS); the root copies fragments into its slots and notifies
//! its children in a tree ([`Tree`]: flat, chain, k-ary, k-nomial;
//! PCOLL_SHM_TREE) through their fragment controls; a child forwards each
//! notification to its own children before copying the fragment out of
//! the root's slot; a set is reused once all its readers have counted
//! themselves out. The fragment size follows the paper's model
//! ([`model_fragment`]): `f* = sqrt(m t_w / (⌈m/b⌉ t))`, `b = s f` the
//! queue, with the paper's ratio `t_w / t = 50` bytes, rounded up to a
//! page, at most a slot (4 KiB by default: the model's own page for
//! messages up to 335 KiB; see [`crate::shm::segment::QUEUE_SLOTS`]
//! for why the queue is larger than a reader's L2; the `shm` Bcast's
//! messages new to their root cycle through its first 2 MiB only, and
//! its hot ones of 32-512 KiB move in fragments of two slots). The
//! root copies in with the stores its readers' timings favour
//! ([`BcastStores`]) and tags every notification with them.
//!
//! Trace, p = 3 flat, 3 fragments, s = 4, q = 2: the root takes set
//! 0 (slots 0, 1), copies a, notifies 1 and 2 (`controls[0] = |a|`), copies
//! b, notifies; takes set 1 (slot 2) for c. Ranks 1 and 2 wait for set 0's
//! operation, copy a and b out, count out of set 0, then set 1.
//!
//! Limitations: one node; the root refills a set only once its slowest
//! reader has counted out of it, and a notification reaches a rank only
//! after every rank above it in the tree has forwarded it; the model's
//! ratio `t_w / t` is the paper's, not measured here. Memory: the segment:
//! each rank's queue of `s` slots (any rank may be a root), a fragment
//! control per rank and slot, a control per set. Cost (per the paper):
//! `⌈m/b⌉ (t_wo + t_a) + t_w ⌈m/f⌉ + m t`, the message moving once in and
//! once out.
//! Seed: 002 (the queue, sets, control blocks, notification trees, the
//! model for f and s).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::{NodeCall, QueueOps, Team};
use crate::adapt::stores::BcastStores;
use crate::core::pattern::{kary_children, knomial_children};
use crate::exec::Combiner;
use crate::shm::prefetch;
use crate::shm::team::{Mismatch, Via};
use crate::shm::wait::Backoff;

/// How notifications travel from the root in the queue broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tree {
    Flat,
    Chain,
    Kary(usize),
    Knomial(usize),
}

impl Tree {
    /// `rel`'s children among `p` ranks relative to the root.
    fn children(self, rel: usize, p: usize) -> Vec<usize> {
        match self {
            Tree::Flat if rel == 0 => (1..p).collect(),
            Tree::Flat => vec![],
            Tree::Chain => kary_children(rel, p, 1).collect(),
            Tree::Kary(k) => kary_children(rel, p, k).collect(),
            Tree::Knomial(k) => knomial_children(rel, p, k).collect(),
        }
    }

    #[cfg(test)]
    fn parent(self, rel: usize) -> Option<usize> {
        use crate::core::pattern::{kary_parent, knomial_parent};
        match self {
            Tree::Flat => (rel > 0).then_some(0),
            Tree::Chain => kary_parent(rel, 1),
            Tree::Kary(k) => kary_parent(rel, k),
            Tree::Knomial(k) => knomial_parent(rel, k),
        }
    }
}

/// The paper's ratio of notification wait to per-byte copy time.
const WAIT_PER_BYTE: f64 = 50.0;

/// Seed 002's fragment size for a message of `m` bytes through a queue of
/// `queue` bytes: `sqrt(m t_w / (⌈m/b⌉ t))`, up to a page multiple, at
/// most `max`.
pub fn model_fragment(m: usize, queue: usize, max: usize) -> usize {
    let rounds = m.div_ceil(queue.max(1)).max(1) as f64;
    let f = (m as f64 * WAIT_PER_BYTE / rounds).sqrt() as usize;
    f.div_ceil(crate::shm::segment::PAGE).max(1).saturating_mul(crate::shm::segment::PAGE).min(max)
}

/// The queue broadcast, as in the paper's pseudo-code. `fragment` bytes per
/// fragment (0 for the model's; a fragment takes whole slots, at most a
/// set's), notifications down `tree`.
pub fn queue(team: &mut Team<'_>, data: &mut [u8], root: usize, fragment: usize, tree: Tree) -> Result<(), Mismatch> {
    // A first step in which the root publishes its head, which every
    // reader checks before it takes part: a reader of another call (an
    // erroneous program) must not count itself out of sets it never read.
    let s = team.next_step();
    if team.rank == root {
        team.writable(s);
        team.publish(s);
    } else {
        team.wait_ready(root, s);
        team.check(root, s, Via::Area, team.mine())?;
    }
    team.finish(s);
    through_queue(team, data, root, fragment, tree, true);
    Ok(())
}

/// The queue after its first step (every reader has checked the root's
/// head), through all its sets (`wide`: a message from the root's last
/// buffer) or those of its first slots ([`Geometry::queue_sets`]).
///
/// [`Geometry::queue_sets`]: crate::shm::segment::Geometry::queue_sets
pub(super) fn through_queue(
    team: &mut Team<'_>,
    data: &mut [u8],
    root: usize,
    fragment: usize,
    tree: Tree,
    wide: bool,
) {
    let geo = team.seg.geo;
    let (p, me) = (team.size, team.rank);
    let slots = geo.slots;
    let per_set = slots / geo.queue_sets(true);
    let sets = geo.queue_sets(wide);
    let f = if fragment == 0 { model_fragment(data.len(), slots * geo.slot_bytes, geo.slot_bytes) } else { fragment };
    // A fragment spans whole slots, within one set.
    let f = f.clamp(1, per_set * geo.slot_bytes);
    let rel = (me + p - root) % p;
    let children: Vec<usize> = tree.children(rel, p).into_iter().map(|c| (c + root) % p).collect();
    let notify = |index: usize, size: u64| {
        for &child in &children {
            // Release: for the root, its copy into the slot happens before
            // the child reads the slot; for a forwarding rank, the release
            // passes on what it acquired from its parent.
            team.seg.fragment_control(child, index).value.store(size, Release);
        }
    };
    // Whole messages decide: fragments are smaller than the chunks. The
    // root tags every notification with its stores where the readers
    // choose ([`BcastStores`]).
    let stores = BcastStores::start(team, root, data.len());
    let stream = stores.streams(team, data.len());
    let tag = if stores.tag() == Some(true) { STREAMED } else { 0 };
    let mut streamed = false;
    if me != root {
        // Misses on the message overlap the wait for the root.
        prefetch::small(data, prefetch::LONG_WAIT);
    }
    let mut sent = 0;
    while sent < data.len() {
        let ops = &mut team.state.memory.queue_ops;
        let (op, set) = (ops.count, (ops.count % sets as u64) as usize);
        *ops = QueueOps { count: op + 1, last_set: set };
        let counters = team.seg.set_control(set);
        let (mut index, set_end) = (set * per_set, (set + 1) * per_set);
        if me == root {
            // Acquire: the readers' copies out of this set (before their
            // release of the counter) happen before it is refilled.
            Backoff::until(|| counters.readers.load(Acquire) == 0);
            counters.readers.store(p as u64 - 1, Relaxed);
            // Release: the reader count above is in place before any
            // reader, having acquired the set's operation, counts out.
            counters.op.store(op + 1, Release);
            while index < set_end && sent < data.len() {
                let len = f.min(data.len() - sent).min((set_end - index) * geo.slot_bytes);
                // SAFETY: the root's slots from `index` to the set's end lie
                // one after the other and hold at least len bytes, and no
                // reader uses this set until notified below.
                let slot = unsafe { std::slice::from_raw_parts_mut(team.seg.queue_slot(root, index), len) };
                crate::shm::stream::copy_with(slot, &data[sent..sent + len], stream);
                notify(index, len as u64 | tag);
                sent += len;
                index += len.div_ceil(geo.slot_bytes);
            }
        } else {
            // Acquire: pairs with the root's release of the operation.
            Backoff::until(|| counters.op.load(Acquire) == op + 1);
            while index < set_end && sent < data.len() {
                let control = &team.seg.fragment_control(me, index).value;
                // Acquire: the parent's notification, and through it the
                // root's copy into the slot, happen before the copy out.
                Backoff::until(|| control.load(Acquire) > 0);
                let value = control.load(Relaxed);
                let len = (value & !STREAMED) as usize;
                streamed = value & STREAMED != 0;
                // Relaxed: the reset happens before this rank counts out of
                // the set (release below), which the next use waits for.
                control.store(0, Relaxed);
                notify(index, value);
                // SAFETY: the root filled `len` bytes from its slot `index`
                // (within the set) before notifying (acquired above) and
                // will not refill them before this rank counts out of the
                // set.
                let slot = unsafe { std::slice::from_raw_parts(team.seg.queue_slot(root, index), len) };
                crate::shm::stream::copy_out(&mut data[sent..sent + len], slot, false, team.settings.ahead);
                sent += len;
                index += len.div_ceil(geo.slot_bytes);
            }
            // AcqRel: this rank's copies out of the set happen before the
            // root, acquiring a count of zero, refills it.
            counters.readers.fetch_sub(1, AcqRel);
        }
    }
    stores.end(team, streamed);
}

/// Waits until the readers of every queue operation so far (as this rank
/// counts them) have counted themselves out: all broadcasts through the
/// queue up to this rank's last have been copied out (a root that times
/// the queue: before its call, so that earlier calls' copies are not
/// counted, and after it). Readers count out of operations in order, call
/// after call, and every reader of an earlier operation but this rank
/// reads the last one too, so the last operation's set tells. A set that
/// a later root has taken again was counted out before (the root waited
/// for it): this rank may be a reader of that root's call, and must not
/// wait for its count.
pub(super) fn wait_counted_out(team: &Team<'_>) {
    let ops = team.state.memory.queue_ops;
    let Some(last) = ops.count.checked_sub(1) else {
        return;
    };
    let counters = team.seg.set_control(ops.last_set);
    // Acquire: the readers' copies out of this and earlier sets (before
    // their releases of the count) happen before what the caller does
    // next (its clock).
    Backoff::until(|| counters.readers.load(Acquire) == 0 || counters.op.load(Acquire) > last + 1);
}

/// The bit of a fragment's notification that tells the readers the root's
/// copies streamed, where they choose ([`BcastStores`]); the rest is the
/// fragment's length.
const STREAMED: u64 = 1 << 63;

/// [`queue`] with the communicator's queue settings.
pub fn configured_queue(team: &mut Team<'_>, data: &mut [u8], root: usize) -> Result<(), Mismatch> {
    let q = team.state.memory.queue;
    queue(team, data, root, q.fragment, q.tree)
}

/// [`configured_queue`], as the registry runs it.
pub fn run_queue(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) -> Result<(), Mismatch> {
    let (data, root) = call.into_bcast();
    configured_queue(team, data, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_reach_everyone_once() {
        for tree in [Tree::Flat, Tree::Chain, Tree::Kary(2), Tree::Kary(4), Tree::Knomial(2), Tree::Knomial(3)] {
            for p in 1..40 {
                let mut seen = vec![0; p];
                for rel in 0..p {
                    for c in tree.children(rel, p) {
                        assert_eq!(tree.parent(c), Some(rel), "{tree:?} p={p}");
                        seen[c] += 1;
                    }
                }
                assert!(seen[1..].iter().all(|&n| n == 1), "{tree:?} p={p}");
            }
        }
    }

    #[test]
    fn model_fragment_is_a_page_multiple_near_the_papers_values() {
        // The paper: 8-12 KiB fragments for 16 MiB through a 4 MiB queue.
        let f = model_fragment(16 << 20, 4 << 20, 64 << 10);
        assert!((8 << 10..=16 << 10).contains(&f), "{f}");
        assert_eq!(f % 4096, 0);
        assert_eq!(model_fragment(100, 1 << 20, 1 << 20), 4096);
        assert_eq!(model_fragment(64 << 20, 512 << 10, 8192), 8192);
    }
}
