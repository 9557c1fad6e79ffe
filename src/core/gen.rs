//! Deterministic generators for tests and the simulator: a small PRNG,
//! Gatherv layouts, a provenance code for combination order.

use super::call::GatherLayout;

/// SplitMix64: a tiny deterministic PRNG, also used as a hash.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the tiny modulo bias does not matter here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A random Gatherv layout: block lengths in `0..=max_len` (a third of
/// them empty), blocks placed in a random order with random gaps, so
/// offsets are neither rank-ordered nor contiguous.
pub fn random_layout(size: usize, max_len: usize, seed: u64) -> GatherLayout {
    let mut rng = Rng(seed);
    let lens: Vec<usize> = (0..size).map(|_| if rng.below(3) == 0 { 0 } else { rng.below(max_len + 1) }).collect();
    let mut order: Vec<usize> = (0..size).collect();
    for i in (1..size).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut blocks = vec![(0, 0); size];
    let mut at = rng.below(4);
    for r in order {
        blocks[r] = (at, lens[r]);
        at += lens[r] + if rng.below(2) == 0 { 0 } else { rng.below(5) };
    }
    GatherLayout { blocks }
}

/// A Gatherv layout of runs: consecutive ranks, `1..=max_run` at a time,
/// whose blocks lie back to back in rank order; the runs are placed in a
/// random order with random gaps. Lengths in `0..=max_len`, a quarter of
/// them empty. With `max_run >= size` it is one run: every block in rank
/// order, back to back (empty blocks anywhere). Algorithms that forward
/// several ranks' blocks in one message (message chains) meet both
/// contiguous and scattered stretches.
pub fn runs_layout(size: usize, max_len: usize, max_run: usize, seed: u64) -> GatherLayout {
    let mut rng = Rng(seed);
    let lens: Vec<usize> = (0..size).map(|_| if rng.below(4) == 0 { 0 } else { rng.below(max_len + 1) }).collect();
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    while start < size {
        let len = if max_run >= size { size } else { 1 + rng.below(max_run.max(1)) };
        let end = (start + len).min(size);
        runs.push(start..end);
        start = end;
    }
    for i in (1..runs.len()).rev() {
        runs.swap(i, rng.below(i + 1));
    }
    let mut blocks = vec![(0, 0); size];
    let mut at = rng.below(4);
    for run in runs {
        for r in run {
            blocks[r] = (at, lens[r]);
            at += lens[r];
        }
        at += if rng.below(2) == 0 { 0 } else { rng.below(5) };
    }
    GatherLayout { blocks }
}

/// `a ∘ b` of the simulator's `Data::Order` operator: a hash of the
/// ordered pair (also the node layer's test of its order, so both check
/// the same canonical order).
pub fn combine_order(a: u64, b: u64) -> u64 {
    Rng(a.rotate_left(17) ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic() {
        let (mut a, mut b) = (Rng(42), Rng(42));
        assert_eq!((0..5).map(|_| a.next_u64()).collect::<Vec<_>>(), (0..5).map(|_| b.next_u64()).collect::<Vec<_>>());
    }

    #[test]
    fn runs_layouts_are_valid_and_have_both_kinds_of_stretches() {
        for seed in 0..50 {
            for max_run in [1, 3, 6, 37] {
                let layout = runs_layout(37, 9, max_run, seed);
                let mut spans: Vec<(usize, usize)> = layout.blocks.clone();
                spans.sort_unstable();
                assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "{layout:?}");
                let follows = |r: usize| layout.blocks[r].0 + layout.blocks[r].1 == layout.blocks[r + 1].0;
                let adjacent = (0..36).filter(|&r| follows(r)).count();
                if max_run == 37 {
                    assert_eq!(adjacent, 36, "one run: every block follows its predecessor");
                } else if max_run > 1 {
                    assert!(adjacent > 0 && adjacent < 36, "{layout:?}");
                }
            }
        }
    }

    #[test]
    fn random_layouts_are_valid() {
        for seed in 0..50 {
            let layout = random_layout(37, 9, seed);
            let mut spans: Vec<(usize, usize)> = layout.blocks.clone();
            spans.sort_unstable();
            assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "{layout:?}");
            assert!(layout.blocks.iter().any(|b| b.1 == 0));
            assert!(layout.blocks.windows(2).any(|w| w[0].0 > w[1].0), "offsets never out of order");
        }
    }
}
