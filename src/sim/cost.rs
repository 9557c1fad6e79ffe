//! The cost model: prices every rank's schedule together under an
//! alpha-beta-gamma model (its parameters, [`CostModel`], are in
//! [`crate::core::cost_model`]), so that algorithms can be compared at scales
//! this machine cannot run (p up to 32768) and checked against their
//! closed formulas.
//!
//! It is a discrete-event simulation of the schedules themselves, without
//! data. Each rank runs its steps in order; a step starts when the previous
//! one (and its local operations) has finished. A message of `n` bytes is a
//! *transfer* that becomes ready when its send is posted (eager messages,
//! up to [`CostModel::eager`] bytes) or when both its send and its receive
//! are posted (rendezvous). Each rank has an out-port and an in-port that
//! carry one transfer at a time: a transfer starts at
//! `max(ready, sender's out-port free, receiver's in-port free)`, holds both
//! ports for `n β`, and arrives `α` later. Ports are granted in order of
//! readiness. A send is complete when its bytes have left; a receive when
//! they have arrived and it is posted. A per-message overhead `o` (LogP's
//! software cost of sending or receiving one message) holds both ports
//! too: it is what makes a root that takes in p-1 small messages slow.
//!
//! A step ends when its transfers are complete; then its local operations
//! cost `n γ` per reduced byte and `n δ` per copied byte. With ports, a
//! linear gather costs `(p-1) n β` at the root rather than one `α + n β`,
//! and a flat fan-out is serialised at its source, as on real networks (the
//! single-port model).
//!
//! Pricing with `α = γ = δ = 0, β = 1` gives the bytes on the critical path
//! (the bandwidth term); [`Price`] also reports total traffic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;

use crate::core::cost_model::CostModel;
use crate::core::schedule::{Local, Schedule};

/// What a call costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Price {
    /// When the last rank finishes (the call's duration).
    pub time: f64,
    /// When each rank finishes.
    pub finish: Vec<f64>,
    /// Bytes sent, summed over ranks.
    pub bytes: usize,
    /// Messages sent, summed over ranks.
    pub messages: usize,
}

/// A schedule set that cannot complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriceError {
    /// Some ranks wait for ever; the first few (rank, step).
    Deadlock(Vec<(usize, usize)>),
    /// A message whose length differs from the receive that matches it.
    Mismatched { src: usize, dst: usize, sent: usize, expected: usize },
    /// Messages nobody receives.
    Unmatched(usize),
}

impl fmt::Display for PriceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PriceError::Deadlock(who) => write!(f, "deadlock: (rank, step) {who:?} wait for ever"),
            PriceError::Mismatched { src, dst, sent, expected } => {
                write!(f, "message {src}→{dst} of {sent} bytes matches a receive of {expected}")
            }
            PriceError::Unmatched(n) => write!(f, "{n} message(s) never received"),
        }
    }
}

impl std::error::Error for PriceError {}

/// A time-ordered event. At equal times steps start first (they post
/// transfers that may be ready at once), then transfers go in the order
/// their sends were posted, as a sender's port queues them.
#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    /// 0 for steps, 1 for transfers.
    class: u8,
    /// Order within the class: a counter for steps, the message number
    /// (posting order) for transfers.
    seq: u64,
    kind: Kind,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A rank starts its next step.
    Step(usize),
    /// Transfer `id` may start.
    Ready(usize),
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, for the max-heap: earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.total_cmp(&self.time).then(other.class.cmp(&self.class)).then(other.seq.cmp(&self.seq))
    }
}

struct Msg {
    src: usize,
    dst: usize,
    len: usize,
    eager: bool,
    sent_at: f64,
    /// When the matching receive was posted, once it is.
    recv_at: Option<f64>,
    /// When the bytes are in, once the transfer has been scheduled.
    arrival: Option<f64>,
}

#[derive(Default, Clone)]
struct RankState {
    step: usize,
    out_free: f64,
    in_free: f64,
    /// Transfers of the current step not yet complete, and the latest
    /// completion time so far.
    left: usize,
    step_end: f64,
    /// The current step is being posted: completions wait for the end of
    /// posting to finish the step (once).
    posting: bool,
    done: bool,
}

/// Prices `schedules[r]` run by rank `r`, all starting at time 0.
pub fn price(schedules: &[Schedule], model: &CostModel) -> Result<Price, PriceError> {
    Pricer::new(schedules, model).run()
}

struct Pricer<'a> {
    schedules: &'a [Schedule],
    model: &'a CostModel,
    ranks: Vec<RankState>,
    msgs: Vec<Msg>,
    /// Per rank, as an MPI matching engine keeps them: messages to it not
    /// yet matched (ids, in posting order), and its receives not yet
    /// matched (source, length, time posted). Matching takes the first
    /// entry of the peer, so per pair it is first in, first out; the
    /// queues are short (the transfers of a step or two).
    unexpected: Vec<Vec<usize>>,
    posted: Vec<Vec<(usize, usize, f64)>>,
    events: BinaryHeap<Event>,
    seq: u64,
    price: Price,
}

impl<'a> Pricer<'a> {
    fn new(schedules: &'a [Schedule], model: &'a CostModel) -> Self {
        let p = schedules.len();
        Pricer {
            schedules,
            model,
            ranks: vec![RankState::default(); p],
            msgs: Vec::new(),
            unexpected: vec![Vec::new(); p],
            posted: vec![Vec::new(); p],
            events: BinaryHeap::new(),
            seq: 0,
            price: Price { finish: vec![0.0; p], ..Price::default() },
        }
    }

    fn push(&mut self, time: f64, kind: Kind) {
        let (class, seq) = match kind {
            Kind::Step(_) => {
                self.seq += 1;
                (0, self.seq)
            }
            Kind::Ready(id) => (1, id as u64),
        };
        self.events.push(Event { time, class, seq, kind });
    }

    fn run(mut self) -> Result<Price, PriceError> {
        for rank in 0..self.schedules.len() {
            self.push(0.0, Kind::Step(rank));
        }
        while let Some(Event { time, kind, .. }) = self.events.pop() {
            match kind {
                Kind::Step(rank) => self.start_step(rank, time)?,
                Kind::Ready(id) => self.transfer(id, time),
            }
        }
        let stuck: Vec<(usize, usize)> =
            self.ranks.iter().enumerate().filter(|(_, r)| !r.done).map(|(i, r)| (i, r.step)).take(8).collect();
        if !stuck.is_empty() {
            return Err(PriceError::Deadlock(stuck));
        }
        let unmatched: usize = self.unexpected.iter().map(Vec::len).sum();
        if unmatched > 0 {
            return Err(PriceError::Unmatched(unmatched));
        }
        self.price.time = self.price.finish.iter().copied().fold(0.0, f64::max);
        Ok(self.price)
    }

    fn start_step(&mut self, rank: usize, now: f64) -> Result<(), PriceError> {
        let Some(step) = self.schedules[rank].steps.get(self.ranks[rank].step) else {
            self.ranks[rank].done = true;
            self.price.finish[rank] = now;
            return Ok(());
        };
        let st = &mut self.ranks[rank];
        st.left = step.sends.len() + step.recvs.len();
        st.step_end = now;
        st.posting = true;
        for x in &step.sends {
            let (dst, len) = (x.peer, x.region.len);
            let id = self.msgs.len();
            let eager = len <= self.model.eager;
            self.msgs.push(Msg { src: rank, dst, len, eager, sent_at: now, recv_at: None, arrival: None });
            self.price.bytes += len;
            self.price.messages += 1;
            if eager {
                self.push(now, Kind::Ready(id));
            }
            let queue = &mut self.posted[dst];
            match queue.iter().position(|&(src, _, _)| src == rank) {
                Some(i) => {
                    let (_, expected, at) = queue.remove(i);
                    self.matched(id, expected, at)?
                }
                None => self.unexpected[dst].push(id),
            }
        }
        for x in &step.recvs {
            let msgs = &self.msgs;
            let queue = &mut self.unexpected[rank];
            match queue.iter().position(|&id| msgs[id].src == x.peer) {
                Some(i) => {
                    let id = queue.remove(i);
                    self.matched(id, x.region.len, now)?
                }
                None => self.posted[rank].push((x.peer, x.region.len, now)),
            }
        }
        self.ranks[rank].posting = false;
        self.maybe_finish_step(rank);
        Ok(())
    }

    /// Message `id` meets its receive, of `expected` bytes, posted `at`.
    fn matched(&mut self, id: usize, expected: usize, at: f64) -> Result<(), PriceError> {
        let msg = &mut self.msgs[id];
        if msg.len != expected {
            return Err(PriceError::Mismatched { src: msg.src, dst: msg.dst, sent: msg.len, expected });
        }
        msg.recv_at = Some(at);
        if !msg.eager {
            let ready = msg.sent_at.max(at);
            self.push(ready, Kind::Ready(id));
        } else if let Some(arrival) = msg.arrival {
            self.received(id, arrival.max(at));
        }
        Ok(())
    }

    /// Transfer `id` is ready at `now`: it takes both ports when free.
    fn transfer(&mut self, id: usize, now: f64) {
        let (src, dst, len) = (self.msgs[id].src, self.msgs[id].dst, self.msgs[id].len);
        let start = now.max(self.ranks[src].out_free).max(self.ranks[dst].in_free);
        let done = start + self.model.overhead + len as f64 * self.model.beta;
        self.ranks[src].out_free = done;
        self.ranks[dst].in_free = done;
        let arrival = done + self.model.alpha;
        self.msgs[id].arrival = Some(arrival);
        self.complete(src, done);
        if let Some(at) = self.msgs[id].recv_at {
            self.received(id, arrival.max(at));
        }
    }

    fn received(&mut self, id: usize, time: f64) {
        let dst = self.msgs[id].dst;
        self.complete(dst, time);
    }

    /// One transfer of `rank`'s current step is complete at `time`.
    fn complete(&mut self, rank: usize, time: f64) {
        let st = &mut self.ranks[rank];
        st.left -= 1;
        st.step_end = st.step_end.max(time);
        self.maybe_finish_step(rank);
    }

    fn maybe_finish_step(&mut self, rank: usize) {
        let st = &self.ranks[rank];
        if st.left > 0 || st.posting {
            return;
        }
        let step = &self.schedules[rank].steps[st.step];
        let local: f64 = step
            .locals
            .iter()
            .map(|l| match l {
                Local::Copy { dst, .. } => dst.len as f64 * self.model.delta,
                Local::Reduce { dst, .. } | Local::ReduceInto { dst, .. } => dst.len as f64 * self.model.gamma,
            })
            .sum();
        let end = st.step_end + local;
        self.ranks[rank].step += 1;
        self.push(end, Kind::Step(rank));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::schedule::{BufId, Builder, Region};
    use crate::exec::calibrate::{burst, fit, ping_pong, Timings, LARGE, SMALL};

    fn reg(len: usize) -> Region {
        Region::new(BufId::Send, 0, len)
    }

    const M: CostModel = CostModel { alpha: 10.0, overhead: 0.0, beta: 1.0, gamma: 0.5, delta: 0.25, eager: 1000 };

    #[test]
    fn one_message_and_a_reduction() {
        let mut a = Builder::new();
        a.send(1, reg(100));
        let mut b = Builder::new();
        b.reserve_scratch(100);
        b.recv(0, Region::new(BufId::Scratch, 0, 100)).reduce(reg(100), Region::new(BufId::Scratch, 0, 100));
        let p = price(&[a.finish(), b.finish()], &M).unwrap();
        // 100 β out, then α + 100 β to arrive, then 100 γ.
        assert_eq!(p.finish, vec![100.0, 10.0 + 100.0 + 50.0]);
        assert_eq!((p.time, p.bytes, p.messages), (160.0, 100, 1));
    }

    #[test]
    fn ports_serialise_fan_in_and_fan_out() {
        // Rank 0 receives 3 messages at once: they queue at its in-port.
        let p = 4;
        let scheds: Vec<Schedule> = (0..p)
            .map(|r| {
                let mut b = Builder::new();
                if r == 0 {
                    for peer in 1..p {
                        b.recv(peer, Region::new(BufId::Recv, peer * 10, 10));
                    }
                } else {
                    b.send(0, reg(10));
                }
                b.finish()
            })
            .collect();
        let pr = price(&scheds, &M).unwrap();
        assert_eq!(pr.finish[0], 10.0 + 10.0 + 20.0);
        // And a fan-out: the root's out-port sends one after the other.
        let scheds: Vec<Schedule> = (0..p)
            .map(|r| {
                let mut b = Builder::new();
                if r == 0 {
                    for peer in 1..p {
                        b.send(peer, reg(10));
                    }
                } else {
                    b.recv(0, Region::new(BufId::Recv, 0, 10));
                }
                b.finish()
            })
            .collect();
        let pr = price(&scheds, &M).unwrap();
        assert_eq!(&pr.finish[1..], &[20.0, 30.0, 40.0]);
        assert_eq!(pr.finish[0], 30.0);
    }

    #[test]
    fn a_step_whose_messages_all_came_early_finishes_once() {
        // Rank 1 receives in step 2 two eager messages that arrived during
        // its step 1; then it must still run step 3.
        let mut a = Builder::new();
        a.send(1, reg(4)).send(1, reg(4)).end_step();
        a.recv(1, Region::new(BufId::Recv, 0, 4));
        let mut b = Builder::new();
        b.reserve_scratch(4);
        b.copy(reg(4), Region::new(BufId::Scratch, 0, 4)).end_step();
        b.recv(0, Region::new(BufId::Recv, 0, 4)).recv(0, Region::new(BufId::Recv, 4, 4)).end_step();
        b.send(0, reg(4));
        let slow = CostModel { delta: 1000.0, ..M };
        let p = price(&[a.finish(), b.finish()], &slow).unwrap();
        assert_eq!(p.messages, 3);
    }

    #[test]
    fn detects_deadlock_and_mismatch() {
        let recv_first = |peer| {
            let mut b = Builder::new();
            b.recv(peer, Region::new(BufId::Recv, 0, 1)).end_step();
            b.send(peer, reg(1));
            b.finish()
        };
        let err = price(&[recv_first(1), recv_first(0)], &M).unwrap_err();
        assert_eq!(err, PriceError::Deadlock(vec![(0, 0), (1, 0)]));
        let mut a = Builder::new();
        a.send(1, reg(2));
        let mut b = Builder::new();
        b.recv(0, Region::new(BufId::Recv, 0, 3));
        let err = price(&[a.finish(), b.finish()], &M).unwrap_err();
        assert!(matches!(err, PriceError::Mismatched { sent: 2, expected: 3, .. }), "{err}");
    }

    /// Fitting the pricer's own times of these schedules gives back the
    /// model they were priced with.
    #[test]
    fn fit_recovers_the_model_that_produced_the_timings() {
        let truth = CostModel { alpha: 2e-6, overhead: 4e-7, beta: 1e-10, gamma: 3e-10, delta: 1e-10, eager: 1 << 20 };
        let time = |s0: Schedule, s1: Schedule| price(&[s0, s1], &truth).unwrap().time;
        let t = Timings {
            small_one_way: time(ping_pong(1, true, SMALL, 10), ping_pong(0, false, SMALL, 10)) / 20.0,
            large_one_way: time(ping_pong(1, true, LARGE, 1), ping_pong(0, false, LARGE, 1)) / 2.0,
            burst: time(burst(1, true), burst(0, false)),
            reduce: 1e6 * truth.gamma,
            copy: 1e6 * truth.delta,
            vector: 1_000_000,
        };
        let got = fit(&t, &CostModel::CLUSTER);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * b.max(1e-12);
        assert!(close(got.overhead, truth.overhead), "{got} vs {truth}");
        assert!(close(got.alpha, truth.alpha), "{got} vs {truth}");
        assert!(close(got.beta, truth.beta), "{got} vs {truth}");
        assert!(close(got.gamma, truth.gamma) && close(got.delta, truth.delta), "{got}");
    }
}
