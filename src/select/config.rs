//! Configuration from the environment, read once per process.
//!
//! Every `PCOLL_*` variable is checked: a bad value, or a variable pcoll
//! does not know (most likely a typo), is an error that names the variable,
//! the value and what is accepted. Nothing is silently ignored.

use super::rules::{self, parse_target, Rules, Target};
use crate::algos::node::Sizes;
use crate::algos::{self, Algorithm, Params};
use crate::core::types::Coll;
use crate::shm::prefetch::Ahead;
use crate::shm::segment::Geometry;
use crate::shm::team::NodeSettings;
use std::fmt;

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
    const NAMES: [(&'static str, LogLevel); 6] = [
        ("off", LogLevel::Off),
        ("error", LogLevel::Error),
        ("warn", LogLevel::Warn),
        ("info", LogLevel::Info),
        ("debug", LogLevel::Debug),
        ("trace", LogLevel::Trace),
    ];

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
    /// queue: slots per rank, fragment bytes (0: the paper's model per
    /// message, up to 16 KiB), sets.
    pub slots: usize,
    pub fragment: usize,
    pub sets: usize,
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
    /// ahead (0: never).
    pub prefetch_out_from: usize,
    /// PCOLL_SHM_GATHERV_COPY_IN: in a Gatherv's auto mode, blocks of at
    /// most this many bytes go through their owner's area, larger ones
    /// straight into the root's buffer.
    pub gatherv_copy_in_up_to: usize,
    /// PCOLL_SHM_BCAST_TIMED: the `shm` Bcast times zero copy against the
    /// pipeline from this many bytes (zero copy below).
    pub bcast_timed_from: usize,
    /// PCOLL_SHM_ADAPT: a flat Allreduce of 64 KiB and more picks the
    /// stores of its copy-in by timing its calls.
    pub adapt: bool,
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
            slots: Geometry::DEFAULT.slots,
            fragment: 0,
            sets: Geometry::DEFAULT.sets,
            tree: ShmTree::Kary,
            tree_k: 4,
            stream_from: crate::shm::team::STREAM_FROM,
            stream_out_from: crate::shm::team::STREAM_OUT_FROM,
            prefetch_out_from: crate::shm::prefetch::AHEAD_FROM,
            gatherv_copy_in_up_to: Sizes::default().gatherv_copy_in_up_to,
            bcast_timed_from: Sizes::default().bcast_timed_from,
            adapt: true,
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

    /// The segment's layout for a node of `ranks` ranks.
    pub fn geometry(&self, ranks: usize) -> Geometry {
        Geometry {
            ranks,
            chunk: self.chunk,
            allreduce_chunk: self.allreduce_chunk,
            slots: self.slots,
            slot_bytes: self.slot_bytes(),
            sets: self.sets.min(self.slots),
        }
    }

    /// The sizes and method thresholds of the node algorithms.
    pub fn node_sizes(&self) -> Sizes {
        Sizes {
            gatherv_copy_in_up_to: self.gatherv_copy_in_up_to,
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
            ahead: Ahead { from: self.prefetch_out_from, ..Ahead::default() },
            oversubscribed,
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
    pub shm: ShmConfig,
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
            shm: ShmConfig::default(),
        }
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

/// Every variable pcoll reads.
pub const VARIABLES: &[&str] = &[
    "PCOLL_ENABLE",
    "PCOLL_ALLREDUCE",
    "PCOLL_REDUCE",
    "PCOLL_BCAST",
    "PCOLL_GATHERV",
    "PCOLL_GATHERV_MODE",
    "PCOLL_TUNE",
    "PCOLL_TUNE_FILE",
    "PCOLL_LOG",
    "PCOLL_STATS",
    "PCOLL_STATS_FILE",
    "PCOLL_VERIFY",
    "PCOLL_REPRODUCIBLE",
    "PCOLL_CALIBRATE",
    "PCOLL_SHM",
    "PCOLL_SHM_ZCOPY",
    "PCOLL_RANKS_PER_NODE",
    "PCOLL_LEADERS",
    "PCOLL_SHM_CHUNK",
    "PCOLL_SHM_SLOTS",
    "PCOLL_SHM_FRAGMENT",
    "PCOLL_SHM_SETS",
    "PCOLL_SHM_TREE",
    "PCOLL_SHM_TREE_K",
    "PCOLL_SHM_STREAM",
    "PCOLL_SHM_STREAM_OUT",
    "PCOLL_SHM_PREFETCH_OUT",
    "PCOLL_SHM_GATHERV_COPY_IN",
    "PCOLL_SHM_BCAST_TIMED",
    "PCOLL_SHM_ALLREDUCE_CHUNK",
    "PCOLL_SHM_ADAPT",
];

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("PCOLL_")).collect();
        Config::from_vars(&vars)
    }

    /// Parses `PCOLL_*` variables given as (name, value) pairs.
    pub fn from_vars(vars: &[(String, String)]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        for (var, value) in vars {
            let err = |problem: Option<String>, accepted: String| ConfigError {
                var: var.clone(),
                value: value.clone(),
                problem,
                accepted,
            };
            match var.as_str() {
                "PCOLL_ENABLE" => cfg.enable = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_STATS" => cfg.stats |= parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_STATS_FILE" => {
                    if value.trim().is_empty() {
                        return Err(err(Some("empty".into()), "a file path".into()));
                    }
                    cfg.stats_file = Some(value.trim().into());
                    cfg.stats = true;
                }
                "PCOLL_VERIFY" => {
                    cfg.verify = match value.trim() {
                        "0" => None,
                        "1" => Some(VerifyMode::Report),
                        "abort" => Some(VerifyMode::Abort),
                        _ => return Err(err(None, "0, 1, abort".into())),
                    }
                }
                "PCOLL_REPRODUCIBLE" => cfg.reproducible = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_CALIBRATE" => cfg.calibrate = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_SHM" => cfg.shm.enable = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_SHM_ZCOPY" => cfg.shm.zcopy = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_RANKS_PER_NODE" => {
                    cfg.shm.ranks_per_node =
                        Some(parse_size(value, 1, 1 << 20).ok_or_else(|| err(None, "1..1048576".into()))?)
                }
                "PCOLL_LEADERS" => {
                    cfg.shm.leaders = Some(parse_size(value, 1, 4096).ok_or_else(|| err(None, "1..4096".into()))?)
                }
                "PCOLL_SHM_CHUNK" => {
                    cfg.shm.chunk = parse_size(value, 4096, 64 << 20).ok_or_else(|| err(None, "4K..64M".into()))?
                }
                "PCOLL_SHM_ALLREDUCE_CHUNK" => {
                    cfg.shm.allreduce_chunk =
                        parse_size(value, 4096, 64 << 20).ok_or_else(|| err(None, "4K..64M".into()))?
                }
                "PCOLL_SHM_ADAPT" => cfg.shm.adapt = parse_bool(value).ok_or_else(|| err(None, "0, 1".into()))?,
                "PCOLL_SHM_SLOTS" => {
                    cfg.shm.slots = parse_size(value, 1, 4096).ok_or_else(|| err(None, "1..4096".into()))?
                }
                "PCOLL_SHM_FRAGMENT" => {
                    cfg.shm.fragment =
                        parse_size(value, 0, 16 << 20).ok_or_else(|| err(None, "0 (model) or 1..16M".into()))?
                }
                "PCOLL_SHM_SETS" => {
                    cfg.shm.sets = parse_size(value, 1, 4096).ok_or_else(|| err(None, "1..4096".into()))?
                }
                "PCOLL_SHM_TREE" => {
                    cfg.shm.tree = match value.trim() {
                        "flat" => ShmTree::Flat,
                        "chain" => ShmTree::Chain,
                        "kary" => ShmTree::Kary,
                        "knomial" => ShmTree::Knomial,
                        _ => return Err(err(None, "flat, chain, kary, knomial".into())),
                    }
                }
                "PCOLL_SHM_TREE_K" => {
                    cfg.shm.tree_k = parse_size(value, 2, 64).ok_or_else(|| err(None, "2..64".into()))?
                }
                "PCOLL_SHM_STREAM" => {
                    cfg.shm.stream_from =
                        parse_size(value, 0, 1 << 30).ok_or_else(|| err(None, "0 (never) or 1..1G".into()))?
                }
                "PCOLL_SHM_STREAM_OUT" => {
                    cfg.shm.stream_out_from =
                        parse_size(value, 0, 1 << 30).ok_or_else(|| err(None, "0 (never) or 1..1G".into()))?
                }
                "PCOLL_SHM_PREFETCH_OUT" => {
                    cfg.shm.prefetch_out_from =
                        parse_size(value, 0, 1 << 30).ok_or_else(|| err(None, "0 (never) or 1..1G".into()))?
                }
                "PCOLL_SHM_GATHERV_COPY_IN" => {
                    cfg.shm.gatherv_copy_in_up_to =
                        parse_size(value, 0, 1 << 30).ok_or_else(|| err(None, "0 (none) or 1..1G".into()))?
                }
                "PCOLL_SHM_BCAST_TIMED" => {
                    cfg.shm.bcast_timed_from = parse_size(value, 1, 1 << 30).ok_or_else(|| err(None, "1..1G".into()))?
                }
                "PCOLL_GATHERV_MODE" => {
                    cfg.gatherv_mode = match value.trim() {
                        "conservative" => GathervMode::Conservative,
                        "aggressive" => GathervMode::Aggressive,
                        _ => return Err(err(None, "conservative, aggressive".into())),
                    }
                }
                "PCOLL_TUNE" => {
                    cfg.tune = Some(
                        Rules::parse(value, "PCOLL_TUNE")
                            .map_err(|e| err(Some(e.to_string()), "rules, see the README".into()))?,
                    )
                }
                "PCOLL_TUNE_FILE" => {
                    let text = std::fs::read_to_string(value.trim())
                        .map_err(|e| err(Some(format!("cannot read it: {e}")), "a readable rules file".into()))?;
                    cfg.tune_file = Some(
                        Rules::parse(&text, value.trim())
                            .map_err(|e| err(Some(e.to_string()), "rules, see the README".into()))?,
                    )
                }
                "PCOLL_LOG" => {
                    cfg.log = LogLevel::NAMES
                        .iter()
                        .find(|(name, _)| name.eq_ignore_ascii_case(value.trim()))
                        .map(|&(_, level)| level)
                        .ok_or_else(|| {
                            let names: Vec<&str> = LogLevel::NAMES.iter().map(|(n, _)| *n).collect();
                            err(None, names.join(", "))
                        })?
                }
                _ => match Coll::ALL.into_iter().find(|c| c.env_var() == var) {
                    Some(coll) => {
                        cfg.choices[coll.index()] =
                            parse_choice(coll, value).map_err(|problem| err(problem, accepted_choices(coll)))?
                    }
                    None => {
                        return Err(err(
                            Some("pcoll has no such variable".into()),
                            format!("variables {}", VARIABLES.join(", ")),
                        ))
                    }
                },
            }
        }
        Ok(cfg)
    }
}

/// A whole number (with an optional K, M or G) within `min..=max`.
fn parse_size(value: &str, min: usize, max: usize) -> Option<usize> {
    rules::number(value.trim()).filter(|n| (min..=max).contains(n))
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
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
        let cfg = parse(&[("PCOLL_BCAST", "mpi"), ("PCOLL_ENABLE", "0"), ("PCOLL_LOG", "DEBUG")]).unwrap();
        assert!(matches!(cfg.choices[Coll::Bcast.index()], Choice::Mpi));
        assert!(!cfg.enable);
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
        assert_eq!(ShmConfig::default().node_settings(false), NodeSettings::default());
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
        assert_eq!(ShmConfig::default().node_sizes(), Sizes::default());
        assert!(parse(&[("PCOLL_SHM_BCAST_TIMED", "0")]).unwrap_err().to_string().contains("PCOLL_SHM_BCAST_TIMED"));
        let shm = parse(&[("PCOLL_SHM_PREFETCH_OUT", "64K")]).unwrap().shm;
        assert_eq!((shm.prefetch_out_from, shm.node_settings(false).ahead.from), (64 << 10, 64 << 10));
        assert_eq!(parse(&[("PCOLL_SHM_PREFETCH_OUT", "0")]).unwrap().shm.prefetch_out_from, 0);
        for bad in ["2G", "-1", "lots"] {
            let err = parse(&[("PCOLL_SHM_PREFETCH_OUT", bad)]).unwrap_err();
            assert_eq!((err.var.as_str(), err.accepted.as_str()), ("PCOLL_SHM_PREFETCH_OUT", "0 (never) or 1..1G"));
            assert!(err.to_string().contains("PCOLL_SHM_PREFETCH_OUT"), "{err}");
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
    fn bad_values_and_unknown_variables_are_refused() {
        for (var, value) in [
            ("PCOLL_ENABLE", "yes"),
            ("PCOLL_STATS", "2"),
            ("PCOLL_LOG", "loud"),
            ("PCOLL_ALREDUCE", "auto"),
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
}
