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
//! job. So each rank times its copy-ins and folds (not the waits, which
//! carry the others' lateness) made with either kind and uses the cheaper
//! ([`super::choice`]: per size class from [`ADAPT_FROM`], the first
//! call a warm-up, one call in 64 exploring).
//!
//! The class and call numbers are the same on every rank (Allreduce's
//! vector is), so ranks explore on the same call. Each decides alone: the
//! kind of stores changes nothing a reader sees but its speed.
//!
//! Limitations: a rank's time reflects its peers' stores as much as its
//! own (its folds read their areas), which works because ranks explore
//! together. Cost: where ordinary stores lose, one call in 64 is 2-3 times
//! slower, about 3% on average. Memory: a few words per class. Seed: none
//! (pcoll's own, from the measurements above).

use std::time::{Duration, Instant};

use super::choice::{Alternative, TimedChoice};

/// Vector bytes from which a flat Allreduce chooses: PCOLL_SHM_STREAM's
/// default (below, copies into the segment use ordinary stores anyway).
/// From 4 KiB a call is long enough to time (a few us), and where the
/// cores share a cache ordinary stores gain there too: 2 ranks, 4 KiB
/// 1.55-1.69 against 1.75-1.84 us, 8 KiB 2.27-2.36 against 2.69-2.83, 32
/// KiB 7.7-8.3 against 9.0-9.8 (both MPIs). Small under test, so that the
/// threaded tests run both kinds.
pub const ADAPT_FROM: usize = if cfg!(test) { 256 } else { super::team::STREAM_FROM };

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
    const FROM: usize = ADAPT_FROM;
    const BOTH: [Stores; 2] = [Stores::Streaming, Stores::Ordinary];
}

/// One rank's timings of its copy-in stores.
pub type StoreChoice = TimedChoice<Stores>;

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
