//! Bringing a rank's own small buffers into its cache before it waits.
//!
//! A rank that must wait for its peers before it touches its buffers (a
//! Reduce root folding into its receive buffer, a Bcast reader copying
//! out) would otherwise take their cache misses only after the wait, in
//! series with it. Applications often pass buffers that are no longer in
//! cache (as the benchmark does); a cold line costs 100-200 ns (a TLB
//! walk, then memory). Prefetching before the wait overlaps those misses
//! with it, as far as the wait is long enough to hide them: the
//! prefetches still in flight when the wait ends queue ahead of the
//! loads that follow.
//!
//! Measured (2 ranks, the benchmark's cold rotating buffers, 3 runs each,
//! before -> after): MPICH host, Reduce of 8 B 0.51-0.57 -> 0.38-0.47 us,
//! 512 B 0.67-0.77 -> 0.48-0.56 us, 16 KiB 3.9-4.5 -> 3.5 us; Bcast of 2
//! KiB 0.84-0.88 -> 0.63-0.64 us, 8 KiB 2.0 -> 1.8 us; Open MPI host,
//! Allreduce of 512 B 0.76-0.90 -> 0.55-0.62 us. Where the rank has work
//! of its own before or after the wait, it lost: an Allreduce prefetching
//! the send buffer its copy-in reads at once (4 KiB: 10% slower), or 16
//! KiB of receive buffer while its peers' copies end with its own (3%); a
//! Gatherv root prefetching the others' places before copying its own
//! block (8 KiB: 2.4 -> 2.8 us). Gatherv has none.
//!
//! Larger buffers are left to the hardware prefetchers, which follow a
//! stream of misses on their own once the copy runs.

/// For a wait on a peer's copy of the same data (a Reduce root, a Bcast
/// reader): buffers up to this many bytes are prefetched.
pub const LONG_WAIT: usize = 16 << 10;
/// For a wait that ends with this rank's own copy (the peers copy at the
/// same time, an Allreduce).
pub const SHORT_WAIT: usize = 4 << 10;

/// Asks for the cache lines of `bytes`, if at most `up_to` bytes, to be
/// brought into this core's cache. A hint: no effect on what the program
/// computes, and nothing where the processor has no such instruction.
pub fn small(bytes: &[u8], up_to: usize) {
    if bytes.is_empty() || bytes.len() > up_to {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let start = bytes.as_ptr() as usize & !(LINE - 1);
        let end = bytes.as_ptr() as usize + bytes.len();
        for line in (start..end).step_by(LINE) {
            // A read hint: the lines are private to this process, so each
            // arrives exclusive and a later store to it needs no transfer.
            // SAFETY: a prefetch never faults and changes nothing the
            // program can observe, whatever the address; SSE is part of
            // x86-64.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
        }
    }
}
