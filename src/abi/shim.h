/* pcoll's C shim: what Rust cannot get from mpi-sys, because the MPI
 * headers provide it as macros (MPI_IN_PLACE, the predefined datatypes and
 * ops, MPI_COMM_NULL_COPY_FN) whose values differ between MPICH (integer
 * handles) and Open MPI (pointers to global objects). */
#ifndef PCOLL_SHIM_H
#define PCOLL_SHIM_H
#include <mpi.h>

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

void *pcoll_in_place(void);
MPI_Datatype pcoll_dtype_byte(void);

#ifdef OPEN_MPI
/* A Fortran buffer argument as C sees it: Open MPI's Fortran MPI_IN_PLACE
 * (only if in_place_allowed) and MPI_BOTTOM become the C constants. */
void *pcoll_fortran_buffer(void *buf, int in_place_allowed);
#endif

/* A communicator keyval whose attribute is not copied by MPI_Comm_dup. */
int pcoll_create_keyval(MPI_Comm_delete_attr_function *delete_fn, int *keyval);

#endif
