//! The simulator: runs every rank's schedule together in one process, with
//! no MPI and no threads, and reports what a real run would get wrong.
//!
//! It is an interpreter with one global scheduling loop. Each rank runs its
//! steps in order; in a step it posts all its sends and all its receives,
//! and the step completes when every receive has been matched — in FIFO
//! order per (source, destination) pair, as MPI's non-overtaking rule
//! guarantees — by a message of exactly the receive's length. Then the
//! step's local operations run through [`crate::exec::apply_local`], the
//! same code the library runs. The loop keeps picking ranks that can make
//! progress until all have finished; if none can while some have not, that
//! is a deadlock, reported with who waits for whom. A message nobody
//! receives is an error too.
//!
//! Two send protocols ([`Protocol`]):
//! - `Eager`: a send completes when it is posted (its bytes are copied into
//!   the mailbox), as small messages do in every MPI.
//! - `Rendezvous`: a send completes only once the destination has posted
//!   the matching receive, as large messages do. A schedule that finishes
//!   under `Rendezvous` finishes under `Eager` too (eager only removes
//!   waits), and the data outcome is the same under both because matching
//!   is fixed by the per-pair posting order, so `Rendezvous` is the strict
//!   check: it catches the classic "both send first, in separate steps"
//!   deadlock that only shows up above the eager limit.
//!
//! Before anything runs, every schedule is validated statically: peers in
//! range, every region within its buffer (scratch size from the schedule,
//! receive buffer size from the caller), nothing writes the send buffer,
//! receive regions of a step overlap neither each other nor the step's send
//! regions (MPI forbids touching a buffer with a transfer in flight), and
//! local operands are well formed. Under MPI_IN_PLACE, `Send` regions are
//! checked as the receive-buffer bytes they alias.
//!
//! [`check`] builds on this: descriptors and schedules for every rank of a
//! collective, inputs, and a comparison against the sequential reference.

pub mod across;
pub mod check;
pub mod cost;
pub mod model;
pub mod report;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::fmt;

use crate::core::schedule::{BufId, Local, Region, Schedule, Xfer};
use crate::exec::{apply_local, Buffers, Combiner};

/// One rank's user buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankIo {
    /// The send buffer (ignored under `in_place`).
    pub send: Vec<u8>,
    /// The receive buffer; its length is all the schedule may address.
    pub recv: Vec<u8>,
    /// MPI_IN_PLACE: `Send` regions address `recv`.
    pub in_place: bool,
}

/// When a send completes (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Eager,
    Rendezvous,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimOptions {
    pub protocol: Protocol,
    /// Initial value of every scratch byte: anything but zero makes a read
    /// of scratch the schedule never wrote show up in the result.
    pub scratch_fill: u8,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions { protocol: Protocol::Eager, scratch_fill: 0xA5 }
    }
}

/// What a simulated run cost, for tests and, later, the cost model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    pub ranks: usize,
    /// The most steps any rank's schedule has.
    pub steps_max: usize,
    /// Critical path in steps: a step ends one after the later of the same
    /// rank's previous step and the steps that sent the messages it
    /// receives (a latency-only model; every step costs one).
    pub depth: usize,
    /// Messages and bytes sent, summed over all ranks.
    pub messages: usize,
    pub bytes: usize,
    /// The busiest rank: most messages sent plus received, and most bytes
    /// sent plus received (the hot spot, e.g. a linear gather's root).
    pub max_rank_messages: usize,
    pub max_rank_bytes: usize,
    /// The largest scratch buffer any rank's schedule asks for.
    pub scratch_max: usize,
}

/// How a region is used, for error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    Send {
        peer: usize,
    },
    Recv {
        peer: usize,
    },
    /// Operand of the step's `index`-th local operation.
    LocalSrc {
        index: usize,
    },
    LocalDst {
        index: usize,
    },
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Use::Send { peer } => write!(f, "send to {peer}"),
            Use::Recv { peer } => write!(f, "receive from {peer}"),
            Use::LocalSrc { index } => write!(f, "source of local op #{index}"),
            Use::LocalDst { index } => write!(f, "destination of local op #{index}"),
        }
    }
}

/// One rank stuck in a deadlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub rank: usize,
    pub step: usize,
    /// Peers whose message this rank still waits for (with repetitions).
    pub recv_from: Vec<usize>,
    /// Peers that have not yet posted the receive for this rank's sends
    /// (rendezvous only).
    pub send_to: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// The caller passed a different number of schedules and buffers.
    RankCount {
        schedules: usize,
        buffers: usize,
    },
    BadPeer {
        rank: usize,
        step: usize,
        peer: usize,
        size: usize,
    },
    OutOfBounds {
        rank: usize,
        step: usize,
        what: Use,
        region: Region,
        buf_len: usize,
    },
    SendBufferWrite {
        rank: usize,
        step: usize,
        what: Use,
        region: Region,
    },
    /// Two regions of one step that must not share bytes do.
    Overlap {
        rank: usize,
        step: usize,
        a: (Use, Region),
        b: (Use, Region),
    },
    /// A local operation whose operands differ in length, or a reduction
    /// whose operands are the same bytes.
    BadLocal {
        rank: usize,
        step: usize,
        index: usize,
        local: Local,
    },
    /// A receive matched by a message of another length.
    Mismatched {
        src: usize,
        dst: usize,
        dst_step: usize,
        sent: usize,
        expected: usize,
    },
    /// No rank can make progress although some have not finished.
    Deadlock {
        blocked: Vec<Blocked>,
    },
    /// Messages that no receive matched; `first` names one (src, dst, len).
    Unmatched {
        first: (usize, usize, usize),
        total: usize,
    },
    /// The run completed but produced the wrong result, or the reduction
    /// operator was misused (from [`check`]; `rank` where one is to blame).
    Wrong {
        rank: Option<usize>,
        what: String,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::RankCount { schedules, buffers } => {
                write!(f, "{schedules} schedules but {buffers} rank buffers")
            }
            SimError::BadPeer { rank, step, peer, size } => {
                write!(f, "rank {rank} step {step}: peer {peer} outside a communicator of {size}")
            }
            SimError::OutOfBounds { rank, step, what, region, buf_len } => write!(
                f,
                "rank {rank} step {step}: {what} addresses {:?}[{}..{}] outside a buffer of {buf_len} bytes",
                region.buf,
                region.off,
                region.end()
            ),
            SimError::SendBufferWrite { rank, step, what, region } => {
                write!(f, "rank {rank} step {step}: {what} writes the send buffer {region:?}")
            }
            SimError::Overlap { rank, step, a, b } => write!(
                f,
                "rank {rank} step {step}: {} {:?}[{}..{}] overlaps {} {:?}[{}..{}]",
                a.0,
                a.1.buf,
                a.1.off,
                a.1.end(),
                b.0,
                b.1.buf,
                b.1.off,
                b.1.end()
            ),
            SimError::BadLocal { rank, step, index, local } => {
                write!(f, "rank {rank} step {step}: malformed local op #{index}: {local:?}")
            }
            SimError::Mismatched { src, dst, dst_step, sent, expected } => write!(
                f,
                "mismatched message {src}→{dst}: {sent} bytes sent, rank {dst} step {dst_step} expects {expected}"
            ),
            SimError::Deadlock { blocked } => {
                write!(f, "deadlock: {} ranks blocked:", blocked.len())?;
                for b in blocked.iter().take(12) {
                    write!(f, " [rank {} step {}", b.rank, b.step)?;
                    if !b.recv_from.is_empty() {
                        write!(f, " waits for messages from {:?}", b.recv_from)?;
                    }
                    if !b.send_to.is_empty() {
                        write!(f, " waits for receives to be posted by {:?}", b.send_to)?;
                    }
                    write!(f, "]")?;
                }
                if blocked.len() > 12 {
                    write!(f, " ...")?;
                }
                Ok(())
            }
            SimError::Unmatched { first: (src, dst, len), total } => {
                write!(f, "{total} unmatched message(s), e.g. {len} bytes {src}→{dst} that rank {dst} never receives")
            }
            SimError::Wrong { rank: Some(rank), what } => write!(f, "wrong result at rank {rank}: {what}"),
            SimError::Wrong { rank: None, what } => write!(f, "wrong result: {what}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Runs every rank's schedule with eager sends (see [`run_with`]).
pub fn run<C: Combiner + ?Sized>(
    schedules: &[Schedule],
    io: &mut [RankIo],
    combiner: &C,
) -> Result<SimStats, SimError> {
    run_with(schedules, io, combiner, SimOptions::default())
}

/// Runs `schedules[r]` as rank `r` over `io[r]`, all ranks together.
/// On success the receive buffers hold the result.
pub fn run_with<C: Combiner + ?Sized>(
    schedules: &[Schedule],
    io: &mut [RankIo],
    combiner: &C,
    opts: SimOptions,
) -> Result<SimStats, SimError> {
    if schedules.len() != io.len() {
        return Err(SimError::RankCount { schedules: schedules.len(), buffers: io.len() });
    }
    for (rank, (sched, io)) in schedules.iter().zip(io.iter()).enumerate() {
        validate(rank, schedules.len(), sched, io)?;
    }
    Sim::new(schedules, io, combiner, opts).run()
}

/// The length of the buffer a region addresses, and the region as the bytes
/// it really is (under MPI_IN_PLACE `Send` is the receive buffer).
fn resolve(io: &RankIo, scratch: usize, region: Region) -> (Region, usize) {
    match region.buf {
        BufId::Send if io.in_place => (Region { buf: BufId::Recv, ..region }, io.recv.len()),
        BufId::Send => (region, io.send.len()),
        BufId::Recv => (region, io.recv.len()),
        BufId::Scratch => (region, scratch),
    }
}

/// Static checks of one rank's schedule (see the module documentation).
pub fn validate(rank: usize, size: usize, sched: &Schedule, io: &RankIo) -> Result<(), SimError> {
    let scratch = sched.scratch_bytes;
    for (step_no, step) in sched.steps.iter().enumerate() {
        let in_bounds = |what: Use, region: Region| {
            let (_, buf_len) = resolve(io, scratch, region);
            if region.off.checked_add(region.len).is_none_or(|end| end > buf_len) {
                return Err(SimError::OutOfBounds { rank, step: step_no, what, region, buf_len });
            }
            Ok(())
        };
        let writable = |what: Use, region: Region| {
            if region.buf == BufId::Send {
                return Err(SimError::SendBufferWrite { rank, step: step_no, what, region });
            }
            Ok(())
        };
        // Transfers: peers, bounds, and the in-flight overlap rule.
        let mut spans: Vec<(Region, bool, Use, Region)> = Vec::new();
        for (xfers, is_recv) in [(&step.sends, false), (&step.recvs, true)] {
            for x in xfers.iter() {
                let what = if is_recv { Use::Recv { peer: x.peer } } else { Use::Send { peer: x.peer } };
                if x.peer >= size {
                    return Err(SimError::BadPeer { rank, step: step_no, peer: x.peer, size });
                }
                in_bounds(what, x.region)?;
                if is_recv {
                    writable(what, x.region)?;
                }
                let (real, _) = resolve(io, scratch, x.region);
                if real.len > 0 {
                    spans.push((real, is_recv, what, x.region));
                }
            }
        }
        // Sweep in address order: a receive may share no byte with any
        // earlier span, a send none with an earlier receive.
        spans.sort_by_key(|s| (s.0.buf as u8, s.0.off));
        let mut any: Option<(usize, usize)> = None; // (end, index) of the furthest span
        let mut recv: Option<(usize, usize)> = None; // the same over receives only
        for (i, s) in spans.iter().enumerate() {
            if i > 0 && spans[i - 1].0.buf != s.0.buf {
                any = None;
                recv = None;
            }
            let hit = if s.1 { any } else { recv };
            if let Some((end, j)) = hit {
                if s.0.off < end {
                    let (a, b) = (&spans[j], s);
                    return Err(SimError::Overlap { rank, step: step_no, a: (a.2, a.3), b: (b.2, b.3) });
                }
            }
            let end = s.0.end();
            if any.is_none_or(|(e, _)| end > e) {
                any = Some((end, i));
            }
            if s.1 && recv.is_none_or(|(e, _)| end > e) {
                recv = Some((end, i));
            }
        }
        // Local operations: operands of one length within their buffers,
        // and the written region disjoint from every read one, except a
        // copy onto itself (a no-op).
        for (index, local) in step.locals.iter().enumerate() {
            let (reads, dst) = local.operands();
            for &src in &reads {
                in_bounds(Use::LocalSrc { index }, src)?;
            }
            in_bounds(Use::LocalDst { index }, dst)?;
            writable(Use::LocalDst { index }, dst)?;
            let (rd, _) = resolve(io, scratch, dst);
            let bad = reads.iter().any(|&src| {
                let (rs, _) = resolve(io, scratch, src);
                let self_copy = matches!(local, Local::Copy { .. }) && rs == rd;
                src.len != dst.len || (!self_copy && rs.overlaps(&rd))
            });
            if bad {
                return Err(SimError::BadLocal { rank, step: step_no, index, local: *local });
            }
        }
    }
    Ok(())
}

/// A message in a mailbox.
struct Msg {
    data: Vec<u8>,
    /// Depth at which the sending step started (for [`SimStats::depth`]).
    depth: usize,
}

#[derive(Default)]
struct RankState {
    step: usize,
    /// Whether `step`'s transfers have been posted.
    posted: bool,
    done: bool,
    queued: bool,
    recvs_left: usize,
    sends_left: usize,
    /// Unmatched receives of the current step by source, in posting order.
    pending: HashMap<usize, VecDeque<usize>>,
    /// Depth at which the last completed step ended.
    depth: usize,
    /// Running depth of the current step: the latest sender start so far.
    step_depth: usize,
    messages: usize,
    bytes: usize,
}

struct Sim<'a, C: ?Sized> {
    schedules: &'a [Schedule],
    io: &'a mut [RankIo],
    scratch: Vec<Vec<u8>>,
    combiner: &'a C,
    rendezvous: bool,
    ranks: Vec<RankState>,
    /// Messages sent but not yet received, per (src, dst).
    mail: HashMap<(usize, usize), VecDeque<Msg>>,
    queue: VecDeque<usize>,
    stats: SimStats,
}

impl<'a, C: Combiner + ?Sized> Sim<'a, C> {
    fn new(schedules: &'a [Schedule], io: &'a mut [RankIo], combiner: &'a C, opts: SimOptions) -> Self {
        let size = schedules.len();
        Sim {
            scratch: schedules.iter().map(|s| vec![opts.scratch_fill; s.scratch_bytes]).collect(),
            schedules,
            io,
            combiner,
            rendezvous: opts.protocol == Protocol::Rendezvous,
            ranks: (0..size).map(|_| RankState { queued: true, ..Default::default() }).collect(),
            mail: HashMap::new(),
            queue: (0..size).collect(),
            stats: SimStats {
                ranks: size,
                steps_max: schedules.iter().map(|s| s.steps.len()).max().unwrap_or(0),
                scratch_max: schedules.iter().map(|s| s.scratch_bytes).max().unwrap_or(0),
                ..Default::default()
            },
        }
    }

    fn run(mut self) -> Result<SimStats, SimError> {
        while let Some(rank) = self.queue.pop_front() {
            self.ranks[rank].queued = false;
            self.advance(rank)?;
        }
        let mut blocked: Vec<Blocked> = Vec::new();
        for (rank, st) in self.ranks.iter().enumerate().filter(|(_, st)| !st.done) {
            let mut recv_from: Vec<usize> =
                st.pending.iter().flat_map(|(&src, q)| std::iter::repeat_n(src, q.len())).collect();
            recv_from.sort_unstable();
            let mut send_to: Vec<usize> = self
                .mail
                .iter()
                .filter(|((src, _), q)| *src == rank && !q.is_empty() && self.rendezvous)
                .flat_map(|(&(_, dst), q)| std::iter::repeat_n(dst, q.len()))
                .collect();
            send_to.sort_unstable();
            blocked.push(Blocked { rank, step: st.step, recv_from, send_to });
        }
        if !blocked.is_empty() {
            return Err(SimError::Deadlock { blocked });
        }
        let mut left: Vec<(usize, usize, usize)> = self
            .mail
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(&(src, dst), q)| (src, dst, q.front().map_or(0, |m| m.data.len())))
            .collect();
        if !left.is_empty() {
            left.sort_unstable();
            let total = self.mail.values().map(VecDeque::len).sum();
            return Err(SimError::Unmatched { first: left[0], total });
        }
        for st in &self.ranks {
            self.stats.depth = self.stats.depth.max(st.depth);
            self.stats.max_rank_messages = self.stats.max_rank_messages.max(st.messages);
            self.stats.max_rank_bytes = self.stats.max_rank_bytes.max(st.bytes);
        }
        Ok(self.stats)
    }

    fn complete(&self, rank: usize) -> bool {
        let st = &self.ranks[rank];
        st.posted && st.recvs_left == 0 && st.sends_left == 0
    }

    fn wake(&mut self, rank: usize) {
        if self.complete(rank) && !self.ranks[rank].queued {
            self.ranks[rank].queued = true;
            self.queue.push_back(rank);
        }
    }

    /// Runs `rank` as far as it can go without other ranks moving.
    fn advance(&mut self, rank: usize) -> Result<(), SimError> {
        let sched = &self.schedules[rank];
        loop {
            if self.ranks[rank].done {
                return Ok(());
            }
            if self.ranks[rank].posted {
                if !self.complete(rank) {
                    return Ok(());
                }
                let step = &sched.steps[self.ranks[rank].step];
                let io = &mut self.io[rank];
                let mut bufs = Buffers {
                    send: if io.in_place { None } else { Some(&io.send) },
                    recv: &mut io.recv,
                    scratch: &mut self.scratch[rank],
                };
                for local in &step.locals {
                    apply_local(&mut bufs, local, self.combiner);
                }
                let st = &mut self.ranks[rank];
                st.depth = st.step_depth + 1;
                st.step += 1;
                st.posted = false;
            }
            let st = &mut self.ranks[rank];
            if st.step == sched.steps.len() {
                st.done = true;
                return Ok(());
            }
            self.post(rank)?;
        }
    }

    /// Posts the current step's sends, then its receives.
    fn post(&mut self, rank: usize) -> Result<(), SimError> {
        let step_no = self.ranks[rank].step;
        let step = &self.schedules[rank].steps[step_no];
        {
            let st = &mut self.ranks[rank];
            st.posted = true;
            st.step_depth = st.depth;
            st.recvs_left = step.recvs.len();
            st.sends_left = if self.rendezvous { step.sends.len() } else { 0 };
            st.messages += step.sends.len() + step.recvs.len();
            st.bytes += step.sends.iter().chain(&step.recvs).map(|x| x.region.len).sum::<usize>();
        }
        let depth = self.ranks[rank].depth;
        for x in &step.sends {
            let data = self.read(rank, x.region).to_vec();
            self.stats.messages += 1;
            self.stats.bytes += data.len();
            let msg = Msg { data, depth };
            let waiting = self.ranks[x.peer].pending.get_mut(&rank).and_then(VecDeque::pop_front);
            match waiting {
                Some(index) => self.deliver(rank, x.peer, index, msg)?,
                None => self.mail.entry((rank, x.peer)).or_default().push_back(msg),
            }
        }
        for (index, x) in step.recvs.iter().enumerate() {
            match self.mail.get_mut(&(x.peer, rank)).and_then(VecDeque::pop_front) {
                Some(msg) => self.deliver(x.peer, rank, index, msg)?,
                None => self.ranks[rank].pending.entry(x.peer).or_default().push_back(index),
            }
        }
        self.ranks[rank].pending.retain(|_, q| !q.is_empty());
        Ok(())
    }

    fn read(&self, rank: usize, region: Region) -> &[u8] {
        let io = &self.io[rank];
        let (real, _) = resolve(io, 0, region);
        let buf: &[u8] = match real.buf {
            BufId::Send => &io.send,
            BufId::Recv => &io.recv,
            BufId::Scratch => &self.scratch[rank],
        };
        &buf[real.off..real.end()]
    }

    /// Matches `msg` from `src` with receive `index` of `dst`'s current step.
    fn deliver(&mut self, src: usize, dst: usize, index: usize, msg: Msg) -> Result<(), SimError> {
        let dst_step = self.ranks[dst].step;
        let Xfer { region, .. } = self.schedules[dst].steps[dst_step].recvs[index];
        if msg.data.len() != region.len {
            return Err(SimError::Mismatched { src, dst, dst_step, sent: msg.data.len(), expected: region.len });
        }
        let buf: &mut [u8] = match region.buf {
            BufId::Recv => &mut self.io[dst].recv,
            BufId::Scratch => &mut self.scratch[dst],
            BufId::Send => unreachable!("validated: receives never target the send buffer"),
        };
        buf[region.off..region.end()].copy_from_slice(&msg.data);
        let st = &mut self.ranks[dst];
        st.recvs_left -= 1;
        st.step_depth = st.step_depth.max(msg.depth);
        if self.rendezvous {
            self.ranks[src].sends_left -= 1;
            self.wake(src);
        }
        self.wake(dst);
        Ok(())
    }
}
