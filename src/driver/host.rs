//! What the driver needs of the host MPI, as a trait: the library
//! implements it with PMPI calls (`src/abi`), the tests with threads of one
//! process (`driver::tests`). Handles are the host's own types; the driver
//! only compares them and hands them back.
//!
//! Every operation here is one the orchestration cannot do itself:
//! - communicators: their shape, and pcoll's state for one (looked up
//!   cheaply, created collectively at the call that sets it up, the calls
//!   before counted);
//! - communicators pcoll makes and small control messages on them (node
//!   discovery, the Gatherv root's decision, PCOLL_VERIFY's agreement);
//! - the operating system's side of the node's memory ([`NodeOs`]);
//! - moving data: a transport for schedules, the leaders' one-sided
//!   window;
//! - datatype and operator handles: what they are, their layout, packing,
//!   and the host's reduction of an operator pcoll has no kernel for;
//! - the host's own collectives, which PCOLL_VERIFY compares with;
//! - the process: its world rank, the host's version, stopping the job,
//!   and summing PCOLL_VERIFY's counts over the job.

use super::comm::{CommState, SegmentPool};
use super::thread::PerThread;
use crate::core::types::{Elem, ReduceOp, TypeClass};
use crate::exec::Transport;
use crate::shm::NodeOs;
use std::ffi::c_void;

/// An MPI return code; [`SUCCESS`] (MPI_SUCCESS is 0 in every MPI) or the
/// host's error code.
pub type Code = i32;
pub const SUCCESS: Code = 0;

/// The error class of a call pcoll finds erroneous, as the host MPI would
/// report it: ranks that disagree, or an argument only this rank can see
/// is invalid while its peers run pcoll's algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// MPI_ERR_TRUNCATE: a peer had more data than this rank's buffer.
    Truncate,
    /// MPI_ERR_OTHER: the ranks ran different calls.
    Other,
    /// MPI_ERR_COUNT: a negative count.
    Count,
    /// MPI_ERR_ARG: a null array argument (recvcounts, displs).
    Arg,
    /// MPI_ERR_TYPE: a null or uncommitted datatype.
    Type,
    /// MPI_ERR_BUFFER: a null buffer where data is.
    Buffer,
    /// A Reduce root's send and receive buffers alias: MPICH says
    /// MPI_ERR_BUFFER, Open MPI MPI_ERR_ARG (both say MPI_ERR_BUFFER for
    /// an Allreduce).
    AliasedAtRoot,
}

/// `Ok` for [`SUCCESS`], else the code.
pub fn check(rc: Code) -> Result<(), Code> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

/// What pcoll does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// pcoll ran it; the MPI return code.
    Done(Code),
    /// The host MPI must run it, for this reason.
    Forward(&'static str),
}

/// How [`Host::split`] groups the ranks of a communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Those that can share memory (MPI_COMM_TYPE_SHARED).
    Shared,
    /// By color; `None` (MPI_UNDEFINED): this rank gets a null handle.
    Color(Option<usize>),
}

/// A one-sided transfer ([`Host::win_transfer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// From the peer's window into this rank's.
    Get,
    /// From this rank's window into the peer's.
    Put,
}

/// What a datatype handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeKind {
    /// MPI_DATATYPE_NULL.
    Null,
    /// Not a predefined datatype (committed or not).
    Derived,
    /// A predefined datatype: its group (`None`: no reduction operator
    /// applies, as for MPI_CHAR) and its machine representation.
    Predefined { class: Option<TypeClass>, repr: Repr },
}

/// Machine representation of an element of a predefined datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    /// None pcoll knows (no kernel, not compared by value).
    Unknown,
    Elem(Elem),
    /// x87 extended precision in 16 bytes (C long double on x86), alone
    /// or as the two parts of a complex number: no kernel, but
    /// PCOLL_VERIFY reads the values.
    F80,
    C80,
}

/// What an operator handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// A user-defined operator.
    User,
    Predefined(ReduceOp),
    /// MPI_OP_NULL, MPI_REPLACE, MPI_NO_OP: left to the host.
    Other,
}

/// Memory layout of `count` elements of a datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeLayout {
    /// Bytes of data per element (the type signature's size).
    pub size: usize,
    /// Distance between consecutive elements.
    pub extent: isize,
    /// Where an element's bytes start, from its address, and how far they
    /// reach (MPI_Type_get_true_extent).
    pub true_lb: isize,
    pub true_extent: isize,
    /// Whether the bytes of consecutive elements are one contiguous run
    /// starting at the buffer address, so the buffer can be used as bytes.
    pub dense: bool,
}

impl TypeLayout {
    /// From MPI_Type_size, MPI_Type_get_extent (lb, extent) and
    /// MPI_Type_get_true_extent (lb, extent).
    pub fn new(size: usize, (lb, extent): (isize, isize), (true_lb, true_extent): (isize, isize)) -> TypeLayout {
        let whole = |n: isize| n == size as isize;
        let dense = lb == 0 && true_lb == 0 && whole(extent) && whole(true_extent);
        TypeLayout { size, extent, true_lb, true_extent, dense }
    }
}

/// The host MPI, as the driver uses it. Cheap to copy (the library's is
/// a unit struct): a reduction through the host keeps a copy.
pub trait Host: Copy + Sized + 'static {
    type Comm: Copy + PartialEq + 'static;
    type Datatype: Copy + PartialEq + 'static;
    type Op: Copy + PartialEq + 'static;
    /// Where node discovery gets the node's segment and zero copy.
    type Os: NodeOs;
    /// A one-sided window.
    type Win;
    /// Runs schedule steps on a state's private communicator.
    type Transport<'a>: Transport<Error = Code>
    where
        Self: 'a;

    /// Runs `f` with this thread's [`PerThread`] (one thread-local
    /// lookup).
    fn with_thread<R>(f: impl FnOnce(&PerThread<Self>) -> R) -> R;

    // --- Communicators.

    /// (rank, size) of an intracommunicator; `None` for a null handle or
    /// an intercommunicator.
    fn comm_shape(&self, comm: Self::Comm) -> Option<(usize, usize)>;
    /// Bumped whenever a state is deleted: a (handle, state) pair seen
    /// under the current epoch is still valid (see [`CommState`]).
    fn epoch(&self) -> u64;
    /// pcoll's state for `comm` if it has one (never for a null handle).
    /// It stays valid until the user frees `comm`, which MPI forbids
    /// during a collective on it.
    fn find_state<'a>(&self, comm: Self::Comm) -> Option<&'a CommState<Self>>;
    /// Creates pcoll's state for `comm`, an intracommunicator of more than
    /// one rank; collective over `comm`. Valid as [`Host::find_state`]'s.
    fn create_state<'a>(&self, comm: Self::Comm) -> Result<&'a CommState<Self>, Code>;
    /// Whether fewer than `after` calls on `comm`, which has no state, went
    /// to the host so far; if so, counts this one, which goes too. The
    /// count lives and dies with the communicator (MPI: an attribute).
    fn count_host_call(&self, comm: Self::Comm, after: usize) -> bool;
    /// MPI_COMM_WORLD.
    fn world(&self) -> Self::Comm;

    // --- Communicators pcoll makes (a state's private duplicate, node
    // discovery's), and control messages on them.

    /// Splits `comm` (collective over it) as `how` says, ranks ordered by
    /// `key`.
    fn split(&self, comm: Self::Comm, how: Split, key: usize) -> Result<Self::Comm, Code>;
    /// Frees a communicator pcoll made (nothing for a null handle) and
    /// sets the handle to null.
    fn free_comm(&self, comm: &mut Self::Comm);
    /// Every rank's `mine` (the same count at every rank), in rank order.
    fn allgather_words(&self, comm: Self::Comm, mine: &[u64]) -> Result<Vec<u64>, Code>;
    /// Broadcasts `words` (the same count at every rank) from `root`.
    fn bcast_words(&self, comm: Self::Comm, words: &mut [u64], root: usize) -> Result<(), Code>;
    fn barrier(&self, comm: Self::Comm) -> Result<(), Code>;
    /// Lets the host MPI progress what this process has started or owes
    /// its peers (a non-blocking probe on `comm`, which matches nothing).
    fn drive_progress(&self, comm: Self::Comm);
    /// Whether threads may call MPI at the same time (the host provides
    /// MPI_THREAD_MULTIPLE).
    fn thread_multiple(&self) -> bool;
    /// The operating system's side of the node's memory.
    fn os(&self) -> Self::Os;
    /// This process's budget of /dev/shm and the segments it keeps
    /// ([`super::pool`]).
    fn pool(&self) -> &'static SegmentPool<Self>;

    // --- Moving data.

    /// A transport among the ranks of the state's private communicator;
    /// schedule peer `i` is rank `ranks[i]` (all ranks in order if `None`).
    fn transport<'a>(&self, state: &'a CommState<Self>, ranks: Option<&'a [usize]>) -> Self::Transport<'a>;
    /// A window over this rank's `bytes` bytes at `base`; collective over
    /// `comm`.
    ///
    /// # Safety
    /// `base` holds `bytes` bytes that nothing else uses until
    /// [`Host::win_free`] returns.
    unsafe fn win_create(&self, comm: Self::Comm, base: *mut u8, bytes: usize) -> Result<Self::Win, Code>;
    /// Whether two windows that disjoint communicators create at once on
    /// one host can corrupt each other. Open MPI before 5.0 names the
    /// shared-memory file of a window's state after its communicator's
    /// context id, which communicators without a common process may share
    /// (ompi#9492, fixed in 5.0.0; seen here as hangs and `Read -1 ...
    /// errno = 14` from vader under PCOLL_RANKS_PER_NODE).
    fn window_names_collide(&self) -> bool;
    /// Frees a window; collective over its communicator.
    fn win_free(&self, win: &mut Self::Win);
    /// Starts a transfer of `len` bytes between `local` and byte `remote`
    /// of `peer`'s window, which the next fence completes.
    ///
    /// # Safety
    /// `local..local + len` lies in this rank's memory of `win`, and
    /// `remote..remote + len` in `peer`'s.
    unsafe fn win_transfer(
        &self,
        win: &mut Self::Win,
        access: Access,
        local: *mut u8,
        peer: usize,
        remote: usize,
        len: usize,
    ) -> Result<(), Code>;
    /// Completes every transfer of the epoch, at every rank of the window.
    fn win_fence(&self, win: &mut Self::Win) -> Result<(), Code>;

    // --- Datatypes and operators.

    /// MPI_IN_PLACE.
    fn in_place(&self) -> *const c_void;
    fn type_kind(&self, datatype: Self::Datatype) -> TypeKind;
    /// The layout of a (non-null) datatype.
    fn type_layout(&self, datatype: Self::Datatype) -> TypeLayout;
    /// Whether a derived datatype is committed.
    fn type_committed(&self, datatype: Self::Datatype) -> bool;
    /// MPI_Type_get_name.
    fn type_name(&self, datatype: Self::Datatype) -> String;
    fn op_kind(&self, op: Self::Op) -> OpKind;
    /// Whether a user-defined operator is commutative.
    fn op_commutative(&self, op: Self::Op) -> bool;
    /// MPI_SUM.
    fn op_sum(&self) -> Self::Op;
    /// `dst = src ∘ dst` by the host (MPI_Reduce_local) for `count`
    /// elements (at most `c_int::MAX`).
    fn reduce_local(&self, op: Self::Op, datatype: Self::Datatype, src: &[u8], dst: &mut [u8], count: usize);
    /// Packs `n` elements (at most `c_int::MAX` bytes) of `datatype` that
    /// start `offset` bytes from `buf` into `out`; returns the bytes packed.
    fn pack(
        &self,
        buf: *const c_void,
        offset: isize,
        n: usize,
        datatype: Self::Datatype,
        out: &mut [u8],
        comm: Self::Comm,
    ) -> usize;
    /// The inverse of [`Host::pack`].
    fn unpack(
        &self,
        packed: &[u8],
        buf: *mut c_void,
        offset: isize,
        n: usize,
        datatype: Self::Datatype,
        comm: Self::Comm,
    );

    // --- The host's own collectives (counts fit an int), which
    // PCOLL_VERIFY compares pcoll's results with on a state's private
    // communicator, and the finalize summary gathers with.

    /// Allreduce (`root` None) or Reduce of `count` elements; `recv` is
    /// significant where the result is defined.
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &self,
        comm: Self::Comm,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        count: usize,
        datatype: Self::Datatype,
        op: Self::Op,
    ) -> Result<(), Code>;
    /// Bcast of bytes.
    fn bcast_bytes(&self, comm: Self::Comm, data: &mut [u8], root: usize) -> Result<(), Code>;
    /// Gatherv of bytes: at the root, block `(offset, len)` of each rank
    /// lands in `recv`.
    fn gatherv_bytes(
        &self,
        comm: Self::Comm,
        send: &[u8],
        recv: &mut [u8],
        blocks: &[(usize, usize)],
        root: usize,
    ) -> Result<(), Code>;

    // --- The process.

    /// This process's rank in MPI_COMM_WORLD.
    fn world_rank(&self) -> usize;
    /// The sum of every rank's `mine` at world rank 0 (`None` elsewhere);
    /// collective over MPI_COMM_WORLD.
    fn sum_at_root(&self, mine: &[u64]) -> Option<Vec<u64>>;
    /// The first line of the host MPI's version string.
    fn version(&self) -> String;
    /// Reports an erroneous call on `comm` the way the host reports its
    /// own errors: through the communicator's error handler (which may
    /// stop the job); returns the code of `class`.
    fn raise(&self, comm: Self::Comm, class: ErrorClass) -> Code;
    /// Says `text` and stops the job.
    fn abort(&self, text: &str) -> !;
}
