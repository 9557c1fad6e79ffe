//! Communication patterns shared by several algorithms, over ranks relative
//! to a tree root (relative rank 0 is the root).
//!
//! Trees: binomial (the k = 2 k-nomial tree), k-nomial and k-ary (a chain is
//! the k = 1 k-ary tree). In all of them a child's relative rank is larger
//! than its parent's, so the root reaches everyone; in the binomial and
//! k-nomial trees a subtree is a contiguous range of relative ranks
//! ([`knomial_subtree`]), which the gathers and scatters rely on.

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

/// The lowest non-zero base-`k` digit of `rel` (> 0) as its place value
/// `k^j`: the size of the largest subtree `rel` can have in the k-nomial
/// tree. Saturates for the root (`rel` = 0): its subtree is everything.
fn knomial_span(rel: usize, k: usize) -> usize {
    if rel == 0 {
        return usize::MAX;
    }
    let mut place = 1;
    while (rel / place).is_multiple_of(k) {
        place *= k;
    }
    place
}

/// Parent of `rel` in the k-nomial tree (`k` >= 2): `rel` with its lowest
/// non-zero base-`k` digit cleared. The root has no parent. For `k` = 2
/// this is [`binomial_parent`].
pub fn knomial_parent(rel: usize, k: usize) -> Option<usize> {
    debug_assert!(k >= 2);
    if rel == 0 {
        return None;
    }
    let place = knomial_span(rel, k);
    Some(rel - (rel / place) % k * place)
}

/// Children of `rel` in the k-nomial tree over `size` ranks (`k` >= 2):
/// `rel + d·k^j` for d = 1..k-1 and every place value `k^j` below `rel`'s
/// lowest non-zero digit (every `k^j` < `size` for the root). Largest
/// subtree first: place values descending, digits ascending (the higher
/// digits of the top place are the ones a small `size` truncates).
pub fn knomial_children(rel: usize, size: usize, k: usize) -> impl Iterator<Item = usize> {
    debug_assert!(k >= 2);
    let limit = knomial_span(rel, k).min(size);
    let mut places = Vec::new();
    let mut place = 1usize;
    while place < limit {
        places.push(place);
        place = match place.checked_mul(k) {
            Some(next) => next,
            None => break,
        };
    }
    places.into_iter().rev().flat_map(move |place| (1..k).map(move |d| rel + d * place)).filter(move |&c| c < size)
}

/// The relative ranks of `rel`'s subtree in the k-nomial tree over `size`
/// ranks, `rel` included: always the contiguous range
/// `rel .. rel + k^j` (cut at `size`), `k^j` the place of `rel`'s lowest
/// non-zero digit. The root's subtree is `0..size`.
pub fn knomial_subtree(rel: usize, size: usize, k: usize) -> std::ops::Range<usize> {
    debug_assert!(k >= 2 && rel < size);
    rel..rel.saturating_add(knomial_span(rel, k)).min(size)
}

/// The subtree of `rel` in the binomial tree: `rel .. rel + lowbit(rel)`,
/// cut at `size` (see [`knomial_subtree`]).
pub fn binomial_subtree(rel: usize, size: usize) -> std::ops::Range<usize> {
    knomial_subtree(rel, size, 2)
}

/// Parent of `rel` in the k-ary tree (`k` >= 1): `(rel - 1) / k`. With
/// `k` = 1 the tree is a chain.
pub fn kary_parent(rel: usize, k: usize) -> Option<usize> {
    debug_assert!(k >= 1);
    (rel != 0).then(|| (rel - 1) / k)
}

/// Children of `rel` in the k-ary tree over `size` ranks (`k` >= 1):
/// `k·rel + 1 ..= k·rel + k`, those below `size`.
pub fn kary_children(rel: usize, size: usize, k: usize) -> impl Iterator<Item = usize> {
    debug_assert!(k >= 1);
    let first = rel.saturating_mul(k).saturating_add(1);
    (first..first.saturating_add(k)).take_while(move |&c| c < size)
}

/// The balanced k-ary tree whose subtrees are contiguous ranges of
/// relative ranks (`k` >= 1): the subtree of a rank `r` spanning
/// `r .. r + s` gives its children the rest, `r + 1 .. r + s`, in
/// `min(k, s - 1)` consecutive parts as even as can be, larger parts first.
/// Fan-out and depth (about log_k p) are those of the heap-ordered k-ary
/// tree, but a subtree's ranks come in order, so a reduction up it keeps
/// rank order. Returns `rel`'s parent and children (ascending), found by
/// walking down from the root: O(k log_k p).
pub fn kary_ranges(rel: usize, size: usize, k: usize) -> (Option<usize>, Vec<usize>) {
    debug_assert!(k >= 1 && rel < size);
    let parts = |node: usize, span: usize| {
        let rest = span - 1;
        let n = k.min(rest);
        let mut at = node + 1;
        (0..n)
            .map(move |i| {
                let len = rest / n + usize::from(i < rest % n);
                let child = (at, len);
                at += len;
                child
            })
            .collect::<Vec<(usize, usize)>>()
    };
    let (mut node, mut span, mut parent) = (0, size, None);
    while node != rel {
        let (child, len) = parts(node, span)
            .into_iter()
            .find(|&(c, len)| c <= rel && rel < c + len)
            .expect("every rank lies in one child's range");
        parent = Some(node);
        node = child;
        span = len;
    }
    (parent, parts(node, span).into_iter().map(|(c, _)| c).collect())
}

/// Height of a tree given by its parent function: the most edges from any
/// rank up to the root.
pub fn tree_height(size: usize, parent: impl Fn(usize) -> Option<usize>) -> usize {
    (0..size)
        .map(|mut rel| {
            let mut h = 0;
            while let Some(up) = parent(rel) {
                rel = up;
                h += 1;
            }
            h
        })
        .max()
        .unwrap_or(0)
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
    fn kary_ranges_is_a_balanced_tree_of_contiguous_subtrees() {
        for k in 1..=8 {
            for size in 1..200 {
                let mut seen = vec![0usize; size];
                for rel in 0..size {
                    let (parent, children) = kary_ranges(rel, size, k);
                    assert!(children.len() <= k);
                    assert!(children.windows(2).all(|w| w[0] < w[1]));
                    for &c in &children {
                        assert_eq!(kary_ranges(c, size, k).0, Some(rel), "k={k} size={size}");
                        seen[c] += 1;
                    }
                    assert_eq!(parent.is_none(), rel == 0);
                }
                assert!(seen[1..].iter().all(|&n| n == 1), "k={k} size={size}");
                // Depth within one of the heap-ordered k-ary tree's.
                let depth = tree_height(size, |r| kary_ranges(r, size, k).0);
                let heap = tree_height(size, |r| kary_parent(r, k));
                assert!(depth <= heap + 1, "k={k} size={size}: {depth} vs {heap}");
            }
        }
        assert_eq!(kary_ranges(0, 7, 2), (None, vec![1, 4]));
        assert_eq!(kary_ranges(4, 7, 2), (Some(0), vec![5, 6]));
    }

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

    /// Every non-root rank has exactly one parent, children agree with
    /// parents, children are numbered above their parent (so following
    /// parents ends at the root: no cycles), and the root has no parent.
    fn assert_spanning(
        size: usize,
        what: &str,
        parent: impl Fn(usize) -> Option<usize>,
        children: impl Fn(usize) -> Vec<usize>,
    ) {
        let mut seen = vec![0usize; size];
        assert_eq!(parent(0), None, "{what}");
        for rel in 0..size {
            for child in children(rel) {
                assert!(child > rel && child < size, "{what} size {size}: child {child} of {rel}");
                assert_eq!(parent(child), Some(rel), "{what} size {size} child {child}");
                seen[child] += 1;
            }
            if rel > 0 {
                assert!(parent(rel).is_some_and(|up| up < rel), "{what} size {size} rel {rel}");
            }
        }
        assert_eq!(seen[0], 0, "{what}");
        assert!(seen[1..].iter().all(|&n| n == 1), "{what} size {size}: {seen:?}");
    }

    #[test]
    fn knomial_trees_are_spanning_trees_with_contiguous_subtrees() {
        for k in 2..=9 {
            for size in (1..300).chain([511, 512, 513, 729, 1000, 1024, 4096]) {
                let kids = |rel| knomial_children(rel, size, k).collect::<Vec<_>>();
                assert_spanning(size, &format!("{k}-nomial"), |rel| knomial_parent(rel, k), kids);
                // Subtrees: a node's range is itself plus its children's
                // ranges, back to back.
                for rel in 0..size {
                    let range = knomial_subtree(rel, size, k);
                    assert_eq!(range.start, rel);
                    let mut covered: Vec<usize> = vec![rel];
                    for child in knomial_children(rel, size, k) {
                        covered.extend(knomial_subtree(child, size, k));
                    }
                    covered.sort_unstable();
                    assert_eq!(covered, range.collect::<Vec<_>>(), "{k}-nomial size {size} rel {rel}");
                }
            }
        }
    }

    #[test]
    fn knomial_of_radix_two_is_binomial() {
        for size in 1..200 {
            for rel in 0..size {
                assert_eq!(knomial_parent(rel, 2), binomial_parent(rel));
                assert_eq!(
                    knomial_children(rel, size, 2).collect::<Vec<_>>(),
                    binomial_children(rel, size).collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn knomial_shapes() {
        // Radix 4 over 16: the root has digits 1..3 at places 4 and 1.
        assert_eq!(knomial_children(0, 16, 4).collect::<Vec<_>>(), vec![4, 8, 12, 1, 2, 3]);
        assert_eq!(knomial_children(4, 16, 4).collect::<Vec<_>>(), vec![5, 6, 7]);
        assert_eq!(knomial_children(0, 10, 4).collect::<Vec<_>>(), vec![4, 8, 1, 2, 3]);
        assert_eq!(knomial_parent(7, 4), Some(4));
        assert_eq!(knomial_parent(8, 4), Some(0));
        assert_eq!(knomial_subtree(4, 6, 4), 4..6);
        assert_eq!(knomial_subtree(0, 6, 4), 0..6);
        assert_eq!(binomial_subtree(6, 100), 6..8);
        // Height: the most non-zero base-k digits of any rank below size.
        for (k, size, height) in [(2, 8, 3), (2, 9, 3), (2, 17, 4), (4, 16, 2), (4, 17, 2), (8, 512, 3), (3, 1, 0)] {
            assert_eq!(tree_height(size, |r| knomial_parent(r, k)), height, "k {k} size {size}");
        }
    }

    #[test]
    fn kary_trees_are_spanning_trees() {
        for k in 1..=9 {
            for size in (1..300).chain([511, 512, 513, 1000, 4096]) {
                let kids = |rel| kary_children(rel, size, k).collect::<Vec<_>>();
                assert_spanning(size, &format!("{k}-ary"), |rel| kary_parent(rel, k), kids);
            }
        }
    }

    #[test]
    fn kary_shapes() {
        assert_eq!(kary_children(0, 10, 3).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(kary_children(2, 10, 3).collect::<Vec<_>>(), vec![7, 8, 9]);
        assert_eq!(kary_children(3, 10, 3).collect::<Vec<_>>(), Vec::<usize>::new());
        assert_eq!(kary_parent(9, 3), Some(2));
        // k = 1 is a chain.
        assert_eq!(kary_children(4, 10, 1).collect::<Vec<_>>(), vec![5]);
        assert_eq!(kary_children(9, 10, 1).collect::<Vec<_>>(), Vec::<usize>::new());
        assert_eq!(kary_parent(5, 1), Some(4));
        assert_eq!(tree_height(10, |r| kary_parent(r, 1)), 9);
        // Binary over 7 is complete with height 2; over 8 it grows a level.
        assert_eq!(tree_height(7, |r| kary_parent(r, 2)), 2);
        assert_eq!(tree_height(8, |r| kary_parent(r, 2)), 3);
    }

    #[test]
    fn pof2_floor_values() {
        assert_eq!(pof2_floor(1), 1);
        assert_eq!(pof2_floor(7), 4);
        assert_eq!(pof2_floor(8), 8);
    }
}
