//! Predictions for a call across nodes at one rank per node, what
//! `scripts/bench.sh --cluster` measures beside them (`pcoll predict`).
//!
//! At one rank per node the node stages of the compositions have nothing
//! to combine or share, and the model has no cost for them anyway beyond
//! copies; so a composition is priced by its stage between the nodes:
//! - `hier` and `dpml` (whose leaders per node are at most the node's one
//!   rank) run the point-to-point algorithm the library plans between
//!   nodes ([`crate::select::multinode::plan_stages`]), priced by its
//!   schedules like any point-to-point algorithm;
//! - `salar` has no schedule (one-sided transfers), so it is priced by the
//!   formula in its module's header, per chunk of the segment's chunk
//!   area (the largest its chunk search can settle on, the fewest fences)
//!   and a fence priced as a barrier of zero-byte messages.
//! - `auto` is what the built-in rules choose for the call, priced so.

use super::model::{predict, Unpriced};
use crate::algos::{self, Algorithm, Params};
use crate::core::call::{CallDesc, Topo};
use crate::core::cost_model::CostModel;
use crate::core::types::Coll;
use crate::select::config::Config;
use crate::select::multinode::plan_stages;
use crate::select::{decide, Decision};

/// The call as every rank of `nodes` nodes of one rank each sees it
/// (8-byte elements for reductions, as [`super::model::case`] prices).
fn across(cfg: &Config, coll: Coll, nodes: usize, bytes: usize) -> CallDesc {
    let unit = if coll.is_reduction() { 8 } else { 1 };
    // A node of one rank allows zero copy (nothing to copy between ranks).
    let topo = Topo { nodes, contiguous: true, shm: true, zcopy: true, chunk: cfg.shm.chunk, one_sided: true };
    CallDesc { coll, rank: 0, size: nodes, root: 0, bytes, unit, commutative: true, in_place: false, topo }
}

/// Predicted seconds of `variant` (an algorithm's name or `auto`) for
/// `coll` of `bytes` across `nodes` nodes of one rank each.
pub fn predict_across(
    coll: Coll,
    variant: &str,
    nodes: usize,
    bytes: usize,
    model: &CostModel,
) -> Result<f64, Unpriced> {
    let cfg = Config::default();
    let desc = across(&cfg, coll, nodes, bytes);
    let (algo, params) = if variant == "auto" {
        match decide(&cfg, &desc, Some(bytes)) {
            Decision::Run(algo, params, _) => (algo, params),
            _ => return Err(Unpriced::Refused),
        }
    } else {
        let algo = algos::find(coll, variant).ok_or(Unpriced::Refused)?;
        (algo, algo.default_params())
    };
    price(&cfg, &desc, algo, &params, model)
}

fn price(cfg: &Config, desc: &CallDesc, algo: &Algorithm, params: &Params, model: &CostModel) -> Result<f64, Unpriced> {
    let (nodes, bytes) = (desc.topo.nodes, desc.bytes);
    if algo.schedule().is_some() {
        return predict(algo, params, nodes, bytes, model).map(|p| p.time);
    }
    (algo.check)(desc).map_err(|_| Unpriced::Refused)?;
    match algo.name {
        "hier" | "dpml" => {
            let plan = plan_stages(cfg, desc);
            let (between, params) = plan.between.for_bytes(bytes);
            predict(between, params, nodes, bytes, model).map(|p| p.time)
        }
        "salar" => Ok(salar(nodes, bytes, desc.topo.chunk, model)),
        // A node algorithm: it cannot run across nodes.
        _ => Err(Unpriced::Refused),
    }
}

/// SALaR's leader stage for `bytes` in chunks of at most `chunk` among
/// `nodes` leaders: per chunk of `m` bytes two fences, a get of every
/// other leader's block ((N-1)/N m, combined) and a put of the finished
/// block to each ((N-1)/N m), and 3 m of copies (into the window, out of
/// it, into the receive buffer); per message `alpha` and an overhead at
/// each end.
fn salar(nodes: usize, bytes: usize, chunk: usize, m: &CostModel) -> f64 {
    let n = nodes as f64;
    let message = m.alpha + 2.0 * m.overhead;
    let fence = (n.log2().ceil()) * message;
    let chunks = bytes.div_ceil(chunk).max(1) as f64;
    let share = (n - 1.0) / n * bytes as f64;
    chunks * (2.0 * fence + 2.0 * (n - 1.0) * message)
        + share * (m.beta + m.gamma)
        + share * m.beta
        + 3.0 * bytes as f64 * m.delta
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: CostModel =
        CostModel { alpha: 1e-6, overhead: 1e-7, beta: 1e-9, gamma: 1e-10, delta: 1e-10, eager: 16384 };

    #[test]
    fn compositions_cost_their_stage_between_nodes_at_one_rank_per_node() {
        for bytes in [8, 4096, 1 << 20] {
            let rd = predict_across(Coll::Allreduce, "recursive_doubling", 2, bytes, &M).unwrap();
            let rab = predict_across(Coll::Allreduce, "rabenseifner", 2, bytes, &M).unwrap();
            let hier = predict_across(Coll::Allreduce, "hier", 2, bytes, &M).unwrap();
            // the built-in rules between nodes: recursive doubling below 16 KiB
            assert_eq!(hier, if bytes < 16 << 10 { rd } else { rab }, "{bytes} B");
            assert_eq!(predict_across(Coll::Allreduce, "dpml", 2, bytes, &M).unwrap(), hier);
        }
    }

    #[test]
    fn auto_is_priced_as_the_rules_choice() {
        // across nodes: hier below 64 KiB, dpml from there
        let at = |variant, bytes| predict_across(Coll::Allreduce, variant, 2, bytes, &M).unwrap();
        assert_eq!(at("auto", 1024), at("hier", 1024));
        assert_eq!(at("auto", 1 << 20), at("dpml", 1 << 20));
        assert_eq!(at("auto", 8 << 20), at("dpml", 8 << 20));
        assert_eq!(predict_across(Coll::Bcast, "auto", 2, 8, &M), predict_across(Coll::Bcast, "hier", 2, 8, &M));
    }

    #[test]
    fn salar_is_linear_in_whole_chunks_and_refuses_node_algorithms() {
        let one = predict_across(Coll::Allreduce, "salar", 2, 64 << 10, &M).unwrap();
        let two = predict_across(Coll::Allreduce, "salar", 2, 128 << 10, &M).unwrap();
        assert!((two - 2.0 * one).abs() < 1e-12, "{one} {two}");
        // part of a chunk still pays a whole chunk's fences
        assert!(predict_across(Coll::Allreduce, "salar", 2, 8, &M).unwrap() > 4.0 * (M.alpha + 2.0 * M.overhead));
        assert_eq!(predict_across(Coll::Allreduce, "shm_flat", 2, 8, &M), Err(Unpriced::Refused));
        assert_eq!(predict_across(Coll::Allreduce, "nonesuch", 2, 8, &M), Err(Unpriced::Refused));
    }
}
