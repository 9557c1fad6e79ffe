//! Process-wide settings of the calls: the configuration (read once by
//! the host layer), the call statistics, and the choices that
//! `pcoll_set_algorithm` overrides.

use super::stats::Stats;
use crate::core::types::Coll;
use crate::select::config::{accepted_choices, parse_choice, Choice, Config};
use std::io::Write;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

pub struct Runtime {
    pub cfg: Config,
    /// Per-process statistics, when PCOLL_STATS=1.
    pub stats: Option<Mutex<Stats>>,
}

/// Choices set through `pcoll_set_algorithm`, one per collective (null:
/// the configured one). They point into [`CHOSEN`], which only grows, so a
/// pointer read stays valid while another thread sets a new choice.
static OVERRIDES: [AtomicPtr<Choice>; 4] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 4];
static CHOSEN: Mutex<Vec<(Coll, String, Box<Choice>)>> = Mutex::new(Vec::new());

impl Runtime {
    pub fn new(cfg: Config) -> Runtime {
        Runtime { stats: cfg.stats.then(|| Mutex::new(Stats::default())), cfg }
    }

    /// How `coll` runs: an override set by `pcoll_set_algorithm`, else the
    /// configuration's. Every choice lives at its own address for good
    /// (see [`CHOSEN`]), so equal addresses mean equal choices.
    #[inline]
    pub fn choice(&self, coll: Coll) -> &Choice {
        let set = OVERRIDES[coll.index()].load(Ordering::Acquire);
        if set.is_null() {
            &self.cfg.choices[coll.index()]
        } else {
            // SAFETY: a Box in CHOSEN, never freed or moved (acquire pairs
            // with the release that published it).
            unsafe { &*set }
        }
    }
}

/// Overrides how `coll` runs (`value` as PCOLL_<COLL> takes it; "" undoes
/// the override).
pub fn set_choice(coll: Coll, value: &str) -> Result<(), String> {
    if value.is_empty() {
        OVERRIDES[coll.index()].store(std::ptr::null_mut(), Ordering::Release);
        return Ok(());
    }
    let mut chosen = CHOSEN.lock().unwrap();
    let index = match chosen.iter().position(|(c, v, _)| *c == coll && v == value) {
        Some(i) => i,
        None => {
            let choice = parse_choice(coll, value)
                .map_err(|problem| problem.unwrap_or_else(|| format!("accepted: {}", accepted_choices(coll))))?;
            chosen.push((coll, value.to_string(), Box::new(choice)));
            chosen.len() - 1
        }
    };
    let ptr: *const Choice = &*chosen[index].2;
    // Release: the Choice is fully built before a reader acquires the pointer.
    OVERRIDES[coll.index()].store(ptr.cast_mut(), Ordering::Release);
    Ok(())
}

/// Writes `text` to stderr in one call, so that a job abort cannot cut it
/// short and other ranks' lines do not interleave with it.
pub fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}
