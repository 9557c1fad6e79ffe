//! The tables `pcoll model` prints: predicted times per algorithm, and the
//! seed-004 non-power-of-two scheme against the classic fold.

use std::fmt::Write;

use super::check;
use super::model::{predict, Unpriced};
use crate::algos::{self, Algorithm};
use crate::core::cost_model::CostModel;
use crate::core::pattern::pof2_floor;
use crate::core::types::Coll;

/// `8 B`, `64 KiB`, `16 MiB`: exact binary units where they fit.
pub fn bytes_label(n: usize) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} B")
}

/// Parses `8`, `64K`, `16M`, `1G` (binary units, optional `iB`/`B`).
pub fn parse_bytes(text: &str) -> Option<usize> {
    let t: String = text.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_uppercase();
    let t: &str = t.trim_end_matches('B').trim_end_matches('I');
    let t: &str = t;
    let (digits, shift) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    digits.parse::<usize>().ok().and_then(|n| n.checked_mul(1 << shift))
}

fn cell(result: &Result<f64, Unpriced>) -> String {
    match result {
        Ok(t) => format!("{:.2}", t * 1e6),
        Err(Unpriced::Refused) => "n/a".into(),
        Err(Unpriced::TooLarge) => "(large)".into(),
        Err(Unpriced::Broken(_)) => "BROKEN".into(),
    }
}

/// `f` over `tasks` on every core, results in task order.
fn in_parallel<T: Sync, R: Send>(tasks: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..tasks.len()).map(|_| None).collect());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(tasks.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(task) = tasks.get(i) else { break };
                let r = f(task);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results.into_inner().unwrap().into_iter().map(|r| r.expect("every task ran")).collect()
}

/// Predicted times (microseconds) of every algorithm of `coll`, one table
/// per message size, one row per process count; `*` marks the fastest.
pub fn times(coll: Coll, sizes: &[usize], procs: &[usize], model: &CostModel) -> String {
    let algs: Vec<&Algorithm> = algos::for_coll(coll).filter(|a| a.schedule().is_some()).collect();
    let mut out = String::new();
    for &bytes in sizes {
        let what = match coll {
            Coll::Gatherv => "per rank",
            Coll::Bcast => "message",
            _ => "vector, 8-byte elements",
        };
        let _ = writeln!(out, "\n# {coll}, {} {what}: predicted us (* fastest)", bytes_label(bytes));
        let _ = write!(out, "{:>7}", "p");
        for a in &algs {
            let _ = write!(out, " {:>20}", a.name);
        }
        let _ = writeln!(out);
        let tasks: Vec<(usize, &Algorithm)> = procs.iter().flat_map(|&p| algs.iter().map(move |&a| (p, a))).collect();
        let mut all = in_parallel(&tasks, |&(p, a)| predict(a, &a.default_params(), p, bytes, model).map(|pr| pr.time));
        for &p in procs {
            let results: Vec<Result<f64, Unpriced>> = all.drain(..algs.len()).collect();
            let best = results.iter().filter_map(|r| r.as_ref().ok()).copied().fold(f64::INFINITY, f64::min);
            let _ = write!(out, "{p:>7}");
            for r in &results {
                let star = if r.as_ref().is_ok_and(|&t| t == best) { "*" } else { " " };
                let _ = write!(out, " {:>19}{star}", cell(r));
            }
            let _ = writeln!(out);
        }
    }
    if out.contains("(large)") {
        let _ = writeln!(
            out,
            "\n(large): not priced, the schedules of all ranks would exceed {} steps",
            super::model::MAX_STEPS
        );
    }
    out
}

/// One line of the non-power-of-two comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemeRow {
    pub coll: Coll,
    pub p: usize,
    /// Critical-path bytes per vector byte (the bandwidth term), fold and
    /// split.
    pub fold_path: f64,
    pub split_path: f64,
    /// Bytes on the wire, all ranks, per vector byte.
    pub fold_total: f64,
    pub split_total: f64,
    /// Predicted times under the given model (seconds).
    pub fold_time: f64,
    pub split_time: f64,
}

/// The classic fold and the seed-004 split, Allreduce and Reduce, for each
/// `p`, on a vector of `bytes`.
pub fn schemes(procs: &[usize], bytes: usize, model: &CostModel) -> Vec<SchemeRow> {
    let mut rows = Vec::new();
    for coll in [Coll::Allreduce, Coll::Reduce] {
        let fold = algos::find(coll, "rabenseifner_fold").expect("registered");
        let split = algos::find(coll, "rabenseifner").expect("registered");
        for &p in procs {
            let run = |a: &Algorithm, m: &CostModel| predict(a, &a.default_params(), p, bytes, m).expect("priced");
            let (fb, sb) = (run(fold, &CostModel::BANDWIDTH), run(split, &CostModel::BANDWIDTH));
            let n = bytes as f64;
            rows.push(SchemeRow {
                coll,
                p,
                fold_path: fb.time / n,
                split_path: sb.time / n,
                fold_total: fb.bytes as f64 / n,
                split_total: sb.bytes as f64 / n,
                fold_time: run(fold, model).time,
                split_time: run(split, model).time,
            });
        }
    }
    rows
}

pub fn schemes_table(procs: &[usize], bytes: usize, model: &CostModel) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Non-power-of-two Rabenseifner, {} vector: seed 004's split against the classic fold",
        bytes_label(bytes)
    );
    let _ = writeln!(
        out,
        "# path: bytes on the critical path / vector bytes (the beta term); total: all bytes sent / vector bytes"
    );
    let _ = writeln!(
        out,
        "{:<9} {:>6} {:>6} {:>4} {:>10} {:>10} {:>8} {:>10} {:>10} {:>12} {:>12}",
        "coll", "p", "N", "r", "fold_path", "split_path", "saved", "fold_total", "split_tot", "fold_us", "split_us"
    );
    for row in schemes(procs, bytes, model) {
        let big_n = pof2_floor(row.p);
        let _ = writeln!(
            out,
            "{:<9} {:>6} {:>6} {:>4} {:>10.3} {:>10.3} {:>7.1}% {:>10.3} {:>10.3} {:>12.2} {:>12.2}",
            row.coll.name(),
            row.p,
            big_n,
            row.p - big_n,
            row.fold_path,
            row.split_path,
            100.0 * (1.0 - row.split_path / row.fold_path),
            row.fold_total,
            row.split_total,
            row.fold_time * 1e6,
            row.split_time * 1e6
        );
    }
    out
}

/// One line of the Gatherv comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct GatherRow {
    pub p: usize,
    /// Distinct peers of the root, linear and tree.
    pub linear_root_peers: usize,
    pub tree_root_peers: usize,
    /// The most distinct peers of any rank in the tree.
    pub tree_max_peers: usize,
    /// Temporary bytes: the tree's root, and the most of any rank.
    pub tree_root_scratch: usize,
    pub tree_max_scratch: usize,
    /// Predicted times (seconds).
    pub linear_time: f64,
    pub tree_time: f64,
}

/// Seed 001's comparison: linear Gatherv against the binomial tree, with
/// `bytes` per rank in rank order (received straight into place).
pub fn gatherv_rows(procs: &[usize], bytes: usize, model: &CostModel) -> Vec<GatherRow> {
    let linear = algos::find(Coll::Gatherv, "linear").expect("registered");
    let tree = algos::find(Coll::Gatherv, "binomial").expect("registered");
    let case_of = |p| super::model::case(Coll::Gatherv, p, bytes);
    in_parallel(procs, |&p| {
        let case = case_of(p);
        let scheds = |a: &Algorithm| check::schedules(a, &a.default_params(), &case).expect("valid").expect("accepted");
        let (ls, ts) = (scheds(linear), scheds(tree));
        let price = |s: &[crate::core::schedule::Schedule]| super::cost::price(s, model).expect("priced").time;
        GatherRow {
            p,
            linear_root_peers: ls[0].peers(),
            tree_root_peers: ts[0].peers(),
            tree_max_peers: ts.iter().map(|s| s.peers()).max().unwrap_or(0),
            tree_root_scratch: ts[0].scratch_bytes,
            tree_max_scratch: ts.iter().map(|s| s.scratch_bytes).max().unwrap_or(0),
            linear_time: price(&ls),
            tree_time: price(&ts),
        }
    })
}

pub fn gatherv_table(procs: &[usize], bytes: usize, model: &CostModel) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Gatherv, {} per rank: linear against seed 001's binomial tree", bytes_label(bytes));
    let _ = writeln!(out, "# peers: distinct ranks a rank exchanges with (connections); scratch: temporary bytes");
    let _ = writeln!(
        out,
        "{:>7} {:>12} {:>10} {:>9} {:>13} {:>12} {:>13} {:>13} {:>8}",
        "p", "root_peers", "tree_root", "tree_max", "tree_root_tmp", "tree_max_tmp", "linear_us", "tree_us", "speedup"
    );
    for row in gatherv_rows(procs, bytes, model) {
        let _ = writeln!(
            out,
            "{:>7} {:>12} {:>10} {:>9} {:>13} {:>12} {:>13.2} {:>13.2} {:>8.2}",
            row.p,
            row.linear_root_peers,
            row.tree_root_peers,
            row.tree_max_peers,
            row.tree_root_scratch,
            row.tree_max_scratch,
            row.linear_time * 1e6,
            row.tree_time * 1e6,
            row.linear_time / row.tree_time
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_labels_round_trip() {
        for (text, n) in [("8", 8), ("64K", 65536), ("16MiB", 16 << 20), ("1g", 1 << 30), ("3 B", 3)] {
            assert_eq!(parse_bytes(text), Some(n), "{text}");
        }
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(bytes_label(65536), "64 KiB");
        assert_eq!(bytes_label(1000), "1000 B");
    }

    #[test]
    fn split_moves_less_than_fold_at_the_issue_sizes() {
        // The sizes the issue names: the seed-004 scheme's bandwidth term is
        // below the fold's for Allreduce and Reduce.
        let rows = schemes(&[3, 5, 6, 7, 12, 100, 1000], 1 << 20, &CostModel::CLUSTER);
        assert_eq!(rows.len(), 14);
        for row in &rows {
            assert!(row.split_path < row.fold_path, "{row:?}");
            assert!(row.split_time < row.fold_time, "{row:?}");
        }
        let text = schemes_table(&[3, 6], 1 << 20, &CostModel::CLUSTER);
        assert!(text.contains("allreduce") && text.contains("reduce"), "{text}");
    }

    #[test]
    fn gatherv_tree_root_has_log_p_peers_and_no_scratch_in_rank_order() {
        let rows = gatherv_rows(&[2, 7, 64, 1000], 8, &CostModel::CLUSTER);
        for row in &rows {
            let log2 = (row.p as f64).log2().ceil() as usize;
            assert_eq!(row.linear_root_peers, row.p - 1);
            assert_eq!(row.tree_root_peers, log2, "{row:?}");
            assert_eq!(row.tree_root_scratch, 0, "{row:?}");
        }
        assert!(rows[3].tree_time < rows[3].linear_time, "{:?}", rows[3]);
    }

    #[test]
    fn times_table_marks_the_fastest() {
        let text = times(Coll::Allreduce, &[1 << 20], &[2, 5], &CostModel::CLUSTER);
        // One mark per row, on every algorithm tied for the fastest (at p = 2
        // ordered and ring move the same data).
        let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with(char::is_numeric)).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(rows[0].contains("222.05*") && rows[0].matches('*').count() == 2, "{text}");
        assert!(rows[1].matches('*').count() == 1 && rows[1].contains("363.93*"), "{text}");
        assert!(text.contains("rabenseifner") && text.contains("ring"), "{text}");
    }
}
