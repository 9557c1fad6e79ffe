//! A host whose ranks are threads of one process: communicators are lists
//! of threads (split as MPI splits them), messages go through mailboxes,
//! segments are heap buffers found by name, datatypes and operators are a
//! few of MPI's. The driver runs against it exactly as against the host
//! MPI, node discovery included.

use crate::core::schedule::Xfer;
use crate::core::types::{Elem, ReduceOp, TypeClass};
use crate::driver::comm::{CommState, SegmentPool, States};
use crate::driver::host::{Access, Code, ErrorClass, OpKind, Repr, Split, TypeKind, TypeLayout};
use crate::driver::node::discover;
use crate::driver::pool::Pool;
use crate::driver::runtime::{panic_message, Runtime};
use crate::driver::thread::PerThread;
use crate::driver::Host;
use crate::exec::kernels;
use crate::exec::{Buffers, Transport};
use crate::select::config::Config;
use crate::shm::segment::Geometry;
use crate::shm::threads::{HeapSegment, Threads};
use crate::shm::{NodeOs, SegmentName};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Condvar, Mutex};

/// A communicator handle: an index into [`World::comms`] (0: null).
pub type Comm = usize;
pub const COMM_NULL: Comm = 0;

/// The datatypes of the test host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Null,
    I32,
    F64,
    Byte,
    /// Predefined, but no reduction operator applies (MPI_PACKED).
    Packed,
    /// A committed vector of two i32 with a gap of one (size 8, extent
    /// 12): elements at bytes 0 and 8 of each extent.
    Vector,
    /// A derived datatype nobody committed.
    Uncommitted,
}

/// The operators of the test host; user-defined ones are functions of
/// the host and two vectors of i32 (`dst = src ∘ dst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Band,
    Replace,
    User { f: UserFn, commutative: bool },
}

/// A user-defined operator's function (by name, so that operators compare).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserFn {
    /// `dst = src + dst` on i32.
    Sum,
    /// `dst = src` where src is "before" dst: keeps the first operand,
    /// so only rank order gives rank 0's vector.
    First,
    /// Like `Sum`, after calling an Allreduce on the same communicator
    /// (see [`super::nested`]).
    Nested,
}

/// A communicator: its ranks (thread indices, by communicator rank).
pub struct CommSpec {
    pub members: Vec<usize>,
    pub inter: bool,
}

/// Messages between threads, first in first out per (channel,
/// communicator, sender, receiver).
type Key = (u8, Comm, usize, usize);

/// Mailbox channels: schedules, control words, the host's collectives,
/// splits.
const DATA: u8 = 0;
const CONTROL: u8 = 1;
const REFERENCE: u8 = 2;
const SPLIT: u8 = 3;

/// Everything the ranks of a test share.
pub struct World {
    pub size: usize,
    /// Each thread's node.
    pub node_of: Vec<usize>,
    /// Communicators by handle (index 0 is null): the test's, then those
    /// the driver splits off.
    comms: Mutex<Vec<&'static CommSpec>>,
    pub rt: Runtime,
    mail: Mutex<HashMap<Key, VecDeque<Vec<u8>>>>,
    arrived: Condvar,
    /// pcoll's states, by (communicator, thread), as MPI's attributes
    /// find them; alive in `registry`.
    states: Mutex<HashMap<(Comm, usize), usize>>,
    pub registry: States<TestHost>,
    /// The segments whose names are not unlinked yet.
    segments: Mutex<HashMap<SegmentName, &'static HeapSegment>>,
    segments_made: AtomicUsize,
    /// Threads (bits) whose segments cannot be created or opened, and
    /// those zero copy does not reach.
    pub no_segment: AtomicU64,
    pub no_zero_copy: AtomicU64,
    /// The size of the node's /dev/shm (0: unknown).
    pub shm_bytes: AtomicUsize,
    /// Calls each thread left to the host on each communicator before
    /// setting it up.
    host_calls: Mutex<HashMap<(Comm, usize), usize>>,
    /// Each thread's budget and kept segments, as each process has its own.
    pools: Vec<SegmentPool<TestHost>>,
    /// Windows by (communicator, how many each of its ranks made before).
    windows: Mutex<HashMap<(Comm, usize), &'static SharedWindow>>,
    /// Windows each thread made on each communicator, and windows made and
    /// freed (by every rank).
    windows_made: Mutex<HashMap<(Comm, usize), usize>>,
    pub windows_created: AtomicUsize,
    windows_freed: Mutex<Vec<(usize, usize)>>,
    /// Threads (bits) whose MPI_Win_create fails (as Open MPI 4.1's
    /// across hosts without osc/pt2pt).
    pub no_window: AtomicU64,
    /// Control broadcasts so far, by communicator; allgathers of words by
    /// any rank.
    bcasts: Mutex<HashMap<Comm, usize>>,
    pub allgathers: AtomicUsize,
    /// Calls a user operator made from inside pcoll, handed to the host.
    pub nested_forwards: AtomicUsize,
    /// The host's collectives give a wrong answer (for PCOLL_VERIFY).
    pub wrong_reference: AtomicBool,
    /// Threads (bits) that let the host progress while waiting.
    pub drove_progress: AtomicU64,
}

impl World {
    /// `node_of[r]` is thread r's node; communicator 1 is all of them,
    /// then `extra` communicators. Leaked: the driver's per-thread caches
    /// keep `'static` hosts. pcoll sets communicators up at their first
    /// call (PCOLL_SETUP_AFTER=0) unless `vars` say otherwise.
    pub fn new(node_of: &[usize], vars: &[(&str, &str)], extra: Vec<CommSpec>) -> &'static World {
        let mut vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        if !vars.iter().any(|(k, _)| k == "PCOLL_SETUP_AFTER") {
            vars.push(("PCOLL_SETUP_AFTER".into(), "0".into()));
        }
        let cfg = Config::from_vars(&vars).expect("a valid test configuration");
        let size = node_of.len();
        let mut comms =
            vec![CommSpec { members: vec![], inter: false }, CommSpec { members: (0..size).collect(), inter: false }];
        comms.extend(extra);
        let comms = comms.into_iter().map(|c| &*Box::leak(Box::new(c))).collect();
        Box::leak(Box::new(World {
            size,
            node_of: node_of.to_vec(),
            comms: Mutex::new(comms),
            rt: Runtime::new(cfg),
            mail: Mutex::default(),
            arrived: Condvar::new(),
            states: Mutex::default(),
            segments: Mutex::default(),
            segments_made: AtomicUsize::new(0),
            no_segment: AtomicU64::new(0),
            no_zero_copy: AtomicU64::new(0),
            shm_bytes: AtomicUsize::new(0),
            host_calls: Mutex::default(),
            pools: (0..size).map(|_| Mutex::new(Pool::new())).collect(),
            windows: Mutex::default(),
            windows_made: Mutex::default(),
            windows_created: AtomicUsize::new(0),
            windows_freed: Mutex::default(),
            no_window: AtomicU64::new(0),
            registry: States::new(),
            bcasts: Mutex::default(),
            allgathers: AtomicUsize::new(0),
            nested_forwards: AtomicUsize::new(0),
            wrong_reference: AtomicBool::new(false),
            drove_progress: AtomicU64::new(0),
        }))
    }

    /// All threads on one node.
    pub fn one_node(p: usize, vars: &[(&str, &str)]) -> &'static World {
        World::new(&vec![0; p], vars, vec![])
    }

    /// Runs `body` on one thread per rank. A rank that panics leaves the
    /// others waiting for it for ever, so a panic ends the test process at
    /// once (the test fails with the panic's message).
    pub fn run<R: Send>(&'static self, body: impl Fn(TestHost) -> R + Sync) -> Vec<R> {
        let body = &body;
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.size)
                .map(|rank| {
                    scope.spawn(move || {
                        let run = std::panic::AssertUnwindSafe(|| body(TestHost { world: self, rank }));
                        match std::panic::catch_unwind(run) {
                            Ok(r) => r,
                            Err(panic) => {
                                let msg = panic_message(&*panic);
                                let _ = std::io::Write::write_all(
                                    &mut std::io::stderr(),
                                    format!("rank {rank} panicked: {msg}\n(the other ranks would wait for ever)\n")
                                        .as_bytes(),
                                );
                                std::process::exit(101);
                            }
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// As MPI_Init finds where every rank runs on one host.
    pub fn on_one_host(&'static self) -> &'static World {
        self.pools.iter().for_each(|pool| pool.lock().unwrap().set_one_host(true));
        self
    }

    /// Makes every thread's state of `comm` (collectively, as the first
    /// call pcoll runs on it does), for tests that call on one thread.
    pub fn with_states(&'static self, comm: Comm) -> &'static World {
        self.run(|h| h.create_state(comm).map(|_| ()).expect("a state"));
        self
    }

    /// Thread `rank`'s state of `comm`, once the driver made it.
    pub fn state(&self, comm: Comm, rank: usize) -> Option<&'static CommState<TestHost>> {
        let address = *self.states.lock().unwrap().get(&(comm, rank))?;
        // SAFETY: a state of the registry's, deleted only once no longer
        // found here (TestHost::free_state).
        Some(unsafe { &*(address as *const CommState<TestHost>) })
    }

    /// The control broadcasts on `comm`'s private duplicate so far (the
    /// Gatherv root's among them).
    pub fn control_bcasts(&self, comm: Comm) -> usize {
        let private = self.state(comm, 0).expect("a state of the communicator").private;
        self.bcasts.lock().unwrap().get(&private).copied().unwrap_or(0)
    }

    /// The threads of communicator `comm`, by rank.
    pub fn members_of(&self, comm: Comm) -> &'static [usize] {
        let spec: &'static CommSpec = self.comms.lock().unwrap()[comm];
        &spec.members
    }

    /// The memory of the windows thread `rank` freed, in order.
    pub fn freed_windows(&self, rank: usize) -> Vec<usize> {
        self.windows_freed.lock().unwrap().iter().filter(|w| w.0 == rank).map(|w| w.1).collect()
    }

    /// The names of segments not unlinked yet.
    pub fn linked_segments(&self) -> usize {
        self.segments.lock().unwrap().len()
    }

    fn send(&self, key: Key, bytes: Vec<u8>) {
        self.mail.lock().unwrap().entry(key).or_default().push_back(bytes);
        self.arrived.notify_all();
    }

    fn recv(&self, key: Key) -> Vec<u8> {
        let mut boxes = self.mail.lock().unwrap();
        loop {
            if let Some(m) = boxes.get_mut(&key).and_then(VecDeque::pop_front) {
                return m;
            }
            boxes = self.arrived.wait(boxes).unwrap();
        }
    }
}

/// One rank (thread) of a [`World`].
#[derive(Clone, Copy)]
pub struct TestHost {
    pub world: &'static World,
    /// The thread's index (its "world rank").
    pub rank: usize,
}

thread_local! {
    static THREAD: PerThread<TestHost> = const { PerThread::new() };
}

static IN_PLACE: u8 = 0;

fn bytes_of_words(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).collect()
}

impl TestHost {
    fn members(&self, comm: Comm) -> &'static [usize] {
        self.world.members_of(comm)
    }

    fn comm_rank(&self, comm: Comm) -> usize {
        self.members(comm).iter().position(|&m| m == self.rank).expect("a member of the communicator")
    }

    /// What MPI does when the user frees `comm` (not collective): deletes
    /// this rank's state of it. Nothing may hold the state any more.
    pub fn free_state(&self, comm: Comm) {
        let state = self.world.states.lock().unwrap().remove(&(comm, self.rank)).expect("a state");
        // SAFETY: added by create_state, and no longer found.
        unsafe { self.world.registry.delete(self, state as *mut CommState<TestHost>) };
    }

    /// Whether thread `rank` is among the bits of `set`.
    fn among(set: &AtomicU64, rank: usize) -> bool {
        set.load(Ordering::Relaxed) >> rank & 1 == 1
    }

    /// Sends `bytes` to communicator rank `to` on `channel`.
    fn post(&self, channel: u8, comm: Comm, to: usize, bytes: Vec<u8>) {
        self.world.send((channel, comm, self.rank, self.members(comm)[to]), bytes);
    }

    fn take(&self, channel: u8, comm: Comm, from: usize) -> Vec<u8> {
        self.world.recv((channel, comm, self.members(comm)[from], self.rank))
    }

    /// The host's reduction of every rank's `send`, in rank order, at
    /// `root` (every rank if `None`).
    fn reduce_at(&self, comm: Comm, root: Option<usize>, send: &[u8], recv: &mut [u8], ty: Ty, op: Op) {
        let (me, size) = (self.comm_rank(comm), self.members(comm).len());
        let at = root.unwrap_or(0);
        self.post(REFERENCE, comm, at, send.to_vec());
        if me == at {
            let all: Vec<Vec<u8>> = (0..size).map(|r| self.take(REFERENCE, comm, r)).collect();
            let mut acc = all[size - 1].clone();
            for r in (0..size - 1).rev() {
                let count = acc.len() / self.type_layout(ty).size;
                self.reduce_local(op, ty, &all[r], &mut acc, count);
            }
            if self.world.wrong_reference.load(Ordering::Relaxed) {
                acc[0] ^= 1;
            }
            if root.is_none() {
                (0..size).for_each(|r| self.post(REFERENCE, comm, r, acc.clone()));
            } else {
                recv.copy_from_slice(&acc);
            }
        }
        if root.is_none() {
            recv.copy_from_slice(&self.take(REFERENCE, comm, at));
        }
    }
}

/// Schedule steps between threads; peer `i` is communicator rank
/// `ranks[i]` (all in order if `None`).
pub struct ThreadTransport<'a> {
    host: TestHost,
    comm: Comm,
    ranks: Option<&'a [usize]>,
}

impl Transport for ThreadTransport<'_> {
    type Error = Code;
    fn exchange(&mut self, bufs: &mut Buffers<'_>, sends: &[Xfer], recvs: &[Xfer]) -> Result<(), Code> {
        let peer = |x: &Xfer| self.ranks.map_or(x.peer, |r| r[x.peer]);
        for x in sends {
            self.host.post(DATA, self.comm, peer(x), bufs.read(x.region).to_vec());
        }
        for x in recvs {
            let msg = self.host.take(DATA, self.comm, peer(x));
            bufs.write(x.region).copy_from_slice(&msg);
        }
        Ok(())
    }
}

/// The memory of every rank of one window: (address, bytes) by rank.
struct SharedWindow {
    mem: Mutex<Vec<(usize, usize)>>,
    fence: Barrier,
}

/// A rank's window. Transfers are queued and carried out at the fence,
/// the latest moment MPI allows, while every rank waits there.
pub struct TestWin {
    shared: &'static SharedWindow,
    /// The thread and the memory whose window this is.
    owner: (usize, usize),
    queued: Vec<(Access, usize, usize, usize, usize)>,
}

/// `dst = src ∘ dst` of a user-defined operator on i32 vectors.
fn user_op(host: TestHost, f: UserFn, src: &[u8], dst: &mut [u8]) {
    match f {
        UserFn::First => dst.copy_from_slice(src),
        UserFn::Sum | UserFn::Nested => {
            if f == UserFn::Nested {
                super::nested(host);
            }
            for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(4)) {
                let v = i32::from_le_bytes(s.try_into().unwrap())
                    .wrapping_add(i32::from_le_bytes((&*d).try_into().unwrap()));
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

impl Host for TestHost {
    type Comm = Comm;
    type Datatype = Ty;
    type Op = Op;
    type Os = TestOs;
    type Win = TestWin;
    type Transport<'a> = ThreadTransport<'a>;

    fn with_thread<R>(f: impl FnOnce(&PerThread<TestHost>) -> R) -> R {
        THREAD.with(f)
    }

    fn comm_shape(&self, comm: Comm) -> Option<(usize, usize)> {
        let spec = *self.world.comms.lock().unwrap().get(comm).filter(|s| comm != COMM_NULL && !s.inter)?;
        Some((self.comm_rank(comm), spec.members.len()))
    }

    fn epoch(&self) -> u64 {
        self.world.registry.epoch()
    }

    fn find_state<'a>(&self, comm: Comm) -> Option<&'a CommState<TestHost>> {
        self.world.state(comm, self.rank)
    }

    fn create_state<'a>(&self, comm: Comm) -> Result<&'a CommState<TestHost>, Code> {
        // the private duplicate
        let private = self.split(comm, Split::Color(Some(0)), self.comm_rank(comm))?;
        let state = self.world.registry.add(discover(self, private, &self.world.rt.cfg.shm)?);
        self.world.states.lock().unwrap().insert((comm, self.rank), state as usize);
        // SAFETY: just added, alive until TestHost::free_state.
        Ok(unsafe { &*state })
    }

    fn count_host_call(&self, comm: Comm, after: usize) -> bool {
        let mut calls = self.world.host_calls.lock().unwrap();
        let calls = calls.entry((comm, self.rank)).or_default();
        if *calls >= after {
            return false;
        }
        *calls += 1;
        true
    }

    fn world(&self) -> Comm {
        1
    }

    /// Rank 0 of `comm` forms the new communicators (in the order of
    /// their colors' first ranks) and tells every rank its handle.
    fn split(&self, comm: Comm, how: Split, key: usize) -> Result<Comm, Code> {
        let color = match how {
            Split::Shared => Some(self.world.node_of[self.rank]),
            Split::Color(color) => color,
        };
        self.post(SPLIT, comm, 0, bytes_of_words(&[color.map_or(u64::MAX, |c| c as u64), key as u64]));
        let members = self.members(comm);
        if self.comm_rank(comm) == 0 {
            let wishes: Vec<Vec<u64>> = (0..members.len()).map(|r| words_of(&self.take(SPLIT, comm, r))).collect();
            let mut handles = vec![COMM_NULL as u64; members.len()];
            for (r, wish) in wishes.iter().enumerate() {
                if wish[0] == u64::MAX || handles[r] != COMM_NULL as u64 {
                    continue;
                }
                let mut group: Vec<usize> = (r..members.len()).filter(|&q| wishes[q][0] == wish[0]).collect();
                group.sort_by_key(|&q| (wishes[q][1], q));
                let spec = CommSpec { members: group.iter().map(|&q| members[q]).collect(), inter: false };
                let mut comms = self.world.comms.lock().unwrap();
                comms.push(Box::leak(Box::new(spec)));
                group.iter().for_each(|&q| handles[q] = (comms.len() - 1) as u64);
            }
            (0..members.len()).for_each(|r| self.post(SPLIT, comm, r, bytes_of_words(&handles[r..r + 1])));
        }
        Ok(words_of(&self.take(SPLIT, comm, 0))[0] as Comm)
    }

    fn free_comm(&self, comm: &mut Comm) {
        *comm = COMM_NULL;
    }

    fn allgather_words(&self, comm: Comm, mine: &[u64]) -> Result<Vec<u64>, Code> {
        self.world.allgathers.fetch_add(1, Ordering::Relaxed);
        let size = self.members(comm).len();
        (0..size).for_each(|r| self.post(CONTROL, comm, r, bytes_of_words(mine)));
        Ok((0..size).flat_map(|r| words_of(&self.take(CONTROL, comm, r))).collect())
    }

    fn bcast_words(&self, comm: Comm, words: &mut [u64], root: usize) -> Result<(), Code> {
        if self.comm_rank(comm) == root {
            *self.world.bcasts.lock().unwrap().entry(comm).or_default() += 1;
            let size = self.members(comm).len();
            (0..size).filter(|&r| r != root).for_each(|r| self.post(CONTROL, comm, r, bytes_of_words(words)));
        } else {
            words.copy_from_slice(&words_of(&self.take(CONTROL, comm, root)));
        }
        Ok(())
    }

    fn barrier(&self, comm: Comm) -> Result<(), Code> {
        self.bcast_words(comm, &mut [0], 0)
    }

    fn drive_progress(&self, _comm: Comm) {
        self.world.drove_progress.fetch_or(1 << self.rank, Ordering::Relaxed);
    }

    /// Each thread is a process of its own: one thread per process calls.
    fn thread_multiple(&self) -> bool {
        false
    }

    fn os(&self) -> TestOs {
        TestOs { world: self.world, rank: self.rank }
    }

    fn pool(&self) -> &'static SegmentPool<TestHost> {
        &self.world.pools[self.rank]
    }

    fn transport<'a>(&self, state: &'a CommState<TestHost>, ranks: Option<&'a [usize]>) -> ThreadTransport<'a> {
        ThreadTransport { host: *self, comm: state.private, ranks }
    }

    fn window_names_collide(&self) -> bool {
        false
    }

    unsafe fn win_create(&self, comm: Comm, base: *mut u8, bytes: usize) -> Result<TestWin, Code> {
        if self.world.no_window.load(Ordering::Relaxed) & (1 << self.rank) != 0 {
            return Err(ERR_WIN);
        }
        let (me, size) = (self.comm_rank(comm), self.members(comm).len());
        let nth = {
            let mut made = self.world.windows_made.lock().unwrap();
            let made = made.entry((comm, self.rank)).or_default();
            *made += 1;
            *made - 1
        };
        let shared = *self.world.windows.lock().unwrap().entry((comm, nth)).or_insert_with(|| {
            Box::leak(Box::new(SharedWindow { mem: Mutex::new(vec![(0, 0); size]), fence: Barrier::new(size) }))
        });
        shared.mem.lock().unwrap()[me] = (base as usize, bytes);
        self.world.windows_created.fetch_add(1, Ordering::Relaxed);
        Ok(TestWin { shared, owner: (self.rank, base as usize), queued: Vec::new() })
    }

    fn win_free(&self, win: &mut TestWin) {
        self.world.windows_freed.lock().unwrap().push(win.owner);
    }

    unsafe fn win_transfer(
        &self,
        win: &mut TestWin,
        access: Access,
        local: *mut u8,
        peer: usize,
        remote: usize,
        len: usize,
    ) -> Result<(), Code> {
        win.queued.push((access, local as usize, peer, remote, len));
        Ok(())
    }

    fn win_fence(&self, win: &mut TestWin) -> Result<(), Code> {
        win.shared.fence.wait();
        let mem = win.shared.mem.lock().unwrap().clone();
        for (access, local, peer, remote, len) in win.queued.drain(..) {
            let (base, bytes) = mem[peer];
            assert!(remote + len <= bytes, "a transfer beyond the peer's window");
            let (from, to) = match access {
                Access::Get => (base + remote, local),
                Access::Put => (local, base + remote),
            };
            // SAFETY: both ranges lie in window memory (win_transfer's
            // promise, and checked above), which every rank leaves alone
            // while it waits in this fence.
            unsafe { std::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, len) };
        }
        win.shared.fence.wait();
        Ok(())
    }

    fn in_place(&self) -> *const c_void {
        (&IN_PLACE as *const u8).cast()
    }

    fn type_kind(&self, ty: Ty) -> TypeKind {
        let predefined =
            |class, elem: Option<Elem>| TypeKind::Predefined { class, repr: elem.map_or(Repr::Unknown, Repr::Elem) };
        match ty {
            Ty::Null => TypeKind::Null,
            Ty::I32 => predefined(Some(TypeClass::CInteger), Some(Elem::I32)),
            Ty::F64 => predefined(Some(TypeClass::Floating), Some(Elem::F64)),
            Ty::Byte => predefined(Some(TypeClass::Byte), Some(Elem::U8)),
            Ty::Packed => predefined(None, None),
            Ty::Vector | Ty::Uncommitted => TypeKind::Derived,
        }
    }

    fn type_layout(&self, ty: Ty) -> TypeLayout {
        let dense = |n| TypeLayout::new(n, (0, n as isize), (0, n as isize));
        match ty {
            Ty::I32 => dense(4),
            Ty::F64 => dense(8),
            Ty::Byte | Ty::Packed => dense(1),
            Ty::Vector | Ty::Uncommitted => TypeLayout::new(8, (0, 12), (0, 12)),
            Ty::Null => unreachable!("the driver asks no layout of a null datatype"),
        }
    }

    fn type_committed(&self, ty: Ty) -> bool {
        ty != Ty::Uncommitted
    }

    fn type_name(&self, ty: Ty) -> String {
        format!("{ty:?}")
    }

    fn op_kind(&self, op: Op) -> OpKind {
        match op {
            Op::Sum => OpKind::Predefined(ReduceOp::Sum),
            Op::Band => OpKind::Predefined(ReduceOp::Band),
            Op::Replace => OpKind::Other,
            Op::User { .. } => OpKind::User,
        }
    }

    fn op_commutative(&self, op: Op) -> bool {
        matches!(op, Op::User { commutative: true, .. })
    }

    fn op_sum(&self) -> Op {
        Op::Sum
    }

    fn reduce_local(&self, op: Op, ty: Ty, src: &[u8], dst: &mut [u8], count: usize) {
        assert_eq!(dst.len(), count * self.type_layout(ty).size);
        match (op, ty) {
            (Op::User { f, .. }, Ty::I32) => user_op(*self, f, src, dst),
            (Op::Sum, Ty::I32) => (kernels::native(Elem::I32, ReduceOp::Sum).unwrap().inplace)(src, dst),
            (Op::Sum, Ty::F64) => (kernels::native(Elem::F64, ReduceOp::Sum).unwrap().inplace)(src, dst),
            _ => unreachable!("the test host reduces {op:?} on {ty:?}"),
        }
    }

    fn pack(&self, buf: *const c_void, offset: isize, n: usize, ty: Ty, out: &mut [u8], _: Comm) -> usize {
        assert_eq!(ty, Ty::Vector);
        for k in 0..n {
            for (part, at) in [0usize, 8].into_iter().enumerate() {
                let from = buf.cast::<u8>().wrapping_offset(offset + (12 * k + at) as isize);
                // SAFETY: element k of the caller's buffer lies at offset + 12k.
                let bytes = unsafe { std::slice::from_raw_parts(from, 4) };
                out[8 * k + 4 * part..8 * k + 4 * part + 4].copy_from_slice(bytes);
            }
        }
        8 * n
    }

    fn unpack(&self, packed: &[u8], buf: *mut c_void, offset: isize, n: usize, ty: Ty, _: Comm) {
        assert_eq!(ty, Ty::Vector);
        for k in 0..n {
            for (part, at) in [0usize, 8].into_iter().enumerate() {
                let to = buf.cast::<u8>().wrapping_offset(offset + (12 * k + at) as isize);
                // SAFETY: element k of the caller's buffer lies at offset + 12k.
                let bytes = unsafe { std::slice::from_raw_parts_mut(to, 4) };
                bytes.copy_from_slice(&packed[8 * k + 4 * part..8 * k + 4 * part + 4]);
            }
        }
    }

    fn reduce(
        &self,
        comm: Comm,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        _count: usize,
        ty: Ty,
        op: Op,
    ) -> Result<(), Code> {
        self.reduce_at(comm, root, send, recv, ty, op);
        Ok(())
    }

    fn bcast_bytes(&self, comm: Comm, data: &mut [u8], root: usize) -> Result<(), Code> {
        if self.comm_rank(comm) == root {
            let size = self.members(comm).len();
            (0..size).filter(|&r| r != root).for_each(|r| self.post(REFERENCE, comm, r, data.to_vec()));
        } else {
            data.copy_from_slice(&self.take(REFERENCE, comm, root));
            if self.world.wrong_reference.load(Ordering::Relaxed) {
                data[0] ^= 1;
            }
        }
        Ok(())
    }

    fn gatherv_bytes(
        &self,
        comm: Comm,
        send: &[u8],
        recv: &mut [u8],
        blocks: &[(usize, usize)],
        root: usize,
    ) -> Result<(), Code> {
        self.post(REFERENCE, comm, root, send.to_vec());
        if self.comm_rank(comm) == root {
            for (r, &(off, len)) in blocks.iter().enumerate().take(self.members(comm).len()) {
                recv[off..off + len].copy_from_slice(&self.take(REFERENCE, comm, r));
            }
        }
        Ok(())
    }

    fn world_rank(&self) -> usize {
        self.rank
    }

    fn sum_at_root(&self, mine: &[u64]) -> Option<Vec<u64>> {
        let all = self.allgather_words(self.world(), mine).ok()?;
        (self.rank == 0).then(|| (0..mine.len()).map(|i| all.iter().skip(i).step_by(mine.len()).sum()).collect())
    }

    fn version(&self) -> String {
        "the test host".into()
    }

    fn raise(&self, _: Comm, class: ErrorClass) -> Code {
        match class {
            ErrorClass::Truncate => ERR_TRUNCATE,
            ErrorClass::Other => ERR_OTHER,
            ErrorClass::Count => ERR_COUNT,
            ErrorClass::Arg => ERR_ARG,
            ErrorClass::Type => ERR_TYPE,
            ErrorClass::Buffer | ErrorClass::AliasedAtRoot => ERR_BUFFER,
        }
    }

    fn abort(&self, text: &str) -> ! {
        panic!("abort: {text}")
    }
}

/// The test host's codes of [`ErrorClass`]es (MPICH's numbers).
pub const ERR_BUFFER: Code = 1;
pub const ERR_COUNT: Code = 2;
pub const ERR_TYPE: Code = 3;
pub const ERR_ARG: Code = 12;
pub const ERR_TRUNCATE: Code = 15;
pub const ERR_OTHER: Code = 16;
pub const ERR_WIN: Code = 45;

/// The node's memory of a test rank: heap segments, found by name while
/// the name is linked; peer memory by plain copies. The world's
/// `no_segment` and `no_zero_copy` make a thread fail.
#[derive(Clone, Copy)]
pub struct TestOs {
    world: &'static World,
    rank: usize,
}

impl TestOs {
    /// A thread among the world's `no_segment` fails to map any segment,
    /// as where /dev/shm has no room for its part.
    fn fits(&self) -> std::io::Result<()> {
        match TestHost::among(&self.world.no_segment, self.rank) {
            true => Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "no room in the test's /dev/shm")),
            false => Ok(()),
        }
    }
}

impl NodeOs for TestOs {
    type Mapping = &'static HeapSegment;
    type Peers = Threads;

    fn cores(&self) -> Option<usize> {
        None
    }

    fn private(&self, geo: Geometry) -> Option<&'static HeapSegment> {
        Some(Box::leak(Box::new(HeapSegment::new(geo))))
    }

    fn shm_bytes(&self) -> Option<usize> {
        Some(self.world.shm_bytes.load(Ordering::Relaxed)).filter(|&b| b > 0)
    }

    fn create(&self, geo: Geometry) -> std::io::Result<(SegmentName, &'static HeapSegment)> {
        self.fits()?;
        let mut name = [0u8; 64];
        let text = format!("/test-{}", self.world.segments_made.fetch_add(1, Ordering::Relaxed));
        name[..text.len()].copy_from_slice(text.as_bytes());
        let segment = self.private(geo).expect("heap memory");
        self.world.segments.lock().unwrap().insert(name, segment);
        Ok((name, segment))
    }

    fn open(&self, name: &SegmentName, geo: Geometry, _local: usize) -> std::io::Result<&'static HeapSegment> {
        let segment = *self.world.segments.lock().unwrap().get(name).expect("a linked name");
        assert_eq!(segment.seg.geo, geo, "every rank of a node computes the same geometry");
        self.fits()?;
        Ok(segment)
    }

    fn unlink(&self, name: &SegmentName) {
        self.world.segments.lock().unwrap().remove(name);
    }

    fn settle(&self, _: &&'static HeapSegment, _: usize) {}

    fn probe_words(&self) -> [u64; 2] {
        [self.rank as u64, 0]
    }

    fn probe(&self, words: &[u64]) -> bool {
        !TestHost::among(&self.world.no_zero_copy, words[0] as usize)
    }

    fn peers(&self, _: &[u64]) -> Threads {
        Threads
    }
}
