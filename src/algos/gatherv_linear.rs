//! Linear Gatherv: every rank sends its block straight to the root, which
//! posts one receive per non-empty block directly into its place.
//!
//! Trace, p = 4, root 0: step 1: 1→0, 2→0, 3→0 (all at once); the root
//! copies its own block unless MPI_IN_PLACE.
//!
//! Limitations: the root holds p-1 concurrent transfers (the hot spot seed
//! 001 removes with a tree). Memory: none. Cost: (p-1) α + (Σ n_i) β at the
//! root. Seed: the baseline of seed 001.

use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, _: &Params, layout: &GatherLayout) -> Schedule {
    let mut b = Builder::new();
    if desc.is_root() {
        for (peer, &(off, len)) in layout.blocks.iter().enumerate() {
            let place = Region::new(BufId::Recv, off, len);
            if peer != desc.root {
                b.recv(peer, place);
            } else if !desc.in_place {
                b.copy(Region::new(BufId::Send, 0, desc.bytes), Region { len: desc.bytes, ..place });
            }
        }
    } else {
        b.send(desc.root, Region::new(BufId::Send, 0, desc.bytes));
    }
    b.finish()
}
