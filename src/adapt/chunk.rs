//! SALaR's adaptive chunk size (seed 003's heuristic): per communicator
//! and size class, start small, double while the measured time per byte
//! improves, halve once at the first regression and keep that. The
//! algorithm (`algos::multinode::allreduce_salar`) measures, and carries
//! the decision to every rank with its data.

use std::collections::HashMap;

/// The first chunk size tried by default ([`Tuners::new`]): 8 KiB.
pub const START_CHUNK: usize = 8 << 10;

/// The chunk-size search of one size class (run by communicator rank 0).
#[derive(Clone, Debug)]
pub struct ChunkSearch {
    /// The chunk size on trial (the settled one when `settled`).
    trial: usize,
    /// The best (chunk, seconds per byte) so far.
    best: Option<(usize, f64)>,
    settled: bool,
    max: usize,
}

impl ChunkSearch {
    pub fn new(start: usize, max: usize) -> ChunkSearch {
        ChunkSearch { trial: start.min(max), best: None, settled: false, max }
    }

    /// The chunk size to use next.
    pub fn proposal(&self) -> usize {
        self.trial
    }

    pub fn settled(&self) -> bool {
        self.settled
    }

    /// Takes one measurement; measurements of another size than the one
    /// on trial (calls already under way when it changed) are ignored.
    /// Returns what changed, for the log.
    pub fn observe(&mut self, chunk: usize, secs_per_byte: f64) -> Option<String> {
        if self.settled || chunk != self.trial {
            return None;
        }
        let ns = secs_per_byte * 1e9;
        match self.best {
            Some((_, best)) if secs_per_byte >= best => {
                self.trial = (self.trial / 2).max(1);
                self.settled = true;
                Some(format!("chunk {chunk} B slower ({ns:.3} ns/B): settled at {} B", self.trial))
            }
            _ => {
                self.best = Some((chunk, secs_per_byte));
                if self.trial * 2 <= self.max {
                    self.trial *= 2;
                    Some(format!("chunk {chunk} B: {ns:.3} ns/B, trying {} B", self.trial))
                } else {
                    self.settled = true;
                    Some(format!("chunk {chunk} B: {ns:.3} ns/B, settled at the largest chunk"))
                }
            }
        }
    }
}

/// What every rank keeps of one size class between calls.
#[derive(Clone, Debug)]
pub struct ClassState {
    /// The chunk size every rank uses in the next call of this class.
    pub next: usize,
    /// Rank 0 only: the search, and the last call's (chunk, s/B) not yet
    /// observed (it is known only after that call's decision travelled).
    pub search: Option<ChunkSearch>,
    pub pending: Option<(usize, f64)>,
}

/// SALaR's memory of one communicator: the state of each size class.
#[derive(Debug)]
pub struct Tuners {
    /// The first chunk size each class tries.
    start: usize,
    classes: HashMap<u32, ClassState>,
}

impl Default for Tuners {
    fn default() -> Self {
        Tuners::new(START_CHUNK)
    }
}

impl Tuners {
    /// Nothing measured yet; every class starts at `start` bytes.
    pub fn new(start: usize) -> Tuners {
        Tuners { start, classes: HashMap::new() }
    }

    /// The state of `bytes`' size class.
    pub fn class(&mut self, bytes: usize, max_chunk: usize) -> &mut ClassState {
        let class = bytes.next_power_of_two().trailing_zeros();
        let start = self.start;
        self.classes.entry(class).or_insert_with(|| ClassState {
            next: start.min(max_chunk),
            search: None,
            pending: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_doubles_while_faster_then_halves_once() {
        let mut s = ChunkSearch::new(8 << 10, 1 << 20);
        // Seconds per byte by chunk size: best at 32K.
        let time = |c: usize| match c >> 10 {
            8 => 3.0,
            16 => 2.0,
            32 => 1.0,
            64 => 1.5,
            _ => 9.0,
        };
        let mut used = Vec::new();
        for _ in 0..20 {
            let c = s.proposal();
            used.push(c);
            s.observe(c, time(c));
        }
        assert!(s.settled());
        assert_eq!(s.proposal(), 32 << 10);
        assert_eq!(&used[..4], &[8 << 10, 16 << 10, 32 << 10, 64 << 10]);
        // A measurement of a size no longer on trial changes nothing.
        assert!(s.observe(8 << 10, 0.1).is_none());
        assert_eq!(s.proposal(), 32 << 10);
    }

    #[test]
    fn the_search_stops_at_the_largest_chunk() {
        let mut s = ChunkSearch::new(8 << 10, 32 << 10);
        for t in [3.0, 2.0, 1.0] {
            let c = s.proposal();
            s.observe(c, t);
        }
        assert!(s.settled());
        assert_eq!(s.proposal(), 32 << 10);
    }
}
