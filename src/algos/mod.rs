//! The algorithms: each a pure function from a call descriptor (and its
//! parameters) to the calling rank's schedule. [`ALGORITHMS`] is the
//! registry that configuration, selection, the simulator and the test
//! runner all read, so an algorithm added here is forceable, tested and
//! listed everywhere at once.

mod allreduce_recursive_doubling;
mod allreduce_reduce_bcast;
mod bcast_binomial;
mod gatherv_linear;
mod reduce_binomial;

use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::Schedule;
use crate::core::types::Coll;

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
/// [`ParamSpec`]s.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Params(pub Vec<u64>);

/// Builds one rank's schedule. `layout` is the root's block layout for
/// Gatherv and empty otherwise.
pub type BuildFn = fn(&CallDesc, &Params, &GatherLayout) -> Schedule;

/// Whether an algorithm can run a call; the error says why not, for the log.
pub type CheckFn = fn(&CallDesc) -> Result<(), &'static str>;

pub struct Algorithm {
    pub coll: Coll,
    pub name: &'static str,
    pub summary: &'static str,
    pub params: &'static [ParamSpec],
    pub check: CheckFn,
    pub build: BuildFn,
}

impl std::fmt::Debug for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.coll, self.name)
    }
}

impl Algorithm {
    pub fn default_params(&self) -> Params {
        Params(self.params.iter().map(|p| p.default).collect())
    }
}

/// Accepts every call.
fn any_call(_: &CallDesc) -> Result<(), &'static str> {
    Ok(())
}

pub static ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        coll: Coll::Allreduce,
        name: "recursive_doubling",
        summary: "recursive doubling, extra ranks folded into pairs (log2 p full-vector exchanges)",
        params: &[],
        check: any_call,
        build: allreduce_recursive_doubling::build,
    },
    Algorithm {
        coll: Coll::Allreduce,
        name: "reduce_bcast",
        summary: "binomial reduce to rank 0, then binomial broadcast",
        params: &[],
        check: any_call,
        build: allreduce_reduce_bcast::build,
    },
    Algorithm {
        coll: Coll::Reduce,
        name: "binomial",
        summary: "binomial tree, combining in rank order",
        params: &[],
        check: any_call,
        build: reduce_binomial::build,
    },
    Algorithm {
        coll: Coll::Bcast,
        name: "binomial",
        summary: "binomial tree",
        params: &[],
        check: any_call,
        build: bcast_binomial::build,
    },
    Algorithm {
        coll: Coll::Gatherv,
        name: "linear",
        summary: "every rank sends its block straight to the root",
        params: &[],
        check: any_call,
        build: gatherv_linear::build,
    },
];

/// The registered algorithms of one collective, in registry order.
pub fn for_coll(coll: Coll) -> impl Iterator<Item = &'static Algorithm> {
    ALGORITHMS.iter().filter(move |a| a.coll == coll)
}

/// Looks an algorithm up by collective and name.
pub fn find(coll: Coll, name: &str) -> Option<&'static Algorithm> {
    for_coll(coll).find(|a| a.name == name)
}
