//! Which stores a flat Allreduce's, a Reduce's, a Gatherv's or a Bcast's
//! copy-in uses, chosen by timing calls.
//!
//! Streaming stores ([`crate::shm::stream`]) leave a copied chunk in memory;
//! ordinary stores leave it in the writer's cache. Where the two cores
//! share a last-level cache the reader gets ordinary stores' lines from
//! there, and a large Allreduce of 2 ranks runs up to 1.6 times as fast
//! as with streaming stores. Where they do not, the writer first pulls
//! back every line the reader holds and ordinary stores are 2-3 times
//! slower. Nothing measured at start tells the two apart, and a virtual
//! machine's state changes under a running job (docs/measurements.md).
//! So a flat Allreduce's node rank 0 times its chunks, from its copy-in
//! to the end of its fold, made with either kind and every rank uses the
//! cheaper ([`LeaderChoice`]; [`super::choice`]: per size class from
//! [`super::Adaptation::allreduce_from`], the first call a warm-up, one
//! call in 64 exploring). The time includes the wait for the others' chunks: where
//! the cores share a cache, streaming stores cost the readers there, not
//! in the copy-in or the fold (2 ranks, 4 KiB: ordinary 290 ns copy-in,
//! 100 wait, 140 fold; streaming 105, 400, 450), and without the wait the
//! choice took streaming stores at 4-16 KiB. A wait also carries a late
//! peer's lateness, so one call's time counts for at most
//! [`super::choice::OUTLIER`] times its estimate
//! ([`super::choice::TimedChoice::bounded`]).
//!
//! A Reduce's copy-in costs its writers little either way; its cost is in
//! the root's reads. So the root chooses for everyone ([`root_pick`]): it
//! times its whole call (from its arrival to its last fold or copy-out)
//! and publishes the stores it wants next in its line of wishes, which
//! the others read once the root has ended its previous node call (2
//! ranks, cores that share a cache: a 2 MiB `shm_flat` Reduce took a
//! fifth less time with ordinary stores). A step of its own, which the
//! others waited for, cost a round trip per call: 4 KiB at 2 ranks,
//! MPICH host, calls started together, 2.1-2.3 against 1.4-1.5 us
//! (docs/measurements.md).
//!
//! Limitations: rank 0's times stand for every rank's; a Reduce root's
//! time includes the others' lateness. Where ranks outnumber cores a
//! Reduce streams, untimed (its non-roots would wait for the root to be
//! scheduled). Cost: where ordinary stores lose, one call in 64 is 2-3
//! times slower, about 3% on average; a Reduce's non-roots wait for the
//! root's end of its previous call before they copy in. Memory: a few
//! words per class, and a flat Allreduce's rank 0 and a Reduce root a
//! byte per class in their wishes. Seed: none (pcoll's own, from the
//! measurements in docs/measurements.md).

use std::time::{Duration, Instant};

use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::Relaxed;

use super::choice::{Alternative, Pick, Preference, TimedChoice, CLASSES};
use super::Adapting;
use crate::shm::segment::LINE;
use crate::shm::team::{Team, STREAM_FROM};

/// Vector bytes from which a flat Allreduce chooses: PCOLL_SHM_STREAM's
/// default (below, copies into the segment use ordinary stores anyway).
/// From 4 KiB a call is long enough to time (a few us), and where the
/// cores share a cache ordinary stores gain there too (4 KiB, 2 ranks:
/// about a tenth less time; docs/measurements.md). The default of
/// [`super::Adaptation::from`].
pub const ADAPT_FROM: usize = STREAM_FROM;

/// Vector bytes from which a flat Allreduce chooses
/// ([`LeaderChoice`]; the default of its
/// [`super::Adaptation::allreduce_from`]): below 4 KiB too, either kind
/// alone loses where the cores sit one way. 2 KiB, 2 ranks, Intel MPI
/// host, back to back: cores apart, streaming 0.89 against ordinary 1.28
/// us (Intel's stock 1.09); near, 0.64 against 0.38 (stock 0.57); the
/// choice 1.00 apart, 0.42 near. Below 2 KiB a call is too short for the
/// choice to pay (docs/measurements.md).
pub const ALLREDUCE_ADAPT_FROM: usize = 2 << 10;

/// A flat Allreduce's stores in use are timed on one call in this many
/// (trials and explorations on every call): two readings of the clock
/// cost 45 ns, an eighth of a 2 KiB call where the cores are near.
pub const ALLREDUCE_TIMED_EVERY: u64 = 8;

/// The stores of a copy into the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    Streaming,
    Ordinary,
}

impl std::fmt::Display for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stores::Streaming => "streaming stores",
            Stores::Ordinary => "ordinary stores",
        })
    }
}

impl Alternative for Stores {
    const BOTH: [Stores; 2] = [Stores::Streaming, Stores::Ordinary];
}

/// One rank's timings of its copy-in stores.
pub type StoreChoice = TimedChoice<Stores>;

/// Whether a root chooses the stores for a call of `n` bytes whose copies
/// into the segment are `copy` bytes: with PCOLL_SHM_ADAPT, ranks no more
/// than cores (their timings are too noisy, and the others would wait for
/// the root to be scheduled), from [`super::Adaptation::from`] bytes, and
/// where those copies would otherwise stream.
pub fn root_chooses<M: Adapting>(team: &Team<'_, M>, n: usize, copy: usize) -> bool {
    let adaptation = team.state.memory.as_ref();
    adaptation.enabled && !team.settings.oversubscribed && n >= adaptation.from() && team.streams(copy)
}

/// The stores of one Reduce's copy-ins into the segment, as its root
/// chose them ([`root_pick`]); the root also times the call.
pub struct RootPick {
    stores: Stores,
    timing: Option<ReaderTiming>,
}

/// Where a Reduce of `n` bytes to `root` chooses its stores (from
/// [`super::Adaptation::from`], with PCOLL_SHM_ADAPT, ranks no more than
/// cores, and copies of `copy` bytes that would stream; the same decision
/// on every rank, as a Reduce's vector is the same length everywhere):
/// the root's pick is the one it published for the class at the end of
/// its last timed call, which the others read once the root has ended
/// its previous node call ([`Team::wait_previous_end`]), so that they
/// read that very pick. They do not wait for the root's arrival.
///
/// A root of another call (an erroneous program) ended its previous call
/// too: the others copy in as its wish says, and the data's heads show
/// the mismatch to whoever reads them.
pub fn root_pick<M: Adapting>(team: &mut Team<'_, M>, n: usize, root: usize, copy: usize) -> Option<RootPick> {
    if !root_chooses(team, n, copy) {
        return None;
    }
    if team.rank == root {
        let timing = team.state.memory.as_mut().reduce_stores.timing(n, n);
        return Some(RootPick { stores: timing.method(), timing: Some(timing) });
    }
    team.wait_previous_end(root);
    let stores = team.state.memory.as_ref().reduce_stores.published(team, root, REDUCE_WISHES, n);
    Some(RootPick { stores, timing: None })
}

/// Whether a copy of `len` bytes into the segment streams: where it is
/// long enough to ([`Team::streams`]), unless the root picked ordinary
/// stores.
pub fn streams<M>(pick: Option<&RootPick>, team: &Team<'_, M>, len: usize) -> bool {
    pick.is_none_or(|pick| pick.stores == Stores::Streaming) && team.streams(len)
}

impl RootPick {
    /// Whether the root tries stores other than those in use.
    pub fn tries(&self) -> bool {
        self.timing.as_ref().is_some_and(|timing| !timing.in_use())
    }

    /// Before the end of the call: the root counts its time and publishes
    /// its stores for the next call of the class.
    pub fn record<M: Adapting>(self, team: &mut Team<'_, M>) {
        if let Some(timing) = self.timing {
            let wishes = &team.seg.control(team.rank).wishes[REDUCE_WISHES..];
            let choice = &mut team.state.memory.as_mut().reduce_stores;
            if let Some(change) = choice.end(&timing, wishes) {
                log::debug!(
                    "shm Reduce of {} B and more to this root: copies in now with {change}",
                    choice.class_bytes(&timing)
                );
            }
        }
    }
}

/// A Gatherv root's choice of the stores the others copy their blocks
/// into the segment with: they bear the copy, the root the reads. The
/// others do not wait for the root (a small block's owner returns at
/// once), so the root keeps, per size class of a block, the stores it
/// wants next time in a line of its control block
/// ([`crate::shm::segment::Control::wishes`]); an owner reads it once
/// its `writable` for the call's first step has waited for the root's
/// `finish` of its previous call, which is when the root sets it. The
/// root times its calls whose other blocks share a class, from its
/// arrival (with hot blocks, the last arrival: see the Gatherv `Route`)
/// to its last copy (2 ranks, cores that share a cache, 8-128
/// KiB blocks: about a tenth less time with ordinary stores;
/// docs/measurements.md). A Bcast reader keeps
/// the same kind of choice for its root's copies ([`BcastStores`]).
/// A Gatherv root keeps the route of its owners' blocks the same way
/// ([`crate::algos::node::gatherv_shm::Route`]).
#[derive(Debug)]
pub struct ReaderChoice<K = Stores> {
    choice: TimedChoice<K>,
    /// Per class: the pick this rank has published for its next call.
    next: [Option<Pick<K>>; CLASSES],
}

/// A call that a reader (a Gatherv root, a Bcast reader) times.
pub struct ReaderTiming<K = Stores> {
    pick: Pick<K>,
    largest: usize,
    bytes: usize,
    start: Instant,
}

/// Whether the owner of a block of `block` bytes copies `copy` of them
/// into the segment with streaming stores for `root`: where the copy is
/// long enough to ([`Team::streams`]) and the root wants them. After
/// [`Team::writable`] for the call's first step.
pub fn wanted_streams<M: Adapting>(team: &Team<'_, M>, root: usize, block: usize, copy: usize) -> bool {
    // Relaxed: ordered by the acquire of the root's `done` in `writable`.
    team.streams(copy)
        && team.state.memory.as_ref().gatherv_stores.published(team, root, GATHERV_WISHES, block) == Stores::Streaming
}

/// Where the wishes of a rank that reads others' copies start in its line
/// ([`crate::shm::segment::Control::wishes`]), one per size class: as a
/// Gatherv root, and as a Bcast reader.
/// After them, a Gatherv root's routes ([`ReaderChoice::published`]): for
/// blocks new to their owners' caches, and for blocks sent from the
/// buffer their owner sent the last one from (hot).
pub const GATHERV_WISHES: usize = 0;
const BCAST_WISHES: usize = CLASSES;
pub const GATHERV_ROUTES: usize = 2 * CLASSES;
pub const GATHERV_HOT_ROUTES: usize = 3 * CLASSES;
/// Node rank 0's stores for a flat Allreduce ([`LeaderChoice`]), in the
/// second line: two per class, by the parity of the class's calls.
const ALLREDUCE_WISHES: usize = LINE;
/// A Reduce root's stores ([`root_pick`]), after them.
const REDUCE_WISHES: usize = ALLREDUCE_WISHES + 2 * CLASSES;
const _: () = assert!(GATHERV_HOT_ROUTES + CLASSES <= LINE);
const _: () = assert!(REDUCE_WISHES + CLASSES <= 2 * LINE);

/// At a Gatherv root's arrival, with the others' block lengths: the
/// call's timing if it chooses (with PCOLL_SHM_ADAPT, ranks no more than
/// cores, blocks from [`super::Adaptation::from`] bytes that would
/// stream, all in one class). Its method is what the owners read.
pub fn reader_start<M: Adapting>(
    team: &mut Team<'_, M>,
    others: impl Iterator<Item = usize> + Clone,
) -> Option<ReaderTiming> {
    let largest = others.clone().max().unwrap_or(0);
    let adaptation = team.state.memory.as_ref();
    let class = adaptation.class(largest);
    let one_class = others.clone().filter(|&len| len > 0).all(|len| adaptation.class(len) == class);
    if !root_chooses(team, largest, largest) || !one_class {
        return None;
    }
    Some(team.state.memory.as_mut().gatherv_stores.timing(largest, others.sum()))
}

/// At the end of a timed Gatherv, before the root's `finish`: counts the
/// call and publishes the class's stores for the next one. The owners
/// read the wish after they acquire that `finish` in `writable`.
pub fn reader_end<M: Adapting>(team: &mut Team<'_, M>, timing: ReaderTiming) {
    let wishes = &team.seg.control(team.rank).wishes[GATHERV_WISHES..];
    let choice = &mut team.state.memory.as_mut().gatherv_stores;
    if let Some(change) = choice.end(&timing, wishes) {
        log::debug!(
            "shm Gatherv of {} B blocks and more to this root: copies in now with {change}",
            choice.class_bytes(&timing)
        );
    }
}

impl<K: Alternative> ReaderChoice<K> {
    /// Nothing timed yet; classes from `from` bytes.
    pub fn new(from: usize) -> ReaderChoice<K> {
        ReaderChoice::with(TimedChoice::new(from))
    }

    /// A reader's choice of copy-in stores, classes from `from` bytes:
    /// each call counts for at most [`super::choice::OUTLIER`] times its
    /// estimate, as its time carries the writers' lateness. Unbounded, a
    /// late peer's single calls (4-60 ns/B where the estimates were
    /// 0.2-0.5) turned a Reduce root's choice again and again, mostly to
    /// the slower stores (2 ranks, MPICH host, 4 KiB calls started
    /// together: 6-7 changes in 0.3 s, 1.8 us a call against 1.7 bounded;
    /// docs/measurements.md). A Reduce and a Gatherv root's choices, and
    /// a Bcast reader's, whose times carry a late root's lateness (2
    /// ranks, cold 4-16 KiB calls started together: 4-12% less time
    /// bounded, relative to the same job's stock MPI).
    pub fn bounded(from: usize) -> ReaderChoice<K> {
        ReaderChoice::with(TimedChoice::new(from).bounded())
    }

    /// A reader's choice by `choice`'s rules.
    pub fn with(choice: TimedChoice<K>) -> ReaderChoice<K> {
        ReaderChoice { choice, next: [None; CLASSES] }
    }

    /// The size class of calls of `len` bytes.
    pub fn class(&self, len: usize) -> usize {
        self.choice.class(len)
    }

    /// The pick for a call whose largest copy is `largest` bytes: the one
    /// published for its class last time. Never published for this class:
    /// the writers read the zeroed line (the first method), which the
    /// class's first pick (a warm-up) uses too.
    fn start(&mut self, largest: usize) -> Pick<K> {
        let class = self.choice.class(largest);
        self.next[class].take().unwrap_or_else(|| self.choice.pick(largest))
    }

    /// A timing that ends uncounted: its pick is the class's next.
    pub fn put_back(&mut self, timing: ReaderTiming<K>) {
        let class = self.choice.class(timing.largest);
        self.next[class] = Some(timing.pick);
    }

    /// A timed call from now whose largest block is `largest` bytes of
    /// `bytes` in all, by the method published for its class.
    pub fn timing(&mut self, largest: usize, bytes: usize) -> ReaderTiming<K> {
        ReaderTiming { pick: self.start(largest), largest, bytes, start: Instant::now() }
    }

    /// The method rank `r` has published among `wishes` in its line for
    /// calls of `len` bytes (the first, as the zeroed line says, before it
    /// has chosen). Relaxed: a wish only steers; where it must be current,
    /// the caller orders the load.
    pub fn published<M>(&self, team: &Team<'_, M>, r: usize, wishes: usize, len: usize) -> K {
        let wish = team.seg.control(r).wishes[wishes + self.class(len)].load(Relaxed);
        K::BOTH[usize::from(wish != 0)]
    }

    /// Counts a timed call, picks the class's method for the next one and
    /// publishes it among `wishes` (this rank's, from the reading
    /// collective's start); returns the class's new preference if it
    /// changed.
    pub fn end(&mut self, timing: &ReaderTiming<K>, wishes: &[AtomicU8]) -> Option<Preference<K>> {
        let change = self.choice.record(timing.pick, timing.bytes, timing.start.elapsed());
        let class = self.choice.class(timing.largest);
        let next = self.choice.pick(timing.largest);
        self.next[class] = Some(next);
        // Stored only when it changes (twice per exploring call), so that
        // the writers keep the line in their caches. Relaxed: a wish only
        // steers speed; the callers order it where it must be current.
        let method = next.method.index() as u8;
        if wishes[class].load(Relaxed) != method {
            wishes[class].store(method, Relaxed);
        }
        change
    }

    /// Whether this rank's next call of `len` bytes, as published, ends
    /// an exploration.
    pub fn next_ends_exploration(&self, len: usize) -> bool {
        self.next[self.class(len)].is_some_and(|pick| pick.ends_exploration())
    }

    /// Makes this rank's next call of `len` bytes, as published, try the
    /// method not in use, and publishes that among `wishes`.
    pub fn explore_next(&mut self, len: usize, wishes: &[AtomicU8]) {
        let class = self.class(len);
        if let Some(pick) = self.next[class].and_then(|next| self.choice.exploring_instead(next)) {
            self.next[class] = Some(pick);
            // Relaxed: as in `end`.
            wishes[class].store(pick.method.index() as u8, Relaxed);
        }
    }

    /// The lower bound of the bytes of `timing`'s class, for logs.
    pub fn class_bytes(&self, timing: &ReaderTiming<K>) -> usize {
        self.choice.class_bytes(&timing.pick)
    }

    /// As [`TimedChoice::summary`].
    pub fn summary(&self, what: &str) -> Vec<String> {
        self.choice.summary(what)
    }
}

impl<K: Copy> ReaderTiming<K> {
    /// The method the call is timed for.
    pub fn method(&self) -> K {
        self.pick.method
    }

    /// Counts the call's time from `start` (the last arrival of the ranks
    /// whose copies it reads), not from this rank's.
    pub fn started(&mut self, start: Instant) {
        self.start = start;
    }

    /// Whether the call uses the method in use ([`Pick::in_use`]).
    pub fn in_use(&self) -> bool {
        self.pick.in_use()
    }

    /// The method the call ran by, where it was not the one published
    /// (the writers read a wish of the call before): the time is its.
    pub fn ran_by(&mut self, method: K) {
        self.pick.method = method;
    }
}

/// A Bcast's copies into the segment where its readers choose their
/// stores (with PCOLL_SHM_ADAPT, ranks no more than cores, messages from
/// [`super::Adaptation::from`] bytes that would stream; the same on every
/// rank).
///
/// Each reader times its calls per size class, from its arrival to its
/// last copy out, and publishes the stores it wants next in its line of
/// wishes. The root reads every reader's wish when it arrives and streams
/// if any of them wants it. A root may start a call before a reader has
/// published its wish, so the root tags the message with the stores it
/// used, and the reader counts its time for those (2 ranks, cores that
/// share a cache, 4-12 KiB: about an eighth less time with ordinary
/// stores; docs/measurements.md).
pub enum BcastStores {
    /// Copies stream as [`Team::streams`] says.
    Unchosen,
    /// The root: whether its copies stream, from the readers' wishes.
    Root { stream: bool },
    /// A reader: its timing of the call.
    Reader(ReaderTiming),
}

impl BcastStores {
    /// At the arrival of a Bcast of `n` bytes from `root`.
    pub fn start<M: Adapting>(team: &mut Team<'_, M>, root: usize, n: usize) -> BcastStores {
        if !root_chooses(team, n, n) {
            BcastStores::Unchosen
        } else if team.rank == root {
            let readers = &team.state.memory.as_ref().bcast_stores;
            let stream =
                (0..team.size).any(|r| r != root && readers.published(team, r, BCAST_WISHES, n) == Stores::Streaming);
            BcastStores::Root { stream }
        } else {
            BcastStores::Reader(team.state.memory.as_mut().bcast_stores.timing(n, n))
        }
    }

    /// Whether the root's copy of `len` bytes into the segment streams.
    pub fn streams<M: Adapting>(&self, team: &Team<'_, M>, len: usize) -> bool {
        team.streams(len) && !matches!(self, BcastStores::Root { stream: false })
    }

    /// The root's tag for the message: whether its copies streamed, where
    /// the readers choose.
    pub fn tag(&self) -> Option<bool> {
        match *self {
            BcastStores::Root { stream } => Some(stream),
            _ => None,
        }
    }

    /// Whether the root chooses the stores of this call (the same on
    /// every rank).
    pub fn chosen(&self) -> bool {
        !matches!(self, BcastStores::Unchosen)
    }

    /// Whether this rank is a reader that times the call (and so reads
    /// the root's tag).
    pub fn timed(&self) -> bool {
        matches!(self, BcastStores::Reader(_))
    }

    /// A call that moved no bytes through the segment after all (the
    /// window): a reader counts no time, and keeps its pick for the next.
    pub fn drop_timing<M: Adapting>(self, team: &mut Team<'_, M>) {
        if let BcastStores::Reader(timing) = self {
            team.state.memory.as_mut().bcast_stores.put_back(timing);
        }
    }

    /// At the end of the call: a reader counts its time for the stores
    /// the root tagged the message with (`streamed`), and publishes its
    /// wish for the next call.
    pub fn end<M: Adapting>(self, team: &mut Team<'_, M>, streamed: bool) {
        if let BcastStores::Reader(mut timing) = self {
            timing.ran_by(if streamed { Stores::Streaming } else { Stores::Ordinary });
            let wishes = &team.seg.control(team.rank).wishes[BCAST_WISHES..];
            let choice = &mut team.state.memory.as_mut().bcast_stores;
            if let Some(change) = choice.end(&timing, wishes) {
                log::debug!("shm Bcast of {} B and more, as reader: wants now {change}", choice.class_bytes(&timing));
            }
        }
    }
}

/// A flat Allreduce's stores, the same on every rank: node rank 0 picks
/// them by its timings for each size class one call ahead and publishes
/// the pick among its wishes before its first chunk of the call; the
/// others read it at their next call of the class. Where each rank chose
/// alone and the choice timed the waits for the others' chunks, a rank's
/// times followed its peer's stores as much as its own, and the two
/// switched each other back and forth (4 KiB, 2 ranks: up to 290 changes
/// in 3,300 calls, the ranks ending on different stores).
///
/// The wish of a class's call `k + 1` goes to the place of its parity:
/// a rank reads it after it has acquired rank 0's first chunk of call `k`,
/// and rank 0 cannot write the place again (for call `k + 3`) before it has
/// the reader's chunks of call `k + 1`, read after that wish.
#[derive(Debug)]
pub struct LeaderChoice {
    choice: StoreChoice,
    /// Per class: rank 0's pick for the class's next call.
    next: [Option<Pick<Stores>>; CLASSES],
    /// Per class: calls so far, the same on every rank.
    calls: [u64; CLASSES],
}

/// One flat Allreduce's stores ([`LeaderChoice::start`]).
#[derive(Clone, Copy, Debug)]
pub struct LeaderCall {
    pub stores: Stores,
    /// Rank 0's pick of the stores where it times the call (every trial
    /// or exploration, one call in [`ALLREDUCE_TIMED_EVERY`] of the stores
    /// in use); none on others and on a class's first call (whose stores,
    /// the first kind, no one picked).
    pub timed: Option<Pick<Stores>>,
}

impl LeaderChoice {
    /// Nothing timed yet; classes from `from` bytes. Bounded: a time
    /// includes the waits for the others' chunks, and so a late peer's
    /// lateness.
    pub fn new(from: usize) -> LeaderChoice {
        LeaderChoice { choice: StoreChoice::new(from).bounded(), next: [None; CLASSES], calls: [0; CLASSES] }
    }

    /// At the start of a call of `n` bytes: its stores, as rank 0 picked
    /// them; rank 0 also picks the class's next call's and publishes them.
    pub fn start<M: Adapting>(team: &mut Team<'_, M>, n: usize) -> LeaderCall {
        let memory = team.state.memory.as_mut();
        let leader = &mut memory.allreduce_stores;
        let class = leader.choice.class(n);
        let call = leader.calls[class];
        leader.calls[class] += 1;
        let wishes = &team.seg.control(0).wishes[ALLREDUCE_WISHES + 2 * class..][..2];
        let place = |call: u64| &wishes[(call % 2) as usize];
        if team.rank != 0 {
            // Relaxed: ordered by this rank's acquire of rank 0's first
            // chunk of the class's last call (see above).
            let stores = Stores::BOTH[usize::from(place(call).load(Relaxed) != 0)];
            return LeaderCall { stores, timed: None };
        }
        let picked = leader.next[class].take();
        let next = leader.choice.pick(n);
        leader.next[class] = Some(next);
        let wish = place(call + 1);
        let method = next.method.index() as u8;
        // Stored only when it changes, so that the others keep the line
        // in their caches. Relaxed: ordered by this call's first publish.
        if wish.load(Relaxed) != method {
            wish.store(method, Relaxed);
        }
        let stores = picked.map_or(Stores::BOTH[0], |pick| pick.method);
        LeaderCall { stores, timed: picked.filter(|pick| pick.sampled(ALLREDUCE_TIMED_EVERY)) }
    }

    /// Vector bytes from which the choice runs.
    pub fn from(&self) -> usize {
        self.choice.from()
    }

    /// At the end of rank 0's call of `n` bytes that its stopwatch timed
    /// at `took`: counts it; returns the class's new preference if it
    /// changed.
    pub fn record(&mut self, pick: Pick<Stores>, n: usize, took: Duration) -> Option<Preference<Stores>> {
        self.choice.record(pick, n, took)
    }

    /// The lower bound of the bytes of `pick`'s class, for logs.
    pub fn class_bytes(&self, pick: &Pick<Stores>) -> usize {
        self.choice.class_bytes(pick)
    }

    /// One line per class that has chosen (rank 0's), for the log.
    pub fn summary(&self, what: &str) -> Vec<String> {
        self.choice.summary(what)
    }
}

/// Adds up the time of the parts of a call it is asked to time; does
/// nothing (not even read the clock) when off.
pub struct Stopwatch {
    on: bool,
    pub total: Duration,
}

impl Stopwatch {
    pub fn new(on: bool) -> Stopwatch {
        Stopwatch { on, total: Duration::ZERO }
    }

    /// A part starts: the time, if on.
    pub fn start(&self) -> Option<Instant> {
        self.on.then(Instant::now)
    }

    /// The part begun at `started` ends.
    pub fn stop(&mut self, started: Option<Instant>) {
        if let Some(started) = started {
            self.total += started.elapsed();
        }
    }
}
