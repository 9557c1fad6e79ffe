//! Which stores a flat Allreduce's copy-in uses, chosen by timing calls.
//!
//! Streaming stores ([`super::stream`]) leave a copied chunk in memory;
//! ordinary stores leave it in the writer's cache. Where the two cores
//! share a last-level cache the reader gets ordinary stores' lines from
//! there, and a 512 KiB-8 MiB Allreduce of 2 ranks runs 1.6-2.3 times as
//! fast as stock Open MPI instead of 1.2-1.45 (with 256 KiB chunks). Where
//! they do not, the writer first pulls back every line the reader holds
//! and ordinary stores are 2-3 times slower (0.65-1.1 against stock).
//! Nothing measured at start tells the two apart (the handoff probe read
//! 3.4 us in both), and a virtual machine's state changes under a running
//! job. So each rank times its calls made with either kind and uses the
//! cheaper:
//! - per size class (vector bytes, powers of two from [`ADAPT_FROM`]) one
//!   cost estimate per kind, in nanoseconds per byte of the copy-ins and
//!   folds (not the waits, which carry the others' lateness);
//! - the class's first call streams to warm up (its buffers' first touch
//!   is not the stores' cost) and is not counted; the second streams, the
//!   third uses ordinary stores; then the kind of the lower estimate,
//!   except one call in [`EXPLORE`], which tries the other and takes its
//!   time as that kind's estimate;
//! - the kind in use moves its estimate a quarter of the way to each
//!   call's time, so a switch on one lucky call is undone within a few.
//!
//! The class and call numbers are the same on every rank (Allreduce's
//! vector is), so ranks explore on the same call. Each decides alone: the
//! kind of stores changes nothing a reader sees but its speed.
//!
//! Trace, class 1-2 MiB: call 0 streams (warm-up), 1 streams (0.30 ns/B),
//! 2 ordinary (0.18) -> ordinary from call 3; call 63 streams (0.31), no
//! change; the vCPUs move, ordinary reads 0.50, 0.55, ... -> the average
//! passes 0.31 and streaming takes over until the next exploration.
//!
//! Limitations: a rank's time reflects its peers' stores as much as its
//! own (its folds read their areas), which works because ranks explore
//! together; an application that alternates sizes within one class
//! shares one estimate. Cost: where ordinary stores lose, one call in 64
//! is 2-3 times slower, about 3% on average. Memory: a few words per
//! class. Seed: none (pcoll's own, from the measurements above).

use std::time::{Duration, Instant};

/// Vector bytes from which a flat Allreduce chooses; below, a call is
/// too short to time and keeps PCOLL_SHM_STREAM's rule. Small under test,
/// so that the threaded tests run both kinds.
pub const ADAPT_FROM: usize = if cfg!(test) { 256 } else { 64 << 10 };

/// One call in this many tries the kind not in use.
pub const EXPLORE: u64 = 64;

/// Size classes: `ADAPT_FROM << i`, the last one open-ended.
const CLASSES: usize = 12;

/// The stores of a copy into the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    Streaming,
    Ordinary,
}

impl std::fmt::Display for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stores::Streaming => "streaming",
            Stores::Ordinary => "ordinary",
        })
    }
}

impl Stores {
    fn other(self) -> Stores {
        match self {
            Stores::Streaming => Stores::Ordinary,
            Stores::Ordinary => Stores::Streaming,
        }
    }
}

/// What a call's time does to its kind's estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Update {
    /// Warm-up: nothing.
    Skip,
    /// A first or exploring call: the time is the estimate.
    Replace,
    /// The kind in use: a moving average.
    Average,
}

/// One call's choice, handed back to [`StoreChoice::record`] with its time.
#[derive(Clone, Copy, Debug)]
pub struct Pick {
    class: usize,
    pub stores: Stores,
    update: Update,
}

#[derive(Clone, Copy, Debug, Default)]
struct Class {
    calls: u64,
    /// Nanoseconds per byte, indexed by `Stores as usize`.
    cost: [Option<f64>; 2],
}

impl Class {
    /// Both estimates, streaming then ordinary; NaN where unknown.
    fn estimates(&self) -> [f64; 2] {
        self.cost.map(|cost| cost.unwrap_or(f64::NAN))
    }

    /// The kind of the lower estimate, once both are known.
    fn preferred(&self) -> Option<Stores> {
        match self.cost {
            [Some(streaming), Some(ordinary)] if ordinary < streaming => Some(Stores::Ordinary),
            [Some(_), Some(_)] => Some(Stores::Streaming),
            _ => None,
        }
    }
}

/// One rank's estimates, kept across calls.
#[derive(Debug, Default)]
pub struct StoreChoice {
    classes: [Class; CLASSES],
}

impl StoreChoice {
    /// The stores of this call of a `len`-byte vector.
    pub fn pick(&mut self, len: usize) -> Pick {
        let class = ((len.max(ADAPT_FROM) / ADAPT_FROM).ilog2() as usize).min(CLASSES - 1);
        let c = &mut self.classes[class];
        let call = c.calls;
        c.calls += 1;
        let (stores, update) = match (c.cost, c.preferred()) {
            _ if call == 0 => (Stores::Streaming, Update::Skip),
            ([None, _], _) => (Stores::Streaming, Update::Replace),
            ([_, None], _) => (Stores::Ordinary, Update::Replace),
            (_, Some(best)) if call % EXPLORE == EXPLORE - 1 => (best.other(), Update::Replace),
            (_, best) => (best.unwrap_or(Stores::Streaming), Update::Average),
        };
        Pick { class, stores, update }
    }

    /// Counts a call's `took` (copy-ins and folds) for `len` bytes; returns
    /// the class's new preference and both estimates when it changed.
    pub fn record(&mut self, pick: Pick, len: usize, took: Duration) -> Option<(Stores, [f64; 2])> {
        let c = &mut self.classes[pick.class];
        let before = c.preferred();
        let sample = took.as_nanos() as f64 / len.max(1) as f64;
        let cost = &mut c.cost[pick.stores as usize];
        *cost = match (pick.update, *cost) {
            (Update::Skip, old) => old,
            (Update::Average, Some(old)) => Some(old + (sample - old) / 4.0),
            _ => Some(sample),
        };
        let after = c.preferred()?;
        (before != Some(after)).then(|| (after, c.estimates()))
    }

    /// The vector bytes of `pick`'s class, for logs: its lower bound.
    pub fn class_bytes(pick: &Pick) -> usize {
        ADAPT_FROM << pick.class
    }

    /// One line per class that has chosen: its vectors, calls, the kind in
    /// use and both estimates (for the log when the communicator goes).
    pub fn summary(&self) -> Vec<String> {
        (self.classes.iter().enumerate())
            .filter_map(|(i, c)| {
                let kind = c.preferred()?;
                let [streaming, ordinary] = c.estimates();
                Some(format!(
                    "vectors from {} B: {} calls, {kind} stores ({streaming:.3} ns/B streaming, {ordinary:.3} ordinary)",
                    ADAPT_FROM << i,
                    c.calls
                ))
            })
            .collect()
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

    pub fn time<R>(&mut self, part: impl FnOnce() -> R) -> R {
        if !self.on {
            return part();
        }
        let start = Instant::now();
        let result = part();
        self.total += start.elapsed();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `calls` calls of `len` bytes, each taking `cost(stores, call)`
    /// ns per byte; returns the kinds used.
    fn run(choice: &mut StoreChoice, len: usize, calls: u64, cost: impl Fn(Stores, u64) -> f64) -> Vec<Stores> {
        (0..calls)
            .map(|call| {
                let pick = choice.pick(len);
                let took = Duration::from_nanos((cost(pick.stores, call) * len as f64) as u64);
                choice.record(pick, len, took);
                pick.stores
            })
            .collect()
    }

    fn count(used: &[Stores], kind: Stores) -> usize {
        used.iter().filter(|&&s| s == kind).count()
    }

    #[test]
    fn warms_up_tries_both_then_keeps_the_cheaper_exploring_once_in_64() {
        let mut choice = StoreChoice::default();
        let used = run(&mut choice, 1 << 20, 3 + 2 * EXPLORE, |s, _| if s == Stores::Ordinary { 0.2 } else { 0.3 });
        assert_eq!(used[..3], [Stores::Streaming, Stores::Streaming, Stores::Ordinary]);
        assert_eq!(count(&used[3..], Stores::Streaming), 2, "one exploring call per 64");
        assert_eq!(used[EXPLORE as usize - 1], Stores::Streaming);
    }

    #[test]
    fn the_warm_up_call_is_not_counted() {
        let mut choice = StoreChoice::default();
        // The first call is slow whatever the kind (first touch).
        let used = run(&mut choice, 1 << 20, 10, |s, call| match (call, s) {
            (0, _) => 5.0,
            (_, Stores::Streaming) => 0.2,
            (_, Stores::Ordinary) => 0.4,
        });
        assert_eq!(count(&used[3..], Stores::Ordinary), 0, "{used:?}");
    }

    #[test]
    fn a_change_of_state_is_followed_within_a_few_calls() {
        let mut choice = StoreChoice::default();
        // Ordinary stores are cheaper for 200 calls, then 3 times dearer.
        let used = run(&mut choice, 4 << 20, 400, |s, call| match (s, call < 200) {
            (Stores::Streaming, _) => 0.3,
            (Stores::Ordinary, true) => 0.2,
            (Stores::Ordinary, false) => 0.6,
        });
        assert_eq!(count(&used[3..200], Stores::Ordinary), 197 - 3, "all but the explorations");
        assert_eq!(count(&used[204..], Stores::Ordinary), 3, "only the explorations: {:?}", &used[200..210]);
    }

    #[test]
    fn one_lucky_exploring_call_is_undone_within_a_few() {
        let mut choice = StoreChoice::default();
        let used = run(&mut choice, 1 << 20, 2 * EXPLORE, |s, call| match s {
            Stores::Streaming => 0.3,
            Stores::Ordinary if call == EXPLORE - 1 => 0.1,
            Stores::Ordinary => 0.6,
        });
        let after = &used[EXPLORE as usize..];
        assert!(count(after, Stores::Ordinary) <= 4, "{after:?}");
        assert!(after[8..EXPLORE as usize - 1].iter().all(|&s| s == Stores::Streaming), "{after:?}");
    }

    #[test]
    fn classes_are_kept_apart_and_change_is_reported_once() {
        let mut choice = StoreChoice::default();
        let (small, large) = (2 * ADAPT_FROM, 32 * ADAPT_FROM);
        run(&mut choice, small, 5, |s, _| if s == Stores::Ordinary { 0.1 } else { 0.3 });
        // A larger class starts over.
        let pick = choice.pick(large);
        assert_eq!((pick.stores, StoreChoice::class_bytes(&pick)), (Stores::Streaming, large));
        let mut reports = 0;
        for _ in 0..4 {
            let pick = choice.pick(small);
            let took = Duration::from_nanos(small as u64 / 20);
            reports += choice.record(pick, small, took).is_some() as usize;
        }
        assert_eq!(reports, 0, "no change, no report");
        let mut fresh = StoreChoice::default();
        let changes: Vec<_> = (0..3)
            .filter_map(|call| {
                let pick = fresh.pick(1 << 20);
                fresh.record(pick, 1 << 20, Duration::from_micros([900, 300, 100][call]))
            })
            .collect();
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].0, Stores::Ordinary);
    }

    #[test]
    fn the_summary_names_each_class_that_has_chosen() {
        let mut choice = StoreChoice::default();
        assert!(choice.summary().is_empty());
        run(&mut choice, 4 * ADAPT_FROM, 5, |s, _| if s == Stores::Ordinary { 0.25 } else { 0.5 });
        run(&mut choice, ADAPT_FROM, 2, |_, _| 1.0);
        let lines = choice.summary();
        assert_eq!(lines.len(), 1, "only the class with both estimates: {lines:?}");
        let want = format!(
            "vectors from {} B: 5 calls, ordinary stores (0.500 ns/B streaming, 0.250 ordinary)",
            4 * ADAPT_FROM
        );
        assert_eq!(lines[0], want);
    }

    #[test]
    fn huge_and_tiny_vectors_fall_in_the_end_classes() {
        let mut choice = StoreChoice::default();
        assert_eq!(choice.pick(1).class, 0);
        assert_eq!(choice.pick(usize::MAX).class, CLASSES - 1);
    }
}
