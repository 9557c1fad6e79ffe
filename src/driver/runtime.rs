//! Process-wide settings of the calls: the configuration (read once by
//! the host layer), the call statistics, and the choices that
//! `pcoll_set_algorithm` overrides.

use super::stats::{Stats, Summary};
use super::Host;
use crate::core::types::Coll;
use crate::select::config::{accepted_choices, parse_choice, Choice, Config, Fingerprint};
use crate::select::settings::SETTINGS;
use std::any::Any;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;
use std::time::Instant;

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
    /// (see `CHOSEN`), so equal addresses mean equal choices.
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

impl Runtime {
    /// Hands a call to the host for `why`, counted in the statistics and
    /// logged at debug level. Without either, only the host's call runs
    /// (inline): the two checks are all a forwarded call costs.
    #[inline]
    pub fn forward<R>(&self, coll: Coll, why: &'static str, forward: impl FnOnce() -> R) -> R {
        if self.stats.is_none() && log::Level::Debug > log::max_level() {
            return forward();
        }
        self.forward_observed(coll, why, forward)
    }

    /// [`Runtime::forward`] with the log or the statistics on (out of line,
    /// like every path but pcoll's own calls, so that their code stays
    /// compact).
    #[inline(never)]
    fn forward_observed<R>(&self, coll: Coll, why: &'static str, forward: impl FnOnce() -> R) -> R {
        log::debug!("{coll}: host MPI ({why})");
        // the clock only when someone keeps statistics
        let start = self.stats.is_some().then(Instant::now);
        let rc = forward();
        if let (Some(stats), Some(start)) = (&self.stats, start) {
            stats.lock().unwrap().record_fallback(coll, why, start.elapsed().as_secs_f64());
        }
        rc
    }
}

/// The message a panic carries.
pub fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Overrides how `coll` runs (`value` as `PCOLL_<COLL>` takes it; "" undoes
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

/// At MPI_Init: whether every rank of MPI_COMM_WORLD holds the same
/// settings (collective over it). Ranks that differ would run different
/// algorithms, or the same with different segments, and hang or corrupt
/// each other's data; so the answer is a message that names the variables
/// that differ, this rank's values and the ranks that hold others. One
/// word per rank in the usual case (every hash equal); only if hashes
/// differ, each variable's digest. A failing host collective skips the
/// check.
pub fn agree_on_settings<H: Host>(host: &H, mine: &Fingerprint) -> Result<(), String> {
    let world = host.world();
    let Ok(hashes) = host.allgather_words(world, &[mine.hash()]) else { return Ok(()) };
    if hashes.iter().all(|&h| h == hashes[0]) {
        return Ok(());
    }
    let Ok(all) = host.allgather_words(world, mine.digests()) else { return Ok(()) };
    let rank = host.world_rank();
    let differing: Vec<String> = Fingerprint::differing(&all)
        .into_iter()
        .map(|i| {
            let others: Vec<usize> = all
                .chunks_exact(SETTINGS.len())
                .enumerate()
                .filter(|(_, theirs)| theirs[i] != all[rank * SETTINGS.len() + i])
                .map(|(r, _)| r)
                .collect();
            let listed: Vec<String> = others.iter().take(8).map(|r| r.to_string()).collect();
            let more = if others.len() > 8 { format!(" and {} more", others.len() - 8) } else { String::new() };
            let here = mine.value(i).map_or("unset or the default".to_string(), |v| format!("{v:?}"));
            format!("{} (rank {rank}: {here}; another value at rank(s) {}{more})", SETTINGS[i].name, listed.join(", "))
        })
        .collect();
    Err(format!(
        "pcoll: the ranks were started with different settings, which would make their collectives disagree \
         or hang: {}; give every rank the same PCOLL_* settings\n",
        differing.join("; ")
    ))
}

/// Writes `text` to stderr in one call, so that a job abort cannot cut it
/// short and other ranks' lines do not interleave with it.
pub fn say(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// At MPI_Finalize: the statistics summary and PCOLL_VERIFY's totals. With
/// `job_wide` (the host reports at the same point on every rank) world
/// rank 0 prints them for the whole job; otherwise each rank prints its
/// own (to `<PCOLL_STATS_FILE>.<world rank>` for a file).
pub fn report_at_finalize<H: Host>(host: &H, rt: &Runtime, job_wide: bool) {
    if let Some(stats) = &rt.stats {
        let text = stats.lock().unwrap().to_text();
        print_summary(host, &text, rt.cfg.stats_file.as_deref(), job_wide);
    }
    if rt.cfg.verify.is_some() {
        print_verify_totals(host, job_wide);
    }
}

fn print_summary<H: Host>(host: &H, text: &str, file: Option<&Path>, job_wide: bool) {
    let mut summary = Summary::default();
    // Every rank's state of the world holds the same node count.
    let nodes = host.find_state(host.world()).map(|state| state.node.topo.nodes);
    if !job_wide {
        summary.add_rank(text).expect("this rank's own table");
        let file = file.map(|f| PathBuf::from(format!("{}.{}", f.display(), host.world_rank())));
        deliver(&summary.render(nodes, &format!("{} (this rank only)", host.version())), file.as_deref());
        return;
    }
    let Some(tables) = gather_at_root(host, text.as_bytes()) else { return };
    for table in &tables {
        if let Err(e) = summary.add_rank(&String::from_utf8_lossy(table)) {
            say(&format!("pcoll: PCOLL_STATS: {e}\n"));
        }
    }
    deliver(&summary.render(nodes, &host.version()), file);
}

/// Every rank's `mine` at world rank 0, by rank (`None` elsewhere, or if
/// the host failed); collective over MPI_COMM_WORLD.
fn gather_at_root<H: Host>(host: &H, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
    let world = host.world();
    let (rank, size) = host.comm_shape(world)?;
    let at_root = |n: usize| if rank == 0 { n } else { 0 };
    // every rank's length, then the bytes
    let mut lens = vec![0u8; at_root(8 * size)];
    let words: Vec<(usize, usize)> = (0..at_root(size)).map(|r| (8 * r, 8)).collect();
    host.gatherv_bytes(world, &(mine.len() as u64).to_le_bytes(), &mut lens, &words, 0).ok()?;
    let mut at = 0;
    let blocks: Vec<(usize, usize)> = lens
        .chunks_exact(8)
        .map(|len| {
            let len = u64::from_le_bytes(len.try_into().unwrap()) as usize;
            at += len;
            (at - len, len)
        })
        .collect();
    let mut all = vec![0u8; at];
    host.gatherv_bytes(world, mine, &mut all, &blocks, 0).ok()?;
    (rank == 0).then(|| blocks.iter().map(|&(offset, len)| all[offset..offset + len].to_vec()).collect())
}

/// PCOLL_VERIFY's count of compared calls and of those that differed.
fn print_verify_totals<H: Host>(host: &H, job_wide: bool) {
    let mine = super::verify::totals();
    let (totals, scope) = if job_wide {
        let Some(sum) = host.sum_at_root(&mine) else { return };
        ([sum[0], sum[1], sum[2]], "all ranks".to_string())
    } else {
        (mine, format!("rank {} only", host.world_rank()))
    };
    say(&format!(
        "pcoll: PCOLL_VERIFY: {} calls compared with the host MPI, {} differed ({scope}); {} not comparable \
         (user-defined operators on floating point, padded types, failed host calls)\n",
        totals[0], totals[1], totals[2]
    ));
}

/// Writes the summary to `file`, or to stderr if none or if it cannot be
/// written (saying why).
fn deliver(summary: &str, file: Option<&Path>) {
    match file.map(|f| (f, std::fs::write(f, summary))) {
        None => say(summary),
        Some((_, Ok(()))) => {}
        Some((f, Err(e))) => {
            say(&format!("pcoll: cannot write PCOLL_STATS_FILE={} ({e}); the summary:\n{summary}", f.display()))
        }
    }
}
