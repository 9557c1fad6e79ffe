//! Calibration of the cost model on a running job: what to time, and how
//! the timings become model parameters. The library runs the schedules
//! below between two ranks over its own transport (PCOLL_CALIBRATE=1), so
//! the parameters describe pcoll's own path, not a textbook network.
//!
//! - a ping-pong of small messages: one way = `α + o + 8 β`;
//! - a burst of small messages one way, then one reply: beyond two small
//!   one-way trips, the burst costs `o` per further message;
//! - a ping-pong of large messages: one way = `α + o + n β`;
//! - reductions and copies of a vector in the cache: `γ` and `δ`.

use crate::core::cost_model::CostModel;
use crate::core::schedule::{BufId, Builder, Region, Schedule};

/// Bytes of the small and large messages.
pub const SMALL: usize = 8;
pub const LARGE: usize = 4 << 20;
/// Messages in a burst.
pub const BURST: usize = 256;

/// `reps` round trips of `n` bytes between `me` and `peer`; `first`: this
/// rank sends first.
pub fn ping_pong(peer: usize, first: bool, n: usize, reps: usize) -> Schedule {
    let mut b = Builder::new();
    let buf = Region::new(BufId::Recv, 0, n);
    for _ in 0..reps {
        if first {
            b.send(peer, buf).end_step();
            b.recv(peer, buf).end_step();
        } else {
            b.recv(peer, buf).end_step();
            b.send(peer, buf).end_step();
        }
    }
    b.finish()
}

/// A burst of [`BURST`] small messages from the first rank, then a reply
/// of one: the burst's time is set by the per-message cost.
pub fn burst(peer: usize, first: bool) -> Schedule {
    let mut b = Builder::new();
    let slot = |i: usize| Region::new(BufId::Recv, i * SMALL, SMALL);
    if first {
        for i in 0..BURST {
            b.send(peer, slot(i));
        }
        b.end_step();
        b.recv(peer, slot(0));
    } else {
        for i in 0..BURST {
            b.recv(peer, slot(i));
        }
        b.end_step();
        b.send(peer, slot(0));
    }
    b.finish()
}

/// The measured times, in seconds (medians of repeated runs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timings {
    /// One way of a small message (half a round trip).
    pub small_one_way: f64,
    /// One way of a [`LARGE`] message.
    pub large_one_way: f64,
    /// A burst of [`BURST`] small messages and the reply.
    pub burst: f64,
    /// Reducing and copying `vector` bytes.
    pub reduce: f64,
    pub copy: f64,
    pub vector: usize,
}

/// Model parameters from timings; `eager` is kept from `base`.
pub fn fit(t: &Timings, base: &CostModel) -> CostModel {
    // One way of n bytes is α + o + n β: two sizes give β, the burst o.
    let beta = ((t.large_one_way - t.small_one_way) / (LARGE - SMALL) as f64).max(0.0);
    let per_message = (t.burst - 2.0 * t.small_one_way) / (BURST - 1) as f64;
    let overhead = (per_message - SMALL as f64 * beta).max(0.0);
    let alpha = (t.small_one_way - overhead - SMALL as f64 * beta).max(0.0);
    CostModel {
        alpha,
        overhead,
        beta,
        gamma: t.reduce / t.vector as f64,
        delta: t.copy / t.vector as f64,
        eager: base.eager,
    }
}

/// The median of a few samples.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
