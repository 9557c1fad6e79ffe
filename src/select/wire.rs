//! The Gatherv root's broadcast in the conservative mode (seed 001): its
//! decision and its layout as 64-bit words, the same on every platform.

use super::{Decision, Reason, RuleSource};
use crate::algos::{Algorithm, Params, ALGORITHMS, MAX_PARAMS};
use crate::core::call::GatherLayout;

/// Words of the root's broadcast before the layout: the algorithm's
/// registry index (or `u64::MAX`: the host MPI runs it), its parameters,
/// the reason.
pub const HEADER: usize = 2 + MAX_PARAMS + 2;
const HOST: u64 = u64::MAX;
/// In place of the algorithm: the root refuses the call (its arguments
/// are invalid), every rank returns an error.
const REFUSED: u64 = u64::MAX - 1;

fn encode_reason(reason: Reason) -> [u64; 2] {
    match reason {
        Reason::Forced => [0, 0],
        Reason::ForcedMpi => [1, 0],
        Reason::Rule { source: RuleSource::Tune, line } => [2, line as u64],
        Reason::Rule { source: RuleSource::TuneFile, line } => [3, line as u64],
        Reason::Rule { source: RuleSource::BuiltIn, line } => [4, line as u64],
        Reason::Fallback => [5, 0],
        Reason::Unsupported(_) => [6, 0],
        Reason::Rule { source: RuleSource::Reproducible, .. } | Reason::Replaced { .. } => {
            unreachable!("PCOLL_REPRODUCIBLE concerns reductions, not Gatherv")
        }
    }
}

fn decode_reason([kind, line]: [u64; 2]) -> Reason {
    let line = line as usize;
    match kind {
        0 => Reason::Forced,
        1 => Reason::ForcedMpi,
        2 => Reason::Rule { source: RuleSource::Tune, line },
        3 => Reason::Rule { source: RuleSource::TuneFile, line },
        4 => Reason::Rule { source: RuleSource::BuiltIn, line },
        5 => Reason::Fallback,
        _ => Reason::Unsupported("the forced algorithm cannot run this call (decided at the root)"),
    }
}

/// The root's decision and layout as words.
pub fn encode(decision: &Decision, layout: &GatherLayout) -> Vec<u64> {
    let mut words = vec![0u64; HEADER];
    let reason = match decision {
        Decision::Run(algo, params, reason) => {
            words[0] = ALGORITHMS.iter().position(|a| std::ptr::eq(a, *algo)).expect("registered") as u64;
            words[1] = params.len() as u64;
            words[2..2 + params.len()].copy_from_slice(params);
            *reason
        }
        Decision::Host(reason) => {
            words[0] = HOST;
            *reason
        }
        Decision::NeedsLayout => unreachable!("the root has the layout"),
    };
    words[HEADER - 2..].copy_from_slice(&encode_reason(reason));
    words.extend(layout.blocks.iter().flat_map(|&(off, len)| [off as u64, len as u64]));
    words
}

/// The root's refusal of a call of `size` ranks, as words of the same
/// length as a decision.
pub fn refusal(size: usize) -> Vec<u64> {
    let mut words = vec![0u64; HEADER + 2 * size];
    words[0] = REFUSED;
    words
}

/// The root's decision and layout; `None` for its refusal.
pub fn decode(words: &[u64]) -> Option<(Decision, GatherLayout)> {
    if words[0] == REFUSED {
        return None;
    }
    let reason = decode_reason([words[HEADER - 2], words[HEADER - 1]]);
    let decision = if words[0] == HOST {
        Decision::Host(reason)
    } else {
        let algo: &'static Algorithm = &ALGORITHMS[words[0] as usize];
        let n = words[1] as usize;
        Decision::Run(algo, Params::new(&words[2..2 + n]), reason)
    };
    let blocks = words[HEADER..].chunks_exact(2).map(|w| (w[0] as usize, w[1] as usize)).collect();
    Some((decision, GatherLayout { blocks }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::types::Coll;

    #[test]
    fn the_broadcast_decision_round_trips() {
        let algo = crate::algos::find(Coll::Gatherv, "binomial").unwrap();
        let layout = GatherLayout { blocks: vec![(0, 3), (9, 0), (3, 6)] };
        let reason = Reason::Rule { source: RuleSource::TuneFile, line: 7 };
        let (d, l) = decode(&encode(&Decision::Run(algo, Params::default(), reason), &layout)).expect("a decision");
        assert_eq!(l, layout);
        assert!(matches!(d, Decision::Run(a, p, r) if std::ptr::eq(a, algo) && p.is_empty() && r == reason));
        let (d, _) = decode(&encode(&Decision::Host(Reason::ForcedMpi), &layout)).expect("a decision");
        assert!(matches!(d, Decision::Host(Reason::ForcedMpi)));
        assert!(decode(&refusal(3)).is_none(), "the root's refusal");
    }
}
