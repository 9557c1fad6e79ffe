//! Communication patterns shared by several algorithms, over ranks relative
//! to a tree root (relative rank 0 is the root).

/// Parent of `rel` in the binomial tree: `rel` with its lowest set bit
/// cleared. The root has no parent.
pub fn binomial_parent(rel: usize) -> Option<usize> {
    (rel != 0).then(|| rel & (rel - 1))
}

/// Children of `rel` in the binomial tree over `size` ranks, largest subtree
/// first: `rel + 2^j` for every `2^j` below `rel`'s lowest set bit.
pub fn binomial_children(rel: usize, size: usize) -> impl Iterator<Item = usize> {
    let limit = if rel == 0 { size.next_power_of_two() } else { rel & rel.wrapping_neg() };
    let top = limit.trailing_zeros();
    (0..top).rev().map(move |j| rel + (1usize << j)).filter(move |&c| c < size)
}

/// Largest power of two not above `size` (size >= 1).
pub fn pof2_floor(size: usize) -> usize {
    debug_assert!(size >= 1);
    1usize << (usize::BITS - 1 - size.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_tree_is_a_spanning_tree() {
        for size in 1..300 {
            let mut seen = vec![0usize; size];
            for rel in 0..size {
                for child in binomial_children(rel, size) {
                    assert_eq!(binomial_parent(child), Some(rel), "size {size} child {child}");
                    seen[child] += 1;
                }
            }
            assert_eq!(seen[0], 0);
            assert!(seen[1..].iter().all(|&n| n == 1), "size {size}");
        }
    }

    #[test]
    fn children_come_largest_subtree_first() {
        assert_eq!(binomial_children(0, 8).collect::<Vec<_>>(), vec![4, 2, 1]);
        assert_eq!(binomial_children(4, 7).collect::<Vec<_>>(), vec![6, 5]);
        assert_eq!(binomial_children(4, 5).collect::<Vec<_>>(), Vec::<usize>::new());
    }

    #[test]
    fn pof2_floor_values() {
        assert_eq!(pof2_floor(1), 1);
        assert_eq!(pof2_floor(7), 4);
        assert_eq!(pof2_floor(8), 8);
    }
}
