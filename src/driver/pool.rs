//! The shared memory one process holds for its communicators' node
//! segments: what it may reserve of /dev/shm (the budget), and the
//! segments of freed communicators it keeps for later ones; and whether
//! the whole job runs on its host, as MPI_Init found.
//!
//! Budget: each rank reserves its own part of a segment (its block; the
//! node's first rank also the header, [`Geometry::own_range`]), and a
//! process's parts of every segment it holds, live or kept, add up to at
//! most its budget (PCOLL_SHM_BUDGET; by default half of /dev/shm shared
//! among the host's ranks, [`default_budget`]). A segment that does not
//! fit, even once the kept ones are let go, is not made: that
//! communicator runs without the node layer (node discovery agrees on it
//! over the node).
//!
//! Kept segments: a freed communicator's segment, with its step
//! protocol's state, is kept (up to [`KEPT`], the oldest let go first)
//! for a later communicator of the same ranks in the same order, which
//! then costs no new memory and no set-up of pages. Ranks free their
//! communicators at different times and keep different segments, so the
//! node's leader proposes the names of those it keeps
//! ([`Pool::proposals`]), each rank claims those it keeps too, and the
//! node takes the first that every rank claimed (node discovery does the
//! collectives). Names are unique to one segment, and a rank claims one
//! only at the place on the node it had there: if every rank of the new
//! node claims it, the new node is the old one, rank for rank.

use crate::shm::segment::Geometry;
use crate::shm::SegmentName;

/// Segments a process keeps: a loop that creates, uses and frees
/// communicators needs one; a few let some come and go in other orders.
pub const KEPT: usize = 4;

/// The names a leader proposes at most.
pub const PROPOSALS: usize = 4;

/// A segment as the pool knows it: its name, this rank's place on its
/// node, and its layout (`geo.ranks`: the node's size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    pub name: SegmentName,
    pub local: usize,
    pub geo: Geometry,
}

impl Tag {
    /// The bytes this rank reserved of the segment.
    pub fn own_bytes(&self) -> usize {
        self.geo.own_range(self.local).1
    }
}

/// The default of PCOLL_SHM_BUDGET: half of /dev/shm (`shm_bytes`),
/// shared equally among the `host_ranks` ranks of the host, so that
/// pcoll's segments never take more than half of it and the rest is left
/// to the host MPI's own (and the program's). With 64 MiB (a container's
/// default) and 2 ranks, 16 MiB each: four communicators' segments at
/// the default 3.4 MiB per rank there (chunk areas moving through 8
/// places, a queue of 2 MiB).
pub fn default_budget(shm_bytes: usize, host_ranks: usize) -> usize {
    shm_bytes / 2 / host_ranks.max(1)
}

/// One process's budget and kept segments; `T` is what a kept segment
/// carries (its mapping and protocol state).
pub struct Pool<T> {
    /// Kept segments, the oldest first.
    kept: Vec<(Tag, T)>,
    /// Bytes this process reserved of every segment it holds, live or kept.
    reserved: usize,
    /// What it may reserve; `None` until set (no limit).
    budget: Option<usize>,
    /// Every rank of MPI_COMM_WORLD runs on this host.
    one_host: bool,
}

impl<T> Pool<T> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Pool<T> {
        Pool { kept: Vec::new(), reserved: 0, budget: None, one_host: false }
    }

    pub fn budget(&self) -> Option<usize> {
        self.budget
    }

    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = Some(bytes);
    }

    /// Whether every rank of the job runs on this host (false unless
    /// MPI_Init found so).
    pub fn one_host(&self) -> bool {
        self.one_host
    }

    pub fn set_one_host(&mut self, one: bool) {
        self.one_host = one;
    }

    /// Bytes reserved of live and kept segments.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Reserves `bytes` for a new segment if the budget allows, letting
    /// kept segments go (the oldest first) to make room.
    pub fn reserve(&mut self, bytes: usize) -> bool {
        let Some(budget) = self.budget else {
            self.reserved += bytes;
            return true;
        };
        while self.reserved + bytes > budget && !self.kept.is_empty() {
            let (tag, oldest) = self.kept.remove(0);
            self.reserved -= tag.own_bytes();
            drop(oldest);
        }
        let fits = self.reserved + bytes <= budget;
        if fits {
            self.reserved += bytes;
        }
        fits
    }

    /// Gives back what [`Pool::reserve`] took: a segment that was not
    /// made, or is let go.
    pub fn unreserve(&mut self, bytes: usize) {
        self.reserved -= bytes;
    }

    /// What a node's leader (local rank 0) proposes for a segment of
    /// `geo`: the names of the segments it keeps with that layout, the
    /// latest kept first.
    pub fn proposals(&self, geo: Geometry) -> Vec<SegmentName> {
        let fitting = self.kept.iter().rev().filter(|(tag, _)| tag.local == 0 && tag.geo == geo);
        fitting.map(|(tag, _)| tag.name).take(PROPOSALS).collect()
    }

    /// Takes out the kept segments among `names` at which this rank was
    /// local rank `local` of a node of layout `geo`, by their index in
    /// `names`, for the node to choose one; the others go back with
    /// [`Pool::keep`].
    pub fn claim(&mut self, names: &[SegmentName], local: usize, geo: Geometry) -> Vec<(usize, Tag, T)> {
        let mut claimed = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let at = self.kept.iter().position(|(tag, _)| tag.name == *name && tag.local == local && tag.geo == geo);
            if let Some(at) = at {
                let (tag, kept) = self.kept.remove(at);
                claimed.push((i, tag, kept));
            }
        }
        claimed
    }

    /// Keeps a segment (still reserved) for a later communicator, letting
    /// the oldest go beyond [`KEPT`].
    pub fn keep(&mut self, tag: Tag, segment: T) {
        self.kept.push((tag, segment));
        if self.kept.len() > KEPT {
            let (tag, oldest) = self.kept.remove(0);
            self.reserved -= tag.own_bytes();
            drop(oldest);
        }
    }

    /// Lets every kept segment go (at MPI_Finalize).
    pub fn clear(&mut self) {
        for (tag, kept) in self.kept.drain(..) {
            self.reserved -= tag.own_bytes();
            drop(kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(ranks: usize) -> Geometry {
        Geometry { ranks, ..Geometry::DEFAULT }
    }

    fn tag(n: u8, local: usize, ranks: usize) -> Tag {
        let mut name = [0u8; 64];
        name[0] = n;
        Tag { name, local, geo: geo(ranks) }
    }

    #[test]
    fn the_default_budget_is_half_of_dev_shm_among_the_hosts_ranks() {
        assert_eq!(default_budget(64 << 20, 2), 16 << 20);
        assert_eq!(default_budget(64 << 20, 0), 32 << 20);
        // two ranks, 64 MiB: the default segment (a 2 MiB queue) fits four times
        let budget = default_budget(64 << 20, 2);
        let own = crate::select::config::ShmConfig::default().geometry(2, Some(budget)).own_range(1).1;
        assert_eq!(budget / own, 4, "{own}");
    }

    #[test]
    fn reservations_stay_within_the_budget_letting_kept_segments_go() {
        let mut pool: Pool<u32> = Pool::new();
        assert!(pool.reserve(1 << 40), "no budget set: no limit");
        pool.unreserve(1 << 40);
        let (a, b) = (tag(1, 0, 2), tag(2, 1, 2));
        let own = a.own_bytes();
        assert_eq!((b.own_bytes(), own), (geo(2).block_bytes(), geo(2).block_bytes() + geo(2).header_bytes()));
        pool.set_budget(a.own_bytes() + b.own_bytes() + own / 2);
        assert!(pool.reserve(a.own_bytes()) && pool.reserve(b.own_bytes()));
        assert!(!pool.reserve(own), "a third does not fit");
        assert_eq!(pool.reserved(), a.own_bytes() + b.own_bytes());
        // the two are freed and kept: still reserved, until room is needed
        pool.keep(a, 1);
        pool.keep(b, 2);
        assert_eq!(pool.reserved(), a.own_bytes() + b.own_bytes());
        assert!(pool.reserve(own), "the oldest kept one goes");
        assert_eq!(pool.proposals(geo(2)), Vec::<SegmentName>::new(), "a is gone; b was local rank 1");
        assert_eq!(pool.claim(&[b.name], 1, geo(2)).len(), 1);
        assert_eq!(pool.reserved(), own + b.own_bytes(), "b is live again");
        assert!(!pool.reserve(own), "nothing kept to let go");
    }

    #[test]
    fn a_segment_is_claimed_only_at_the_same_place_on_a_node_of_the_same_layout() {
        let mut pool: Pool<&str> = Pool::new();
        pool.keep(tag(1, 0, 2), "1");
        pool.keep(tag(2, 0, 3), "2");
        pool.keep(tag(3, 0, 2), "3");
        pool.keep(tag(4, 1, 2), "4");
        // the leader proposes its own layout's, the latest first
        assert_eq!(pool.proposals(geo(2)), [tag(3, 0, 2).name, tag(1, 0, 2).name]);
        assert_eq!(pool.proposals(geo(4)), Vec::<SegmentName>::new());
        // another place, another layout, an unknown name: nothing
        let names = [tag(4, 0, 2).name, tag(2, 0, 2).name, tag(9, 0, 2).name];
        assert!(pool.claim(&names, 0, geo(2)).is_empty());
        // claimed by index; the others stay
        let claimed = pool.claim(&[tag(3, 0, 2).name, tag(1, 0, 2).name], 0, geo(2));
        let found: Vec<(usize, &str)> = claimed.iter().map(|(i, _, s)| (*i, *s)).collect();
        assert_eq!(found, [(0, "3"), (1, "1")]);
        assert_eq!(pool.proposals(geo(2)), Vec::<SegmentName>::new());
        // one goes back, as the latest
        let (_, back, kept) = claimed.into_iter().nth(1).unwrap();
        pool.keep(back, kept);
        assert_eq!(pool.proposals(geo(2)), [tag(1, 0, 2).name]);
    }

    #[test]
    fn at_most_kept_segments_stay_the_oldest_going_first() {
        let mut pool: Pool<u8> = Pool::new();
        for n in 0..KEPT as u8 + 2 {
            assert!(pool.reserve(tag(n, 0, 2).own_bytes()));
            pool.keep(tag(n, 0, 2), n);
        }
        let left: Vec<u8> = pool.proposals(geo(2)).iter().map(|name| name[0]).collect();
        assert_eq!(left, [5, 4, 3, 2]);
        assert_eq!(pool.reserved(), KEPT * tag(0, 0, 2).own_bytes());
        pool.clear();
        assert_eq!((pool.reserved(), pool.proposals(geo(2)).len()), (0, 0));
    }
}
