//! Per-process call statistics and the job-wide summary printed at
//! MPI_Finalize (PCOLL_STATS=1): per collective and algorithm the calls,
//! bytes and time, and the calls the host MPI ran (fallbacks) by reason.
//!
//! Each rank keeps its own table; at finalize every rank's table travels
//! to world rank 0 as text ([`Stats::to_text`]) and [`Summary`] merges
//! them, so ranks need not have met the same algorithms or reasons.

use crate::algos::{Algorithm, ALGORITHMS};
use crate::core::types::Coll;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// What ran a call: a registered algorithm (its registry index), or the
/// host MPI for a reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Ran {
    Algo(usize),
    Host(&'static str),
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Slot {
    calls: u64,
    bytes: u64,
    seconds: f64,
}

/// One rank's statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    slots: HashMap<(Coll, Ran), Slot>,
}

/// Separates the fields of a line of [`Stats::to_text`]; reasons are
/// static strings of pcoll's and never contain it.
const SEP: char = '\t';

impl Stats {
    /// A call pcoll ran with `algo`.
    pub fn record(&mut self, coll: Coll, algo: &Algorithm, bytes: usize, seconds: f64) {
        let index = ALGORITHMS.iter().position(|r| std::ptr::eq(r, algo)).expect("a registered algorithm");
        self.add(coll, Ran::Algo(index), bytes, seconds);
    }

    /// A call the host MPI ran, and why.
    pub fn record_fallback(&mut self, coll: Coll, reason: &'static str, seconds: f64) {
        self.add(coll, Ran::Host(reason), 0, seconds);
    }

    fn add(&mut self, coll: Coll, ran: Ran, bytes: usize, seconds: f64) {
        let slot = self.slots.entry((coll, ran)).or_default();
        slot.calls += 1;
        slot.bytes += bytes as u64;
        slot.seconds += seconds;
    }

    /// One line per slot: collective, algorithm (`mpi` for the host),
    /// reason (empty for algorithms), calls, bytes, seconds.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (&(coll, ran), s) in &self.slots {
            let (name, reason) = match ran {
                Ran::Algo(i) => (ALGORITHMS[i].name, ""),
                Ran::Host(reason) => ("mpi", reason),
            };
            debug_assert!(!reason.contains([SEP, '\n']), "{reason:?}");
            let _ = writeln!(out, "{coll}{SEP}{name}{SEP}{reason}{SEP}{}{SEP}{}{SEP}{:e}", s.calls, s.bytes, s.seconds);
        }
        out
    }
}

/// Totals of one row of the summary over ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Total {
    calls: u64,
    bytes: u64,
    seconds: f64,
    /// The largest per-rank time.
    seconds_max: f64,
}

impl Total {
    fn add(&mut self, calls: u64, bytes: u64, seconds: f64) {
        self.calls += calls;
        self.bytes += bytes;
        self.seconds += seconds;
        self.seconds_max = self.seconds_max.max(seconds);
    }
}

/// Where a collective's row sorts: the registry order of its algorithm,
/// the host MPI last.
fn rank_of(coll: Coll, name: &str) -> usize {
    ALGORITHMS.iter().position(|a| a.coll == coll && a.name == name).unwrap_or(ALGORITHMS.len())
}

/// The job's statistics: every rank's tables merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    ranks: usize,
    /// (collective, order, algorithm) -> totals; the host MPI as `mpi`.
    algos: BTreeMap<(Coll, usize, String), Total>,
    /// (collective, reason) -> totals of the calls the host MPI ran.
    fallbacks: BTreeMap<(Coll, String), Total>,
}

impl Summary {
    /// Adds one rank's table ([`Stats::to_text`]); a line that does not
    /// parse (it cannot come from pcoll) is an error naming it.
    pub fn add_rank(&mut self, text: &str) -> Result<(), String> {
        self.ranks += 1;
        // One rank's time per row, so that per-rank maxima are per rank.
        let mut algos: BTreeMap<(Coll, usize, String), (u64, u64, f64)> = BTreeMap::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let bad = || format!("unreadable statistics line {line:?}");
            let f: Vec<&str> = line.split(SEP).collect();
            let [coll, name, reason, calls, bytes, seconds] = f[..] else { return Err(bad()) };
            let coll = Coll::ALL.into_iter().find(|c| c.name() == coll).ok_or_else(bad)?;
            let calls: u64 = calls.parse().map_err(|_| bad())?;
            let bytes: u64 = bytes.parse().map_err(|_| bad())?;
            let seconds: f64 = seconds.parse().map_err(|_| bad())?;
            let row = algos.entry((coll, rank_of(coll, name), name.to_string())).or_default();
            row.0 += calls;
            row.1 += bytes;
            row.2 += seconds;
            if name == "mpi" {
                self.fallbacks.entry((coll, reason.to_string())).or_default().add(calls, bytes, seconds);
            }
        }
        for (key, (calls, bytes, seconds)) in algos {
            self.algos.entry(key).or_default().add(calls, bytes, seconds);
        }
        Ok(())
    }

    /// The summary as printed: a header naming the job (its ranks, the
    /// nodes pcoll's node discovery found on MPI_COMM_WORLD, if it ran
    /// there, and the host MPI), one line per collective and algorithm that
    /// ran (`mpi`: the host MPI), then the host MPI's calls by reason.
    pub fn render(&self, nodes: Option<usize>, host: &str) -> String {
        let mut out = String::new();
        let nodes = match nodes {
            Some(1) => " on 1 node".to_string(),
            Some(n) => format!(" on {n} nodes"),
            None => " (nodes not counted: no collective on MPI_COMM_WORLD reached pcoll)".to_string(),
        };
        let _ = writeln!(out, "pcoll summary: {} ranks{nodes}, host MPI: {host}", self.ranks);
        let _ = writeln!(out, "pcoll version: {}", env!("CARGO_PKG_VERSION"));
        let _ = writeln!(
            out,
            "pcoll   {:<10} {:<20} {:>10} {:>14} {:>12} {:>12}",
            "collective", "algorithm", "calls", "bytes", "time_s_sum", "time_s_max"
        );
        for ((coll, _, name), t) in &self.algos {
            let _ = writeln!(
                out,
                "pcoll   {:<10} {:<20} {:>10} {:>14} {:>12.6} {:>12.6}",
                coll.name(),
                name,
                t.calls,
                t.bytes,
                t.seconds,
                t.seconds_max
            );
        }
        if !self.fallbacks.is_empty() {
            let _ = writeln!(out, "pcoll fallbacks: calls the host MPI ran, by reason");
            let _ = writeln!(out, "pcoll   fallback {:<10} {:>10} {:>12}  reason", "collective", "calls", "time_s_sum");
            for ((coll, reason), t) in &self.fallbacks {
                let _ =
                    writeln!(out, "pcoll   fallback {:<10} {:>10} {:>12.6}  {reason}", coll.name(), t.calls, t.seconds);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos;

    #[test]
    fn records_land_in_their_rows_and_print() {
        let mut stats = Stats::default();
        let rd = algos::find(Coll::Allreduce, "recursive_doubling").unwrap();
        stats.record(Coll::Allreduce, rd, 800, 0.5);
        stats.record(Coll::Allreduce, rd, 200, 0.25);
        stats.record_fallback(Coll::Bcast, "empty", 0.125);
        let mut summary = Summary::default();
        summary.add_rank(&stats.to_text()).unwrap();
        summary.add_rank(&stats.to_text()).unwrap();
        let text = summary.render(Some(2), "test");
        assert!(text.starts_with("pcoll summary: 2 ranks on 2 nodes, host MPI: test\npcoll version: 0."), "{text}");
        let line = text.lines().find(|l| l.contains("recursive_doubling")).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f, ["pcoll", "allreduce", "recursive_doubling", "4", "2000", "1.500000", "0.750000"], "{text}");
        assert!(text.contains("bcast      mpi"), "{text}");
        assert!(!text.contains("gatherv"), "{text}");
        let fallback = text.lines().find(|l| l.contains("fallback bcast")).unwrap();
        assert_eq!(
            fallback.split_whitespace().collect::<Vec<_>>(),
            ["pcoll", "fallback", "bcast", "2", "0.250000", "empty"]
        );
    }

    #[test]
    fn ranks_with_different_rows_merge_and_fallbacks_split_by_reason() {
        let rd = algos::find(Coll::Allreduce, "recursive_doubling").unwrap();
        let ring = algos::find(Coll::Allreduce, "ring").unwrap();
        let mut a = Stats::default();
        a.record(Coll::Allreduce, ring, 8, 1.0);
        a.record_fallback(Coll::Allreduce, "derived datatype", 0.5);
        a.record_fallback(Coll::Allreduce, "empty", 0.25);
        let mut b = Stats::default();
        b.record(Coll::Allreduce, rd, 8, 2.0);
        b.record_fallback(Coll::Allreduce, "derived datatype", 1.0);
        let mut summary = Summary::default();
        summary.add_rank(&a.to_text()).unwrap();
        summary.add_rank(&b.to_text()).unwrap();
        summary.add_rank("").unwrap();
        let text = summary.render(None, "h");
        assert!(text.starts_with("pcoll summary: 3 ranks (nodes not counted"), "{text}");
        // After the head, version and column lines, registry order:
        // recursive_doubling before ring, the host last.
        let rows: Vec<&str> = text.lines().skip(3).take(3).map(|l| l.split_whitespace().nth(2).unwrap()).collect();
        assert_eq!(rows, ["recursive_doubling", "ring", "mpi"], "{text}");
        let host = text.lines().find(|l| l.contains(" mpi ")).unwrap();
        assert_eq!(host.split_whitespace().collect::<Vec<_>>()[3..], ["3", "0", "1.750000", "1.000000"], "{text}");
        let derived = text.lines().find(|l| l.ends_with("derived datatype")).unwrap();
        assert!(derived.contains(" 2 ") && derived.contains("1.500000"), "{text}");
        assert!(text.lines().any(|l| l.contains("fallback allreduce") && l.ends_with("  empty")), "{text}");
        assert!(summary.add_rank("allreduce\tring\t1\n").is_err());
        assert!(summary.add_rank("scatter\tring\t\t1\t1\t1\n").is_err());
    }
}
