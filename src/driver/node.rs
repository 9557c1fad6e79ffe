//! Node discovery, at the first collective on a communicator
//! (collectively over its private duplicate), from the host's splits and
//! small collectives and the [`NodeOs`]:
//! - the node communicator: [`Split::Shared`], split further into groups
//!   of PCOLL_RANKS_PER_NODE consecutive world ranks if set, so that
//!   node-aware algorithms run on one machine;
//! - the segment: local rank 0 creates it, the others open it, each
//!   places its own block, and the name is unlinked once every rank has
//!   mapped it; used only if every rank of the node has it;
//! - zero copy: every rank reads a known word from a neighbour; used only
//!   if that works on every rank of the node;
//! - every rank learns every rank's node and local rank (one allgather),
//!   hence the node layout all ranks agree on ([`NodeState`]).

use super::comm::{CommState, NodeReport, NodeState};
use super::host::{Code, Host, Split};
use crate::select::config::ShmConfig;
use crate::shm::segment::Geometry;
use crate::shm::{NodeOs, SegmentName};
use std::sync::Mutex;

/// The state of the communicator whose private duplicate is `private`;
/// collective over it.
pub fn discover<H: Host>(host: &H, private: H::Comm, cfg: &ShmConfig) -> Result<CommState<H>, Code> {
    let (rank, size) = shape(host, private);
    let os = host.os();
    let mut node_comm = host.split(private, Split::Shared, rank)?;
    let (_, on_this_host) = shape(host, node_comm);
    let oversubscribed = os.cores().is_some_and(|cores| on_this_host > cores);
    if oversubscribed {
        crate::shm::wait::set_oversubscribed();
    }
    if let Some(per_node) = cfg.ranks_per_node {
        // groups of consecutive world ranks
        let mut shared = node_comm;
        let split = host.split(shared, Split::Color(Some(host.world_rank() / per_node)), rank);
        host.free_comm(&mut shared);
        node_comm = split?;
    }
    let (local, local_size) = shape(host, node_comm);
    // The node's first communicator rank names the node.
    let leader = host.allgather_words(node_comm, &[rank as u64])?.into_iter().min().expect("this rank's own") as usize;
    let (geo, on_node) = (cfg.geometry(local_size), OnNode { host, os, comm: node_comm, local, size: local_size });
    let mapping = match (cfg.enable, local_size) {
        (false, _) => None,
        // A node of one rank (of a communicator that spans nodes) needs
        // no sharing: private memory serves the compositions alike.
        (true, 1) => on_node.os.private(geo),
        (true, _) => on_node.map_segment(geo)?,
    };
    let peers = match &mapping {
        Some(_) if cfg.zcopy => on_node.probe_zero_copy()?,
        _ => None,
    };
    let mine = NodeReport { leader, local, segment: mapping.is_some(), zero_copy: peers.is_some() };
    let all = host.allgather_words(private, &mine.to_words())?;
    let reports: Vec<NodeReport> = all.chunks_exact(4).map(NodeReport::from_words).collect();
    let node = NodeState::new(local, local_size, &reports, cfg, oversubscribed);
    log::debug!(
        "node layer: rank {rank} is rank {local} of {local_size} on node {} of {} ({:?})",
        node.node_of[rank],
        node.topo.nodes,
        node.topo
    );
    Ok(CommState {
        rank,
        size,
        schedules: Mutex::default(),
        node,
        leaders: Mutex::default(),
        memo: Mutex::default(),
        private,
        node_comm,
        mapping,
        peers,
    })
}

/// (rank, size) of a communicator pcoll made.
fn shape<H: Host>(host: &H, comm: H::Comm) -> (usize, usize) {
    host.comm_shape(comm).expect("pcoll's communicators are intracommunicators")
}

/// This rank on its node: what it sets up with the node's other ranks.
struct OnNode<'a, H: Host> {
    host: &'a H,
    os: H::Os,
    /// The node's communicator, this rank there, and the node's size.
    comm: H::Comm,
    local: usize,
    size: usize,
}

impl<H: Host> OnNode<'_, H> {
    /// Whether `ok` holds at every rank of the node (the same answer at
    /// all).
    fn everywhere(&self, ok: bool) -> Result<bool, Code> {
        Ok(self.host.allgather_words(self.comm, &[ok as u64])?.iter().all(|&w| w != 0))
    }

    /// Local rank 0 creates the segment, the others open it; each places
    /// its block, and the name is unlinked once all have mapped it. `None`
    /// (on every rank alike) if any rank failed.
    fn map_segment(&self, geo: Geometry) -> Result<Option<<H::Os as NodeOs>::Mapping>, Code> {
        let (os, local) = (&self.os, self.local);
        let (mut name, mut mapping): (SegmentName, _) = ([0; 64], None);
        if local == 0 {
            if let Some((created, m)) = os.create(geo) {
                (name, mapping) = (created, Some(m));
            }
        }
        let mut words: Vec<u64> = name.chunks_exact(8).map(|b| u64::from_ne_bytes(b.try_into().unwrap())).collect();
        self.host.bcast_words(self.comm, &mut words, 0)?;
        name.chunks_exact_mut(8).zip(&words).for_each(|(b, w)| b.copy_from_slice(&w.to_ne_bytes()));
        if local != 0 && name[0] != 0 {
            mapping = os.open(&name, geo);
        }
        let ok = self.everywhere(mapping.is_some())?;
        if let Some(m) = mapping.as_ref().filter(|_| ok) {
            os.place(m, local);
        }
        // every rank has mapped (or failed to map) the segment by now
        self.host.barrier(self.comm)?;
        if local == 0 && name[0] != 0 {
            os.unlink(&name);
        }
        if !ok {
            log::warn!("node layer: the shared segment could not be set up on every rank; node algorithms are off");
            return Ok(None);
        }
        let mapping = mapping.expect("every rank mapped the segment");
        os.settle(&mapping, local);
        Ok(Some(mapping))
    }

    /// Whether zero copy works between the node's ranks: each reads its
    /// right neighbour's probe word. `None` on every rank unless all
    /// succeed.
    fn probe_zero_copy(&self) -> Result<Option<<H::Os as NodeOs>::Peers>, Code> {
        let all = self.host.allgather_words(self.comm, &self.os.probe_words())?;
        let right = (self.local + 1) % self.size;
        let works = self.os.probe(&all[2 * right..2 * right + 2]);
        let peers = self.os.peers(&all);
        Ok(self.everywhere(works)?.then_some(peers))
    }
}
