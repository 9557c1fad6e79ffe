//! The algorithms: each a pure function from a call descriptor (and its
//! parameters) to the calling rank's schedule, or a node algorithm (shared
//! memory within a node, [`node`]) or a composition across nodes
//! ([`multinode`]). [`ALGORITHMS`] is the registry that
//! configuration, selection, the simulator and the test runner all read,
//! so an algorithm added here is forceable, tested and listed everywhere
//! at once.

mod allreduce_recursive_doubling;
mod allreduce_reduce_bcast;
#[cfg(feature = "test-wrong-algorithm")]
mod allreduce_wrong;
mod bcast_binomial;
mod bcast_chain;
mod bcast_kary;
mod bcast_knomial;
mod bcast_scatter_allgather;
mod bcast_tree;
mod gatherv_binomial;
mod gatherv_linear;
pub mod multinode;
pub mod node;
mod ordered;
mod rabenseifner;
mod reduce_binomial;
pub(crate) mod reduce_tree;
mod ring;

use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::Schedule;
use crate::core::types::Coll;
use multinode::HierFn;
use node::NodeFn;
use std::sync::OnceLock;

/// One tunable parameter of an algorithm, e.g. a tree fan-out.
#[derive(Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub min: u64,
    pub max: u64,
    pub default: u64,
    pub help: &'static str,
}

/// Parameter values of one forced or selected algorithm, in the order of its
/// [`ParamSpec`]s. A plain value (no allocation): every call carries one.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Params {
    len: usize,
    values: [u64; MAX_PARAMS],
}

/// The most parameters an algorithm has.
pub const MAX_PARAMS: usize = 4;

impl Params {
    pub fn new(values: &[u64]) -> Params {
        values.iter().copied().collect()
    }
}

impl FromIterator<u64> for Params {
    fn from_iter<I: IntoIterator<Item = u64>>(values: I) -> Params {
        let mut params = Params::default();
        for value in values {
            assert!(params.len < MAX_PARAMS, "more than {MAX_PARAMS} parameters");
            params.values[params.len] = value;
            params.len += 1;
        }
        params
    }
}

impl std::ops::Deref for Params {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.values[..self.len]
    }
}

impl std::ops::DerefMut for Params {
    fn deref_mut(&mut self) -> &mut [u64] {
        &mut self.values[..self.len]
    }
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self[..].fmt(f)
    }
}

/// Builds one rank's schedule. `layout` is the root's block layout for
/// Gatherv and empty otherwise.
pub type BuildFn = fn(&CallDesc, &Params, &GatherLayout) -> Schedule;

/// Whether an algorithm can run a call; the error says why not, for the log.
pub type CheckFn = fn(&CallDesc) -> Result<(), &'static str>;

/// How an algorithm runs.
#[derive(Clone, Copy)]
pub enum Impl {
    /// A schedule of point-to-point transfers (any communicator).
    Schedule(BuildFn),
    /// Shared memory within one node.
    Node(NodeFn),
    /// Node-aware: the node layer within nodes, a schedule between them.
    Hier(HierFn),
}

impl Impl {
    /// The communicators an algorithm can run on, as `pcoll algorithms`
    /// lists it: `p2p` any, `node` those on one node, `multi-node` those
    /// spanning several (the test runner sets up node layouts by this).
    pub fn scope(&self) -> &'static str {
        match self {
            Impl::Schedule(_) => "p2p",
            Impl::Node(_) => "node",
            Impl::Hier(_) => "multi-node",
        }
    }
}

pub struct Algorithm {
    pub coll: Coll,
    pub name: &'static str,
    pub summary: &'static str,
    pub params: &'static [ParamSpec],
    pub check: CheckFn,
    pub imp: Impl,
    /// Gatherv: every rank needs the root's block layout to build its
    /// schedule (a tree forwards other ranks' blocks), not only the root.
    pub layout_everywhere: bool,
    /// Reductions: every element is combined in the canonical order
    /// `x0 ∘ (x1 ∘ (... ∘ x(p-1)))`, whatever p, the layout on nodes and
    /// the vector's length, so canonical algorithms give bitwise the same
    /// result (PCOLL_REPRODUCIBLE runs only these).
    pub canonical: bool,
    /// The seed paper it comes from ("000".."004"), if any.
    pub seed: Option<&'static str>,
    /// A node algorithm that hands hot calls to the host MPI: the schedule
    /// algorithm of the same collective it runs them with
    /// ([`node::HostWay`]).
    pub hot_by: Option<&'static str>,
    /// The hot way takes only calls that come back to back.
    pub hot_back_to_back: bool,
    /// A node or node-aware reduction that may combine zero copy: the
    /// dispatcher lends it the thread's scratch for the sub-chunks
    /// ([`node::reduction::zero_copy_scratch`]). Flat and partitioned
    /// reductions take none: lending it cost a flat Reduce of 128 B some
    /// 80 instructions a call at each rank (back to back, Open MPI host:
    /// 1.00-1.10 of the stock's speed with it, 1.10-1.18 without;
    /// docs/measurements.md).
    pub zero_copy_scratch: bool,
}

impl std::fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.coll, self.name)
    }
}

impl Algorithm {
    /// Where this algorithm is in [`ALGORITHMS`] (what a node call's head
    /// names it by: an offset, not a search, on every call).
    pub fn index(&'static self) -> usize {
        let offset = (self as *const Algorithm as usize).wrapping_sub(ALGORITHMS.as_ptr() as usize);
        offset / std::mem::size_of::<Algorithm>()
    }

    const fn base(coll: Coll, name: &'static str, summary: &'static str, imp: Impl, check: CheckFn) -> Algorithm {
        Algorithm {
            coll,
            name,
            summary,
            params: &[],
            check,
            imp,
            layout_everywhere: false,
            canonical: false,
            seed: None,
            hot_by: None,
            hot_back_to_back: false,
            zero_copy_scratch: false,
        }
    }

    /// A schedule algorithm without parameters that accepts every call.
    pub const fn new(coll: Coll, name: &'static str, summary: &'static str, build: BuildFn) -> Algorithm {
        Algorithm::base(coll, name, summary, Impl::Schedule(build), any_call)
    }

    /// A node algorithm; it runs where its check (at least "one node with
    /// a segment") accepts the call. A reduction takes the thread's
    /// scratch for zero copy unless it says otherwise
    /// ([`Algorithm::without_zero_copy`]).
    pub const fn node(coll: Coll, name: &'static str, summary: &'static str, run: NodeFn, check: CheckFn) -> Algorithm {
        Algorithm::base(coll, name, summary, Impl::Node(run), check).zero_copy_if_reduction()
    }

    /// A node-aware composition; a reduction takes the thread's scratch
    /// for its node stages' zero copy.
    pub const fn hier(coll: Coll, name: &'static str, summary: &'static str, run: HierFn) -> Algorithm {
        Algorithm::base(coll, name, summary, Impl::Hier(run), multinode::check).zero_copy_if_reduction()
    }

    const fn zero_copy_if_reduction(mut self) -> Algorithm {
        self.zero_copy_scratch = matches!(self.coll, Coll::Allreduce | Coll::Reduce);
        self
    }

    /// A node reduction that never combines zero copy: it needs no scratch.
    pub const fn without_zero_copy(mut self) -> Algorithm {
        self.zero_copy_scratch = false;
        self
    }

    /// The schedule builder, for schedule algorithms.
    pub fn schedule(&self) -> Option<BuildFn> {
        match self.imp {
            Impl::Schedule(build) => Some(build),
            Impl::Node(_) | Impl::Hier(_) => None,
        }
    }

    pub const fn with_params(mut self, params: &'static [ParamSpec]) -> Algorithm {
        assert!(params.len() <= MAX_PARAMS, "more parameters than Params holds");
        self.params = params;
        self
    }

    pub const fn with_check(mut self, check: CheckFn) -> Algorithm {
        self.check = check;
        self
    }

    pub const fn with_layout_everywhere(mut self) -> Algorithm {
        self.layout_everywhere = true;
        self
    }

    /// Names the seed paper the algorithm comes from.
    pub const fn from_seed(mut self, seed: &'static str) -> Algorithm {
        self.seed = Some(seed);
        self
    }

    /// A node algorithm whose hot calls may run the schedule algorithm
    /// `name` over the host MPI.
    pub const fn hot_runs_by(mut self, name: &'static str) -> Algorithm {
        self.hot_by = Some(name);
        self
    }

    /// [`Algorithm::hot_runs_by`], for hot calls back to back only
    /// ([`node::HostWay::back_to_back_within`]).
    pub const fn back_to_back_runs_by(mut self, name: &'static str) -> Algorithm {
        self.hot_by = Some(name);
        self.hot_back_to_back = true;
        self
    }

    /// The schedule algorithm named by [`Algorithm::hot_by`], looked up
    /// once for the registry: a node call asks on every call.
    pub fn hot_algorithm(&'static self) -> Option<&'static Algorithm> {
        static RESOLVED: OnceLock<Vec<Option<&'static Algorithm>>> = OnceLock::new();
        let resolved = RESOLVED.get_or_init(|| {
            let resolve = |a: &Algorithm| {
                let name = a.hot_by?;
                let found = find(a.coll, name).filter(|b| b.schedule().is_some());
                Some(found.unwrap_or_else(|| {
                    panic!("{a:?} hands hot calls to {name}, not a schedule algorithm of its collective")
                }))
            };
            ALGORITHMS.iter().map(resolve).collect()
        });
        resolved[self.index()]
    }

    /// Marks a reduction that combines in the canonical order.
    pub const fn canonical(mut self) -> Algorithm {
        self.canonical = true;
        self
    }

    pub fn default_params(&self) -> Params {
        self.params.iter().map(|p| p.default).collect()
    }
}

/// Accepts every call.
fn any_call(_: &CallDesc) -> Result<(), &'static str> {
    Ok(())
}

/// The fan-out of seed 000's trees.
const TREE_K: &[ParamSpec] =
    &[ParamSpec { name: "k", min: 2, max: 8, default: 4, help: "fan-out: children per rank (seed 000: 2, 4, 8)" }];

pub static ALGORITHMS: &[Algorithm] = &[
    Algorithm::new(
        Coll::Allreduce,
        "recursive_doubling",
        "recursive doubling, extra ranks folded into pairs (log2 p full-vector exchanges)",
        allreduce_recursive_doubling::build,
    ),
    Algorithm::new(
        Coll::Allreduce,
        "reduce_bcast",
        "binomial reduce to rank 0, then binomial broadcast",
        allreduce_reduce_bcast::build,
    ),
    Algorithm::new(
        Coll::Allreduce,
        "rabenseifner",
        "recursive halving + doubling; extra ranks by half-vector exchanges",
        rabenseifner::allreduce,
    )
    .from_seed("004"),
    Algorithm::new(
        Coll::Allreduce,
        "rabenseifner_fold",
        "recursive halving + doubling; extra ranks folded in whole (prior art)",
        rabenseifner::allreduce_fold,
    ),
    Algorithm::new(
        Coll::Allreduce,
        "ring",
        "ring reduce-scatter + ring allgather (commutative operators)",
        ring::allreduce,
    )
    .with_check(ring::check),
    Algorithm::new(
        Coll::Allreduce,
        "knomial",
        "k-nomial tree reduce, then broadcast down the same tree",
        reduce_tree::knomial_allreduce,
    )
    .from_seed("000")
    .with_params(TREE_K),
    Algorithm::new(
        Coll::Allreduce,
        "kary",
        "k-ary tree reduce, then broadcast down the same tree",
        reduce_tree::kary_allreduce,
    )
    .from_seed("000")
    .with_params(TREE_K),
    Algorithm::new(
        Coll::Allreduce,
        "ordered",
        "direct-exchange reduce-scatter and allgather, combining in the canonical order (PCOLL_REPRODUCIBLE)",
        ordered::allreduce,
    )
    .canonical(),
    #[cfg(feature = "test-wrong-algorithm")]
    Algorithm::new(
        Coll::Allreduce,
        "wrong_for_tests",
        "TEST FIXTURE: recursive doubling, then the last rank corrupts its last element (PCOLL_VERIFY's test)",
        allreduce_wrong::build,
    ),
    Algorithm::new(Coll::Reduce, "binomial", "binomial tree, combining in rank order", reduce_binomial::build),
    Algorithm::new(
        Coll::Reduce,
        "knomial",
        "k-nomial tree, each rank fires when its children are in",
        reduce_tree::knomial_reduce,
    )
    .from_seed("000")
    .with_params(TREE_K),
    Algorithm::new(
        Coll::Reduce,
        "kary",
        "k-ary tree, each rank fires when its children are in",
        reduce_tree::kary_reduce,
    )
    .from_seed("000")
    .with_params(TREE_K),
    Algorithm::new(
        Coll::Reduce,
        "rabenseifner",
        "recursive halving + binomial gather; extra ranks by half-vector exchanges",
        rabenseifner::reduce,
    )
    .from_seed("004"),
    Algorithm::new(
        Coll::Reduce,
        "rabenseifner_fold",
        "recursive halving + binomial gather; extra ranks folded in whole (prior art)",
        rabenseifner::reduce_fold,
    ),
    Algorithm::new(
        Coll::Reduce,
        "ring",
        "ring reduce-scatter, pieces sent to the root (commutative operators)",
        ring::reduce,
    )
    .with_check(ring::check),
    Algorithm::new(
        Coll::Reduce,
        "ordered",
        "direct-exchange reduce-scatter, slices to the root, combining in the canonical order (PCOLL_REPRODUCIBLE)",
        ordered::reduce,
    )
    .canonical(),
    Algorithm::new(Coll::Bcast, "binomial", "binomial tree", bcast_binomial::build),
    Algorithm::new(
        Coll::Bcast,
        "knomial",
        "k-nomial tree, each rank forwards as soon as its data is in",
        bcast_knomial::build,
    )
    .with_params(bcast_knomial::PARAMS),
    Algorithm::new(Coll::Bcast, "kary", "k-ary tree, pipelined in segments", bcast_kary::build)
        .with_params(bcast_kary::PARAMS),
    Algorithm::new(Coll::Bcast, "chain", "pipelined chain from the root (large messages)", bcast_chain::build)
        .with_params(bcast_chain::PARAMS),
    Algorithm::new(
        Coll::Bcast,
        "scatter_allgather",
        "binomial scatter, then recursive-doubling allgather (large messages)",
        bcast_scatter_allgather::build_doubling,
    ),
    Algorithm::new(
        Coll::Bcast,
        "scatter_allgather_ring",
        "binomial scatter, then ring allgather (large messages, any p)",
        bcast_scatter_allgather::build_ring,
    ),
    Algorithm::new(Coll::Gatherv, "linear", "every rank sends its block straight to the root", gatherv_linear::build),
    Algorithm::new(
        Coll::Gatherv,
        "binomial",
        "binomial tree, exact temporary buffers, message chains at the root (needs the layout everywhere)",
        gatherv_binomial::build,
    )
    .from_seed("001")
    .with_layout_everywhere(),
    Algorithm::node(
        Coll::Allreduce,
        "shm_flat",
        "one node: every rank combines every rank's vector from shared memory (small vectors)",
        node::reduce_flat::run_flat,
        node::on_one_node,
    )
    .without_zero_copy()
    .canonical(),
    Algorithm::node(
        Coll::Allreduce,
        "shm_flat_zcopy",
        "one node: shm_flat, or shm_zcopy where every rank reduces from its last call's input buffer (hot)",
        node::reduce_flat_zcopy::run,
        node::on_one_node,
    )
    .canonical(),
    Algorithm::node(
        Coll::Allreduce,
        "shm_flat_ring",
        "one node: shm_flat_zcopy, but runs of calls where every rank reduces from its last call's input buffer (hot) go by the ring over the host MPI (commutative operators)",
        node::reduce_flat_zcopy::run,
        node::on_one_node,
    )
    .hot_runs_by("ring"),
    Algorithm::node(
        Coll::Allreduce,
        "shm_window",
        "one node, 2 ranks: halves combined and handed over through the window, each rank storing into lines its cache holds (else shm_flat_zcopy)",
        node::reduce_window::run,
        node::on_one_node,
    )
    .canonical(),
    Algorithm::node(
        Coll::Allreduce,
        "shm_partition",
        "one node: each rank combines 1/p of the vectors in shared memory",
        node::reduce_partition::run_partition,
        node::on_one_node,
    )
    .without_zero_copy()
    .from_seed("003")
    .canonical(),
    Algorithm::node(
        Coll::Allreduce,
        "shm_zcopy",
        "one node: each rank combines 1/p read straight from its peers' buffers (large vectors)",
        node::reduce_zcopy::run_zero_copy,
        node::on_one_node_zero_copy,
    )
    .canonical(),
    Algorithm::node(
        Coll::Reduce,
        "shm_flat",
        "one node: the root combines every rank's vector from shared memory (small vectors)",
        node::reduce_flat::run_flat,
        node::on_one_node,
    )
    .without_zero_copy()
    .canonical(),
    Algorithm::node(
        Coll::Reduce,
        "shm_flat_zcopy",
        "one node: shm_flat, or shm_zcopy where every rank reduces from its last call's input buffer (hot)",
        node::reduce_flat_zcopy::run,
        node::on_one_node,
    )
    .canonical(),
    Algorithm::node(
        Coll::Reduce,
        "shm_flat_binomial",
        "one node: shm_flat_zcopy, but runs of calls that every rank starts back to back with its last one (PCOLL_SHM_BACK_TO_BACK) on its last call's input buffer (hot) go by the binomial tree over the host MPI",
        node::reduce_flat_zcopy::run,
        node::on_one_node,
    )
    .back_to_back_runs_by("binomial"),
    Algorithm::node(
        Coll::Reduce,
        "shm_window",
        "one node, 2 ranks: up to 512 KiB, the non-root's vector through the window where it did not write the last window call (roots alternating), the root combining each piece as it lands (else shm_flat_zcopy)",
        node::reduce_window::run,
        node::on_one_node,
    )
    .canonical(),
    Algorithm::node(
        Coll::Reduce,
        "shm_window_binomial",
        "one node, 2 ranks: shm_window, else shm_flat_binomial",
        node::reduce_window::run,
        node::on_one_node,
    )
    .back_to_back_runs_by("binomial"),
    Algorithm::node(
        Coll::Reduce,
        "shm_partition",
        "one node: each rank combines 1/p of the vectors in shared memory",
        node::reduce_partition::run_partition,
        node::on_one_node,
    )
    .without_zero_copy()
    .from_seed("003")
    .canonical(),
    Algorithm::node(
        Coll::Reduce,
        "shm_zcopy",
        "one node: each rank combines 1/p read straight from its peers' buffers (large vectors)",
        node::reduce_zcopy::run_zero_copy,
        node::on_one_node_zero_copy,
    )
    .canonical(),
    Algorithm::node(
        Coll::Bcast,
        "shm_pipeline",
        "one node: through two shared chunks, copy-in and copy-out overlapped; at 2 ranks hot messages from 2 KiB whose root did not write the last window call through the window the hot Bcasts and Gathervs share",
        node::bcast_pipeline::run_pipeline,
        node::on_one_node,
    ),
    Algorithm::node(
        Coll::Bcast,
        "shm_queue",
        "one node: a queue of fragments, sets and notification tree (PCOLL_SHM_*)",
        node::bcast_queue::run_queue,
        node::on_one_node,
    )
    .from_seed("002"),
    Algorithm::node(
        Coll::Bcast,
        "shm_queue_zcopy",
        "one node: the queue, or where the root sends from its last Bcast's buffer (hot), zero copy or the queue (the window all roots share, where the root did not write the last window call) as its timings favour",
        node::bcast_queue_zcopy::run,
        node::on_one_node_zero_copy,
    )
    .from_seed("002"),
    Algorithm::node(
        Coll::Bcast,
        "shm_zcopy",
        "one node: straight from the root's buffer, root and readers sharing the copying",
        node::bcast_zcopy::run_zero_copy,
        node::on_one_node_zero_copy,
    ),
    Algorithm::node(
        Coll::Bcast,
        "shm",
        "one node: zero copy, or where the root's timings favour them the queue (for hot messages up to 512 KiB whose root did not write the last window call, the window all roots share), from 256 KiB (PCOLL_SHM_BCAST_TIMED) the pipeline",
        node::bcast_timed::run_timed,
        node::on_one_node_zero_copy,
    ),
    Algorithm::node(
        Coll::Bcast,
        "shm_binomial",
        "one node: shm, but runs of calls whose root starts them back to back with its last one (PCOLL_SHM_BACK_TO_BACK) from its last call's buffer (hot) go by the binomial tree over the host MPI",
        node::bcast_host_runs::run_shm,
        node::on_one_node_zero_copy,
    )
    .back_to_back_runs_by("binomial"),
    Algorithm::node(
        Coll::Bcast,
        "shm_queue_binomial",
        "one node: shm_queue, but runs of calls whose root starts them back to back with its last one (PCOLL_SHM_BACK_TO_BACK) from its last call's buffer (hot) go by the binomial tree over the host MPI",
        node::bcast_host_runs::run_queue,
        node::on_one_node,
    )
    .back_to_back_runs_by("binomial")
    .from_seed("002"),
    Algorithm::node(
        Coll::Gatherv,
        "shm",
        "one node: copy-in for small blocks; large ones by zero copy or through their owners' areas, as the root's timings favour; at 2 ranks hot blocks of 4-256 KiB whose owner did not write the last window call through the window the Bcasts share",
        node::gatherv_shm::run_auto,
        node::on_one_node,
    ),
    Algorithm::node(
        Coll::Gatherv,
        "shm_copy",
        "one node: blocks through shared memory, the root copying them into place",
        node::gatherv_shm::run_copy_in,
        node::on_one_node,
    ),
    Algorithm::node(
        Coll::Gatherv,
        "shm_zcopy",
        "one node: every rank writes its block straight into the root's buffer",
        node::gatherv_shm::run_zero_copy,
        node::on_one_node_gatherv_zero_copy,
    ),
    Algorithm::hier(
        Coll::Allreduce,
        "hier",
        "several nodes: reduce in each node, allreduce between nodes, broadcast in each node",
        multinode::allreduce_hier::run,
    ),
    Algorithm::hier(
        Coll::Allreduce,
        "dpml",
        "several nodes: l leaders per node, each reducing 1/l of the vector and allreducing it between nodes",
        multinode::allreduce_dpml::run,
    )
    .from_seed("003")
    .with_params(multinode::allreduce_dpml::PARAMS),
    Algorithm::hier(
        Coll::Allreduce,
        "salar",
        "several nodes: chunks pipelined through node reduction, one-sided exchange between leaders, node broadcast; \
         adaptive chunk size",
        multinode::allreduce_salar::run,
    )
    .from_seed("003")
    .with_params(multinode::allreduce_salar::PARAMS)
    .with_check(multinode::allreduce_salar::check),
    Algorithm::hier(
        Coll::Reduce,
        "hier",
        "several nodes: reduce in each node, then between the nodes to the root",
        multinode::reduce_hier::run,
    ),
    Algorithm::hier(
        Coll::Bcast,
        "hier",
        "several nodes: broadcast between nodes, then in each node",
        multinode::bcast_hier::run,
    ),
    Algorithm::hier(
        Coll::Gatherv,
        "hier",
        "several nodes: gather each node's blocks at one rank, which sends them to the root in one message",
        multinode::gatherv_hier::run,
    ),
];

/// The registered algorithms of one collective, in registry order.
pub fn for_coll(coll: Coll) -> impl Iterator<Item = &'static Algorithm> {
    ALGORITHMS.iter().filter(move |a| a.coll == coll)
}

/// Looks an algorithm up by collective and name.
pub fn find(coll: Coll, name: &str) -> Option<&'static Algorithm> {
    for_coll(coll).find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_calls_go_to_a_schedule_algorithm_of_the_same_collective() {
        for algo in ALGORITHMS {
            let hot = algo.hot_algorithm();
            assert_eq!(hot.is_some(), algo.hot_by.is_some(), "{algo:?}");
            if let Some(hot) = hot {
                assert!(matches!(algo.imp, Impl::Node(_)), "{algo:?}: only node algorithms have a hot way");
                assert_eq!((hot.coll, Some(hot.name)), (algo.coll, algo.hot_by));
            }
        }
    }

    #[test]
    fn the_wrong_algorithm_exists_only_with_its_feature() {
        assert_eq!(find(Coll::Allreduce, "wrong_for_tests").is_some(), cfg!(feature = "test-wrong-algorithm"));
    }
}
