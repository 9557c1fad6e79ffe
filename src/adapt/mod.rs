//! Run-time adaptation: choices that the node algorithms make by timing
//! their own calls, because nothing measured at start-up tells the better
//! method apart on a given machine (and a virtual machine's state changes
//! under a running job).
//!
//! - [`choice`]: the mechanism, a per-size-class timed choice between two
//!   alternatives (warm-up, exploring, switching);
//! - [`stores`]: which stores the copies into the segment use, chosen by
//!   the rank that bears their cost (and the readers' wishes it reads);
//! - [`chunk`]: SALaR's adaptive pipeline chunk (seed 003).
//!
//! Each algorithm that adapts keeps an [`Adaptation`] between calls (in
//! the team's memory) and asks these modules what to do.

pub mod choice;
pub mod chunk;
pub mod stores;

use stores::{LeaderChoice, ReaderChoice, ADAPT_FROM, ALLREDUCE_ADAPT_FROM};

/// What one rank's node algorithms have learnt by timing, per
/// communicator.
#[derive(Debug)]
pub struct Adaptation {
    /// Whether the algorithms adapt at all (PCOLL_SHM_ADAPT).
    pub enabled: bool,
    /// Copy bytes from which the stores are timed; the same on every rank.
    from: usize,
    /// Flat Allreduce's copy-in stores, as node rank 0 times them for
    /// every rank.
    pub allreduce_stores: LeaderChoice,
    /// Reduce's timings of the others' copy-in stores, as root.
    pub reduce_stores: ReaderChoice,
    /// Gatherv's timings of the others' copy-in stores, as root.
    pub gatherv_stores: ReaderChoice,
    /// Bcast's timings of the root's copy-in stores, as reader.
    pub bcast_stores: ReaderChoice,
}

impl Default for Adaptation {
    /// Nothing learnt yet; adapting, as PCOLL_SHM_ADAPT's default says,
    /// from [`ADAPT_FROM`] bytes (a flat Allreduce from
    /// [`ALLREDUCE_ADAPT_FROM`]).
    fn default() -> Self {
        Adaptation::new(true, ADAPT_FROM, ALLREDUCE_ADAPT_FROM)
    }
}

impl Adaptation {
    /// Nothing learnt yet; the stores of copies from `from` bytes are
    /// timed if `enabled`, those of a flat Allreduce's vectors from
    /// `allreduce_from`.
    pub fn new(enabled: bool, from: usize, allreduce_from: usize) -> Adaptation {
        Adaptation {
            enabled,
            from,
            allreduce_stores: LeaderChoice::new(allreduce_from),
            reduce_stores: ReaderChoice::bounded(from),
            gatherv_stores: ReaderChoice::bounded(from),
            bcast_stores: ReaderChoice::bounded(from),
        }
    }

    /// Copy bytes from which the stores are timed.
    pub fn from(&self) -> usize {
        self.from
    }

    /// Vector bytes from which a flat Allreduce's stores are timed.
    pub fn allreduce_from(&self) -> usize {
        self.allreduce_stores.from()
    }

    /// The size class of copies of `len` bytes, as every store choice
    /// counts it.
    pub fn class(&self, len: usize) -> usize {
        choice::size_class(self.from, len)
    }

    /// The store choices settled by timing, a line each, for the log.
    pub fn summary(&self) -> Vec<String> {
        [
            ("shm_flat Allreduce copy-in", self.allreduce_stores.summary("vectors")),
            ("shm Reduce copy-in as root", self.reduce_stores.summary("vectors")),
            ("shm Gatherv copy-in as root", self.gatherv_stores.summary("blocks")),
            ("shm Bcast copy-in as reader", self.bcast_stores.summary("messages")),
        ]
        .into_iter()
        .flat_map(|(what, lines)| lines.into_iter().map(move |line| format!("{what}: {line}")))
        .collect()
    }
}

/// A team memory that holds an [`Adaptation`] (what the functions of
/// this module read and update through the team).
pub trait Adapting: AsRef<Adaptation> + AsMut<Adaptation> {}

impl<T: AsRef<Adaptation> + AsMut<Adaptation>> Adapting for T {}
