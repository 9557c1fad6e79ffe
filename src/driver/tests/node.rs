//! Node discovery against the threaded host: the node layout from the
//! host's splits, PCOLL_RANKS_PER_NODE, and the agreement on the segment
//! and on zero copy when a rank cannot have them.

use super::host::{Comm, CommSpec, TestHost, World};
use super::{bcast_call, WORLD};
use crate::core::call::Topo;
use crate::driver::comm::CommState;
use crate::driver::host::Outcome::Forward;
use crate::driver::Host;
use std::sync::atomic::Ordering;

/// What a rank learnt of its node, and of every rank's.
#[derive(Debug, PartialEq)]
struct Found {
    /// This rank on its node, and the node's size.
    local: (usize, usize),
    node_of: Vec<usize>,
    local_of: Vec<usize>,
    /// The threads of its node communicator.
    node_comm: Vec<usize>,
    segment: bool,
    zero_copy: bool,
}

/// Every rank's state of `comm`, made by discovery.
fn discover_all(world: &'static World, comm: Comm) -> Vec<(Found, Topo, usize)> {
    world
        .run(|h| {
            let rank = world.members_of(comm).iter().position(|&t| t == h.rank)?;
            let state: &CommState<TestHost> = h.create_state(comm).expect("a state");
            assert_eq!(state.rank, rank);
            let node = &state.node;
            let found = Found {
                local: (node.rank, node.size),
                node_of: node.node_of.clone(),
                local_of: node.local_of.clone(),
                node_comm: world.members_of(state.node_comm).to_vec(),
                segment: state.mapping.is_some(),
                zero_copy: state.peers.is_some(),
            };
            let base = state.node_memory().map_or(0, |(seg, _)| seg.base() as usize);
            Some((found, node.topo, base))
        })
        .into_iter()
        .flatten()
        .collect()
}

#[test]
fn discovery_names_nodes_by_their_first_rank_and_shares_one_segment_per_node() {
    // threads 0 and 2 on host node 1, 1 and 3 on host node 0, 4 alone
    let world = World::new(&[1, 0, 1, 0, 2], &[], vec![]);
    let all = discover_all(world, WORLD);
    let (node_of, local_of) = (vec![0, 1, 0, 1, 2], vec![0, 0, 1, 1, 0]);
    for (rank, (found, topo, _)) in all.iter().enumerate() {
        let node_comm = (0..5).filter(|&t| node_of[t] == node_of[rank]).collect::<Vec<_>>();
        let want = Found {
            local: (local_of[rank], node_comm.len()),
            node_of: node_of.clone(),
            local_of: local_of.clone(),
            node_comm,
            segment: true,
            zero_copy: true,
        };
        assert_eq!(found, &want, "rank {rank}");
        assert_eq!((topo.nodes, topo.contiguous, topo.shm, topo.zcopy), (3, false, true, true));
    }
    // one segment per node, the lone rank's its own; every name unlinked
    let base = |r: usize| all[r].2;
    assert!(base(0) == base(2) && base(1) == base(3));
    assert!(base(0) != base(1) && base(4) != base(0) && base(4) != base(1) && base(4) != 0);
    assert_eq!(world.linked_segments(), 0);
}

#[test]
fn ranks_per_node_groups_consecutive_world_ranks_ordered_by_communicator_rank() {
    // one host node; a communicator of threads 4, 3, 2, 1 in that order
    let reversed = CommSpec { members: vec![4, 3, 2, 1], inter: false };
    let world = World::new(&[0; 5], &[("PCOLL_RANKS_PER_NODE", "2")], vec![reversed]);
    let all = discover_all(world, WORLD);
    assert!(all.iter().all(|(f, t, _)| f.node_of == [0, 0, 1, 1, 2] && t.contiguous && t.nodes == 3));
    assert_eq!(all[3].0.node_comm, [2, 3]);
    // threads 4 | 3 2 | 1: groups 2, 1, 0
    let all = discover_all(world, 2);
    for (found, topo, _) in &all {
        assert_eq!((&found.node_of[..], &found.local_of[..]), (&[0, 1, 1, 2][..], &[0, 0, 1, 0][..]));
        assert!(topo.contiguous && topo.shm);
    }
    assert_eq!(all[2].0.node_comm, [3, 2], "ordered by communicator rank");
}

#[test]
fn a_rank_without_the_segment_turns_it_off_on_its_whole_node() {
    for failing in [2, 0] {
        // nodes {0, 1, 2} and {3, 4}: thread 2 cannot open the segment,
        // or thread 0 cannot create it (the others then open nothing)
        let world = World::new(&[0, 0, 0, 1, 1], &[("PCOLL_BCAST", "hier")], vec![]);
        world.no_segment.store(1 << failing, Ordering::Relaxed);
        let all = discover_all(world, WORLD);
        let segment: Vec<bool> = all.iter().map(|(f, ..)| f.segment).collect();
        assert_eq!(segment, [false, false, false, true, true], "thread {failing} fails");
        assert!(all.iter().all(|(f, t, _)| !t.shm && !t.zcopy && f.zero_copy == f.segment));
        assert_eq!(world.linked_segments(), 0, "the failed segment's name is unlinked too");
        // a composition forced: the host runs the call, at every rank
        let outcomes = world.run(|h| {
            let mut buf = [h.rank as u8; 8];
            bcast_call(h, buf.as_mut_ptr().cast(), 8, super::host::Ty::Byte, 0, WORLD)
        });
        assert!(outcomes.iter().all(|&o| o == Forward("a node has no shared segment")), "{outcomes:?}");
    }
}

#[test]
fn zero_copy_is_used_only_where_every_rank_of_the_node_reaches_its_neighbour() {
    // thread 1 cannot be read: its node {0, 1, 2} has no zero copy; {3, 4} has
    let world = World::new(&[0, 0, 0, 1, 1], &[], vec![]);
    world.no_zero_copy.store(1 << 1, Ordering::Relaxed);
    let all = discover_all(world, WORLD);
    let zero_copy: Vec<bool> = all.iter().map(|(f, ..)| f.zero_copy).collect();
    assert_eq!(zero_copy, [false, false, false, true, true]);
    assert!(all.iter().all(|(f, t, _)| f.segment && t.shm && !t.zcopy));
    // switched off: no probe, and no segment without PCOLL_SHM
    for (var, segment) in [("PCOLL_SHM_ZCOPY", true), ("PCOLL_SHM", false)] {
        let world = World::new(&[0, 0, 1, 1], &[(var, "0")], vec![]);
        let all = discover_all(world, WORLD);
        assert!(all.iter().all(|(f, t, _)| f.segment == segment && t.shm == segment && !f.zero_copy), "{var}");
    }
}
