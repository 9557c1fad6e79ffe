/* pcoll's C shim: the host MPI as pcoll reaches it. libpcoll.so names no
 * MPI library (no DT_NEEDED entry, no reference the loader must resolve):
 * pcoll_bind finds the MPI library the process itself loaded and takes
 * from it, by dlsym, every PMPI function pcoll calls and, under Open MPI,
 * the global objects whose addresses are its predefined handles. So a
 * preloaded pcoll never loads an MPI of its own (another distribution's
 * libmpich.so.12 beside a wheel's libmpi.so.12, or Debian's libmpi.so.40
 * into a Python that later loads a wheel's), and it also works where the
 * program loads MPI privately (mpi4py: RTLD_LOCAL). The predefined handles
 * are macros whose values differ between MPICH (integer constants) and
 * Open MPI (addresses of global objects), so they are compared here. */
#ifndef PCOLL_SHIM_H
#define PCOLL_SHIM_H
#include <mpi.h>

/* Every host function pcoll calls, bound by pcoll_bind; each is
 * `pcoll_<name>` here and `<name>` in Rust (see the pmpi! macro). */
#define PCOLL_HOST_FUNCTIONS(X)                                                           \
    X(PMPI_Init) X(PMPI_Init_thread) X(PMPI_Initialized) X(PMPI_Abort)                    \
    X(PMPI_Get_library_version) X(PMPI_Comm_rank) X(PMPI_Comm_size) X(PMPI_Comm_dup)      \
    X(PMPI_Comm_free) X(PMPI_Comm_split) X(PMPI_Comm_split_type) X(PMPI_Comm_test_inter)  \
    X(PMPI_Comm_set_attr) X(PMPI_Comm_get_attr) X(PMPI_Comm_create_keyval)                \
    X(PMPI_Comm_free_keyval) X(PMPI_Comm_set_errhandler) X(PMPI_Comm_call_errhandler)     \
    X(PMPI_Type_size) X(PMPI_Type_get_extent) X(PMPI_Type_get_true_extent)                \
    X(PMPI_Type_get_name)                                                                 \
    X(PMPI_Type_create_struct) X(PMPI_Type_commit) X(PMPI_Type_free)                      \
    X(PMPI_Op_commutative) X(PMPI_Pack) X(PMPI_Unpack) X(PMPI_Reduce_local)               \
    X(PMPI_Allreduce) X(PMPI_Reduce) X(PMPI_Bcast) X(PMPI_Gatherv) X(PMPI_Barrier)        \
    X(PMPI_Allgather) X(PMPI_Isend) X(PMPI_Irecv) X(PMPI_Testall) X(PMPI_Iprobe)          \
    X(PMPI_Query_thread) X(PMPI_Win_create) X(PMPI_Win_free) X(PMPI_Win_fence)            \
    X(PMPI_Put) X(PMPI_Get)                                                               \
    PCOLL_HOST_FORTRAN_FUNCTIONS(X)

/* Open MPI's Fortran bindings in pcoll (src/abi/fortran.rs) convert handles
 * with these; MPICH defines them as macros, and needs no such bindings. */
#ifdef OPEN_MPI
#define PCOLL_HOST_FORTRAN_FUNCTIONS(X) X(PMPI_Comm_f2c) X(PMPI_Type_f2c) X(PMPI_Op_f2c)
#else
#define PCOLL_HOST_FORTRAN_FUNCTIONS(X)
#endif

/* The MPI-4 large-count forms: bound where the host has them (an MPI
 * whose header declares them may still lack them, Intel MPI before 2021.11). */
#if MPI_VERSION >= 4
#define PCOLL_HOST_LARGE_COUNT_FUNCTIONS(X)                                               \
    X(PMPI_Allreduce_c) X(PMPI_Reduce_c) X(PMPI_Bcast_c) X(PMPI_Gatherv_c)
#else
#define PCOLL_HOST_LARGE_COUNT_FUNCTIONS(X)
#endif

#define PCOLL_DECLARE_HOST_FUNCTION(name) extern __typeof__(&name) pcoll_##name;
PCOLL_HOST_FUNCTIONS(PCOLL_DECLARE_HOST_FUNCTION)
PCOLL_HOST_LARGE_COUNT_FUNCTIONS(PCOLL_DECLARE_HOST_FUNCTION)

/* A Fortran INTEGER (Open MPI's MPI_Fint is a macro, which bindgen skips). */
typedef MPI_Fint pcoll_fint;

/* The predefined handles and constants pcoll passes to the host itself. */
struct pcoll_handles {
    MPI_Comm comm_world, comm_self, comm_null;
    MPI_Datatype byte, uint64;
    MPI_Op sum;
    MPI_Info info_null;
    MPI_Win win_null;
    MPI_Request request_null;
    MPI_Errhandler errors_return;
    MPI_Status *status_ignore, *statuses_ignore;
    void *in_place;
    int undefined, comm_type_shared, any_source, any_tag, thread_multiple;
};
extern struct pcoll_handles pcoll_handles;

/* Binds the host (once; thread-safe): returns NULL when every required
 * function and handle was found, else a static message naming what is
 * missing. *library is set to the path of the MPI library found (or ""). */
const char *pcoll_bind(const char **library);

/* The MPI standard's datatype groups, which decide the valid operators. */
enum pcoll_class {
    PCOLL_CLASS_NULL = 0, /* MPI_DATATYPE_NULL */
    PCOLL_CLASS_DERIVED, /* not a predefined datatype */
    PCOLL_CLASS_C_INTEGER,
    PCOLL_CLASS_FORTRAN_INTEGER, /* MPI_INTEGER, MPI_INTEGERn */
    PCOLL_CLASS_MULTI_LANGUAGE, /* MPI_AINT, MPI_OFFSET, MPI_COUNT */
    PCOLL_CLASS_FLOATING,
    PCOLL_CLASS_LOGICAL,
    PCOLL_CLASS_COMPLEX,
    PCOLL_CLASS_BYTE,
    PCOLL_CLASS_PAIR,
    PCOLL_CLASS_OTHER /* predefined, but no reduction operator applies */
};

/* Machine representation of an element, from C's sizeof and signedness. */
enum pcoll_repr {
    PCOLL_REPR_NONE = 0, /* no native kernel (long double, ...) */
    PCOLL_REPR_I8, PCOLL_REPR_U8, PCOLL_REPR_I16, PCOLL_REPR_U16,
    PCOLL_REPR_I32, PCOLL_REPR_U32, PCOLL_REPR_I64, PCOLL_REPR_U64,
    PCOLL_REPR_F32, PCOLL_REPR_F64, PCOLL_REPR_BOOL,
    PCOLL_REPR_C32, PCOLL_REPR_C64,
    PCOLL_REPR_F32_I32, PCOLL_REPR_F64_I32, PCOLL_REPR_I64_I32,
    PCOLL_REPR_I32_I32, PCOLL_REPR_I16_I32,
    /* x87 extended precision in 16 bytes (C long double on x86): no
     * kernel, but PCOLL_VERIFY reads the values */
    PCOLL_REPR_F80, PCOLL_REPR_C80
};

enum pcoll_op {
    PCOLL_OP_USER = 0, /* a user-defined operator */
    PCOLL_OP_MAX, PCOLL_OP_MIN, PCOLL_OP_SUM, PCOLL_OP_PROD,
    PCOLL_OP_LAND, PCOLL_OP_BAND, PCOLL_OP_LOR, PCOLL_OP_BOR,
    PCOLL_OP_LXOR, PCOLL_OP_BXOR, PCOLL_OP_MINLOC, PCOLL_OP_MAXLOC,
    PCOLL_OP_OTHER /* MPI_OP_NULL, MPI_REPLACE, MPI_NO_OP: left to the host */
};

/* Classifies a datatype handle; sets *repr (PCOLL_REPR_NONE if none). */
int pcoll_dtype_class(MPI_Datatype datatype, int *repr);
int pcoll_op_code(MPI_Op op);

/* Whether a (non-null) datatype is committed, as the host's collectives
 * require: whether MPI_Pack of zero elements (which refuses uncommitted
 * types) accepts it; public API only, the same on every MPI. */
int pcoll_dtype_committed(MPI_Datatype datatype);

#ifdef OPEN_MPI
/* A Fortran buffer argument as C sees it: Open MPI's Fortran MPI_IN_PLACE
 * (only if in_place_allowed) and MPI_BOTTOM become the C constants. */
void *pcoll_fortran_buffer(void *buf, int in_place_allowed);
#endif

/* A communicator keyval whose attribute is not copied by MPI_Comm_dup. */
int pcoll_create_keyval(MPI_Comm_delete_attr_function *delete_fn, int *keyval);

#endif
