//! Broadcast down a tree, optionally pipelined in segments: the engine the
//! k-nomial, k-ary and chain broadcasts share (they differ only in the tree
//! shape and the segment size). Not registered itself.
//!
//! Without segmentation a rank receives the whole message from its parent
//! in one step and sends it to all its children in the next: it forwards as
//! soon as its data is in, with no global step barrier. With segments of
//! `s` bytes (S = ⌈n/s⌉ of them) the root sends segment i to every child in
//! its step i, and an inner rank's step i receives segment i while sending
//! segment i-1 to its children (distinct bytes, so the regions of a step
//! stay disjoint); its last step sends segment S-1.
//!
//! Trace, chain over 3 ranks, 2 segments a, b: root: [→1 a] [→1 b];
//! rank 1: [←0 a] [←0 b, →2 a] [→2 b]; rank 2: [←1 a] [←1 b] [].
//!
//! Limitations: at most [`MAX_SEGMENTS`] segments: a larger message gets
//! proportionally larger segments, which keeps schedules (one step per
//! segment) and request counts bounded. Memory: none beyond the buffer.
//! Cost: see the algorithms; per pipeline step a rank with c children
//! moves c + 1 segments.

use crate::core::call::CallDesc;
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// Most segments a message is cut into.
pub(super) const MAX_SEGMENTS: usize = 4096;

/// The segment size used for `bytes` when `seg` is asked for (0: no
/// segmentation): never more than [`MAX_SEGMENTS`] segments. Depends only
/// on values every rank shares, so all ranks cut alike.
pub(super) fn segment_size(bytes: usize, seg: usize) -> usize {
    if seg == 0 || seg >= bytes {
        return bytes.max(1);
    }
    seg.max(bytes.div_ceil(MAX_SEGMENTS))
}

/// The segments of `data`, in order.
pub(super) fn segments(data: Region, seg: usize) -> Vec<Region> {
    let seg = segment_size(data.len, seg);
    (0..data.len).step_by(seg).map(|off| Region { off: data.off + off, len: seg.min(data.len - off), ..data }).collect()
}

/// One rank's schedule of a broadcast of the whole receive buffer down a
/// tree given in ranks relative to the root: this rank's `parent` (none at
/// the root) and `children` (largest subtree first), pipelined in segments
/// of `seg` bytes (0: not segmented).
pub(super) fn build(
    desc: &CallDesc,
    seg: usize,
    parent: Option<usize>,
    children: impl IntoIterator<Item = usize>,
) -> Schedule {
    let mut b = Builder::new();
    let children: Vec<usize> = children.into_iter().map(|c| desc.abs_rank(c)).collect();
    let data = Region::new(BufId::Recv, 0, desc.bytes);
    append(&mut b, parent.map(|p| desc.abs_rank(p)), &children, data, seg);
    b.finish()
}

/// Appends the broadcast of `data` (see [`build`]); `parent` and
/// `children` are absolute ranks.
pub(super) fn append(b: &mut Builder, parent: Option<usize>, children: &[usize], data: Region, seg: usize) {
    let segs = segments(data, seg);
    let Some(parent) = parent else {
        for &s in &segs {
            for &c in children {
                b.send(c, s);
            }
            b.end_step();
        }
        return;
    };
    for i in 0..=segs.len() {
        if let Some(&s) = segs.get(i) {
            b.recv(parent, s);
        }
        if i > 0 {
            for &c in children {
                b.send(c, segs[i - 1]);
            }
        }
        b.end_step();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_data_and_are_capped() {
        let data = Region::new(BufId::Recv, 0, 10);
        let lens = |seg| segments(data, seg).iter().map(|r| (r.off, r.len)).collect::<Vec<_>>();
        assert_eq!(lens(0), vec![(0, 10)]);
        assert_eq!(lens(4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(lens(10), vec![(0, 10)]);
        assert_eq!(lens(1 << 20), vec![(0, 10)]);
        assert!(segments(Region::new(BufId::Recv, 0, 0), 4).is_empty());
        let big = 1usize << 40;
        assert_eq!(segment_size(big, 1024), big / MAX_SEGMENTS);
        let capped = segments(Region::new(BufId::Recv, 0, 100_000), 1).len();
        assert!(capped <= MAX_SEGMENTS && capped > MAX_SEGMENTS / 2, "{capped}");
    }

    #[test]
    fn inner_rank_receives_one_segment_while_forwarding_the_previous() {
        let mut b = Builder::new();
        append(&mut b, Some(0), &[2, 3], Region::new(BufId::Recv, 0, 9), 4);
        let s = b.finish();
        assert_eq!(s.steps.len(), 4);
        assert_eq!(s.steps[0].recvs.len(), 1);
        assert!(s.steps[0].sends.is_empty());
        for i in 1..3 {
            assert_eq!(s.steps[i].recvs[0].region.off, 4 * i);
            assert!(s.steps[i].sends.iter().all(|x| x.region.off == 4 * (i - 1)));
        }
        assert!(s.steps[3].recvs.is_empty() && s.steps[3].sends.len() == 2);
    }
}
