//! Configuration from the environment, read once per process.
//!
//! Only `PCOLL_*` names are looked at, and the environment is not assumed
//! to be UTF-8. A bad value of a variable pcoll knows (one that is not
//! UTF-8 included) is an error that names the variable, the value and
//! what is accepted. A `PCOLL_*` name pcoll does not know (most likely a
//! typo) is a warning that suggests the nearest known name; the names
//! pcoll's own scripts read are ignored silently. PCOLL_ENABLE=0 reads
//! nothing else. The settings that ranks must share leave a
//! [`Fingerprint`], which they compare at MPI_Init.

use super::rules::{parse_target, HostMpi, Rules, Target};
use super::settings::{self, SETTINGS};
use crate::algos::node::Sizes;
use crate::algos::{self, Algorithm, Params};
use crate::core::types::Coll;
use crate::shm::prefetch::Ahead;
use crate::shm::segment::{Geometry, COLD_QUEUE_SLOTS, LEAST_QUEUE_SLOTS, QUEUE_SLOTS, SLOTS_PER_SET, WINDOW_BYTES};
use crate::shm::team::NodeSettings;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

/// How one collective is run.
#[derive(Clone, Debug)]
pub enum Choice {
    /// pcoll picks per call.
    Auto,
    /// Always the host MPI's own collective.
    Mpi,
    /// Always this algorithm, where it can run the call.
    Force(&'static Algorithm, Params),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn to_filter(self) -> log::LevelFilter {
        match self {
            LogLevel::Off => log::LevelFilter::Off,
            LogLevel::Error => log::LevelFilter::Error,
            LogLevel::Warn => log::LevelFilter::Warn,
            LogLevel::Info => log::LevelFilter::Info,
            LogLevel::Debug => log::LevelFilter::Debug,
            LogLevel::Trace => log::LevelFilter::Trace,
        }
    }
}

/// PCOLL_VERIFY: what a mismatch between pcoll's result and the host
/// MPI's does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// Report the first mismatch of each rank, go on with pcoll's result.
    Report,
    /// Report it and abort the job.
    Abort,
}

/// PCOLL_GATHERV_MODE: how a Gatherv algorithm that needs the root's
/// layout on every rank gets it (seed 001's two levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GathervMode {
    /// The root broadcasts recvcounts, displs and its decision first
    /// (standard-conforming).
    Conservative,
    /// The user promises every rank passes the root's recvcounts and
    /// displs: each rank takes its own, no broadcast.
    Aggressive,
}

/// How the queue broadcast (seed 002) notifies: PCOLL_SHM_TREE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmTree {
    Flat,
    Chain,
    Kary,
    Knomial,
}

/// The node layer: PCOLL_SHM* and PCOLL_RANKS_PER_NODE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// PCOLL_SHM: use shared memory within nodes at all.
    pub enable: bool,
    /// PCOLL_SHM_ZCOPY: copy straight between processes where the system
    /// allows it (cross-memory attach).
    pub zcopy: bool,
    /// PCOLL_RANKS_PER_NODE: treat consecutive groups of this many ranks
    /// (of MPI_COMM_WORLD) as separate nodes.
    pub ranks_per_node: Option<usize>,
    /// PCOLL_LEADERS: DPML's leaders per node.
    pub leaders: Option<usize>,
    /// PCOLL_SHM_CHUNK: bytes of the chunks moved through a rank's two
    /// chunk areas; PCOLL_SHM_ALLREDUCE_CHUNK: a flat Allreduce's (the
    /// areas hold the larger).
    pub chunk: usize,
    pub allreduce_chunk: usize,
    /// PCOLL_SHM_SLOTS, PCOLL_SHM_FRAGMENT, PCOLL_SHM_SETS: seed 002's
    /// queue: slots per rank (`None`: as many as the budget allows, up to
    /// [`crate::shm::segment::QUEUE_SLOTS`]; [`ShmConfig::geometry`]),
    /// fragment bytes (0: the paper's model per message, up to a slot of
    /// 4 KiB), sets (`None`: one per
    /// [`crate::shm::segment::SLOTS_PER_SET`] slots).
    pub slots: Option<usize>,
    pub fragment: usize,
    pub sets: Option<usize>,
    /// PCOLL_SHM_RING, PCOLL_SHM_RING_BYTES: small messages' slots per
    /// rank, and the bytes a slot carries beyond its first line's.
    pub ring: usize,
    pub ring_bytes: usize,
    /// PCOLL_SHM_ROTATE: the places each chunk area moves through; `None`:
    /// as many as the budget allows, up to [`crate::shm::segment::ROTATIONS`]
    /// ([`ShmConfig::rotations`]).
    pub rotate: Option<usize>,
    /// PCOLL_SHM_SPREAD: the places whose bytes steps spread back to back
    /// move through; `None`: as many as the budget allows, up to
    /// [`crate::shm::segment::SPREAD`] ([`ShmConfig::spread`]).
    pub spread: Option<usize>,
    /// PCOLL_SHM_TREE, PCOLL_SHM_TREE_K: the queue's notification tree.
    pub tree: ShmTree,
    pub tree_k: usize,
    /// PCOLL_SHM_STREAM: copies into the segment of at least this many
    /// bytes bypass the writer's cache (0: never).
    pub stream_from: usize,
    /// PCOLL_SHM_STREAM_OUT: copies of at least this many bytes per message
    /// into the application's buffers bypass the writer's cache (0: never).
    pub stream_out_from: usize,
    /// PCOLL_SHM_PREFETCH_OUT: writes of at least this many bytes into the
    /// application's buffers with ordinary stores ask for their lines
    /// ahead (0: never; unset: where a probe finds that it pays,
    /// [`crate::shm::prefetch::probed_from`]).
    pub prefetch_out_from: Option<usize>,
    /// PCOLL_SHM_GATHERV_COPY_IN: in a Gatherv's auto mode, blocks of at
    /// most this many bytes go through their owner's area, larger ones
    /// straight into the root's buffer.
    pub gatherv_copy_in_up_to: usize,
    /// PCOLL_SHM_GATHERV_HOT_COPY_IN: in a Gatherv's auto mode with timed
    /// routes, hot blocks of at most this many bytes may go through their
    /// owner's area where the root's timings favour it, and at 2 ranks
    /// through the window.
    pub gatherv_hot_copy_in_up_to: usize,
    /// PCOLL_SHM_PIPELINE_WINDOW: at 2 ranks, hot `shm_pipeline` Bcasts of
    /// at least this many bytes go through the window (0: none).
    pub pipeline_window_from: usize,
    /// PCOLL_SHM_BCAST_TIMED: the `shm` Bcast times zero copy against the
    /// pipeline from this many bytes, against the queue below.
    pub bcast_timed_from: usize,
    /// PCOLL_SHM_BACK_TO_BACK: a reduction (a Bcast) that starts within
    /// this many nanoseconds of the end of the rank's last one comes back
    /// to back (0: none does).
    pub back_to_back_ns: u64,
    /// PCOLL_SHM_ADAPT: a flat Allreduce of 64 KiB and more picks the
    /// stores of its copy-in by timing its calls.
    pub adapt: bool,
    /// PCOLL_SHM_BUDGET: bytes of /dev/shm one process may reserve for
    /// its parts of segments; `None`: half of /dev/shm shared among the
    /// host's ranks (`driver::pool`).
    pub budget: Option<usize>,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            enable: true,
            zcopy: true,
            ranks_per_node: None,
            leaders: None,
            chunk: Geometry::DEFAULT.chunk,
            allreduce_chunk: Geometry::DEFAULT.allreduce_chunk,
            slots: None,
            fragment: 0,
            sets: None,
            ring: Geometry::DEFAULT.ring,
            ring_bytes: Geometry::DEFAULT.ring_bytes,
            rotate: None,
            spread: None,
            tree: ShmTree::Kary,
            tree_k: 4,
            stream_from: crate::shm::team::STREAM_FROM,
            stream_out_from: crate::shm::team::STREAM_OUT_FROM,
            prefetch_out_from: None,
            gatherv_copy_in_up_to: Sizes::default().gatherv_copy_in_up_to,
            gatherv_hot_copy_in_up_to: Sizes::default().gatherv_hot_copy_in_up_to,
            pipeline_window_from: Sizes::default().pipeline_window_from,
            bcast_timed_from: Sizes::default().bcast_timed_from,
            back_to_back_ns: crate::algos::node::host_runs::BACK_TO_BACK_NS,
            adapt: true,
            budget: None,
        }
    }
}

impl ShmConfig {
    /// Bytes of one queue slot: the fixed fragment, or room for the model's.
    pub fn slot_bytes(&self) -> usize {
        if self.fragment > 0 {
            self.fragment
        } else {
            Geometry::DEFAULT.slot_bytes
        }
    }

    /// The segment's layout for a node of `ranks` ranks, within a rank's
    /// `budget` of /dev/shm where it has one: the chunk areas' places
    /// first ([`ShmConfig::rotations`], with the queue at its least), then
    /// by default the most queue slots, a power of two from
    /// [`QUEUE_SLOTS`] down to [`LEAST_QUEUE_SLOTS`], whose block fits
    /// [`BLOCKS_IN_BUDGET`] times in `budget` (in a 64 MiB /dev/shm: 2 MiB
    /// at 2 ranks, 1 MiB from 3), then the places of spread steps
    /// ([`ShmConfig::spread`]), and the hot Bcast's window: the largest,
    /// a power of two from [`WINDOW_BYTES`] down to [`LEAST_WINDOW_BYTES`],
    /// with which rank 0's block and header still fit
    /// [`BLOCKS_IN_BUDGET`] times, or none (in a 64 MiB /dev/shm: 512 KiB
    /// at 2 ranks, 3.9 MiB against a budget of 16; 256 KiB at 3).
    pub fn geometry(&self, ranks: usize, budget: Option<usize>) -> Geometry {
        let geo = self.geometry_unspread(ranks, budget);
        let geo = Geometry { spread: self.spread(geo, budget), ..geo };
        let fits = |geo: &Geometry| {
            budget.is_none_or(|budget| (geo.block_bytes() + geo.header_bytes()) * BLOCKS_IN_BUDGET <= budget)
        };
        std::iter::successors(Some(WINDOW_BYTES), |&bytes| (bytes > LEAST_WINDOW_BYTES).then_some(bytes / 2))
            .map(|bytes| geo.with_window(bytes))
            .find(fits)
            .unwrap_or(geo)
    }

    /// [`ShmConfig::geometry`] with spread steps moving through the chunk
    /// areas' places only.
    fn geometry_unspread(&self, ranks: usize, budget: Option<usize>) -> Geometry {
        let with_slots = |slots: usize| Geometry {
            ranks,
            chunk: self.chunk,
            allreduce_chunk: self.allreduce_chunk,
            slots,
            slot_bytes: self.slot_bytes(),
            sets: self.sets.unwrap_or(slots / SLOTS_PER_SET).clamp(1, slots),
            cold_slots: COLD_QUEUE_SLOTS.min(slots),
            ring: self.ring,
            ring_bytes: self.ring_bytes,
            rotations: 1,
            spread: 1,
            window: 0,
            window_pieces: 0,
        };
        let least = with_slots(self.slots.unwrap_or(LEAST_QUEUE_SLOTS));
        let rotations = self.rotations(least, budget);
        if self.slots.is_some() {
            return Geometry { rotations, ..least };
        }
        std::iter::successors(Some(QUEUE_SLOTS), |&slots| (slots > LEAST_QUEUE_SLOTS).then_some(slots / 2))
            .map(|slots| Geometry { rotations, ..with_slots(slots) })
            .find(|geo| fits_budget(geo, budget))
            .unwrap_or(Geometry { rotations, ..least })
    }

    /// The places spread steps move through in `geo`: PCOLL_SHM_SPREAD,
    /// or by default the most, a power of two up to
    /// [`crate::shm::segment::SPREAD`] and at least `geo.rotations`, whose
    /// extra bytes are at most the default's and whose block fits
    /// [`BLOCKS_IN_BUDGET`] times in `budget`: in a 64 MiB /dev/shm, the
    /// chunk areas' places (its queue comes first).
    pub fn spread(&self, geo: Geometry, budget: Option<usize>) -> usize {
        use crate::shm::segment::SPREAD;
        if let Some(spread) = self.spread {
            return spread;
        }
        let extra = (SPREAD - 1) * Geometry::DEFAULT.chunk;
        let fits =
            |spread: usize| (spread - 1) * geo.chunk <= extra && fits_budget(&Geometry { spread, ..geo }, budget);
        std::iter::successors(Some(SPREAD), |&spread| (spread / 2 > geo.rotations).then_some(spread / 2))
            .find(|&spread| spread > geo.rotations && fits(spread))
            .unwrap_or(geo.rotations)
    }

    /// The places of a chunk area in `geo`: PCOLL_SHM_ROTATE, or by default
    /// the most, a power of two up to [`crate::shm::segment::ROTATIONS`],
    /// whose extra bytes are at most the default's (larger chunks move
    /// through fewer places) and whose block fits [`BLOCKS_IN_BUDGET`]
    /// times in `budget`: in a 64 MiB /dev/shm, 8 places at 2 ranks, 4
    /// at 4, none beyond.
    pub fn rotations(&self, geo: Geometry, budget: Option<usize>) -> usize {
        use crate::shm::segment::ROTATIONS;
        if let Some(rotate) = self.rotate {
            return rotate;
        }
        let extra = (ROTATIONS - 1) * Geometry::DEFAULT.chunk;
        let fits = |rotations: usize| {
            (rotations - 1) * geo.chunk <= extra && fits_budget(&Geometry { rotations, ..geo }, budget)
        };
        let mut rotations = ROTATIONS;
        while rotations > 1 && !fits(rotations) {
            rotations /= 2;
        }
        rotations
    }

    /// The sizes and method thresholds of the node algorithms.
    pub fn node_sizes(&self) -> Sizes {
        Sizes {
            gatherv_copy_in_up_to: self.gatherv_copy_in_up_to,
            gatherv_hot_copy_in_up_to: self.gatherv_hot_copy_in_up_to,
            pipeline_window_from: self.pipeline_window_from,
            bcast_timed_from: self.bcast_timed_from,
            ..Sizes::default()
        }
    }

    /// The node primitives' settings, on a host that runs more ranks than
    /// it has cores if `oversubscribed`.
    pub fn node_settings(&self, oversubscribed: bool) -> NodeSettings {
        NodeSettings {
            stream_from: self.stream_from,
            stream_out_from: self.stream_out_from,
            ahead: Ahead {
                from: self.prefetch_out_from.unwrap_or_else(crate::shm::prefetch::probed_from),
                ..Ahead::default()
            },
            oversubscribed,
            back_to_back_ns: self.back_to_back_ns,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    /// PCOLL_ENABLE: when false every call goes straight to the host MPI.
    pub enable: bool,
    /// PCOLL_ALLREDUCE, PCOLL_REDUCE, PCOLL_BCAST, PCOLL_GATHERV, indexed by
    /// [`Coll::index`].
    pub choices: [Choice; 4],
    /// PCOLL_LOG.
    pub log: LogLevel,
    /// PCOLL_STATS: print a job-wide summary at MPI_Finalize.
    pub stats: bool,
    /// PCOLL_STATS_FILE: write the summary to this file instead of stderr
    /// (implies PCOLL_STATS=1).
    pub stats_file: Option<std::path::PathBuf>,
    /// PCOLL_VERIFY: compare every call pcoll runs with the host MPI's.
    pub verify: Option<VerifyMode>,
    /// PCOLL_REPRODUCIBLE: reductions combine in one canonical order.
    pub reproducible: bool,
    /// PCOLL_TUNE: rules given inline.
    pub tune: Option<Rules>,
    /// PCOLL_TUNE_FILE: rules read from a file.
    pub tune_file: Option<Rules>,
    /// PCOLL_GATHERV_MODE.
    pub gatherv_mode: GathervMode,
    /// PCOLL_CALIBRATE: measure the cost model's parameters at MPI_Init.
    pub calibrate: bool,
    /// PCOLL_SETUP_AFTER: calls on a new communicator that the host MPI
    /// runs before pcoll sets it up.
    pub setup_after: usize,
    pub shm: ShmConfig,
    /// What ranks compare to find they were started with different
    /// settings.
    pub fingerprint: Fingerprint,
    /// About the environment, for the log at start-up: `PCOLL_*` names
    /// pcoll does not know, with the nearest one it does.
    pub warnings: Vec<String>,
    /// Not a variable: who made the host MPI (from its
    /// MPI_Get_library_version at MPI_Init), for rules that name it.
    pub host_mpi: Option<HostMpi>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            enable: true,
            choices: [Choice::Auto, Choice::Auto, Choice::Auto, Choice::Auto],
            log: LogLevel::Warn,
            stats: false,
            stats_file: None,
            verify: None,
            reproducible: false,
            tune: None,
            tune_file: None,
            gatherv_mode: GathervMode::Conservative,
            calibrate: false,
            setup_after: SETUP_AFTER,
            shm: ShmConfig::default(),
            fingerprint: Fingerprint::default(),
            warnings: Vec::new(),
            host_mpi: None,
        }
    }
}

/// Default of PCOLL_SETUP_AFTER: the first call on a communicator goes to
/// the host MPI, and pcoll sets the communicator up at the second. A
/// communicator created, used once and freed then costs about what it
/// costs without pcoll (MPICH, 2 ranks, MPI_Comm_dup, one 8-byte
/// Allreduce and MPI_Comm_free: 4.1 us a cycle against 3.8 stock, where
/// set-up at the first call cost 2.0 ms; docs/measurements.md).
pub const SETUP_AFTER: usize = 1;

/// A node's segment may take at most this share (1/4) of /dev/shm:
/// settings that make it larger are refused at MPI_Init
/// ([`Config::check_segment`]).
pub const SEGMENT_SHARE: usize = 4;

/// The variables that size a rank's block of the segment.
const BLOCK_VARIABLES: [&str; 8] = [
    "PCOLL_SHM_CHUNK",
    "PCOLL_SHM_ALLREDUCE_CHUNK",
    "PCOLL_SHM_SLOTS",
    "PCOLL_SHM_FRAGMENT",
    "PCOLL_SHM_RING",
    "PCOLL_SHM_RING_BYTES",
    "PCOLL_SHM_ROTATE",
    "PCOLL_SHM_SPREAD",
];

/// The least window the node gives the hot Bcast ([`ShmConfig::geometry`]):
/// four pieces; below, a window of a piece or two pays for its flags
/// and leaves the 2-rank messages it serves best (16-512 KiB) to the
/// queue anyway.
pub const LEAST_WINDOW_BYTES: usize = 64 << 10;

/// A rank's block of a segment with chunk areas moving through their
/// default places takes at most this share (1/4) of its budget, which
/// leaves room for the segments of three more communicators.
pub const BLOCKS_IN_BUDGET: usize = 4;

/// Whether a rank's block of `geo` fits [`BLOCKS_IN_BUDGET`] times in
/// `budget` (any, where there is none).
fn fits_budget(geo: &Geometry, budget: Option<usize>) -> bool {
    budget.is_none_or(|budget| geo.block_bytes() * BLOCKS_IN_BUDGET <= budget)
}

impl Config {
    /// Calls on a new communicator that go to the host MPI before pcoll
    /// sets it up: PCOLL_SETUP_AFTER, but none where every call must run
    /// pcoll's algorithms: with PCOLL_REPRODUCIBLE=1 (canonical
    /// reductions) or an algorithm forced for a collective.
    pub fn calls_before_setup(&self) -> usize {
        if self.reproducible || self.choices.iter().any(|c| matches!(c, Choice::Force(..))) {
            0
        } else {
            self.setup_after
        }
    }

    /// Refuses block settings (PCOLL_SHM_CHUNK, PCOLL_SHM_ALLREDUCE_CHUNK,
    /// PCOLL_SHM_SLOTS, PCOLL_SHM_FRAGMENT) that make the segment of a
    /// node of `ranks` ranks larger than 1/[`SEGMENT_SHARE`] of /dev/shm
    /// (`shm_bytes`), naming those set above their defaults. Defaults are
    /// never refused: where their segment does not fit, the budget turns
    /// the node layer off (with a warning).
    pub fn check_segment(&self, ranks: usize, shm_bytes: usize) -> Result<(), String> {
        if !self.enable || !self.shm.enable || ranks < 2 {
            return Ok(());
        }
        let (geo, default) = (self.shm.geometry(ranks, None), ShmConfig::default().geometry(ranks, None));
        let bound = shm_bytes / SEGMENT_SHARE;
        if geo.total_bytes() <= bound || geo.total_bytes() <= default.total_bytes() {
            return Ok(());
        }
        let above = [
            geo.chunk > default.chunk,
            geo.allreduce_chunk > default.allreduce_chunk,
            geo.slots > default.slots,
            geo.slot_bytes > default.slot_bytes,
            geo.ring > default.ring,
            geo.ring_bytes > default.ring_bytes,
            geo.rotations > default.rotations,
            geo.spread > default.spread,
        ];
        let named: Vec<String> = BLOCK_VARIABLES
            .iter()
            .zip(above)
            .filter(|(_, above)| *above)
            .map(|(var, _)| format!("{var}={}", self.fingerprint.value(settings::index(var)).unwrap_or_default()))
            .collect();
        Err(format!(
            "pcoll: {} {} a shared segment of {} for the {ranks} ranks of a node, more than 1/{SEGMENT_SHARE} \
             of /dev/shm ({}); lower {} (a rank's block: two chunk areas of the larger of PCOLL_SHM_CHUNK and \
             PCOLL_SHM_ALLREDUCE_CHUNK, each moving through PCOLL_SHM_ROTATE places a chunk apart (PCOLL_SHM_SPREAD back to \
             back), PCOLL_SHM_SLOTS slots of PCOLL_SHM_FRAGMENT bytes, and \
             PCOLL_SHM_RING slots of PCOLL_SHM_RING_BYTES), or give the job a larger /dev/shm\n",
            named.join(" and "),
            if named.len() == 1 { "makes" } else { "make" },
            bytes_text(geo.total_bytes()),
            bytes_text(shm_bytes),
            if named.len() == 1 { "it" } else { "them" },
        ))
    }
}

/// `bytes` for messages: "1.5 MiB".
pub fn bytes_text(bytes: usize) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut value, mut unit) = (bytes as f64, 0);
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// An invalid configuration value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub var: String,
    pub value: String,
    /// What is wrong, when more than "not one of the accepted values".
    pub problem: Option<String>,
    pub accepted: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}={:?}", self.var, self.value)?;
        if let Some(problem) = &self.problem {
            write!(f, " ({problem})")?;
        }
        write!(f, "; accepted: {}", self.accepted)
    }
}

impl std::error::Error for ConfigError {}

/// `PCOLL_*` names that pcoll's own scripts read (`scripts/bench.sh`: the
/// library to run under each MPI). Launchers forward them to the ranks,
/// where they are neither settings nor typos: ignored without a word.
pub const SCRIPT_VARIABLES: &[&str] = &["PCOLL_LIB_MPICH", "PCOLL_LIB_OPENMPI"];

/// Settings that only concern this rank's own output, so ranks may differ
/// in them: not part of the [`Fingerprint`].
const RANK_LOCAL: &[&str] = &["PCOLL_LOG"];

impl Config {
    /// Reads the process environment (its `PCOLL_*` names only, whatever
    /// the encoding of the others).
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_os(std::env::vars_os())
    }

    /// Parses `PCOLL_*` variables given as (name, value) pairs.
    pub fn from_vars(vars: &[(String, String)]) -> Result<Config, ConfigError> {
        Config::from_os(vars.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))))
    }

    /// Parses an environment: the variables named `PCOLL_*`, in the order
    /// of their names (none depends on another's order), PCOLL_ENABLE
    /// first; with PCOLL_ENABLE=0 nothing else.
    pub fn from_os(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Result<Config, ConfigError> {
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for (name, value) in vars {
            if !name.as_bytes().starts_with(b"PCOLL_") {
                continue;
            }
            match SETTINGS.iter().find(|s| OsStr::new(s.name) == name) {
                Some(setting) => known.push((setting.name, value)),
                None if SCRIPT_VARIABLES.iter().any(|v| OsStr::new(v) == name) => {}
                None => unknown.push(name.to_string_lossy().into_owned()),
            }
        }
        known.sort_by_key(|&(var, _)| (var != "PCOLL_ENABLE", var));
        let mut cfg = Config::default();
        let default = format!("{cfg:?}");
        for (var, value) in &known {
            let value = value.to_str().ok_or_else(|| ConfigError {
                var: var.to_string(),
                value: value.to_string_lossy().into_owned(),
                problem: Some("not valid UTF-8".into()),
                accepted: "UTF-8 text (docs/configuration.md lists the values)".into(),
            })?;
            cfg.set(var, value)?;
            // this variable's effect alone, as every rank computes it
            let mut alone = Config::default();
            alone.set(var, value)?;
            let effect = format!("{alone:?}");
            if effect != default && !RANK_LOCAL.contains(var) {
                cfg.fingerprint.record(var, value, fnv1a(effect.as_bytes()));
            }
            if !cfg.enable {
                return Ok(cfg);
            }
        }
        cfg.warnings = unknown.iter().map(|name| unknown_variable(name)).collect();
        Ok(cfg)
    }

    /// Applies one known variable ([`SETTINGS`]).
    fn set(&mut self, var: &str, value: &str) -> Result<(), ConfigError> {
        let setting = settings::find(var).expect("a known variable");
        let err = |problem: Option<String>| ConfigError {
            var: var.to_string(),
            value: value.to_string(),
            problem,
            accepted: setting.accepts.text(),
        };
        let parsed = setting.accepts.parse(value).ok_or_else(|| err(None))?;
        (setting.set)(self, parsed).map_err(|problem| err(Some(problem).filter(|p| !p.is_empty())))
    }
}

/// The warning for a `PCOLL_*` name pcoll does not know: it is ignored,
/// and the nearest known name, if near enough to be the one meant (edit
/// distance at most a third of the part after `PCOLL_`, case aside), is
/// suggested.
pub fn unknown_variable(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    let suffix = upper.len().saturating_sub("PCOLL_".len());
    let nearest = SETTINGS.iter().map(|s| (edit_distance(&upper, s.name), s.name)).min_by_key(|&(d, _)| d);
    match nearest {
        Some((d, var)) if 3 * d <= suffix.max(3) => {
            format!("{name} is not a pcoll variable and is ignored; did you mean {var}?")
        }
        _ => format!("{name} is not a pcoll variable and is ignored (docs/configuration.md lists them)"),
    }
}

/// Levenshtein distance, by bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let next = (diagonal + usize::from(x != y)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// FNV-1a, 64 bits: the same on every rank, whatever the process.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The settings that ranks must share, as ranks compare them at MPI_Init:
/// per variable of [`SETTINGS`], a digest of the effect its value has on
/// the configuration (0 where it has none: unset, or the default's value
/// in whatever spelling; also for PCOLL_LOG, which only concerns this
/// rank's output), and the value as given, for the message if ranks
/// differ.
#[derive(Clone, PartialEq, Eq)]
pub struct Fingerprint {
    digests: Vec<u64>,
    values: Vec<Option<String>>,
}

impl Default for Fingerprint {
    fn default() -> Fingerprint {
        Fingerprint { digests: vec![0; SETTINGS.len()], values: vec![None; SETTINGS.len()] }
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.hash())
    }
}

impl Fingerprint {
    fn record(&mut self, var: &str, value: &str, digest: u64) {
        let i = settings::index(var);
        // never 0, which stands for "no effect"
        (self.digests[i], self.values[i]) = (digest | 1, Some(value.to_string()));
    }

    /// One digest per variable of [`SETTINGS`], in its order.
    pub fn digests(&self) -> &[u64] {
        &self.digests
    }

    /// All the digests in one word: equal on two ranks (but for a
    /// collision) exactly when their settings are.
    pub fn hash(&self) -> u64 {
        fnv1a(&self.digests.iter().flat_map(|d| d.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// The value this rank was given for variable `index` of
    /// [`SETTINGS`], if it has an effect.
    pub fn value(&self, index: usize) -> Option<&str> {
        self.values[index].as_deref()
    }

    /// The variables (indices into [`SETTINGS`]) whose digests differ
    /// among `all`, every rank's [`Fingerprint::digests`] one after the
    /// other.
    pub fn differing(all: &[u64]) -> Vec<usize> {
        let ranks: Vec<&[u64]> = all.chunks_exact(SETTINGS.len()).collect();
        (0..SETTINGS.len()).filter(|&i| ranks.iter().any(|r| r[i] != ranks[0][i])).collect()
    }
}

/// "auto, mpi, name[:k=v,...], ..." for the error message.
pub fn accepted_choices(coll: Coll) -> String {
    let mut names = vec!["auto".to_string(), "mpi".to_string()];
    for algo in algos::for_coll(coll) {
        let params: Vec<String> = algo.params.iter().map(|p| format!("{}={}..{}", p.name, p.min, p.max)).collect();
        names.push(if params.is_empty() {
            algo.name.to_string()
        } else {
            format!("{}[:{}]", algo.name, params.join(","))
        });
    }
    names.join(", ")
}

/// Parses `auto | mpi | <algorithm>[:key=value,...]`; the error, if any,
/// says what is wrong beyond "unknown value".
pub fn parse_choice(coll: Coll, value: &str) -> Result<Choice, Option<String>> {
    let value = value.trim();
    if value == "auto" {
        return Ok(Choice::Auto);
    }
    if algos::find(coll, value.split(':').next().unwrap_or("")).is_none() && value != "mpi" {
        return Err(None);
    }
    match parse_target(coll, value).map_err(|expected| Some(format!("expected {expected}")))? {
        Target::Mpi => Ok(Choice::Mpi),
        Target::Algo(a, p) => Ok(Choice::Force(a, p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::segment::WINDOW_PIECE;

    fn parse(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_vars(&vars)
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let cfg = parse(&[]).unwrap();
        assert!(cfg.enable && !cfg.stats);
        assert_eq!(cfg.log, LogLevel::Warn);
        assert!(cfg.choices.iter().all(|c| matches!(c, Choice::Auto)));
    }

    #[test]
    fn forcing_each_registered_algorithm() {
        for algo in algos::ALGORITHMS {
            let cfg = parse(&[(algo.coll.env_var(), algo.name)]).unwrap();
            match &cfg.choices[algo.coll.index()] {
                Choice::Force(a, p) => {
                    assert_eq!(a.name, algo.name);
                    assert_eq!(*p, algo.default_params());
                }
                other => panic!("{other:?}"),
            }
        }
        let cfg = parse(&[("PCOLL_BCAST", "mpi"), ("PCOLL_ENABLE", "1"), ("PCOLL_LOG", "DEBUG")]).unwrap();
        assert!(matches!(cfg.choices[Coll::Bcast.index()], Choice::Mpi));
        assert!(cfg.enable);
        assert_eq!(cfg.log, LogLevel::Debug);
    }

    #[test]
    fn parameters_take_size_suffixes() {
        let cfg = parse(&[("PCOLL_ALLREDUCE", "salar:chunk=64K")]).unwrap();
        match &cfg.choices[Coll::Allreduce.index()] {
            Choice::Force(a, p) => assert_eq!((a.name, p[0]), ("salar", 64 << 10)),
            other => panic!("{other:?}"),
        }
        assert!(parse(&[("PCOLL_ALLREDUCE", "salar:chunk=1G")]).is_err(), "beyond the range");
        assert!(parse(&[("PCOLL_ALLREDUCE", "salar:chunk=+5")]).is_err(), "digits only");
    }

    #[test]
    fn node_layer_settings() {
        let cfg =
            parse(&[("PCOLL_RANKS_PER_NODE", "3"), ("PCOLL_SHM_CHUNK", "256K"), ("PCOLL_SHM_TREE", "flat")]).unwrap();
        assert_eq!(cfg.shm.ranks_per_node, Some(3));
        assert_eq!(cfg.shm.chunk, 256 << 10);
        assert_eq!(cfg.shm.tree, ShmTree::Flat);
        assert_eq!(parse(&[]).unwrap().shm, ShmConfig::default());
        // What the node layer gets when nothing is set: the defaults the
        // threaded tests run with production settings.
        // Only where to ask for lines ahead is probed on the machine.
        let probed = Ahead { from: crate::shm::prefetch::probed_from(), ..Ahead::default() };
        assert_eq!(
            ShmConfig::default().node_settings(false),
            NodeSettings { ahead: probed, ..NodeSettings::default() }
        );
        assert_eq!(parse(&[("PCOLL_SHM_STREAM", "0")]).unwrap().shm.stream_from, 0);
        assert_eq!(parse(&[("PCOLL_SHM_ALLREDUCE_CHUNK", "1M")]).unwrap().shm.allreduce_chunk, 1 << 20);
        assert!(!parse(&[("PCOLL_SHM_ADAPT", "0")]).unwrap().shm.adapt);
        let err = parse(&[("PCOLL_SHM_ADAPT", "yes")]).unwrap_err().to_string();
        assert!(err.contains("PCOLL_SHM_ADAPT"), "{err}");
        assert_eq!(parse(&[("PCOLL_SHM_STREAM", "4K")]).unwrap().shm.stream_from, 4096);
        let err = parse(&[("PCOLL_SHM_STREAM", "2G")]).unwrap_err().to_string();
        assert!(err.contains("PCOLL_SHM_STREAM"), "{err}");
        assert_eq!(parse(&[("PCOLL_SHM_STREAM_OUT", "1M")]).unwrap().shm.stream_out_from, 1 << 20);
        assert_eq!(parse(&[("PCOLL_SHM_STREAM_OUT", "0")]).unwrap().shm.stream_out_from, 0);
        let err = parse(&[("PCOLL_SHM_STREAM_OUT", "2G")]).unwrap_err().to_string();
        assert!(err.contains("PCOLL_SHM_STREAM_OUT"), "{err}");
        let shm = parse(&[("PCOLL_SHM_GATHERV_COPY_IN", "8K"), ("PCOLL_SHM_BCAST_TIMED", "1M")]).unwrap().shm;
        let sizes = shm.node_sizes();
        assert_eq!((sizes.gatherv_copy_in_up_to, sizes.bcast_timed_from), (8 << 10, 1 << 20));
        assert_eq!(sizes.sub_chunk, Sizes::default().sub_chunk);
        assert_eq!(parse(&[("PCOLL_SHM_PIPELINE_WINDOW", "0")]).unwrap().shm.node_sizes().pipeline_window_from, 0);
        assert_eq!(ShmConfig::default().node_sizes(), Sizes::default());
        assert!(parse(&[("PCOLL_SHM_BCAST_TIMED", "0")]).unwrap_err().to_string().contains("PCOLL_SHM_BCAST_TIMED"));
        assert_eq!(parse(&[("PCOLL_SHM_BACK_TO_BACK", "2000")]).unwrap().shm.back_to_back_ns, 2000);
        assert_eq!(parse(&[("PCOLL_SHM_BACK_TO_BACK", "0")]).unwrap().shm.back_to_back_ns, 0);
        let err = parse(&[("PCOLL_SHM_BACK_TO_BACK", "2G")]).unwrap_err().to_string();
        assert!(err.contains("PCOLL_SHM_BACK_TO_BACK"), "{err}");
        let geo = parse(&[("PCOLL_SHM_RING", "64"), ("PCOLL_SHM_RING_BYTES", "1K")]).unwrap().shm.geometry(2, None);
        assert_eq!((geo.ring, geo.ring_bytes), (64, 1024));
        assert_eq!((Geometry::DEFAULT.ring, Geometry::DEFAULT.ring_bytes), (16, 256));
        for bad in ["12", "1", "0", "2K"] {
            let err = parse(&[("PCOLL_SHM_RING", bad)]).unwrap_err().to_string();
            assert!(err.contains("PCOLL_SHM_RING"), "{bad}: {err}");
        }
        let shm = parse(&[("PCOLL_SHM_PREFETCH_OUT", "64K")]).unwrap().shm;
        assert_eq!((shm.prefetch_out_from, shm.node_settings(false).ahead.from), (Some(64 << 10), 64 << 10));
        assert_eq!(parse(&[("PCOLL_SHM_PREFETCH_OUT", "0")]).unwrap().shm.prefetch_out_from, Some(0));
        for bad in ["2G", "-1", "lots"] {
            let err = parse(&[("PCOLL_SHM_PREFETCH_OUT", bad)]).unwrap_err();
            assert_eq!((err.var.as_str(), err.accepted.as_str()), ("PCOLL_SHM_PREFETCH_OUT", "0 (never) or 1..1G"));
            assert!(err.to_string().contains("PCOLL_SHM_PREFETCH_OUT"), "{err}");
        }
    }

    #[test]
    fn segments_larger_than_a_quarter_of_dev_shm_are_refused_naming_the_variables() {
        let shm = 64 << 20;
        // the defaults are never refused, even where they do not fit
        let cfg = parse(&[]).unwrap();
        assert!(cfg.check_segment(2, shm).is_ok() && cfg.check_segment(1000, shm).is_ok());
        // the example: 64 GiB per rank
        let cfg = parse(&[("PCOLL_SHM_FRAGMENT", "16M"), ("PCOLL_SHM_SLOTS", "4096")]).unwrap();
        let err = cfg.check_segment(2, shm).unwrap_err();
        assert!(err.contains("PCOLL_SHM_SLOTS=4096 and PCOLL_SHM_FRAGMENT=16M"), "{err}");
        assert!(err.contains("128.0 GiB for the 2 ranks") && err.contains("(64.0 MiB)"), "{err}");
        // one variable, in the user's spelling; the same on a larger /dev/shm passes
        let cfg = parse(&[("PCOLL_SHM_CHUNK", "8M"), ("PCOLL_SHM_SLOTS", "8")]).unwrap();
        let err = cfg.check_segment(2, shm).unwrap_err();
        assert!(err.starts_with("pcoll: PCOLL_SHM_CHUNK=8M makes a shared segment"), "{err}");
        assert!(cfg.check_segment(2, 1 << 30).is_ok());
        // lowered settings are not refused, whatever the size
        let cfg = parse(&[("PCOLL_SHM_SLOTS", "8")]).unwrap();
        assert!(cfg.check_segment(1000, shm).is_ok());
        // without the node layer, or alone on a node, nothing to check
        for vars in [
            &[("PCOLL_SHM_CHUNK", "64M"), ("PCOLL_SHM", "0")][..],
            &[("PCOLL_SHM_CHUNK", "64M"), ("PCOLL_ENABLE", "0")],
        ] {
            assert!(parse(vars).unwrap().check_segment(2, shm).is_ok(), "{vars:?}");
        }
        assert!(parse(&[("PCOLL_SHM_CHUNK", "64M")]).unwrap().check_segment(1, shm).is_ok());
        assert_eq!((bytes_text(100), bytes_text(3 << 19)), ("100 B".to_string(), "1.5 MiB".to_string()));
    }

    #[test]
    fn budget_and_setup_after() {
        let cfg = parse(&[]).unwrap();
        assert_eq!((cfg.shm.budget, cfg.calls_before_setup()), (None, SETUP_AFTER));
        let cfg = parse(&[("PCOLL_SHM_BUDGET", "16M"), ("PCOLL_SETUP_AFTER", "3")]).unwrap();
        assert_eq!((cfg.shm.budget, cfg.calls_before_setup()), (Some(16 << 20), 3));
        // reproducible reductions never reach the host's own algorithms,
        // nor calls of a collective forced to an algorithm
        for forcing in [("PCOLL_REPRODUCIBLE", "1"), ("PCOLL_GATHERV", "linear")] {
            assert_eq!(parse(&[("PCOLL_SETUP_AFTER", "3"), forcing]).unwrap().calls_before_setup(), 0, "{forcing:?}");
        }
        assert_eq!(parse(&[("PCOLL_SETUP_AFTER", "3"), ("PCOLL_BCAST", "mpi")]).unwrap().calls_before_setup(), 3);
        for (var, value) in [("PCOLL_SHM_BUDGET", "2048G"), ("PCOLL_SETUP_AFTER", "-1")] {
            assert_eq!(parse(&[(var, value)]).unwrap_err().var, var);
        }
    }

    #[test]
    fn bogus_algorithm_is_refused_by_name() {
        let err = parse(&[("PCOLL_ALLREDUCE", "bogus")]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("PCOLL_ALLREDUCE") && msg.contains("bogus"), "{msg}");
        assert!(msg.contains("auto") && msg.contains("recursive_doubling"), "{msg}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = ["binomial:k", "binomial:k=2", "binomial:=", "auto:x=1", "mpi:"];
        for value in bad {
            let err = parse(&[("PCOLL_REDUCE", value)]).unwrap_err();
            assert_eq!(err.var, "PCOLL_REDUCE", "{value}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        for (var, value) in [
            ("PCOLL_ENABLE", "yes"),
            ("PCOLL_STATS", "2"),
            ("PCOLL_LOG", "loud"),
            ("PCOLL_RANKS_PER_NODE", "0"),
            ("PCOLL_SHM_CHUNK", "1K"),
            ("PCOLL_SHM_TREE", "star"),
            ("PCOLL_SHM_ZCOPY", "auto"),
        ] {
            let err = parse(&[(var, value)]).unwrap_err();
            assert_eq!((err.var.as_str(), err.value.as_str()), (var, value));
        }
    }

    #[test]
    fn malformed_rules_are_refused_naming_the_variable_line_and_column() {
        let err = parse(&[("PCOLL_TUNE", "bcast binomial\nreduce p<x binomial")]).unwrap_err();
        assert_eq!(err.var, "PCOLL_TUNE");
        let msg = err.to_string();
        assert!(msg.starts_with("invalid PCOLL_TUNE=\"bcast binomial\\nreduce p<x binomial\""), "{msg}");
        assert!(msg.contains("PCOLL_TUNE line 2, column 8: expected a number"), "{msg}");
        assert!(msg.contains("found \"p<x\""), "{msg}");

        let dir = std::env::temp_dir().join(format!("pcoll-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("bad.rules");
        std::fs::write(&file, "# tuned\nallreduce p=2 ring\ngatherv bytes<1Q linear\n").unwrap();
        let path = file.to_str().unwrap();
        let err = parse(&[("PCOLL_TUNE_FILE", path)]).unwrap_err();
        assert_eq!((err.var.as_str(), err.value.as_str()), ("PCOLL_TUNE_FILE", path));
        let msg = err.to_string();
        assert!(msg.contains(&format!("{path} line 3, column 9: expected a number")), "{msg}");
        std::fs::write(&file, "allreduce p=2 ring\n").unwrap();
        let cfg = parse(&[("PCOLL_TUNE_FILE", path)]).unwrap();
        assert_eq!(cfg.tune_file.unwrap().rules.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();

        let err = parse(&[("PCOLL_TUNE_FILE", "/nonexistent/pcoll.rules")]).unwrap_err();
        assert!(err.to_string().contains("cannot read it"), "{err}");
    }

    #[test]
    fn stats_file_verify_and_reproducible() {
        let cfg = parse(&[]).unwrap();
        assert_eq!((cfg.stats_file.clone(), cfg.verify, cfg.reproducible), (None, None, false));
        // PCOLL_STATS_FILE implies the summary, in either order.
        for vars in [
            [("PCOLL_STATS", "0"), ("PCOLL_STATS_FILE", "s.txt")],
            [("PCOLL_STATS_FILE", "s.txt"), ("PCOLL_STATS", "0")],
        ] {
            let cfg = parse(&vars).unwrap();
            assert!(cfg.stats);
            assert_eq!(cfg.stats_file.unwrap(), std::path::PathBuf::from("s.txt"));
        }
        assert_eq!(parse(&[("PCOLL_VERIFY", "1")]).unwrap().verify, Some(VerifyMode::Report));
        assert_eq!(parse(&[("PCOLL_VERIFY", "abort")]).unwrap().verify, Some(VerifyMode::Abort));
        assert_eq!(parse(&[("PCOLL_VERIFY", "0")]).unwrap().verify, None);
        assert!(parse(&[("PCOLL_REPRODUCIBLE", "1")]).unwrap().reproducible);
        for (var, value, accepted) in [
            ("PCOLL_VERIFY", "yes", "0, 1, abort"),
            ("PCOLL_REPRODUCIBLE", "on", "0, 1"),
            ("PCOLL_STATS_FILE", " ", "a file path"),
        ] {
            let err = parse(&[(var, value)]).unwrap_err();
            assert_eq!((err.var.as_str(), err.value.as_str(), err.accepted.as_str()), (var, value, accepted));
        }
    }

    /// An environment as the process gets it: names and values of bytes.
    fn parse_os(pairs: &[(&[u8], &[u8])]) -> Result<Config, ConfigError> {
        Config::from_os(pairs.iter().map(|(k, v)| (OsStr::from_bytes(k).to_owned(), OsStr::from_bytes(v).to_owned())))
    }

    #[test]
    fn values_that_are_not_utf8() {
        // another program's variable: none of pcoll's business
        let cfg = parse_os(&[(b"LANGUAGE_JUNK", b"caf\xe9"), (b"PCOLL_SHM", b"0")]).unwrap();
        assert!(!cfg.shm.enable);
        // a setting's: an invalid value of that setting, named
        let err = parse_os(&[(b"PCOLL_SHM_CHUNK", b"64K\xff")]).unwrap_err();
        assert_eq!((err.var.as_str(), err.value.as_str()), ("PCOLL_SHM_CHUNK", "64K\u{fffd}"));
        assert_eq!(err.problem.as_deref(), Some("not valid UTF-8"));
        assert!(err.to_string().starts_with("invalid PCOLL_SHM_CHUNK="), "{err}");
        // a name that is not UTF-8 is no name pcoll knows
        let cfg = parse_os(&[(b"PCOLL_\xffSHM", b"0")]).unwrap();
        assert!(cfg.shm.enable);
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        assert!(cfg.warnings[0].starts_with("PCOLL_\u{fffd}SHM is not a pcoll variable"), "{:?}", cfg.warnings);
    }

    #[test]
    fn unknown_names_are_warnings_with_the_nearest_name() {
        let cfg = parse(&[("PCOLL_ALREDUCE", "ring"), ("PCOLL_BCAST", "mpi")]).unwrap();
        assert!(matches!(cfg.choices[Coll::Bcast.index()], Choice::Mpi), "the others still apply");
        assert!(matches!(cfg.choices[Coll::Allreduce.index()], Choice::Auto));
        assert_eq!(
            cfg.warnings,
            ["PCOLL_ALREDUCE is not a pcoll variable and is ignored; did you mean PCOLL_ALLREDUCE?"]
        );
        for (name, meant) in [
            ("PCOLL_shm_zcopy", "PCOLL_SHM_ZCOPY"),
            ("PCOLL_SHM_ZEROCOPY", "PCOLL_SHM_ZCOPY"),
            ("PCOLL_STAT", "PCOLL_STATS"),
            ("PCOLL_RANKS_PER_NODES", "PCOLL_RANKS_PER_NODE"),
            ("PCOLL_VERIFI", "PCOLL_VERIFY"),
        ] {
            let cfg = parse(&[(name, "1")]).unwrap();
            assert_eq!(cfg.warnings, [format!("{name} is not a pcoll variable and is ignored; did you mean {meant}?")]);
        }
        // nothing near enough: no guess
        for name in ["PCOLL_FOO", "PCOLL_VERBOSE", "PCOLL_"] {
            let cfg = parse(&[(name, "1")]).unwrap();
            assert_eq!(
                cfg.warnings,
                [format!("{name} is not a pcoll variable and is ignored (docs/configuration.md lists them)")]
            );
        }
        // the names pcoll's own scripts read: silent
        let cfg = parse(&[("PCOLL_LIB_MPICH", "/x/libpcoll.so"), ("PCOLL_LIB_OPENMPI", "/y/libpcoll.so")]).unwrap();
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert_eq!(cfg.fingerprint, Fingerprint::default());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn disabled_reads_nothing_else() {
        let others: &[(&[u8], &[u8])] = &[
            (b"PCOLL_SHM", b"bogus"),
            (b"PCOLL_ALLREDUCE", b"bogus"),
            (b"PCOLL_BCAST", b"\xff"),
            (b"PCOLL_TUNE_FILE", b"/nonexistent/pcoll.rules"),
            (b"PCOLL_ALREDUCE", b"ring"),
        ];
        let mut vars = others.to_vec();
        vars.push((b"PCOLL_ENABLE", b"0"));
        let cfg = parse_os(&vars).unwrap();
        assert!(!cfg.enable);
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert!(cfg.shm.enable && cfg.tune_file.is_none());
        // enabled, each of them stops it (or warns)
        vars.pop();
        vars.push((b"PCOLL_ENABLE", b"1"));
        for bad in &vars[..4] {
            let err = parse_os(&[*bad, (b"PCOLL_ENABLE", b"1")]).unwrap_err();
            assert_eq!(err.var.as_bytes(), bad.0);
        }
        // and PCOLL_ENABLE itself is checked
        assert_eq!(parse_os(&[(b"PCOLL_ENABLE", b"\xff0")]).unwrap_err().var, "PCOLL_ENABLE");
    }

    /// A valid value of each variable that has an effect (PCOLL_TUNE_FILE's
    /// file made in `dir`).
    fn effective_values(dir: &std::path::Path) -> Vec<(&'static str, String)> {
        let rules = dir.join("fingerprint.rules");
        std::fs::write(&rules, "allreduce p=2 ring\n").unwrap();
        let mut values: Vec<(&str, String)> = [
            ("PCOLL_ENABLE", "0"),
            ("PCOLL_ALLREDUCE", "mpi"),
            ("PCOLL_REDUCE", "mpi"),
            ("PCOLL_BCAST", "mpi"),
            ("PCOLL_GATHERV", "mpi"),
            ("PCOLL_GATHERV_MODE", "aggressive"),
            ("PCOLL_TUNE", "allreduce p=2 ring"),
            ("PCOLL_STATS", "1"),
            ("PCOLL_STATS_FILE", "s.txt"),
            ("PCOLL_VERIFY", "1"),
            ("PCOLL_REPRODUCIBLE", "1"),
            ("PCOLL_CALIBRATE", "1"),
            ("PCOLL_SHM", "0"),
            ("PCOLL_SHM_ZCOPY", "0"),
            ("PCOLL_RANKS_PER_NODE", "2"),
            ("PCOLL_LEADERS", "2"),
            ("PCOLL_SHM_CHUNK", "128K"),
            ("PCOLL_SHM_SLOTS", "8"),
            ("PCOLL_SHM_FRAGMENT", "4K"),
            ("PCOLL_SHM_SETS", "4"),
            ("PCOLL_SHM_TREE", "flat"),
            ("PCOLL_SHM_TREE_K", "8"),
            ("PCOLL_SHM_STREAM", "0"),
            ("PCOLL_SHM_STREAM_OUT", "0"),
            ("PCOLL_SHM_PREFETCH_OUT", "0"),
            ("PCOLL_SHM_GATHERV_COPY_IN", "0"),
            ("PCOLL_SHM_GATHERV_HOT_COPY_IN", "0"),
            ("PCOLL_SHM_PIPELINE_WINDOW", "0"),
            ("PCOLL_SHM_BCAST_TIMED", "1M"),
            ("PCOLL_SHM_BACK_TO_BACK", "2000"),
            ("PCOLL_SHM_ALLREDUCE_CHUNK", "1M"),
            ("PCOLL_SHM_RING", "4"),
            ("PCOLL_SHM_RING_BYTES", "1K"),
            ("PCOLL_SHM_ROTATE", "2"),
            ("PCOLL_SHM_SPREAD", "4"),
            ("PCOLL_SHM_ADAPT", "0"),
            ("PCOLL_SHM_BUDGET", "1M"),
            ("PCOLL_SETUP_AFTER", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        values.push(("PCOLL_TUNE_FILE", rules.to_str().unwrap().to_string()));
        values
    }

    #[test]
    fn chunk_areas_move_through_as_many_places_as_the_budget_allows() {
        use crate::driver::pool::default_budget;
        let shm = ShmConfig::default();
        let places = |ranks: usize| shm.geometry(ranks, Some(default_budget(64 << 20, ranks))).rotations;
        assert_eq!([places(2), places(4), places(8)], [8, 4, 1], "a 64 MiB /dev/shm");
        assert_eq!(shm.geometry(64, None).rotations, crate::shm::segment::ROTATIONS, "no budget");
        let large_chunks = parse(&[("PCOLL_SHM_CHUNK", "1M")]).unwrap().shm;
        assert_eq!(large_chunks.geometry(2, None).rotations, 1, "no more bytes than the default's places");
        let set = parse(&[("PCOLL_SHM_ROTATE", "32")]).unwrap().shm;
        assert_eq!(set.geometry(8, Some(1)).rotations, 32, "as set, whatever the budget");
        assert!(parse(&[("PCOLL_SHM_ROTATE", "3")]).unwrap_err().to_string().contains("PCOLL_SHM_ROTATE"));
        let block = |rotations| Geometry { rotations, spread: 1, ..shm.geometry(2, None) }.block_bytes();
        assert_eq!(block(8) - block(1), 2 * 7 * (64 << 10), "two spans of 7 more chunks");
    }

    #[test]
    fn the_hot_bcast_window_is_there_where_rank_0_s_share_of_the_budget_holds_it() {
        use crate::driver::pool::default_budget;
        let shm = ShmConfig::default();
        let in_shm = |shm_bytes: usize, ranks: usize| shm.geometry(ranks, Some(default_budget(shm_bytes, ranks)));
        let holds =
            |geo: &Geometry, budget: usize| (geo.block_bytes() + geo.header_bytes()) * BLOCKS_IN_BUDGET <= budget;
        for (shm_bytes, ranks, window) in [
            (64 << 20, 2, WINDOW_BYTES),
            (64 << 20, 3, 256 << 10),
            (256 << 20, 8, WINDOW_BYTES),
            (24 << 30, 64, WINDOW_BYTES),
        ] {
            let (geo, budget) = (in_shm(shm_bytes, ranks), default_budget(shm_bytes, ranks));
            assert_eq!((geo.window, geo.window_pieces), (window, window / WINDOW_PIECE), "{shm_bytes} {ranks}");
            assert!(holds(&geo, budget), "{shm_bytes} {ranks}");
            let twice = geo.with_window(2 * window);
            assert!(window == WINDOW_BYTES || !holds(&twice, budget), "the largest that fits: {shm_bytes} {ranks}");
        }
        // In a 64 MiB /dev/shm at 2 ranks: rank 0's 3.4 MiB block and its
        // header of the window and the set controls, in 16 MiB.
        let in_64m = in_shm(64 << 20, 2);
        assert!((in_64m.block_bytes() + in_64m.header_bytes()) < 4 << 20, "{}", in_64m.block_bytes());
        assert_eq!(in_shm(64 << 20, 8).window, 0, "a 64 MiB /dev/shm at 8 ranks");
        // Where a block barely fits, no window: the calls take the queue.
        let least = in_shm(64 << 20, 16);
        let budget = least.block_bytes() * BLOCKS_IN_BUDGET;
        let without = shm.geometry(16, Some(budget));
        assert_eq!((without.window, without.window_pieces), (0, 0));
        assert_eq!(without.header_bytes(), least.with_window(0).header_bytes());
        assert_eq!(shm.geometry(64, None).window, WINDOW_BYTES, "no budget");
    }

    #[test]
    fn spread_steps_move_through_as_many_places_as_the_budget_leaves() {
        use crate::driver::pool::default_budget;
        use crate::shm::segment::SPREAD;
        let shm = ShmConfig::default();
        let in_shm = |shm_bytes: usize, ranks: usize| shm.geometry(ranks, Some(default_budget(shm_bytes, ranks)));
        let spread = |shm_bytes, ranks| in_shm(shm_bytes, ranks).spread;
        assert_eq!([spread(24 << 30, 2), spread(24 << 30, 64), shm.geometry(64, None).spread], [SPREAD; 3]);
        assert_eq!([spread(64 << 20, 2), spread(64 << 20, 4), spread(64 << 20, 8)], [8, 4, 1], "the chunk areas'");
        // The queue first: the most slots whose block fits, before any
        // spread place (the default's 4 MiB does not fit 16 MiB four times).
        let in_64m = in_shm(64 << 20, 2);
        assert_eq!(in_64m.slots, COLD_QUEUE_SLOTS, "the queue first");
        let doubled = Geometry { slots: 2 * in_64m.slots, sets: 2 * in_64m.sets, spread: in_64m.rotations, ..in_64m };
        assert!(!fits_budget(&doubled, Some(default_budget(64 << 20, 2))), "the most slots that fit");
        for (shm_bytes, ranks) in [(64 << 20, 2), (256 << 20, 2), (256 << 20, 3), (1 << 30, 16)] {
            let geo = in_shm(shm_bytes, ranks);
            assert!(geo.spread >= geo.rotations && geo.spread.is_power_of_two(), "{shm_bytes} {ranks}");
            assert!(geo.block_bytes() * BLOCKS_IN_BUDGET <= default_budget(shm_bytes, ranks), "{shm_bytes} {ranks}");
        }
        let large_chunks = parse(&[("PCOLL_SHM_CHUNK", "1M")]).unwrap().shm;
        assert_eq!(large_chunks.geometry(2, None).spread, 2, "no more bytes than the default's places");
        let set = parse(&[("PCOLL_SHM_SPREAD", "64")]).unwrap().shm;
        assert_eq!(set.geometry(8, Some(1)).spread, 64, "as set, whatever the budget");
        assert!(parse(&[("PCOLL_SHM_SPREAD", "3")]).unwrap_err().to_string().contains("PCOLL_SHM_SPREAD"));
        let block = |spread| Geometry { spread, ..shm.geometry(2, None) }.block_bytes();
        assert_eq!(block(SPREAD) - block(8), 2 * (SPREAD - 8) * (64 << 10), "two spans of more chunks");
    }

    #[test]
    fn the_queue_takes_as_many_slots_as_the_budget_allows() {
        use crate::driver::pool::default_budget;
        let shm = ShmConfig::default();
        let in_64m = |ranks: usize| shm.geometry(ranks, Some(default_budget(64 << 20, ranks)));
        let slots_and_sets = |geo: Geometry| (geo.slots, geo.sets);
        assert_eq!(slots_and_sets(shm.geometry(64, None)), (QUEUE_SLOTS, QUEUE_SLOTS / SLOTS_PER_SET), "no budget");
        assert_eq!(slots_and_sets(shm.geometry(2, Some(default_budget(24 << 30, 2)))), (1024, 256), "24 GiB");
        assert_eq!([in_64m(2).slots, in_64m(3).slots, in_64m(8).slots], [512, 256, 256], "a 64 MiB /dev/shm");
        assert_eq!(in_64m(2).rotations, 8, "the chunk areas' places come first");
        for ranks in [2, 3, 4] {
            assert!(in_64m(ranks).block_bytes() * BLOCKS_IN_BUDGET <= default_budget(64 << 20, ranks), "{ranks}");
        }
        let set = parse(&[("PCOLL_SHM_SLOTS", "64")]).unwrap().shm;
        assert_eq!(slots_and_sets(set.geometry(2, None)), (64, 16), "as set, a set per 4 slots");
        let set = parse(&[("PCOLL_SHM_SLOTS", "64"), ("PCOLL_SHM_SETS", "100")]).unwrap().shm;
        assert_eq!(slots_and_sets(set.geometry(2, Some(1))), (64, 64), "as set, at most a set per slot");
        let set = parse(&[("PCOLL_SHM_SETS", "2")]).unwrap().shm;
        assert_eq!(slots_and_sets(set.geometry(2, None)), (QUEUE_SLOTS, 2));
    }

    #[test]
    fn the_fingerprint_tells_each_variable_apart() {
        let dir = std::env::temp_dir().join(format!("pcoll-fingerprint-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let values = effective_values(&dir);
        let default = parse(&[]).unwrap().fingerprint;
        assert_eq!(default.digests(), vec![0; SETTINGS.len()]);
        for var in SETTINGS.iter().map(|s| &s.name) {
            let setting = values.iter().find(|(v, _)| v == var);
            let Some((_, value)) = setting else {
                assert_eq!(*var, "PCOLL_LOG", "every variable but PCOLL_LOG has a value above");
                continue;
            };
            let fp = parse(&[(var, value)]).unwrap().fingerprint;
            assert_ne!(fp.hash(), default.hash(), "{var}={value}");
            let both: Vec<u64> = [default.digests(), fp.digests()].concat();
            let i = settings::index(var);
            assert_eq!(Fingerprint::differing(&both), [i], "{var}={value}");
            assert_eq!((fp.value(i), default.value(i)), (Some(value.as_str()), None));
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // the effect counts, not the spelling; PCOLL_LOG only concerns this rank
        for same in [
            &[("PCOLL_SHM_CHUNK", "64K")][..],
            &[("PCOLL_SHM_CHUNK", " 65536")],
            &[("PCOLL_SHM", "1"), ("PCOLL_ENABLE", "1"), ("PCOLL_ALLREDUCE", "auto")],
            &[("PCOLL_LOG", "debug")],
            &[("PCOLL_ALREDUCE", "ring"), ("PCOLL_LIB_MPICH", "x")],
        ] {
            assert_eq!(parse(same).unwrap().fingerprint.hash(), default.hash(), "{same:?}");
        }
        // values that differ between set ones
        let a = parse(&[("PCOLL_SHM_CHUNK", "128K"), ("PCOLL_SHM", "0")]).unwrap().fingerprint;
        let b = parse(&[("PCOLL_SHM_CHUNK", "256K"), ("PCOLL_SHM", "0")]).unwrap().fingerprint;
        let chunk = settings::index("PCOLL_SHM_CHUNK");
        assert_eq!(Fingerprint::differing(&[a.digests(), a.digests(), b.digests()].concat()), [chunk]);
    }
}
