//! What node algorithms that hand calls to a schedule over the host MPI
//! ([`super::HostWay`]) keep between calls: runs of calls per size class
//! that all ranks count alike and that go to the host together, and each
//! rank's pace (whether its calls come back to back).
//!
//! A run's first call agrees whether the run goes to the host; its other
//! calls follow with no step in the segment, so that the host's
//! point-to-point pipelines them: a rank that has sent returns and
//! starts its next call while its peer still receives. Every rank counts
//! the same calls (a collective's sizes are the same on every rank), so
//! the runs start together.

use std::time::{Duration, Instant};

use super::HostWay;
use crate::adapt::choice::CLASSES;
use crate::exec::Buffers;

/// Calls of a size class from one agreement on a run to the next: a run
/// that goes flat or to the host saves the agreement on all its calls
/// but the first, and a change waits for the run's end (16: at most 15
/// calls the other way).
pub const RUN: u32 = 16;

/// Default of PCOLL_SHM_BACK_TO_BACK (ns). On the EPYC VM under Intel MPI
/// at 2 ranks, the gap between the end of a rank's Reduce and the start
/// of its next was 150-300 ns in the median in loops back to back (8-128
/// KiB); between barriers the non-root's was 0.7 us or more in 95% of
/// calls, the root's 250-300 ns (its peer waits at the barrier for it);
/// docs/measurements.md.
pub const BACK_TO_BACK_NS: u64 = 500;

/// Calls in a row that must come back to back on a rank before it asks
/// for the host's way: a run taken stays there for up to [`RUN`] calls,
/// and one short gap between barriers must not send a run of calls apart
/// to the host (with a window of 800 ns and no streak, half the Reduces
/// between barriers went there).
pub const BACK_TO_BACK_STREAK: u32 = 3;

/// Per size class, the calls so far and whether the current run goes to
/// the host's schedule; the same on every rank.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostRuns {
    calls: [u32; CLASSES],
    by_host: [bool; CLASSES],
    /// Calls that went to the host's schedule.
    pub by_host_calls: u64,
}

impl HostRuns {
    /// Counts a call of size class `class`; whether it opens a run.
    pub fn opens(&mut self, class: usize) -> bool {
        let call = self.calls[class];
        self.calls[class] = call.wrapping_add(1);
        call.is_multiple_of(RUN)
    }

    /// Where the next call of `class` stands in its run (0: it opens one).
    pub fn position(&self, class: usize) -> u32 {
        self.calls[class] % RUN
    }

    /// Whether the next call of `class` is one that [`leads_to_opening`].
    pub fn leads_to_opening(&self, class: usize) -> bool {
        leads_to_opening(self.position(class))
    }

    /// Whether the current run of `class` goes to the host.
    pub fn by_host(&self, class: usize) -> bool {
        self.by_host[class]
    }

    /// Sends the current run of `class` to the host, or not.
    pub fn set_by_host(&mut self, class: usize, by_host: bool) {
        self.by_host[class] = by_host;
    }

    /// Runs a call by the host's schedule.
    pub fn run(&mut self, host: &mut dyn HostWay, bufs: &mut Buffers<'_>) {
        self.by_host_calls += 1;
        host.run(bufs);
    }
}

/// Whether the call at position `at` of its run is one of the last
/// [`BACK_TO_BACK_STREAK`] + 1 or opens the next: the calls whose pace
/// tells whether the next run's calls come back to back.
fn leads_to_opening(at: u32) -> bool {
    at == 0 || at + BACK_TO_BACK_STREAK + 1 >= RUN
}

/// A writer's runs of [`RUN`] calls that spread their steps, which it
/// decides alone (its readers follow what its head says:
/// [`crate::shm::team::Team::spread`]): the calls that lead up to a run's
/// first are watched, and that call says for the whole run, by its pace
/// or its buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct OwnRuns {
    calls: u32,
    watched: bool,
    spread: bool,
    /// Whether the current run's first call came back to back.
    back_to_back: bool,
    pace: Pace,
    /// Calls in runs that spread.
    pub spread_calls: u64,
}

impl OwnRuns {
    /// A call starts; whether it is in a run that spreads: one whose first
    /// call came back to back (each of the calls before it started
    /// `within` of the end of the one before) or sent from `hot` buffers
    /// (the writer's last ones).
    pub fn starts(&mut self, within: Duration, hot: bool) -> bool {
        let at = self.calls % RUN;
        self.calls = self.calls.wrapping_add(1);
        self.watched = leads_to_opening(at);
        if self.watched {
            self.pace.starts(within);
        }
        if at == 0 {
            self.back_to_back = self.pace.back_to_back();
            self.spread = hot || self.back_to_back;
        }
        self.spread_calls += u64::from(self.spread);
        self.spread
    }

    /// Whether the current run's calls come back to back (as its first
    /// call found them).
    pub fn back_to_back(&self) -> bool {
        self.back_to_back
    }

    /// The call started last ends.
    pub fn ends(&mut self) {
        if self.watched {
            self.pace.ends();
        }
    }
}

/// Whether a rank's calls come back to back: each starts within a window
/// of the end of its last one, [`BACK_TO_BACK_STREAK`] times in a row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    last_end: Option<Instant>,
    streak: u32,
}

impl Pace {
    /// A call starts: it counts as back to back if it starts `within` of
    /// the last one's end.
    pub fn starts(&mut self, within: Duration) {
        let soon = self.last_end.is_some_and(|end| end.elapsed() < within);
        self.streak = if soon { self.streak.saturating_add(1) } else { 0 };
    }

    /// A call ends.
    pub fn ends(&mut self) {
        self.last_end = Some(Instant::now());
    }

    /// Counts the streak afresh (from a call whose start is not watched).
    pub fn restart(&mut self) {
        self.streak = 0;
    }

    /// The calls up to this one came back to back.
    pub fn back_to_back(&self) -> bool {
        self.streak >= BACK_TO_BACK_STREAK
    }
}
