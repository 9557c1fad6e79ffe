//! The schedule IR: what one rank does in one collective call, as data.
//!
//! A schedule is a list of steps. In a step the rank posts all its receives
//! and sends at once (non-blocking), waits for all of them, then runs the
//! step's local operations in order. There is no global barrier between
//! steps: a rank moves on as soon as its own transfers are complete.
//!
//! Buffers are addressed as byte ranges of three buffers: the user's send
//! buffer (read only), the user's receive buffer and a scratch buffer that
//! the executor allocates with `scratch_bytes` bytes. With MPI_IN_PLACE the
//! executor maps `Send` onto `Recv`.

/// One of the three buffers a schedule addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufId {
    Send,
    Recv,
    Scratch,
}

/// A byte range of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub buf: BufId,
    pub off: usize,
    pub len: usize,
}

impl Region {
    pub fn new(buf: BufId, off: usize, len: usize) -> Region {
        Region { buf, off, len }
    }

    pub fn end(&self) -> usize {
        self.off + self.len
    }

    /// Whether two regions share at least one byte.
    pub fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf && self.off < other.end() && other.off < self.end() && self.len > 0 && other.len > 0
    }
}

/// A point-to-point transfer with one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xfer {
    pub peer: usize,
    pub region: Region,
}

/// A local operation, run after the step's transfers have completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local {
    /// `dst = src` (same length).
    Copy { src: Region, dst: Region },
    /// `dst = src ∘ dst`, elementwise: `src` holds the operand that comes
    /// first in rank order (MPI_Reduce_local's inbuf/inoutbuf convention).
    Reduce { src: Region, dst: Region },
    /// `dst = first ∘ second`, elementwise, with `dst` disjoint from both
    /// operands: combines without first copying a read-only operand (the
    /// user's send buffer) into place.
    ReduceInto { first: Region, second: Region, dst: Region },
}

impl Local {
    /// The regions this operation reads besides its destination (which a
    /// `Reduce` also reads), and the destination. The reads must not share
    /// a byte with the destination, except that a `Copy` onto itself is a
    /// no-op.
    pub fn operands(&self) -> (Vec<Region>, Region) {
        match *self {
            Local::Copy { src, dst } | Local::Reduce { src, dst } => (vec![src], dst),
            Local::ReduceInto { first, second, dst } => (vec![first, second], dst),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub sends: Vec<Xfer>,
    pub recvs: Vec<Xfer>,
    pub locals: Vec<Local>,
}

impl Step {
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty() && self.recvs.is_empty() && self.locals.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub steps: Vec<Step>,
    pub scratch_bytes: usize,
}

impl Schedule {
    /// Total bytes this rank sends.
    pub fn bytes_sent(&self) -> usize {
        self.steps.iter().flat_map(|s| &s.sends).map(|x| x.region.len).sum()
    }

    /// Total number of messages this rank sends.
    pub fn messages_sent(&self) -> usize {
        self.steps.iter().map(|s| s.sends.len()).sum()
    }

    /// How many distinct ranks this rank exchanges messages with (the
    /// connections it needs: seed 001's memory argument).
    pub fn peers(&self) -> usize {
        let mut peers: Vec<usize> =
            self.steps.iter().flat_map(|s| s.sends.iter().chain(&s.recvs)).map(|x| x.peer).collect();
        peers.sort_unstable();
        peers.dedup();
        peers.len()
    }
}

/// Builds a schedule step by step; empty steps are dropped and zero-length
/// transfers and local operations are never emitted (both sides of a
/// transfer know its length, so both skip it).
#[derive(Default)]
pub struct Builder {
    sched: Schedule,
    open: Step,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Ensures the scratch buffer holds at least `bytes` bytes.
    pub fn reserve_scratch(&mut self, bytes: usize) {
        self.sched.scratch_bytes = self.sched.scratch_bytes.max(bytes);
    }

    pub fn send(&mut self, peer: usize, region: Region) -> &mut Self {
        if region.len > 0 {
            self.open.sends.push(Xfer { peer, region });
        }
        self
    }

    pub fn recv(&mut self, peer: usize, region: Region) -> &mut Self {
        if region.len > 0 {
            self.open.recvs.push(Xfer { peer, region });
        }
        self
    }

    pub fn copy(&mut self, src: Region, dst: Region) -> &mut Self {
        debug_assert_eq!(src.len, dst.len);
        if src.len > 0 && src != dst {
            self.open.locals.push(Local::Copy { src, dst });
        }
        self
    }

    pub fn reduce(&mut self, src: Region, dst: Region) -> &mut Self {
        debug_assert_eq!(src.len, dst.len);
        if src.len > 0 {
            self.open.locals.push(Local::Reduce { src, dst });
        }
        self
    }

    /// `dst = first ∘ second`; `dst` may be `second` itself (then this is
    /// [`Builder::reduce`]) but must not otherwise share bytes with either.
    pub fn reduce_into(&mut self, first: Region, second: Region, dst: Region) -> &mut Self {
        debug_assert!(first.len == second.len && second.len == dst.len);
        if dst == second {
            return self.reduce(first, dst);
        }
        if dst.len > 0 {
            self.open.locals.push(Local::ReduceInto { first, second, dst });
        }
        self
    }

    /// Closes the current step: its transfers complete before its local
    /// operations run, and before anything of the next step starts.
    pub fn end_step(&mut self) -> &mut Self {
        let step = std::mem::take(&mut self.open);
        if !step.is_empty() {
            self.sched.steps.push(step);
        }
        self
    }

    pub fn finish(mut self) -> Schedule {
        self.end_step();
        self.sched
    }
}
