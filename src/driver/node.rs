//! Node discovery, at the call that sets a communicator up
//! (collectively over its private duplicate), from the host's splits and
//! small collectives and the [`NodeOs`]:
//! - the node communicator: [`Split::Shared`], split further into groups
//!   of PCOLL_RANKS_PER_NODE consecutive world ranks if set, so that
//!   node-aware algorithms run on one machine;
//! - the segment: one the node's ranks kept from an earlier communicator
//!   of the same ranks ([`super::pool`]), or a new one: local rank 0
//!   creates it, the others open it, each reserving its own part of
//!   /dev/shm within its budget, and the name is unlinked once every rank
//!   has mapped it; used only if every rank of the node has it, else the
//!   communicator runs without (one warning per process says why);
//! - zero copy: every rank reads a known word from a neighbour; used only
//!   if that works on every rank of the node;
//! - every rank learns every rank's node and local rank (one allgather),
//!   hence the node layout all ranks agree on ([`NodeState`]).
//!
//! At MPI_Init, [`at_init`] sizes the budget and refuses settings whose
//! segment /dev/shm cannot hold.

use super::comm::{CallState, CommState, Kept, Mapping, NodeReport, NodeState, SegmentPool};
use super::host::{Code, Host, Split};
use super::pool::{default_budget, Pool, Tag, PROPOSALS};
use crate::select::config::{bytes_text, Config, ShmConfig};
use crate::shm::segment::Geometry;
use crate::shm::{NodeOs, SegmentName};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// At MPI_Init (collective over MPI_COMM_WORLD): refuses block settings
/// whose segment, for a node of every rank of this host, would take more
/// than its share of /dev/shm ([`Config::check_segment`]; the message
/// names them), and sets the process's budget (PCOLL_SHM_BUDGET, or half
/// of /dev/shm shared among the host's ranks).
pub fn at_init<H: Host>(host: &H, cfg: &Config) -> Result<(), String> {
    if !cfg.enable || !cfg.shm.enable {
        return Ok(());
    }
    let Some(shm) = host.os().shm_bytes() else { return Ok(()) };
    let Ok(mut shared) = host.split(host.world(), Split::Shared, host.world_rank()) else { return Ok(()) };
    let (_, host_ranks) = shape(host, shared);
    host.free_comm(&mut shared);
    cfg.check_segment(cfg.shm.ranks_per_node.map_or(host_ranks, |k| k.min(host_ranks)), shm)?;
    let mut pool = host.pool().lock().unwrap();
    set_budget(&mut pool, &cfg.shm, Some(shm), host_ranks);
    pool.set_one_host(host.comm_shape(host.world()).is_some_and(|(_, world)| world == host_ranks));
    Ok(())
}

/// Sets the budget: PCOLL_SHM_BUDGET, or half of /dev/shm (`shm`) shared
/// among `host_ranks`; none where neither is known.
fn set_budget<T>(pool: &mut Pool<T>, cfg: &ShmConfig, shm: Option<usize>, host_ranks: usize) {
    if let Some(budget) = cfg.budget.or_else(|| shm.map(|shm| default_budget(shm, host_ranks))) {
        pool.set_budget(budget);
    }
}

/// The state of the communicator whose private duplicate is `private`;
/// collective over it.
pub fn discover<H: Host>(host: &H, private: H::Comm, cfg: &ShmConfig) -> Result<CommState<H>, Code> {
    let (rank, size) = shape(host, private);
    let pool = host.pool();
    let os = host.os();
    // Where the whole job runs on this host, so does every communicator:
    // no split (MPI_Comm_split_type and its free: 71 us under MPICH 4.0.2,
    // 11 under Open MPI, 2 ranks on a loaded machine).
    let mut node_comm = match pool.lock().unwrap().one_host() {
        true => private,
        false => host.split(private, Split::Shared, rank)?,
    };
    let (_, on_this_host) = shape(host, node_comm);
    let oversubscribed = os.cores().is_some_and(|cores| on_this_host > cores);
    if oversubscribed {
        crate::shm::wait::set_oversubscribed();
    }
    {
        // not sized at MPI_Init (which pcoll did not see): this
        // communicator's ranks on the host stand for the host's
        let mut pool = pool.lock().unwrap();
        if pool.budget().is_none() {
            set_budget(&mut pool, cfg, os.shm_bytes(), on_this_host);
        }
    }
    if let Some(per_node) = cfg.ranks_per_node {
        // groups of consecutive world ranks
        let mut shared = node_comm;
        let split = host.split(shared, Split::Color(Some(host.world_rank() / per_node)), rank);
        if shared != private {
            host.free_comm(&mut shared);
        }
        node_comm = split?;
    }
    let (local, local_size) = shape(host, node_comm);
    // The node's first communicator rank names the node. The layout
    // follows each rank's budget, which the ranks of a host share alike
    // unless set apart: the fewest places of a chunk area (and of spread
    // steps, and of the window) any rank wants.
    let geo = cfg.geometry(local_size, pool.lock().unwrap().budget());
    let mine = [rank, geo.rotations, geo.spread, geo.window].map(|w| w as u64);
    let words = host.allgather_words(node_comm, &mine)?;
    let least = |i: usize| words.chunks_exact(mine.len()).map(|w| w[i]).min().expect("this rank's own") as usize;
    let geo = Geometry { rotations: least(1), spread: least(2), ..geo }.with_window(least(3));
    let leader = least(0);
    let on_node = OnNode { host, os, comm: node_comm, local, size: local_size };
    let (mapping, segment, kept, how) = match (cfg.enable, local_size) {
        (false, _) => (None, None, None, "none"),
        // A node of one rank (of a communicator that spans nodes) needs
        // no sharing: private memory serves the compositions alike.
        (true, 1) => (on_node.os.private(geo), None, None, "private"),
        (true, _) => match on_node.kept_segment(geo, pool)? {
            Some((tag, kept)) => (Some(kept.mapping), Some(tag), Some((kept.state, kept.peers)), "kept"),
            None => match on_node.new_segment(geo, pool)? {
                Some((tag, mapping)) => (Some(mapping), Some(tag), None, "new"),
                None => (None, None, None, "none"),
            },
        },
    };
    // zero copy between the same processes works as it did
    let (kept_state, kept_peers) = kept.map_or((None, None), |(state, peers)| (Some(state), Some(peers)));
    let peers = match (&mapping, kept_peers) {
        (Some(_), Some(peers)) => peers,
        (Some(_), None) if cfg.zcopy => on_node.probe_zero_copy()?,
        _ => None,
    };
    let mine = NodeReport { leader, local, segment: mapping.is_some(), zero_copy: peers.is_some() };
    let all = host.allgather_words(private, &mine.to_words())?;
    let reports: Vec<NodeReport> = all.chunks_exact(4).map(NodeReport::from_words).collect();
    let state = kept_state.unwrap_or_else(|| CallState::fresh(cfg, host.thread_multiple()));
    let node = NodeState::new(local, local_size, &reports, cfg, oversubscribed, state);
    log::debug!(
        "node layer: rank {rank} is rank {local} of {local_size} on node {} of {} ({:?}; segment: {how})",
        node.node_of[rank],
        node.topo.nodes,
        node.topo,
    );
    Ok(CommState {
        rank,
        size,
        schedules: Mutex::default(),
        node,
        leaders: Mutex::default(),
        one_sided: AtomicBool::new(true),
        memo: Mutex::default(),
        private,
        node_comm,
        mapping,
        peers,
        segment,
    })
}

/// Words of a segment name (bcast as words).
const NAME_WORDS: usize = std::mem::size_of::<SegmentName>() / 8;

fn name_words(name: &SegmentName) -> [u64; NAME_WORDS] {
    std::array::from_fn(|i| u64::from_ne_bytes(name[8 * i..8 * i + 8].try_into().unwrap()))
}

fn name_of(words: &[u64]) -> SegmentName {
    let mut name = [0u8; 64];
    name.chunks_exact_mut(8).zip(words).for_each(|(b, w)| b.copy_from_slice(&w.to_ne_bytes()));
    name
}

/// Why a rank could not have a new segment.
#[derive(Debug)]
enum Setback {
    /// Its part would exceed its budget (PCOLL_SHM_BUDGET).
    Budget,
    /// /dev/shm has no room for its part.
    NoRoom(String),
    /// Another failure, as the system said it.
    Failed(String),
}

impl Setback {
    fn of(e: std::io::Error) -> Setback {
        match e.kind() {
            std::io::ErrorKind::StorageFull => Setback::NoRoom(e.to_string()),
            _ => Setback::Failed(e.to_string()),
        }
    }

    /// What the node's ranks tell each other (0: none), the most telling
    /// cause the highest.
    fn code(&self) -> u64 {
        match self {
            Setback::Failed(_) => 1,
            Setback::Budget => 2,
            Setback::NoRoom(_) => 3,
        }
    }

    /// Another rank's setback, from its code.
    fn from_code(code: u64) -> Setback {
        match code {
            2 => Setback::Budget,
            3 => Setback::NoRoom("at another rank of the node".into()),
            _ => Setback::Failed("at another rank of the node".into()),
        }
    }
}

/// `make`s a segment if `own` bytes fit the budget, which keeps them
/// reserved if it succeeds.
fn reserved<T, M>(pool: &Mutex<Pool<T>>, own: usize, make: impl FnOnce() -> std::io::Result<M>) -> Result<M, Setback> {
    if !pool.lock().unwrap().reserve(own) {
        return Err(Setback::Budget);
    }
    make().map_err(|e| {
        pool.lock().unwrap().unreserve(own);
        Setback::of(e)
    })
}

/// Set once a process has said why a communicator runs without the node
/// layer: one warning per process, however many communicators.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Says (once per process, then at the info level) that a communicator
/// runs without a segment, why, and what to do.
fn warn_once<T>(why: &Setback, geo: Geometry, pool: &Mutex<Pool<T>>) {
    let segment = bytes_text(geo.total_bytes());
    let cause = match why {
        Setback::Budget => {
            let budget = pool.lock().unwrap().budget().map_or_else(|| "?".into(), bytes_text);
            format!(
                "a rank's part of it ({}) would exceed what the rank may reserve of /dev/shm (PCOLL_SHM_BUDGET: \
                 {budget} here), held by the segments of its other communicators",
                bytes_text(geo.block_bytes())
            )
        }
        Setback::NoRoom(e) => format!("/dev/shm has no room for its {segment} ({e})"),
        Setback::Failed(e) => format!("it could not be set up ({e})"),
    };
    let text = format!(
        "node layer: no shared segment for a communicator of {} ranks on this node: {cause}. pcoll runs its \
         point-to-point algorithms on it, and on any other communicator in that case without another word. To have \
         the node layer: give the job a larger /dev/shm (docker run --shm-size=...), free communicators no longer \
         used, raise PCOLL_SHM_BUDGET, or lower PCOLL_SHM_CHUNK, PCOLL_SHM_ALLREDUCE_CHUNK, PCOLL_SHM_ROTATE, \
         PCOLL_SHM_SPREAD, PCOLL_SHM_SLOTS or PCOLL_SHM_FRAGMENT",
        geo.ranks
    );
    if WARNED.swap(true, Ordering::Relaxed) {
        log::info!("{text}");
    } else {
        log::warn!("{text}");
    }
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

    /// A segment every rank of the node kept from an earlier communicator
    /// of the same ranks in the same order: the leader proposes those it
    /// keeps, each rank claims those it keeps too, and the node takes the
    /// first that every rank claimed (the others go back). `None` on every
    /// rank if there is none.
    fn kept_segment(&self, geo: Geometry, pool: &SegmentPool<H>) -> Result<Option<(Tag, Kept<H>)>, Code> {
        let mut words = vec![0u64; PROPOSALS * NAME_WORDS];
        if self.local == 0 {
            for (name, at) in pool.lock().unwrap().proposals(geo).iter().zip(words.chunks_exact_mut(NAME_WORDS)) {
                at.copy_from_slice(&name_words(name));
            }
        }
        self.host.bcast_words(self.comm, &mut words, 0)?;
        let names: Vec<SegmentName> = words.chunks_exact(NAME_WORDS).map(name_of).filter(|n| n[0] != 0).collect();
        if names.is_empty() {
            return Ok(None);
        }
        let claimed = pool.lock().unwrap().claim(&names, self.local, geo);
        let mine = claimed.iter().fold(0u64, |bits, (i, ..)| bits | 1 << i);
        let everywhere = self.host.allgather_words(self.comm, &[mine]).map(|all| all.iter().fold(mine, |a, b| a & b));
        let first = everywhere.as_ref().map_or(0, |&bits| bits & bits.wrapping_neg());
        let mut pool = pool.lock().unwrap();
        let mut chosen = None;
        for (i, tag, kept) in claimed {
            if 1 << i == first {
                chosen = Some((tag, kept));
            } else {
                pool.keep(tag, kept);
            }
        }
        everywhere?;
        Ok(chosen)
    }

    /// A new segment: local rank 0 creates it, the others open it, each
    /// reserving its own part within its budget; the name is unlinked once
    /// every rank has mapped it. `None` on every rank if any rank failed,
    /// and then nothing is left of it.
    fn new_segment(&self, geo: Geometry, pool: &SegmentPool<H>) -> Result<Option<(Tag, Mapping<H>)>, Code> {
        let (os, local) = (&self.os, self.local);
        let own = geo.own_range(local).1;
        let (mut name, mut mapping, mut setback): (SegmentName, _, _) = ([0; 64], None, None);
        if local == 0 {
            match reserved(pool, own, || os.create(geo)) {
                Ok((created, m)) => (name, mapping) = (created, Some(m)),
                Err(why) => setback = Some(why),
            }
        }
        let mut words = name_words(&name);
        let shared = self.host.bcast_words(self.comm, &mut words, 0);
        name = name_of(&words);
        if shared.is_ok() && local != 0 && name[0] != 0 {
            match reserved(pool, own, || os.open(&name, geo, local)) {
                Ok(m) => mapping = Some(m),
                Err(why) => setback = Some(why),
            }
        }
        let codes =
            shared.and_then(|()| self.host.allgather_words(self.comm, &[setback.as_ref().map_or(0, Setback::code)]));
        // every rank has mapped (or failed to map) the segment by now
        if local == 0 && name[0] != 0 {
            os.unlink(&name);
        }
        let worst = codes.as_ref().map_or(0, |codes| codes.iter().copied().max().unwrap_or(0));
        let mapping = match mapping {
            Some(mapping) if codes.is_ok() && worst == 0 && name[0] != 0 => mapping,
            failed => {
                if failed.is_some() {
                    pool.lock().unwrap().unreserve(own);
                }
                codes?;
                warn_once(&setback.unwrap_or_else(|| Setback::from_code(worst)), geo, pool);
                return Ok(None);
            }
        };
        os.settle(&mapping, local);
        Ok(Some((Tag { name, local, geo }, mapping)))
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
