/* See shim.h. Handles are compared here, in C, because only the MPI header
 * knows what they are. */
#include "shim.h"
#include <float.h>
#include <pthread.h>
#include <stddef.h>

/* Representation of an integer type from its size and signedness. */
#define INT_REPR(T)                                                              \
    ((T)-1 < (T)1 ? (sizeof(T) == 1   ? PCOLL_REPR_I8                            \
                     : sizeof(T) == 2 ? PCOLL_REPR_I16                           \
                     : sizeof(T) == 4 ? PCOLL_REPR_I32                           \
                     : sizeof(T) == 8 ? PCOLL_REPR_I64                           \
                                      : PCOLL_REPR_NONE)                         \
                  : (sizeof(T) == 1   ? PCOLL_REPR_U8                            \
                     : sizeof(T) == 2 ? PCOLL_REPR_U16                           \
                     : sizeof(T) == 4 ? PCOLL_REPR_U32                           \
                     : sizeof(T) == 8 ? PCOLL_REPR_U64                           \
                                      : PCOLL_REPR_NONE))

struct long_int { long v; int i; };

/* long double is x87 extended precision, padded to 16 bytes. */
#define X87_LONG_DOUBLE (LDBL_MANT_DIG == 64 && LDBL_MAX_EXP == 16384 && sizeof(long double) == 16)

struct dtype_entry {
    MPI_Datatype handle;
    int cls;
    int repr;
};

/* The tables are static: built once by the loader (handles are
 * compile-time constants in MPICH and addresses of global objects in Open
 * MPI), not on the stack at every call. */
int pcoll_dtype_class(MPI_Datatype datatype, int *repr)
{
    static const struct dtype_entry table[] = {
        {MPI_INT, PCOLL_CLASS_C_INTEGER, INT_REPR(int)},
        {MPI_LONG, PCOLL_CLASS_C_INTEGER, INT_REPR(long)},
        {MPI_SHORT, PCOLL_CLASS_C_INTEGER, INT_REPR(short)},
        {MPI_UNSIGNED_SHORT, PCOLL_CLASS_C_INTEGER, INT_REPR(unsigned short)},
        {MPI_UNSIGNED, PCOLL_CLASS_C_INTEGER, INT_REPR(unsigned)},
        {MPI_UNSIGNED_LONG, PCOLL_CLASS_C_INTEGER, INT_REPR(unsigned long)},
        {MPI_LONG_LONG_INT, PCOLL_CLASS_C_INTEGER, INT_REPR(long long)},
        {MPI_LONG_LONG, PCOLL_CLASS_C_INTEGER, INT_REPR(long long)},
        {MPI_UNSIGNED_LONG_LONG, PCOLL_CLASS_C_INTEGER, INT_REPR(unsigned long long)},
        {MPI_SIGNED_CHAR, PCOLL_CLASS_C_INTEGER, INT_REPR(signed char)},
        {MPI_UNSIGNED_CHAR, PCOLL_CLASS_C_INTEGER, INT_REPR(unsigned char)},
        /* Outside the standard's reduction table, but MPICH and Open MPI
         * both reduce MPI_CHAR with every C integer operator, as the C
         * compiler's char (signed on x86-64), and OSU's benchmarks reduce
         * MPI_CHAR by default; ctests/common.h checks it against the host. */
        {MPI_CHAR, PCOLL_CLASS_C_INTEGER, INT_REPR(char)},
        {MPI_INT8_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_I8},
        {MPI_INT16_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_I16},
        {MPI_INT32_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_I32},
        {MPI_INT64_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_I64},
        {MPI_UINT8_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_U8},
        {MPI_UINT16_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_U16},
        {MPI_UINT32_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_U32},
        {MPI_UINT64_T, PCOLL_CLASS_C_INTEGER, PCOLL_REPR_U64},
        {MPI_AINT, PCOLL_CLASS_MULTI_LANGUAGE, INT_REPR(MPI_Aint)},
        {MPI_OFFSET, PCOLL_CLASS_MULTI_LANGUAGE, INT_REPR(MPI_Offset)},
        {MPI_COUNT, PCOLL_CLASS_MULTI_LANGUAGE, INT_REPR(MPI_Count)},
        {MPI_FLOAT, PCOLL_CLASS_FLOATING, sizeof(float) == 4 ? PCOLL_REPR_F32 : PCOLL_REPR_NONE},
        {MPI_DOUBLE, PCOLL_CLASS_FLOATING, sizeof(double) == 8 ? PCOLL_REPR_F64 : PCOLL_REPR_NONE},
        {MPI_LONG_DOUBLE, PCOLL_CLASS_FLOATING, X87_LONG_DOUBLE ? PCOLL_REPR_F80 : PCOLL_REPR_NONE},
        {MPI_C_BOOL, PCOLL_CLASS_LOGICAL, sizeof(_Bool) == 1 ? PCOLL_REPR_BOOL : PCOLL_REPR_NONE},
        {MPI_C_FLOAT_COMPLEX, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C32},
        {MPI_C_DOUBLE_COMPLEX, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C64},
        {MPI_C_LONG_DOUBLE_COMPLEX, PCOLL_CLASS_COMPLEX, X87_LONG_DOUBLE ? PCOLL_REPR_C80 : PCOLL_REPR_NONE},
        {MPI_BYTE, PCOLL_CLASS_BYTE, PCOLL_REPR_U8},
        {MPI_FLOAT_INT, PCOLL_CLASS_PAIR, PCOLL_REPR_F32_I32},
        {MPI_DOUBLE_INT, PCOLL_CLASS_PAIR, PCOLL_REPR_F64_I32},
        {MPI_LONG_INT, PCOLL_CLASS_PAIR,
         sizeof(struct long_int) == 16 && sizeof(long) == 8 ? PCOLL_REPR_I64_I32 : PCOLL_REPR_NONE},
        {MPI_2INT, PCOLL_CLASS_PAIR, PCOLL_REPR_I32_I32},
        {MPI_SHORT_INT, PCOLL_CLASS_PAIR, PCOLL_REPR_I16_I32},
        {MPI_LONG_DOUBLE_INT, PCOLL_CLASS_PAIR, PCOLL_REPR_NONE},
        /* The Fortran types: representations assume gfortran's default
         * kinds; handles.rs uses a kernel only if its element size is the
         * host's extent, else the host's MPI_Reduce_local combines. */
        {MPI_INTEGER, PCOLL_CLASS_FORTRAN_INTEGER, PCOLL_REPR_I32},
        {MPI_INTEGER1, PCOLL_CLASS_FORTRAN_INTEGER, PCOLL_REPR_I8},
        {MPI_INTEGER2, PCOLL_CLASS_FORTRAN_INTEGER, PCOLL_REPR_I16},
        {MPI_INTEGER4, PCOLL_CLASS_FORTRAN_INTEGER, PCOLL_REPR_I32},
        {MPI_INTEGER8, PCOLL_CLASS_FORTRAN_INTEGER, PCOLL_REPR_I64},
        {MPI_REAL, PCOLL_CLASS_FLOATING, PCOLL_REPR_F32},
        {MPI_DOUBLE_PRECISION, PCOLL_CLASS_FLOATING, PCOLL_REPR_F64},
        {MPI_REAL4, PCOLL_CLASS_FLOATING, PCOLL_REPR_F32},
        {MPI_REAL8, PCOLL_CLASS_FLOATING, PCOLL_REPR_F64},
        {MPI_REAL16, PCOLL_CLASS_FLOATING, PCOLL_REPR_NONE},
        {MPI_COMPLEX, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C32},
        {MPI_DOUBLE_COMPLEX, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C64},
        {MPI_COMPLEX8, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C32},
        {MPI_COMPLEX16, PCOLL_CLASS_COMPLEX, PCOLL_REPR_C64},
        {MPI_COMPLEX32, PCOLL_CLASS_COMPLEX, PCOLL_REPR_NONE},
        {MPI_LOGICAL, PCOLL_CLASS_LOGICAL, PCOLL_REPR_NONE}, /* the compiler's .true. */
        {MPI_2INTEGER, PCOLL_CLASS_PAIR, PCOLL_REPR_I32_I32},
        {MPI_2REAL, PCOLL_CLASS_PAIR, PCOLL_REPR_NONE},
        {MPI_2DOUBLE_PRECISION, PCOLL_CLASS_PAIR, PCOLL_REPR_NONE},
        {MPI_CHARACTER, PCOLL_CLASS_OTHER, PCOLL_REPR_NONE},

        {MPI_WCHAR, PCOLL_CLASS_OTHER, PCOLL_REPR_NONE},
        {MPI_PACKED, PCOLL_CLASS_OTHER, PCOLL_REPR_NONE},
    };
    *repr = PCOLL_REPR_NONE;
    if (datatype == MPI_DATATYPE_NULL)
        return PCOLL_CLASS_NULL;
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        if (table[k].handle == datatype) {
            *repr = table[k].repr;
            return table[k].cls;
        }
    }
    return PCOLL_CLASS_DERIVED;
}

int pcoll_op_code(MPI_Op op)
{
    static const struct {
        MPI_Op handle;
        int code;
    } table[] = {
        {MPI_MAX, PCOLL_OP_MAX},       {MPI_MIN, PCOLL_OP_MIN},       {MPI_SUM, PCOLL_OP_SUM},
        {MPI_PROD, PCOLL_OP_PROD},     {MPI_LAND, PCOLL_OP_LAND},     {MPI_BAND, PCOLL_OP_BAND},
        {MPI_LOR, PCOLL_OP_LOR},       {MPI_BOR, PCOLL_OP_BOR},       {MPI_LXOR, PCOLL_OP_LXOR},
        {MPI_BXOR, PCOLL_OP_BXOR},     {MPI_MINLOC, PCOLL_OP_MINLOC}, {MPI_MAXLOC, PCOLL_OP_MAXLOC},
        {MPI_OP_NULL, PCOLL_OP_OTHER}, {MPI_REPLACE, PCOLL_OP_OTHER}, {MPI_NO_OP, PCOLL_OP_OTHER},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (table[k].handle == op)
            return table[k].code;
    return PCOLL_OP_USER;
}

void *pcoll_in_place(void) { return MPI_IN_PLACE; }

MPI_Datatype pcoll_dtype_byte(void) { return MPI_BYTE; }

int pcoll_create_keyval(MPI_Comm_delete_attr_function *delete_fn, int *keyval)
{
    return PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_fn, keyval, NULL);
}

#ifdef OPEN_MPI
/* Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM are the addresses of the
 * common blocks mpi_fortran_in_place and mpi_fortran_bottom, spelled the way
 * the Fortran compiler names symbols (libmpi defines the spelling it was
 * configured for; gfortran: one trailing underscore). Weak references: a
 * spelling the host does not define has the address NULL. */
#define FORTRAN_SENTINEL(UPPER, lower)                                                  \
    extern int UPPER __attribute__((weak)), lower __attribute__((weak)),                \
        lower##_ __attribute__((weak)), lower##__ __attribute__((weak));                \
    static int is_##lower(const void *buf)                                              \
    {                                                                                   \
        return buf != NULL && (buf == &UPPER || buf == &lower || buf == &lower##_ ||    \
                               buf == &lower##__);                                      \
    }
FORTRAN_SENTINEL(MPI_FORTRAN_IN_PLACE, mpi_fortran_in_place)
FORTRAN_SENTINEL(MPI_FORTRAN_BOTTOM, mpi_fortran_bottom)

void *pcoll_fortran_buffer(void *buf, int in_place_allowed)
{
    if (in_place_allowed && is_mpi_fortran_in_place(buf))
        return MPI_IN_PLACE;
    return is_mpi_fortran_bottom(buf) ? MPI_BOTTOM : buf;
}
#endif

/* A duplicate of MPI_COMM_SELF that returns errors instead of calling the
 * user's error handler: probing a datatype must not abort the job. */
static MPI_Comm probe_comm = MPI_COMM_NULL;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void create_probe_comm(void)
{
    PMPI_Comm_dup(MPI_COMM_SELF, &probe_comm);
    PMPI_Comm_set_errhandler(probe_comm, MPI_ERRORS_RETURN);
}

/* MPI_Pack refuses an uncommitted datatype with MPI_ERR_TYPE even for zero
 * elements, in MPICH 4.0 and Open MPI 4.1 alike (checked with an
 * uncommitted vector and struct, committed derived types up to 8 MiB and
 * the predefined types); zero elements move nothing and cannot overflow
 * the buffer, so any other outcome means the type is committed. */
int pcoll_dtype_committed(MPI_Datatype datatype)
{
    char in = 0, out[8];
    int position = 0;
    pthread_once(&probe_once, create_probe_comm);
    return PMPI_Pack(&in, 0, datatype, out, (int)sizeof out, &position, probe_comm) == MPI_SUCCESS;
}
