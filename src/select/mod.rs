//! Configuration and the per-call decision: which algorithm runs a call, or
//! whether it goes to the host MPI, and why.

pub mod config;

use crate::algos::{self, Algorithm, Params};
use crate::core::call::CallDesc;
use config::{Choice, Config};
use std::fmt;

/// Why a call runs the way it does (shown in the debug log and the summary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// PCOLL_<COLL>=<algorithm>.
    Forced,
    /// PCOLL_<COLL>=mpi.
    ForcedMpi,
    /// The built-in default for this call.
    Default,
    /// The forced algorithm cannot run this call; the host MPI runs it.
    Unsupported(&'static str),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced => f.write_str("forced"),
            Reason::ForcedMpi => f.write_str("forced mpi"),
            Reason::Default => f.write_str("default"),
            Reason::Unsupported(why) => write!(f, "forced algorithm cannot run this call: {why}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Decision {
    /// `None`: the host MPI's own collective.
    pub algo: Option<(&'static Algorithm, Params)>,
    pub reason: Reason,
}

/// Decides how to run one call. Depends only on `cfg` and on fields of
/// `desc` that every rank shares, so every rank decides alike.
pub fn decide(cfg: &Config, desc: &CallDesc) -> Decision {
    match &cfg.choices[desc.coll.index()] {
        Choice::Mpi => Decision { algo: None, reason: Reason::ForcedMpi },
        Choice::Force(algo, params) => match (algo.check)(desc) {
            Ok(()) => Decision { algo: Some((algo, params.clone())), reason: Reason::Forced },
            Err(why) => Decision { algo: None, reason: Reason::Unsupported(why) },
        },
        Choice::Auto => {
            // The registry lists each collective's general-purpose algorithm
            // first; it accepts every call.
            let algo = algos::for_coll(desc.coll)
                .find(|a| (a.check)(desc).is_ok())
                .expect("every collective has an algorithm that accepts every call");
            Decision { algo: Some((algo, algo.default_params())), reason: Reason::Default }
        }
    }
}
