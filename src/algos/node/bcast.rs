//! Bcast within a node.
//!
//! - **pipeline**: the root copies the message chunk by chunk into its two
//!   chunk areas (alternating), the others copy each chunk out as soon as
//!   it is published: copy-in and copy-out overlap, two chunks deep. From
//!   PCOLL_SHM_STREAM_OUT bytes the copies out stream past the readers'
//!   caches ([`crate::shm::team::STREAM_OUT_FROM`]). Here and in the queue, the
//!   root copies in with the stores its readers' timings favour
//!   ([`BcastStores`]).
//! - **queue** (seed 002, the paper's algorithm as published): the root's
//!   queue of `s` slots of `f` bytes, split into `q` sets; the root copies
//!   fragments into its slots and notifies its children in a tree (flat,
//!   chain, k-ary, k-nomial) through their fragment controls; a child
//!   forwards each notification to its own children before copying the
//!   fragment out of the root's slot; a set is reused once all its readers
//!   have counted themselves out. The fragment size follows the paper's
//!   model: `f* = sqrt(m t_w / (⌈m/b⌉ t))`, `b = s f` the queue, with the
//!   paper's ratio `t_w / t = 50` bytes, rounded up to a page.
//! - **zero copy** (large messages): the root and the readers publish
//!   their buffers; reader `j` reads all but the last `1/p` of the message
//!   straight from the root's buffer while the root writes that last part
//!   into reader `j`: every rank copies about `(p-1)/p` of the message, at
//!   the same time. With two ranks each copies half.
//! - **timed** (`shm`, large messages): zero copy or the pipeline, as the
//!   root's timings favour ([`crate::adapt::choice`]). On the development VM
//!   neither wins in every state: at 2 ranks the pipeline took 1.16-1.18
//!   ms for 16 MiB where zero copy took 1.54-1.62, and 1.67 where zero
//!   copy took 1.32 (2 MiB: 150 against 168 us, and the reverse). The
//!   root names the method in the first step, which every rank publishes
//!   (zero copy needs their buffers anyway), and times the call from
//!   there to a last step that all ranks publish when done, so both
//!   methods' times include the slowest rank's copying. Where ranks
//!   outnumber cores, always the pipeline (see [`timed`]).
//!
//! Trace, queue, p = 3 flat, 3 fragments, s = 4, q = 2: the root takes set
//! 0 (slots 0, 1), copies a, notifies 1 and 2 (controls[0] = |a|), copies
//! b, notifies; takes set 1 (slot 2) for c. Ranks 1 and 2 wait for set 0's
//! operation, copy a and b out, count out of set 0, then set 1.
//!
//! Limitations: one node. Memory: the segment. Cost (queue, per the paper):
//! `⌈m/b⌉ (t_wo + t_a) + t_w ⌈m/f⌉ + m t`, the message moving once in and
//! once out; zero copy: `(p-1)/p m t` on every rank in parallel.
//! Seed: 002 (the queue, sets, control blocks, notification trees, the
//! model for f and s).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::time::Instant;

use super::{NodeCall, Team};
use crate::adapt::choice::Alternative;
use crate::adapt::stores::BcastStores;
use crate::core::pattern::{kary_children, knomial_children};
use crate::exec::Combiner;
use crate::shm::prefetch;
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

/// The pipeline through the chunk areas. `data` is the whole message at
/// every rank (the root's to send, the others' to fill).
pub fn pipeline(team: &mut Team<'_>, data: &mut [u8], root: usize) {
    let chunk = team.seg.geo.chunk;
    let stream_out = team.streams_out(data.len());
    let stores = BcastStores::start(team, root, data.len());
    let mut streamed = false;
    let mut off = 0;
    while off < data.len() {
        let len = chunk.min(data.len() - off);
        let s = team.next_step();
        if team.rank == root {
            team.put_stored(s, &data[off..off + len], stores.streams(team, len));
            if let (0, Some(tag)) = (off, stores.tag()) {
                // After put_stored's `writable`: the first chunk is longer
                // than a slot's line where the readers choose.
                team.set_word(s, STORES, u64::from(tag));
            }
            team.publish(s);
        } else {
            // Misses on the chunk overlap the wait for the root.
            prefetch::small(&data[off..off + len], prefetch::LONG_WAIT);
            let from_root = team.wait_data(root, s, len);
            crate::shm::stream::copy_out(&mut data[off..off + len], from_root, stream_out, team.settings.ahead);
            if off == 0 && stores.timed() {
                streamed = team.word(root, s, STORES) != 0;
            }
        }
        team.finish(s);
        off += len;
    }
    stores.end(team, streamed);
}

/// The published word of a pipeline's first step where the readers choose
/// the stores: whether the root's copies streamed ([`BcastStores`]).
const STORES: usize = 0;

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
/// slot (at most the slot size; 0 for the model's), notifications down
/// `tree`.
pub fn queue(team: &mut Team<'_>, data: &mut [u8], root: usize, fragment: usize, tree: Tree) {
    let geo = team.seg.geo;
    let (p, me) = (team.size, team.rank);
    let (slots, sets) = (geo.slots, geo.sets.clamp(1, geo.slots));
    let per_set = slots / sets;
    let f = if fragment == 0 { model_fragment(data.len(), slots * geo.slot_bytes, geo.slot_bytes) } else { fragment };
    let f = f.clamp(1, geo.slot_bytes);
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
        let set = (team.state.memory.queue_op % sets as u64) as usize;
        let op = team.state.memory.queue_op;
        team.state.memory.queue_op += 1;
        let counters = team.seg.set_control(set);
        let mut index = set * per_set;
        if me == root {
            // Acquire: the readers' copies out of this set (before their
            // release of the counter) happen before it is refilled.
            Backoff::until(|| counters.readers.load(Acquire) == 0);
            counters.readers.store(p as u64 - 1, Relaxed);
            // Release: the reader count above is in place before any
            // reader, having acquired the set's operation, counts out.
            counters.op.store(op + 1, Release);
            while index < (set + 1) * per_set && sent < data.len() {
                let len = f.min(data.len() - sent);
                // SAFETY: the root's slot `index` holds slot_bytes >= len
                // bytes, and no reader uses this set until notified below.
                let slot = unsafe { std::slice::from_raw_parts_mut(team.seg.queue_slot(root, index), len) };
                crate::shm::stream::copy_with(slot, &data[sent..sent + len], stream);
                notify(index, len as u64 | tag);
                sent += len;
                index += 1;
            }
        } else {
            // Acquire: pairs with the root's release of the operation.
            Backoff::until(|| counters.op.load(Acquire) == op + 1);
            while index < (set + 1) * per_set && sent < data.len() {
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
                // SAFETY: the root filled `len` bytes of its slot `index`
                // before notifying (acquired above) and will not refill it
                // before this rank counts out of the set.
                let slot = unsafe { std::slice::from_raw_parts(team.seg.queue_slot(root, index), len) };
                crate::shm::stream::copy_out(&mut data[sent..sent + len], slot, false, team.settings.ahead);
                sent += len;
                index += 1;
            }
            // AcqRel: this rank's copies out of the set happen before the
            // root, acquiring a count of zero, refills it.
            counters.readers.fetch_sub(1, AcqRel);
        }
    }
    stores.end(team, streamed);
}

/// The bit of a fragment's notification that tells the readers the root's
/// copies streamed, where they choose ([`BcastStores`]); the rest is the
/// fragment's length.
const STREAMED: u64 = 1 << 63;

/// Published words of the first step: every rank's buffer address, and
/// the root's method ([`timed`]).
const BUFFER: usize = 0;
const METHOD: usize = 1;

/// How a large broadcast moves the message ([`timed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    ZeroCopy,
    Pipeline,
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Method::ZeroCopy => "zero copy",
            Method::Pipeline => "pipeline",
        })
    }
}

/// Message bytes from which [`timed`] times the methods, by default:
/// below, either wins by 1-2 us at most (2 ranks, 128 KiB: 12.3-16.3 us),
/// about what the pipeline's two extra steps cost, so timing cannot gain.
pub const TIMED_FROM: usize = 256 << 10;

impl Alternative for Method {
    const BOTH: [Method; 2] = [Method::ZeroCopy, Method::Pipeline];
}

/// The first step of a zero-copy or timed broadcast: every rank publishes
/// its buffer, the root also `method`; returns the step once all have.
fn announce(team: &mut Team<'_>, data: &mut [u8], method: Option<Method>) -> u64 {
    let s = team.next_step();
    team.writable(s);
    team.set_word(s, BUFFER, data.as_mut_ptr() as u64);
    if let Some(method) = method {
        team.set_word(s, METHOD, method.index() as u64);
    }
    team.publish(s);
    team.wait_all_ready(s);
    s
}

/// The zero-copy broadcast; the team must have [`Team::peers`].
pub fn zero_copy(team: &mut Team<'_>, data: &mut [u8], root: usize) {
    let s = announce(team, data, None);
    copy_across(team, data, root, s);
}

/// Zero copy after [`announce`] as step `s`.
fn copy_across(team: &mut Team<'_>, data: &mut [u8], root: usize, s: u64) {
    let peers = team.peers.expect("zero copy needs peer memory access");
    let (p, me, n) = (team.size, team.rank, data.len());
    // The root writes the last 1/p into each reader; the readers read the
    // rest from the root.
    let split = n - n / p;
    if me == root {
        for r in (0..p).filter(|&r| r != root) {
            peers.write(r, team.word(r, s, BUFFER) as usize + split, &data[split..]);
        }
    } else {
        peers.read(root, team.word(root, s, BUFFER) as usize, &mut data[..split]);
    }
    let t = team.next_step();
    team.finish(s);
    team.publish(t);
    team.wait_all_ready(t);
    team.finish(t);
}

/// `shm`: where ranks outnumber cores, the pipeline; else from the
/// choice's [`crate::adapt::choice::TimedChoice::from`] bytes
/// ([`TIMED_FROM`] by default; with PCOLL_SHM_ADAPT), zero copy or the
/// pipeline as the root's timings favour; else zero copy. The team must
/// have [`Team::peers`].
pub fn timed(team: &mut Team<'_>, data: &mut [u8], root: usize) {
    let n = data.len();
    if team.settings.oversubscribed {
        // Zero copy needs every reader on a core at once, and the root
        // writes into each in turn: Open MPI, 2 cores, pipeline against
        // zero copy, 4 ranks 2 MiB 411-430 against 617-773 us, 8 ranks
        // 128 KiB 48-54 against 130-133 us, 16 MiB 6.0 against 8.0-10.8
        // ms. Timings there are too noisy to choose by (2 MiB, 8 ranks:
        // the choice stayed with zero copy in one run of two).
        return pipeline(team, data, root);
    }
    if !team.state.memory.adaptation.enabled || n < team.state.memory.bcast_method.from() {
        return zero_copy(team, data, root);
    }
    let pick = (team.rank == root).then(|| team.state.memory.bcast_method.pick(n));
    let s = announce(team, data, pick.map(|pick| pick.method));
    // From the moment all have arrived: their lateness is no method's.
    let start = Instant::now();
    match Method::BOTH[team.word(root, s, METHOD) as usize] {
        Method::ZeroCopy => copy_across(team, data, root, s),
        Method::Pipeline => {
            team.finish(s);
            pipeline(team, data, root);
            // The root's time then includes the readers' last copy-out.
            team.barrier();
        }
    }
    if let Some(pick) = pick {
        let choice = &mut team.state.memory.bcast_method;
        if let Some(change) = choice.record(pick, n, start.elapsed()) {
            log::debug!("shm Bcast of {} B and more from this root, now: {change}", choice.class_bytes(&pick));
        }
    }
}

/// [`pipeline`], as the registry runs it.
pub fn run_pipeline(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let (data, root) = call.into_bcast();
    pipeline(team, data, root)
}

/// [`queue`] with the communicator's queue settings, as the registry runs it.
pub fn run_queue(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let (data, root) = call.into_bcast();
    let q = team.state.memory.queue;
    queue(team, data, root, q.fragment, q.tree)
}

/// [`zero_copy`], as the registry runs it.
pub fn run_zero_copy(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let (data, root) = call.into_bcast();
    zero_copy(team, data, root)
}

/// [`timed`], as the registry runs it.
pub fn run_timed(team: &mut Team<'_>, call: NodeCall<'_>, _: &dyn Combiner) {
    let (data, root) = call.into_bcast();
    timed(team, data, root)
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
