//! Waiting that behaves when ranks outnumber cores (design rule 6): spin
//! briefly (the common case on a quiet node is a wait of a microsecond or
//! two), then yield the core, then sleep with growing naps. A rank that
//! spins for ever on a shared core delays the very peer it waits for; on a
//! node running more ranks than it has cores ([`set_oversubscribed`]) a
//! wait yields at once.

use std::cell::RefCell;
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

thread_local! {
    /// What this thread's long waits run at every pause (see [`driving`]).
    static PROGRESS: RefCell<Option<Box<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Runs `f`, in which every wait of this thread that has spun without
/// success runs `progress` at each pause (until `f` returns or unwinds).
///
/// A rank waiting here for a peer may be what that peer waits for inside
/// the host MPI: MPICH 4.0's fence over UCX flushes every connection of
/// the process, and one that ranks it had exchanged messages with never
/// acknowledged stays unflushed until they enter MPI again (node leaders
/// in a fence, the other ranks waiting for them in the segment: a hang,
/// 2 of 10 runs of a 4-rank C reproducer without pcoll, none of 15 when
/// the waiting ranks probed). The composition across nodes runs under a
/// `progress` that lets the host MPI progress.
pub fn driving<R>(progress: Box<dyn Fn()>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Box<dyn Fn()>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            let _ = PROGRESS.try_with(|p| *p.borrow_mut() = before);
        }
    }
    let _restore = Restore(PROGRESS.with(|p| p.borrow_mut().replace(progress)));
    f()
}

/// Runs this thread's progress hook, if it has one (see [`driving`]).
fn drive_progress() {
    let _ = PROGRESS.try_with(|p| {
        if let Ok(p) = p.try_borrow() {
            if let Some(progress) = p.as_ref() {
                progress();
            }
        }
    });
}

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
        drive_progress();
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

    #[test]
    fn long_waits_drive_progress_inside_driving_only() {
        use std::cell::Cell;
        use std::rc::Rc;
        let calls = Rc::new(Cell::new(0));
        let counter = calls.clone();
        let progress = Box::new(move || counter.set(counter.get() + 1));
        let wait = |polls_wanted: usize| {
            let mut polls = 0;
            Backoff::until(|| {
                polls += 1;
                polls == polls_wanted
            })
        };
        driving(progress, || {
            // a wait that ends while spinning leaves the host alone
            wait(5);
            if !OVERSUBSCRIBED.load(Ordering::Relaxed) {
                assert_eq!(calls.get(), 0);
            }
            let t = Instant::now();
            Backoff::until(|| t.elapsed() > Duration::from_millis(3));
        });
        let inside = calls.get();
        assert!(inside > 0, "a wait of 3 ms never drove progress");
        let t = Instant::now();
        Backoff::until(|| t.elapsed() > Duration::from_millis(3));
        assert_eq!(calls.get(), inside, "progress ran after driving returned");
    }
}
