//! Predictions: every rank's schedule of one call, priced by the cost
//! model ([`super::cost`]). What `pcoll model` prints, and what the tests
//! hold against each algorithm's closed formula.

use super::check::{self, Case, Data};
use super::cost::{price, Price};
use crate::algos::{Algorithm, Params};
use crate::core::cost_model::CostModel;
use crate::core::types::Coll;

/// Schedules bigger than this many steps in all are not priced (a ring
/// over thousands of ranks): they would take gigabytes to build.
pub const MAX_STEPS: usize = 5_000_000;

/// Why a call was not priced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unpriced {
    /// The algorithm's check refuses the call.
    Refused,
    /// The schedules would exceed [`MAX_STEPS`].
    TooLarge,
    /// The schedules do not complete (a bug the simulator sweep would show).
    Broken(String),
}

/// The call that predictions are made for: root 0, not in place, a
/// commutative operator on 8-byte elements (Reduce, Allreduce), `bytes`
/// bytes (Bcast) or `bytes` per rank in rank order (Gatherv).
pub fn case(coll: Coll, p: usize, bytes: usize) -> Case {
    let count = match coll {
        Coll::Allreduce | Coll::Reduce => bytes / 8,
        Coll::Bcast | Coll::Gatherv => bytes,
    };
    let mut case = Case::new(coll, p, count);
    case.commutative = true;
    case.data = Data::SumU64;
    case
}

/// Prices `alg` on `case`.
pub fn predict_case(alg: &Algorithm, params: &Params, case: &Case, model: &CostModel) -> Result<Price, Unpriced> {
    // The first and last ranks' schedules first, as a sample of the size
    // of the whole.
    let descs = case.descs();
    let Some(build) = alg.schedule() else { return Err(Unpriced::Refused) };
    if (alg.check)(&descs[0]).is_err() {
        return Err(Unpriced::Refused);
    }
    let sample = [0, case.size - 1]
        .iter()
        .map(|&r| build(&descs[r], params, case.layout_at(r, alg.layout_everywhere)).steps.len())
        .max()
        .unwrap_or(0);
    if sample.saturating_mul(case.size) > MAX_STEPS {
        return Err(Unpriced::TooLarge);
    }
    let schedules = match check::schedules(alg, params, case) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(Unpriced::Refused),
        Err(e) => return Err(Unpriced::Broken(e.to_string())),
    };
    price(&schedules, model).map_err(|e| Unpriced::Broken(e.to_string()))
}

/// Prices `alg` with `params` for `p` ranks and `bytes` (see [`case`]).
pub fn predict(alg: &Algorithm, params: &Params, p: usize, bytes: usize, model: &CostModel) -> Result<Price, Unpriced> {
    predict_case(alg, params, &case(alg.coll, p, bytes), model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algos;

    fn alg(coll: Coll, name: &str) -> &'static Algorithm {
        algos::find(coll, name).unwrap()
    }

    /// The three terms of a price: messages, bytes, bytes reduced.
    fn terms(a: &Algorithm, p: usize, bytes: usize) -> (f64, f64, f64) {
        let params = a.default_params();
        let only = |alpha, beta, gamma| {
            let m = CostModel { alpha, overhead: 0.0, beta, gamma, delta: 0.0, eager: 0 };
            predict(a, &params, p, bytes, &m).unwrap().time
        };
        (only(1.0, 0.0, 0.0), only(0.0, 1.0, 0.0), only(0.0, 0.0, 1.0))
    }

    fn log2(p: usize) -> f64 {
        (p as f64).log2()
    }

    #[test]
    fn rabenseifner_power_of_two_matches_its_formula() {
        // 2 log p α + 2 (p-1)/p n β + (p-1)/p n γ.
        let n = 1 << 16;
        for p in [2, 4, 8, 64, 512] {
            let (a, b, g) = terms(alg(Coll::Allreduce, "rabenseifner"), p, n);
            let f = (p - 1) as f64 / p as f64 * n as f64;
            assert_eq!((a, b, g), (2.0 * log2(p), 2.0 * f, f), "p={p}");
            let (a, b, g) = terms(alg(Coll::Reduce, "rabenseifner"), p, n);
            assert_eq!((a, b, g), (2.0 * log2(p), 2.0 * f, f), "reduce p={p}");
        }
    }

    #[test]
    fn ring_matches_its_formula() {
        // 2(p-1) α + 2 (p-1)/p n β + (p-1)/p n γ, for any p.
        let n = 8 * 3 * 5 * 7 * 64;
        for p in [2, 3, 5, 7, 8] {
            let f = (p - 1) as f64 / p as f64 * n as f64;
            let (a, b, g) = terms(alg(Coll::Allreduce, "ring"), p, n);
            assert_eq!(a, 2.0 * (p - 1) as f64, "p={p}");
            assert!((b - 2.0 * f).abs() < 1e-6 && (g - f).abs() < 1e-6, "p={p}: {b} {g}");
        }
    }

    #[test]
    fn recursive_doubling_and_binomial_match_their_formulas() {
        let n = 4096;
        for p in [2, 16, 256] {
            let l = log2(p);
            assert_eq!(terms(alg(Coll::Allreduce, "recursive_doubling"), p, n), (l, l * n as f64, l * n as f64));
            let (a, b, _) = terms(alg(Coll::Bcast, "binomial"), p, n);
            assert_eq!((a, b), (l, l * n as f64), "bcast p={p}");
        }
        // The linear gather serialises p-1 blocks at the root.
        let (a, b, _) = terms(alg(Coll::Gatherv, "linear"), 64, n);
        assert_eq!((a, b), (1.0, 63.0 * n as f64));
    }

    #[test]
    fn non_power_of_two_schemes_match_their_formulas() {
        // Critical-path bytes per vector byte: fold 2 + 2 (N-1)/N, split
        // 3 - 2/N for r even, 3.5 - 2/N for r odd.
        let n = 3 << 16;
        for p in [3, 5, 6, 7, 12, 100, 1000] {
            let big_n = crate::core::pattern::pof2_floor(p) as f64;
            let r = p - big_n as usize;
            let (_, fold, _) = terms(alg(Coll::Allreduce, "rabenseifner_fold"), p, n);
            let (_, split, _) = terms(alg(Coll::Allreduce, "rabenseifner"), p, n);
            let (fold, split) = (fold / n as f64, split / n as f64);
            let want_split = 3.0 - 2.0 / big_n + if r % 2 == 1 { 0.5 } else { 0.0 };
            assert!((fold - (4.0 - 2.0 / big_n)).abs() < 1e-3, "p={p}: fold {fold}");
            assert!((split - want_split).abs() < 1e-3, "p={p}: split {split}, want {want_split}");
            assert!(split < fold, "p={p}");
        }
    }
}
