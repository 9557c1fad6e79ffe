//! Node discovery through MPI, at the first collective on a communicator
//! (collectively over its private duplicate):
//! - the node communicator: `MPI_COMM_TYPE_SHARED`, split further into
//!   groups of PCOLL_RANKS_PER_NODE consecutive world ranks if set, so
//!   that node-aware algorithms run on one machine;
//! - the segment ([`crate::shm::os`]): local rank 0 creates it, the others
//!   open it, each places its own block, and the name is unlinked once
//!   every rank has mapped it; used only if every rank of the node has it;
//! - zero copy: every rank reads a known word from a neighbour; used only
//!   if that works on every rank of the node;
//! - every rank learns every rank's node and local rank (one allgather),
//!   hence the node layout all ranks agree on
//!   ([`crate::driver::comm::NodeState`]).

use super::comm::{free_comm, MpiComm};
use super::host::State;
use crate::driver::comm::{NodeReport, NodeState};
use crate::driver::host::{check, Code};
use crate::select::config::ShmConfig;
use crate::shm::os::{self, Cma, Mapping};
use crate::shm::segment::Geometry;
use mpi_sys::*;
use std::os::raw::c_int;

fn allgather_u64(comm: MPI_Comm, mine: &[u64], size: usize) -> Result<Vec<u64>, c_int> {
    let mut all = vec![0u64; mine.len() * size];
    // SAFETY: `all` holds size × mine.len() words; every rank passes the same count.
    check(unsafe {
        PMPI_Allgather(
            mine.as_ptr().cast(),
            mine.len() as c_int,
            RSMPI_UINT64_T,
            all.as_mut_ptr().cast(),
            mine.len() as c_int,
            RSMPI_UINT64_T,
            comm,
        )
    })?;
    Ok(all)
}

/// The smallest of every rank's `value`.
fn min_over(comm: MPI_Comm, value: c_int) -> Result<c_int, c_int> {
    let mut min = value;
    // SAFETY: one int in, one out, at every rank.
    check(unsafe {
        PMPI_Allreduce(
            (&value as *const c_int).cast(),
            (&mut min as *mut c_int).cast(),
            1,
            RSMPI_INT32_T,
            RSMPI_MIN,
            comm,
        )
    })?;
    Ok(min)
}

fn rank_size(comm: MPI_Comm) -> (usize, usize) {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a valid communicator; out-pointers are locals.
    unsafe {
        PMPI_Comm_rank(comm, &mut rank);
        PMPI_Comm_size(comm, &mut size);
    }
    (rank as usize, size as usize)
}

/// The state of the communicator whose private duplicate is `private`;
/// collective over it.
pub(super) fn discover(private: MPI_Comm, cfg: &ShmConfig) -> Result<State, Code> {
    let (rank, size) = rank_size(private);
    let mut node_comm = private;
    // SAFETY: splits the private communicator; the result is freed with the state.
    check(unsafe {
        PMPI_Comm_split_type(private, RSMPI_COMM_TYPE_SHARED, rank as c_int, RSMPI_INFO_NULL, &mut node_comm)
    })?;
    let (_, on_this_host) = rank_size(node_comm);
    // SAFETY: sysconf has no preconditions.
    let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let oversubscribed = cores > 0 && on_this_host > cores as usize;
    if oversubscribed {
        crate::shm::wait::set_oversubscribed();
    }
    if let Some(per_node) = cfg.ranks_per_node {
        let mut world_rank = 0;
        let mut shared = node_comm;
        // SAFETY: splits the shared-memory communicator by groups of
        // consecutive world ranks, then frees it.
        let rc = unsafe {
            PMPI_Comm_rank(RSMPI_COMM_WORLD, &mut world_rank);
            PMPI_Comm_split(shared, world_rank / per_node as c_int, rank as c_int, &mut node_comm)
        };
        free_comm(&mut shared);
        check(rc)?;
    }
    let (local, local_size) = rank_size(node_comm);
    // The node's first communicator rank names the node.
    let leader = min_over(node_comm, rank as c_int)? as usize;
    let geo = cfg.geometry(local_size);
    let mapping = match (cfg.enable, local_size) {
        (false, _) => None,
        // A node of one rank (of a communicator that spans nodes) needs
        // no sharing: private memory serves the compositions alike.
        (true, 1) => Mapping::private(geo),
        (true, _) => map_segment(node_comm, local, geo)?,
    };
    let cma = match &mapping {
        Some(_) if cfg.zcopy => probe_cma(node_comm, local, local_size)?,
        _ => None,
    };
    let mine = NodeReport { leader, local, segment: mapping.is_some(), zero_copy: cma.is_some() };
    let all = allgather_u64(private, &mine.to_words(), size)?;
    let reports: Vec<NodeReport> = all.chunks_exact(4).map(NodeReport::from_words).collect();
    let node = NodeState::new(local, local_size, &reports, cfg, oversubscribed);
    log::debug!(
        "node layer: rank {rank} is rank {local} of {local_size} on node {} of {} ({:?})",
        node.node_of[rank],
        node.topo.nodes,
        node.topo
    );
    Ok(State::new(rank, size, node, MpiComm { private, node_comm, mapping, cma }))
}

/// Creates (local rank 0) or opens the segment, maps it, places each
/// block by first touch, and unlinks the name once all have mapped it.
/// `None` (on every rank alike) if any rank failed.
fn map_segment(node_comm: MPI_Comm, local: usize, geo: Geometry) -> Result<Option<Mapping>, c_int> {
    let len = geo.total_bytes();
    let mut name = [0u8; 64];
    let mut base: *mut u8 = std::ptr::null_mut();
    if local == 0 {
        name = os::segment_name();
        base = os::create_or_open(&name, len, true);
        if base.is_null() {
            name = [0u8; 64];
        }
    }
    // SAFETY: 64 bytes at every rank.
    check(unsafe { PMPI_Bcast(name.as_mut_ptr().cast(), 64, RSMPI_UINT8_T, 0, node_comm) })?;
    if local != 0 && name[0] != 0 {
        base = os::create_or_open(&name, len, false);
    }
    let ok = min_over(node_comm, !base.is_null() as c_int)? != 0;
    if ok {
        // SAFETY: `base` maps the segment's `len` bytes, page-aligned.
        unsafe { os::place(base, geo, local) };
    }
    // SAFETY: every rank has mapped (or failed to map) the segment by now.
    check(unsafe { PMPI_Barrier(node_comm) })?;
    if local == 0 && name[0] != 0 {
        os::unlink(&name);
    }
    if !ok {
        if !base.is_null() {
            // SAFETY: this rank's mapping of `len` bytes, not used by anyone.
            unsafe { os::unmap(base, len) };
        }
        log::warn!("node layer: the shared segment could not be set up on every rank; node algorithms are off");
        return Ok(None);
    }
    // SAFETY: `base` maps `len` zeroed bytes, page-aligned, placed above.
    Ok(Some(unsafe { Mapping::shared(base, geo, local) }))
}

/// Whether zero copy works between the node's ranks: each reads its
/// right neighbour's probe word. `None` on every rank unless all succeed.
fn probe_cma(node_comm: MPI_Comm, local: usize, size: usize) -> Result<Option<Cma>, c_int> {
    let all = allgather_u64(node_comm, &os::probe_words(), size)?;
    let right = (local + 1) % size;
    let works = os::probe_cma(&all[2 * right..2 * right + 2]);
    let cma = Cma { pids: all.chunks_exact(2).map(|w| w[0] as libc::pid_t).collect() };
    Ok((min_over(node_comm, works as c_int)? != 0).then_some(cma))
}
