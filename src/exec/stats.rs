//! Per-process call statistics and the job-wide summary printed at
//! MPI_Finalize (PCOLL_STATS=1). One slot per registered algorithm plus one
//! per collective for calls the host MPI ran, so the per-rank tables have
//! the same shape everywhere and combine with one elementwise reduction.

use crate::algos::{Algorithm, ALGORITHMS};
use crate::core::types::Coll;
use std::fmt::Write;

/// Values per slot in the flat form: calls, bytes, seconds.
pub const FIELDS: usize = 3;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slot {
    pub calls: u64,
    pub bytes: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    slots: Vec<Slot>,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats { slots: vec![Slot::default(); ALGORITHMS.len() + Coll::ALL.len()] }
    }
}

/// The slot of an algorithm, or of the host MPI (`None`) for a collective.
fn slot_index(coll: Coll, algo: Option<&Algorithm>) -> usize {
    match algo {
        Some(a) => ALGORITHMS.iter().position(|r| std::ptr::eq(r, a)).expect("a registered algorithm"),
        None => ALGORITHMS.len() + coll.index(),
    }
}

fn slot_label(index: usize) -> (Coll, &'static str) {
    match ALGORITHMS.get(index) {
        Some(a) => (a.coll, a.name),
        None => (Coll::ALL[index - ALGORITHMS.len()], "mpi"),
    }
}

impl Stats {
    pub fn record(&mut self, coll: Coll, algo: Option<&Algorithm>, bytes: usize, seconds: f64) {
        let slot = &mut self.slots[slot_index(coll, algo)];
        slot.calls += 1;
        slot.bytes += bytes as u64;
        slot.seconds += seconds;
    }

    /// Flat form for an elementwise MPI reduction: FIELDS values per slot.
    pub fn to_flat(&self) -> Vec<f64> {
        self.slots.iter().flat_map(|s| [s.calls as f64, s.bytes as f64, s.seconds]).collect()
    }
}

/// Formats the job summary from the per-slot sums over all ranks and the
/// per-slot maximum of seconds over ranks.
pub fn summary(sum: &[f64], max_seconds: &[f64], ranks: usize, host: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "pcoll summary: {ranks} ranks, host MPI: {host}");
    let _ = writeln!(
        out,
        "pcoll   {:<10} {:<20} {:>10} {:>14} {:>12} {:>12}",
        "collective", "algorithm", "calls", "bytes", "time_s_sum", "time_s_max"
    );
    for (index, chunk) in sum.chunks_exact(FIELDS).enumerate() {
        if chunk[0] == 0.0 {
            continue;
        }
        let (coll, name) = slot_label(index);
        let _ = writeln!(
            out,
            "pcoll   {:<10} {:<20} {:>10} {:>14} {:>12.6} {:>12.6}",
            coll.name(),
            name,
            chunk[0] as u64,
            chunk[1] as u64,
            chunk[2],
            max_seconds[index * FIELDS + 2]
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos;

    #[test]
    fn records_land_in_their_slots_and_print() {
        let mut stats = Stats::default();
        let rd = algos::find(Coll::Allreduce, "recursive_doubling").unwrap();
        stats.record(Coll::Allreduce, Some(rd), 800, 0.5);
        stats.record(Coll::Allreduce, Some(rd), 200, 0.25);
        stats.record(Coll::Bcast, None, 8, 0.125);
        let flat = stats.to_flat();
        let text = summary(&flat, &flat, 2, "test");
        assert!(text.contains("allreduce  recursive_doubling"), "{text}");
        assert!(text.contains("bcast      mpi"), "{text}");
        let line = text.lines().find(|l| l.contains("recursive_doubling")).unwrap();
        assert!(line.contains(" 2 ") && line.contains(" 1000 "), "{line}");
        assert!(!text.contains("gatherv"), "{text}");
    }
}
