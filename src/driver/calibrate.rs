//! PCOLL_CALIBRATE=1: at MPI_Init, ranks 0 and 1 of MPI_COMM_WORLD time
//! pcoll's own transport and kernels (exec::calibrate says what and how
//! the times become model parameters), and world rank 0 prints the cost
//! model's parameters for this job, ready for `pcoll model --model`.

use super::comm;
use super::host::Host;
use super::runtime::say;
use super::thread::PerThread;
use crate::core::cost_model::CostModel;
use crate::core::schedule::Schedule;
use crate::core::types::{Elem, ReduceOp};
use crate::exec::calibrate::{self, burst, fit, median, ping_pong, Timings, LARGE, SMALL};
use crate::exec::kernels;
use crate::exec::{run, Buffers, NoReduction, Transport};
use std::time::Instant;

/// Samples per measurement (the median is kept).
const SAMPLES: usize = 7;

/// Seconds one run of `sched` takes on this rank.
fn timed<T: Transport>(transport: &mut T, sched: &Schedule, buf: &mut [u8]) -> f64 {
    let start = Instant::now();
    let mut bufs = Buffers { send: None, recv: buf, scratch: &mut [] };
    if run(sched, &mut bufs, transport, &NoReduction).is_err() {
        return f64::NAN;
    }
    start.elapsed().as_secs_f64()
}

/// Median seconds of `f` over [`SAMPLES`] runs after one warm-up.
fn sample(mut f: impl FnMut() -> f64) -> f64 {
    f();
    median((0..SAMPLES).map(|_| f()).collect())
}

/// Runs the calibration; collective over MPI_COMM_WORLD.
pub fn calibrate<H: Host>(host: &H, t: &PerThread<H>) {
    let Ok(state) = comm::state(host, t, host.world()) else { return };
    let (rank, size) = (state.rank, state.size);
    if rank < 2 && size >= 2 {
        let peer = 1 - rank;
        let first = rank == 0;
        let mut transport = host.transport(state, None);
        let mut buf = vec![0u8; LARGE.max(calibrate::BURST * SMALL)];
        let reps = 100;
        let small = ping_pong(peer, first, SMALL, reps);
        let large = ping_pong(peer, first, LARGE, 2);
        let burst = burst(peer, first);
        let small_one_way = sample(|| timed(&mut transport, &small, &mut buf)) / (2 * reps) as f64;
        let large_one_way = sample(|| timed(&mut transport, &large, &mut buf)) / 4.0;
        let burst = sample(|| timed(&mut transport, &burst, &mut buf));
        let vector = 1 << 20;
        let src = vec![1u8; vector];
        let mut dst = vec![0u8; vector];
        let sum = kernels::native(Elem::F64, ReduceOp::Sum).expect("f64 sum");
        let reduce = sample(|| {
            let t = Instant::now();
            (sum.inplace)(std::hint::black_box(&src), std::hint::black_box(&mut dst));
            t.elapsed().as_secs_f64()
        });
        let copy = sample(|| {
            let t = Instant::now();
            std::hint::black_box(&mut dst).copy_from_slice(std::hint::black_box(&src));
            t.elapsed().as_secs_f64()
        });
        let t = Timings { small_one_way, large_one_way, burst, reduce, copy, vector };
        if rank == 0 {
            let model = fit(&t, &CostModel::CLUSTER);
            log::info!("calibration timings: {t:?}");
            say(&format!(
                "pcoll calibration (world ranks 0 and 1, {size} ranks, {}): {model}\n\
                 pcoll calibration: predict with `pcoll model --model {model}`\n",
                host.version()
            ));
        }
    }
    // every rank takes part; the others wait for the two that measure
    let _ = host.barrier(state.private);
}
