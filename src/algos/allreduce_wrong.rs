//! A deliberately wrong Allreduce, registered only with the cargo feature
//! `test-wrong-algorithm` (never in a released library), so that the tests
//! can check that PCOLL_VERIFY catches a wrong result and names it
//! precisely: recursive doubling, after which the last rank overwrites the
//! last element of its result with the first one.
//!
//! Trace, p = 2, vector (a, b, c): both ranks compute the sums (A, B, C);
//! rank 1 then holds (A, B, A): element 2 at rank 1 is wrong.
//!
//! Limitations: vectors of one element come out right (there is nothing
//! to copy from). Memory and cost: those of recursive doubling, plus one
//! element copied. Seed: none (a test fixture).

use super::allreduce_recursive_doubling;
use crate::algos::Params;
use crate::core::call::{CallDesc, GatherLayout};
use crate::core::schedule::{BufId, Builder, Region, Schedule};

pub(super) fn build(desc: &CallDesc, params: &Params, layout: &GatherLayout) -> Schedule {
    let mut sched = allreduce_recursive_doubling::build(desc, params, layout);
    let (n, unit) = (desc.bytes, desc.unit);
    if desc.rank == desc.size - 1 && n >= 2 * unit {
        let mut b = Builder::new();
        b.copy(Region::new(BufId::Recv, 0, unit), Region::new(BufId::Recv, n - unit, unit));
        sched.steps.extend(b.finish().steps);
    }
    sched
}
