//! Which of two ways to run a call, chosen by timing calls.
//!
//! Where the faster of two methods depends on the machine's state (on a
//! virtual machine, where the host has put the virtual CPUs), and that
//! state changes under a running job, a rank times its calls made either
//! way and uses the cheaper:
//! - per size class (message bytes, powers of two from the choice's
//!   [`TimedChoice::from`]) one cost estimate per method, in nanoseconds
//!   per byte of what the caller times;
//! - the class's first call uses the first method to warm up (its
//!   buffers' first touch is not the method's cost) and is not counted;
//!   the second uses the first method, the third the second; then the
//!   method of the lower estimate, except one call in [`EXPLORE`], which
//!   tries the other and moves that method's estimate halfway to its
//!   time;
//! - the method in use moves its estimate a quarter of the way to each
//!   call's time;
//! - after a change of method, the method left is tried again
//!   [`RECHECK_AFTER`] calls later (as an exploration): a burst of slow
//!   calls otherwise held a class on the slower method until the next
//!   regular exploration.
//!
//! One lucky call does not switch: a Reduce root's time carries the
//! others' lateness, and with the exploring call's time taken whole, a
//! flat Reduce at 2 ranks switched to its slower stores on nearly every
//! exploration (128 KiB, osu mode, 0.3 s: 87 switches; halfway, 17 and
//! 71 in two runs). Where single calls can take many times as long as
//! the others, a choice may be [`TimedChoice::bounded`], so that one
//! unlucky call does not switch either.
//! A lasting change of the method not in use is followed within a few
//! explorations, one of the method in use within a few calls.
//!
//! Trace, class 1-2 MiB, streaming or ordinary stores: call 0 streams
//! (warm-up), 1 streams (0.30 ns/B), 2 ordinary (0.18) -> ordinary from
//! call 3; call 63 streams (0.24: estimate 0.27), no change; the vCPUs
//! move, ordinary reads 0.50, 0.55, ... -> the average passes 0.27 and
//! streaming takes over until the next exploration.
//!
//! Users: a flat Allreduce's copy-in stores ([`super::stores`], each rank
//! alone), a Bcast's method (the `shm` Bcast of the node algorithms, the
//! root for everyone; it times the queue on one call in a few,
//! [`Pick::sampled`]), flat against zero copy for reductions on hot
//! buffers (rank 0 for everyone), a Gatherv block's route (the root for
//! its owners, through its wishes). Limitations: an application that alternates sizes within
//! one class shares one estimate. Cost: where the other method loses, one
//! call in 64 pays its loss. Memory: a few words per class. Seed: none
//! (pcoll's own, from measurements on the development VM).

use std::fmt::{Debug, Display};
use std::marker::PhantomData;
use std::time::Duration;

/// One call in this many tries the method not in use.
pub const EXPLORE: u64 = 64;

/// The most a call's time counts for in a [`TimedChoice::bounded`] choice,
/// as a multiple of its method's estimate (and the least, as a fraction):
/// a call that waited for a preempted peer, or met lines another
/// library's calls had taken, would otherwise switch alone. 2 ranks, hot
/// 32 KiB Gatherv blocks back to back on a Zen 3 VM: single calls through
/// the area took 5-15 times their estimate, and a root switched to
/// direct, twice as slow, 20 times in 0.3 s. A lasting change is followed
/// all the same, at twice the estimate per call. Bounded: hot Gatherv
/// routes, a Bcast's hot way, a flat Allreduce's stores and those a
/// reader chooses (timed with the waits for the others: Reduce and
/// Gatherv roots, Bcast readers); not flat against zero copy, which it made
/// slower (docs/measurements.md).
pub const OUTLIER: f64 = 2.0;

/// Where a change of method costs the call after it
/// ([`TimedChoice::paying_changes`]): calls in a row that try the method
/// not in use, the first of them not counted.
pub const EXPLORING_AFTER_CHANGE: u64 = 3;

/// Calls after a class changes its method at which it tries the method it
/// left again (an exploration of [`TimedChoice`]'s length): a burst of
/// slow calls (a preempted peer) can raise the estimate of the method in
/// use past the other's, and the next regular exploration may be 64 calls
/// away. 2 ranks, hot 16 KiB Bcasts back to back on a Zen 3 VM: the root
/// times the queue at 1.3-1.9 us a call (median) and zero copy at 4.8-5.1,
/// yet used zero copy on 12-18% of its calls, in runs of up to 64.
pub const RECHECK_AFTER: u64 = 8;

/// Size classes: `from << i`, the last one open-ended (a flat
/// Allreduce's stores: 4 KiB to 128 MiB).
pub const CLASSES: usize = 16;

/// The size class of a call of `len` bytes where classes start at `from`
/// bytes (smaller calls fall in the first).
pub fn size_class(from: usize, len: usize) -> usize {
    let from = from.max(1);
    ((len.max(from) / from).ilog2() as usize).min(CLASSES - 1)
}

/// Two ways of running a call, the first of them the default.
pub trait Alternative: Copy + Eq + Debug + Display {
    /// The first method (warm-up, first trial) and the second.
    const BOTH: [Self; 2];

    fn index(self) -> usize {
        usize::from(self != Self::BOTH[0])
    }

    fn other(self) -> Self {
        Self::BOTH[1 - self.index()]
    }
}

/// What a call's time does to its method's estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Update {
    /// Warm-up: nothing.
    Skip,
    /// A first call: the time is the estimate.
    Replace,
    /// An exploring call: the estimate moves halfway to the time.
    Explore,
    /// The method in use: a moving average.
    Average,
}

/// One call's choice, handed back to [`TimedChoice::record`] with its time.
#[derive(Clone, Copy, Debug)]
pub struct Pick<K> {
    class: usize,
    /// The class's calls before this one.
    call: u64,
    pub method: K,
    update: Update,
}

impl<K> Pick<K> {
    /// Whether the caller must time this call: every call of a trial, a
    /// warm-up or an exploration, and one in `every` of the method in use
    /// (for callers whose timing costs the call, such as a Bcast root that
    /// waits for its readers; the others are not recorded).
    pub fn sampled(&self, every: u64) -> bool {
        self.update != Update::Average || self.call.is_multiple_of(every.max(1))
    }

    /// Whether the call uses its class's method in use (not a warm-up, a
    /// trial or an exploration).
    pub fn in_use(&self) -> bool {
        self.update == Update::Average
    }

    /// Whether the call is the last of an exploration of the method not
    /// in use.
    pub fn ends_exploration(&self) -> bool {
        self.update == Update::Explore && self.call % EXPLORE == EXPLORE - 1
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Class {
    calls: u64,
    /// Nanoseconds per byte, indexed by [`Alternative::index`].
    cost: [Option<f64>; 2],
    /// The method of the class's last call, by index.
    last: Option<usize>,
    /// The call from which the class runs its method since it changed,
    /// until it has tried the method it left again ([`RECHECK_AFTER`]).
    changed_at: Option<u64>,
}

impl Class {
    /// The method of the lower estimate, once both are known.
    fn preferred<K: Alternative>(&self) -> Option<K> {
        match self.cost {
            [Some(first), Some(second)] if second < first => Some(K::BOTH[1]),
            [Some(_), Some(_)] => Some(K::BOTH[0]),
            _ => None,
        }
    }

    /// The preferred method with both estimates, once both are known.
    fn preference<K: Alternative>(&self) -> Option<Preference<K>> {
        let method = self.preferred()?;
        Some(Preference { method, estimates: self.cost.map(|cost| cost.unwrap_or(f64::NAN)) })
    }
}

/// A class's method and both estimates (ns per byte, in the order of
/// [`Alternative::BOTH`]), shown as logs show them:
/// `method (a ns/B first, b second)`.
#[derive(Clone, Copy, Debug)]
pub struct Preference<K> {
    pub method: K,
    pub estimates: [f64; 2],
}

impl<K: Alternative> Display for Preference<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ([first, second], [a, b]) = (K::BOTH, self.estimates);
        write!(f, "{} ({a:.3} ns/B {first}, {b:.3} {second})", self.method)
    }
}

/// One rank's estimates, kept across calls.
#[derive(Debug)]
pub struct TimedChoice<K> {
    classes: [Class; CLASSES],
    from: usize,
    /// Calls in a row that explore: 1, or [`EXPLORING_AFTER_CHANGE`],
    /// where the call after a change of method is not counted
    /// ([`TimedChoice::paying_changes`]).
    exploring: u64,
    /// How far one call's time counts: [`OUTLIER`], or unbounded.
    bound: f64,
    method: PhantomData<K>,
}

impl<K: Alternative> TimedChoice<K> {
    /// Nothing timed yet; classes from `from` bytes, the message size
    /// from which its user times its calls (smaller ones are too short).
    pub fn new(from: usize) -> Self {
        TimedChoice {
            classes: [Class::default(); CLASSES],
            from,
            exploring: 1,
            bound: f64::INFINITY,
            method: PhantomData,
        }
    }

    /// This choice, with each call's time counting for at most
    /// [`OUTLIER`] times its method's estimate (and at least its inverse).
    pub fn bounded(self) -> Self {
        TimedChoice { bound: OUTLIER, ..self }
    }

    /// As [`TimedChoice::new`], for methods whose change costs the call
    /// after it more than either method (the other way's lines and pages
    /// still in the caches, a peer still busy with its part): a call whose
    /// method differs from its class's last call's is not counted, and
    /// explorations run [`EXPLORING_AFTER_CHANGE`] calls.
    pub fn paying_changes(from: usize) -> Self {
        TimedChoice { exploring: EXPLORING_AFTER_CHANGE, ..Self::new(from) }
    }

    /// Message bytes from which calls are timed.
    pub fn from(&self) -> usize {
        self.from
    }

    /// The size class of a call of `len` bytes.
    pub fn class(&self, len: usize) -> usize {
        size_class(self.from, len)
    }

    /// The method of this call of `len` bytes.
    pub fn pick(&mut self, len: usize) -> Pick<K> {
        let class = self.class(len);
        let c = &mut self.classes[class];
        let call = c.calls;
        c.calls += 1;
        let [first, second] = K::BOTH;
        let recheck = c.changed_at.map(|at| at + RECHECK_AFTER);
        let rechecking = recheck.is_some_and(|from| (from..from + self.exploring).contains(&call));
        if recheck.is_some_and(|from| call + 1 >= from + self.exploring) {
            c.changed_at = None;
        }
        let (method, update) = match (c.cost, c.preferred::<K>()) {
            _ if call == 0 => (first, Update::Skip),
            ([None, _], _) => (first, Update::Replace),
            ([_, None], _) => (second, Update::Replace),
            (_, Some(best)) if rechecking || call % EXPLORE >= EXPLORE - self.exploring => {
                (best.other(), Update::Explore)
            }
            (_, best) => (best.unwrap_or(first), Update::Average),
        };
        let changed = c.last.replace(method.index()) != Some(method.index());
        let update = if changed && self.exploring > 1 { Update::Skip } else { update };
        Pick { class, call, method, update }
    }

    /// `pick`, the class's last, made an exploration of the method not in
    /// use if it used the method in use; None if it did not. For a choice
    /// whose calls come mostly where another choice explores, so that its
    /// own explorations are too rare to keep its estimates current.
    pub fn exploring_instead(&mut self, pick: Pick<K>) -> Option<Pick<K>> {
        let c = &mut self.classes[pick.class];
        let best = c.preferred::<K>().filter(|_| pick.in_use())?;
        let method = best.other();
        c.last = Some(method.index());
        Some(Pick { method, update: Update::Explore, ..pick })
    }

    /// Counts a call's `took` for `len` bytes; returns the class's new
    /// preference when it changed.
    pub fn record(&mut self, pick: Pick<K>, len: usize, took: Duration) -> Option<Preference<K>> {
        let c = &mut self.classes[pick.class];
        let before = c.preferred::<K>();
        let sample = took.as_nanos() as f64 / len.max(1) as f64;
        let cost = &mut c.cost[pick.method.index()];
        let bounded = |old: f64| sample.clamp(old / self.bound, old * self.bound);
        *cost = match (pick.update, *cost) {
            (Update::Skip, old) => old,
            (Update::Average, Some(old)) => Some(old + (bounded(old) - old) / 4.0),
            (Update::Explore, Some(old)) => Some(old + (bounded(old) - old) / 2.0),
            _ => Some(sample),
        };
        let after = c.preference::<K>()?;
        let changed = before.is_some_and(|before| before != after.method);
        if changed {
            c.changed_at = Some(c.calls);
        }
        (before != Some(after.method)).then_some(after)
    }

    /// The message bytes of `pick`'s class, for logs: its lower bound.
    pub fn class_bytes(&self, pick: &Pick<K>) -> usize {
        self.from << pick.class
    }

    /// One line per class that has chosen, its messages called `what`:
    /// their size, calls, the method in use and both estimates (for the
    /// log when the communicator goes).
    pub fn summary(&self, what: &str) -> Vec<String> {
        (self.classes.iter().enumerate())
            .filter_map(|(i, c)| {
                let preference = c.preference::<K>()?;
                Some(format!("{what} from {} B: {} calls, {preference}", self.from << i, c.calls))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the tests' classes start.
    const FROM: usize = 1024;

    /// A pair of methods for the tests.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Way {
        A,
        B,
    }

    impl Display for Way {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(if *self == Way::A { "a" } else { "b" })
        }
    }

    impl Alternative for Way {
        const BOTH: [Way; 2] = [Way::A, Way::B];
    }

    /// Runs `calls` calls of `len` bytes, each taking `cost(method, call)`
    /// ns per byte; returns the methods used.
    fn run(choice: &mut TimedChoice<Way>, len: usize, calls: u64, cost: impl Fn(Way, u64) -> f64) -> Vec<Way> {
        (0..calls)
            .map(|call| {
                let pick = choice.pick(len);
                let took = Duration::from_nanos((cost(pick.method, call) * len as f64) as u64);
                choice.record(pick, len, took);
                pick.method
            })
            .collect()
    }

    fn count(used: &[Way], way: Way) -> usize {
        used.iter().filter(|&&s| s == way).count()
    }

    /// Records a call of 1 MiB that took `ns` per byte.
    fn record_mib(choice: &mut TimedChoice<Way>, pick: Pick<Way>, ns: f64) {
        choice.record(pick, 1 << 20, Duration::from_nanos((ns * (1 << 20) as f64) as u64));
    }

    /// Records a call of 1 MiB at B's 0.2 ns per byte or A's 0.3.
    fn record_b_cheaper(choice: &mut TimedChoice<Way>, pick: Pick<Way>) {
        record_mib(choice, pick, if pick.method == Way::B { 0.2 } else { 0.3 });
    }

    #[test]
    fn warms_up_tries_both_then_keeps_the_cheaper_exploring_once_in_64() {
        let mut choice = TimedChoice::new(FROM);
        let used = run(&mut choice, 1 << 20, 3 + 2 * EXPLORE, |s, _| if s == Way::B { 0.2 } else { 0.3 });
        assert_eq!(used[..3], [Way::A, Way::A, Way::B]);
        assert_eq!(count(&used[3..], Way::A), 2, "one exploring call per 64");
        assert_eq!(used[EXPLORE as usize - 1], Way::A);
    }

    #[test]
    fn the_warm_up_call_is_not_counted() {
        let mut choice = TimedChoice::new(FROM);
        // The first call is slow whatever the method (first touch).
        let used = run(&mut choice, 1 << 20, 10, |s, call| match (call, s) {
            (0, _) => 5.0,
            (_, Way::A) => 0.2,
            (_, Way::B) => 0.4,
        });
        assert_eq!(count(&used[3..], Way::B), 0, "{used:?}");
    }

    #[test]
    fn a_change_of_state_is_followed_within_a_few_calls() {
        let mut choice = TimedChoice::new(FROM);
        // B is cheaper for 200 calls, then 3 times dearer.
        let used = run(&mut choice, 4 << 20, 400, |s, call| match (s, call < 200) {
            (Way::A, _) => 0.3,
            (Way::B, true) => 0.2,
            (Way::B, false) => 0.6,
        });
        assert_eq!(count(&used[3..200], Way::B), 197 - 3, "all but the explorations");
        let (explorations, recheck) = (3, 1);
        assert_eq!(count(&used[204..], Way::B), explorations + recheck, "{:?}", &used[200..220]);
    }

    #[test]
    fn bounded_one_slow_call_in_a_row_of_cheap_ones_does_not_switch() {
        let mut choice = TimedChoice::new(FROM).bounded();
        // B is cheaper, but every 16th of its calls takes 20 times as long
        // (a preempted peer, lines taken by another library's calls).
        let used = run(&mut choice, 1 << 20, 3 + 2 * EXPLORE, |s, call| match s {
            Way::A => 0.3,
            Way::B if call % 16 == 15 => 4.0,
            Way::B => 0.2,
        });
        assert_eq!(count(&used[3..], Way::A), 2, "only the explorations: {used:?}");
    }

    #[test]
    fn paying_changes_the_call_after_a_change_is_not_counted() {
        let mut choice = TimedChoice::paying_changes(FROM);
        // Each way costs 10 times as much right after the other; B is
        // cheaper in a row.
        let mut last = None;
        let mut used = Vec::new();
        for _ in 0..3 + 2 * EXPLORE {
            let pick = choice.pick(1 << 20);
            let way = pick.method;
            let ns = match (way, last.replace(way) == Some(way)) {
                (_, false) => 10.0,
                (Way::A, true) => 0.3,
                (Way::B, true) => 0.2,
            };
            record_mib(&mut choice, pick, ns);
            used.push(way);
        }
        assert_eq!(used[..4], [Way::A, Way::A, Way::B, Way::B], "both tried, each counted in a row");
        let explored = EXPLORING_AFTER_CHANGE as usize;
        assert_eq!(count(&used[4..], Way::A), 2 * explored, "{explored} exploring calls per 64");
        let at = EXPLORE as usize - explored;
        assert_eq!(used[at - 1..at + explored + 1], [Way::B, Way::A, Way::A, Way::A, Way::B]);
    }

    #[test]
    fn sampling_times_every_trial_and_exploration_and_one_routine_call_in_every() {
        let mut choice: TimedChoice<Way> = TimedChoice::paying_changes(FROM);
        let mut sampled = Vec::new();
        for _ in 0..2 * EXPLORE {
            let pick = choice.pick(1 << 20);
            sampled.push((pick.method, pick.sampled(8)));
            if pick.sampled(8) {
                record_b_cheaper(&mut choice, pick);
            }
        }
        // Warm-up and trials: timed whatever their index.
        assert!(sampled[..4].iter().all(|&(_, timed)| timed), "{sampled:?}");
        for (call, &(way, timed)) in sampled.iter().enumerate().skip(4) {
            let routine = way == Way::B;
            assert_eq!(timed, !routine || call % 8 == 0, "call {call}: {way}");
        }
        assert!(sampled.iter().any(|&(way, timed)| way == Way::A && timed), "explorations are timed");
    }

    #[test]
    fn a_call_in_use_made_an_exploration_moves_the_other_estimate() {
        let mut choice = TimedChoice::new(FROM);
        // B is in use; A's estimate is stale at 0.3, A now takes 0.1.
        run(&mut choice, 1 << 20, 3, |s, _| if s == Way::B { 0.2 } else { 0.3 });
        let pick = choice.pick(1 << 20);
        assert_eq!((pick.method, pick.in_use()), (Way::B, true));
        let pick = choice.exploring_instead(pick).expect("a call in use");
        assert_eq!((pick.method, pick.in_use()), (Way::A, false));
        assert!(choice.exploring_instead(pick).is_none(), "an exploration stays one");
        record_mib(&mut choice, pick, 0.1);
        assert_eq!(choice.pick(1 << 20).method, Way::A, "halfway from 0.3 to 0.1 is below 0.2");
    }

    #[test]
    fn the_last_call_of_an_exploration_says_so() {
        let mut choice: TimedChoice<Way> = TimedChoice::paying_changes(FROM);
        let ends: Vec<u64> = (0..2 * EXPLORE)
            .filter(|_| {
                let pick = choice.pick(1 << 20);
                record_b_cheaper(&mut choice, pick);
                pick.ends_exploration()
            })
            .collect();
        assert_eq!(ends, [EXPLORE - 1, 2 * EXPLORE - 1]);
    }

    #[test]
    fn a_burst_of_slow_calls_that_switches_is_rechecked_and_switched_back_soon() {
        let mut choice = TimedChoice::new(FROM).bounded();
        // A costs 0.2, B 0.5; calls 20-27 of A take 10 times as long.
        let burst = 20..28;
        let used = run(&mut choice, 1 << 20, 60, |s, call| match s {
            Way::A if burst.contains(&call) => 2.0,
            Way::A => 0.2,
            Way::B => 0.5,
        });
        let at = burst.clone().find(|&c| used[c as usize] == Way::B).expect("the burst switches to B");
        let back = (at + RECHECK_AFTER + 1) as usize;
        // B once more: the recheck after the change back.
        assert_eq!(count(&used[back..], Way::B), 1, "A again within {RECHECK_AFTER} calls: {used:?}");
    }

    #[test]
    fn one_lucky_exploring_call_does_not_switch() {
        let mut choice = TimedChoice::new(FROM);
        let used = run(&mut choice, 1 << 20, 2 * EXPLORE, |s, call| match s {
            Way::A => 0.3,
            Way::B if call == EXPLORE - 1 => 0.1,
            Way::B => 0.6,
        });
        let after = &used[EXPLORE as usize..2 * EXPLORE as usize - 1];
        assert_eq!(count(after, Way::B), 0, "{after:?}");
    }

    #[test]
    fn a_lasting_change_of_the_method_not_in_use_is_followed_within_a_few_explorations() {
        let mut choice = TimedChoice::new(FROM);
        // A is cheaper for 200 calls; then B is, by half, for good.
        let used = run(&mut choice, 1 << 20, 200 + 4 * EXPLORE, |s, call| match (s, call < 200) {
            (Way::A, _) => 0.3,
            (Way::B, true) => 0.6,
            (Way::B, false) => 0.15,
        });
        assert_eq!(count(&used[3..200], Way::B), 3, "only the explorations");
        let last = &used[200 + 3 * EXPLORE as usize..];
        assert_eq!(count(last, Way::A), 1, "B in use but for an exploration: {last:?}");
    }

    #[test]
    fn classes_are_kept_apart_and_change_is_reported_once() {
        let mut choice = TimedChoice::new(FROM);
        let (small, large) = (2 * FROM, 32 * FROM);
        run(&mut choice, small, 5, |s, _| if s == Way::B { 0.1 } else { 0.3 });
        // A larger class starts over.
        let pick = choice.pick(large);
        assert_eq!((pick.method, choice.class_bytes(&pick)), (Way::A, large));
        let mut reports = 0;
        for _ in 0..4 {
            let pick = choice.pick(small);
            let took = Duration::from_nanos(small as u64 / 20);
            reports += choice.record(pick, small, took).is_some() as usize;
        }
        assert_eq!(reports, 0, "no change, no report");
        let mut fresh = TimedChoice::<Way>::new(FROM);
        let changes: Vec<_> = (0..3)
            .filter_map(|call| {
                let pick = fresh.pick(1 << 20);
                fresh.record(pick, 1 << 20, Duration::from_micros([900, 300, 100][call]))
            })
            .collect();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].method, Way::B);
    }

    #[test]
    fn the_summary_names_each_class_that_has_chosen() {
        let mut choice = TimedChoice::new(FROM);
        assert!(choice.summary("vectors").is_empty());
        run(&mut choice, 4 * FROM, 5, |s, _| if s == Way::B { 0.25 } else { 0.5 });
        run(&mut choice, FROM, 2, |_, _| 1.0);
        let lines = choice.summary("vectors");
        assert_eq!(lines.len(), 1, "only the class with both estimates: {lines:?}");
        let want = format!("vectors from {} B: 5 calls, b (0.500 ns/B a, 0.250 b)", 4 * FROM);
        assert_eq!(lines[0], want);
    }

    #[test]
    fn huge_and_tiny_messages_fall_in_the_end_classes() {
        let mut choice = TimedChoice::<Way>::new(FROM);
        assert_eq!(choice.pick(1).class, 0);
        assert_eq!(choice.pick(usize::MAX).class, CLASSES - 1);
    }
}
