//! Waiting that behaves when ranks outnumber cores (design rule 6): spin
//! briefly (the common case on a quiet node is a wait of a microsecond or
//! two), then yield the core, then sleep with growing naps. A rank that
//! spins for ever on a shared core delays the very peer it waits for; on a
//! node running more ranks than it has cores ([`set_oversubscribed`]) a
//! wait yields at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// This node runs more ranks than it has cores: the rank waited for is
/// likely waiting for this core, so spinning only delays it.
static OVERSUBSCRIBED: AtomicBool = AtomicBool::new(false);

/// Says that this node runs more ranks than it has cores (never undone:
/// the job's processes stay).
pub fn set_oversubscribed() {
    OVERSUBSCRIBED.store(true, Ordering::Relaxed);
}

/// While spinning, the clock is read once every this many pauses: a
/// clock read costs as much as several polls (20-50 ns on a virtual
/// machine), and a poll that waits for one sees the flag that much later
/// (22% of a back-to-back 8-byte Allreduce when every pause read it).
const SPIN_POLLS: u32 = 64;
/// Spinning stops after this long.
const SPIN: Duration = Duration::from_micros(20);
/// Yielding stops after this long; then naps.
const YIELD: Duration = Duration::from_micros(2000);
/// Naps grow from the first to the longest.
const NAP_FIRST: Duration = Duration::from_micros(10);
const NAP_LONGEST: Duration = Duration::from_micros(500);

/// One wait: call [`Backoff::pause`] between polls of the condition.
#[derive(Debug)]
pub struct Backoff {
    polls: u32,
    /// When the wait began, read at the first clock read.
    start: Option<Instant>,
    /// The spinning is over: every pause yields or naps.
    spun: bool,
    nap: Duration,
    /// Spin first even on an oversubscribed node.
    always_spin: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}

impl Backoff {
    /// A wait for another process's write to shared memory.
    pub fn new() -> Backoff {
        Backoff { polls: 0, start: None, spun: false, nap: NAP_FIRST, always_spin: false }
    }

    /// A wait whose polls drive the host MPI's progress (point-to-point
    /// tests): it spins first even on an oversubscribed node, where
    /// yielding at once measured three times slower (Open MPI, 4 ranks on
    /// 2 cores, 8-byte tree Allreduce).
    pub fn polling() -> Backoff {
        Backoff { always_spin: true, ..Backoff::new() }
    }

    /// Pauses before the next poll, more politely the longer the wait.
    pub fn pause(&mut self) {
        if !self.spun {
            let oversubscribed = !self.always_spin && OVERSUBSCRIBED.load(Ordering::Relaxed);
            self.polls = self.polls.wrapping_add(1);
            if !oversubscribed && (!self.polls.is_multiple_of(SPIN_POLLS) || self.spin_time_left()) {
                std::hint::spin_loop();
                return;
            }
            self.spun = true;
        }
        let waited = self.start.get_or_insert_with(Instant::now).elapsed();
        if waited < YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.nap);
            self.nap = (self.nap * 2).min(NAP_LONGEST);
        }
    }

    /// Whether the wait has spun for less than [`SPIN`] (the first call
    /// starts the clock).
    fn spin_time_left(&mut self) -> bool {
        match self.start {
            None => {
                self.start = Some(Instant::now());
                true
            }
            Some(start) => start.elapsed() < SPIN,
        }
    }

    /// Polls `done` until it returns true.
    pub fn until(mut done: impl FnMut() -> bool) {
        let mut backoff = Backoff::new();
        while !done() {
            backoff.pause();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_done_and_naps_when_long() {
        let mut polls = 0;
        Backoff::until(|| {
            polls += 1;
            polls == 5
        });
        assert_eq!(polls, 5);
        let t = Instant::now();
        let deadline = t + Duration::from_millis(5);
        let mut naps = 0;
        let mut b = Backoff::new();
        while Instant::now() < deadline {
            let before = Instant::now();
            b.pause();
            naps += (before.elapsed() >= NAP_FIRST) as usize;
        }
        assert!(naps > 0, "a wait of 5 ms never napped");
    }
}
