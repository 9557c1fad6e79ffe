/* See shim.h. Handles are compared here, in C, because only the MPI header
 * knows what they are. */
#define _GNU_SOURCE
#include "shim.h"
#include <dlfcn.h>
#include <float.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFINE_HOST_FUNCTION(name) __typeof__(&name) pcoll_##name;
PCOLL_HOST_FUNCTIONS(DEFINE_HOST_FUNCTION)
PCOLL_HOST_LARGE_COUNT_FUNCTIONS(DEFINE_HOST_FUNCTION)

/* The shim's own calls go through the bound pointers too. */
#define PMPI_Comm_create_keyval pcoll_PMPI_Comm_create_keyval
#define PMPI_Comm_dup pcoll_PMPI_Comm_dup
#define PMPI_Comm_set_errhandler pcoll_PMPI_Comm_set_errhandler
#define PMPI_Pack pcoll_PMPI_Pack

#ifdef OPEN_MPI
/* Open MPI's predefined handles are the addresses of global objects
 * (OMPI_PREDEFINED_GLOBAL(type, ompi_mpi_int) is `(type)&ompi_mpi_int`):
 * each becomes a pointer bound by dlsym, so that no reference is left for
 * the loader. host_globals.h (build.rs, from the host's mpi.h) lists every
 * such object the header declares. */
#include "host_globals.h"
#define DECLARE_GLOBAL(global) static void *bound_##global;
PCOLL_OMPI_GLOBALS(DECLARE_GLOBAL)
#undef OMPI_PREDEFINED_GLOBAL
#define OMPI_PREDEFINED_GLOBAL(type, global) ((type)bound_##global)
#endif

struct pcoll_handles pcoll_handles;

_Static_assert(sizeof(MPI_Aint) == sizeof(long), "MPI_Aint is C's long in Rust (build.rs)");

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

/* The tables are built once, when the host is bound (Open MPI's handles
 * are known only then), not at every call. */
static struct dtype_entry dtype_table[64];
static size_t dtype_entries;

static void build_dtype_table(void)
{
    const struct dtype_entry table[] = {
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
    _Static_assert(sizeof table <= sizeof dtype_table, "dtype_table holds every predefined datatype");
    dtype_entries = 0;
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
#ifdef OPEN_MPI
        if (table[k].handle != NULL) /* NULL: a type this Open MPI lacks */
#endif
            dtype_table[dtype_entries++] = table[k];
}

int pcoll_dtype_class(MPI_Datatype datatype, int *repr)
{
    *repr = PCOLL_REPR_NONE;
    if (datatype == MPI_DATATYPE_NULL)
        return PCOLL_CLASS_NULL;
    for (size_t k = 0; k < dtype_entries; k++) {
        if (dtype_table[k].handle == datatype) {
            *repr = dtype_table[k].repr;
            return dtype_table[k].cls;
        }
    }
    return PCOLL_CLASS_DERIVED;
}

struct op_entry {
    MPI_Op handle;
    int code;
};
static struct op_entry op_table[15];

static void build_op_table(void)
{
    const struct op_entry table[] = {
        {MPI_MAX, PCOLL_OP_MAX},       {MPI_MIN, PCOLL_OP_MIN},       {MPI_SUM, PCOLL_OP_SUM},
        {MPI_PROD, PCOLL_OP_PROD},     {MPI_LAND, PCOLL_OP_LAND},     {MPI_BAND, PCOLL_OP_BAND},
        {MPI_LOR, PCOLL_OP_LOR},       {MPI_BOR, PCOLL_OP_BOR},       {MPI_LXOR, PCOLL_OP_LXOR},
        {MPI_BXOR, PCOLL_OP_BXOR},     {MPI_MINLOC, PCOLL_OP_MINLOC}, {MPI_MAXLOC, PCOLL_OP_MAXLOC},
        {MPI_OP_NULL, PCOLL_OP_OTHER}, {MPI_REPLACE, PCOLL_OP_OTHER}, {MPI_NO_OP, PCOLL_OP_OTHER},
    };
    _Static_assert(sizeof table == sizeof op_table, "op_table holds every predefined operator");
    memcpy(op_table, table, sizeof table);
}

int pcoll_op_code(MPI_Op op)
{
    for (size_t k = 0; k < sizeof op_table / sizeof op_table[0]; k++)
        if (op_table[k].handle == op)
            return op_table[k].code;
    return PCOLL_OP_USER;
}

/* MPI_COMM_NULL_COPY_FN, which Open MPI defines as a function of libmpi
 * (an address the loader would have to resolve). */
static int no_copy(MPI_Comm comm, int keyval, void *extra, void *value_in, void *value_out, int *flag)
{
    (void)comm, (void)keyval, (void)extra, (void)value_in, (void)value_out;
    *flag = 0;
    return MPI_SUCCESS;
}

int pcoll_create_keyval(MPI_Comm_delete_attr_function *delete_fn, int *keyval)
{
    return PMPI_Comm_create_keyval(no_copy, delete_fn, keyval, NULL);
}

#ifdef OPEN_MPI
/* Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM are the addresses of the
 * common blocks mpi_fortran_in_place and mpi_fortran_bottom, spelled the way
 * the Fortran compiler names symbols (libmpi defines the spelling it was
 * configured for; gfortran: one trailing underscore). Bound with the host:
 * a spelling the host does not define stays NULL. */
struct fortran_sentinel {
    const char *names[4];
    void *addresses[4];
};
static struct fortran_sentinel fortran_in_place = {
    {"MPI_FORTRAN_IN_PLACE", "mpi_fortran_in_place", "mpi_fortran_in_place_", "mpi_fortran_in_place__"}, {0}};
static struct fortran_sentinel fortran_bottom = {
    {"MPI_FORTRAN_BOTTOM", "mpi_fortran_bottom", "mpi_fortran_bottom_", "mpi_fortran_bottom__"}, {0}};

static void bind_sentinel(void *host, struct fortran_sentinel *sentinel)
{
    for (int k = 0; k < 4; k++)
        sentinel->addresses[k] = dlsym(host, sentinel->names[k]);
}

static int is_sentinel(const struct fortran_sentinel *sentinel, const void *buf)
{
    for (int k = 0; k < 4; k++)
        if (buf != NULL && buf == sentinel->addresses[k])
            return 1;
    return 0;
}

void *pcoll_fortran_buffer(void *buf, int in_place_allowed)
{
    if (in_place_allowed && is_sentinel(&fortran_in_place, buf))
        return MPI_IN_PLACE;
    return is_sentinel(&fortran_bottom, buf) ? MPI_BOTTOM : buf;
}
#endif

/* A duplicate of MPI_COMM_SELF that returns errors instead of calling the
 * user's error handler: probing a datatype must not abort the job. */
static MPI_Comm probe_comm; /* set by create_probe_comm */
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

/* ------------------------------------------------------------------------
 * Binding: which library is the host, and what pcoll takes from it. */

enum { MAX_OBJECTS = 1024 };
struct loaded_objects {
    char *names[MAX_OBJECTS];
    int n;
};

static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
    struct loaded_objects *objects = data;
    (void)size;
    if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0' && objects->n < MAX_OBJECTS) {
        char *name = strdup(info->dlpi_name);
        if (name != NULL)
            objects->names[objects->n++] = name;
    }
    return 0;
}

/* The process's MPI library: the global scope first (a program linked with
 * MPI, pcoll preloaded or linked before it), then every loaded object, for
 * a program that loaded MPI privately (Python imports mpi4py with
 * RTLD_LOCAL); dlsym on an object's handle also searches the objects it
 * depends on. Sets *host to a handle for dlsym (RTLD_DEFAULT is NULL);
 * returns whether there is one. */
static int find_host(void **host)
{
    *host = RTLD_DEFAULT;
    if (dlsym(RTLD_DEFAULT, "PMPI_Init") != NULL)
        return 1;
    static struct loaded_objects objects; /* 8 KiB: not on the caller's stack */
    objects.n = 0;
    /* dlopen after, not inside, dl_iterate_phdr, which holds the loader's lock */
    dl_iterate_phdr(collect_object, &objects);
    int found = 0;
    for (int k = 0; k < objects.n; k++) {
        void *object = found ? NULL : dlopen(objects.names[k], RTLD_LAZY | RTLD_NOLOAD);
        if (object != NULL && dlsym(object, "PMPI_Init") != NULL) {
            *host = object; /* kept open: it stays loaded with MPI anyway */
            found = 1;
        } else if (object != NULL) {
            dlclose(object);
        }
        free(objects.names[k]);
    }
    return found;
}

static const char *bind_error;
static const char *host_library = "";
static char missing[1024];

static void note_missing(const char *name)
{
    size_t used = strlen(missing);
    snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "", name);
}

static void bind_host(void)
{
    static char message[1400];
    void *host;
    if (!find_host(&host)) {
        bind_error = "no MPI library is loaded in this process (none defines PMPI_Init)";
        return;
    }
    Dl_info info;
    if (dladdr(dlsym(host, "PMPI_Init"), &info) != 0 && info.dli_fname != NULL)
        host_library = info.dli_fname;
#define BIND_REQUIRED(name)                                                     \
    if ((pcoll_##name = (__typeof__(pcoll_##name))dlsym(host, #name)) == NULL) \
        note_missing(#name);
#define BIND_OPTIONAL(name) pcoll_##name = (__typeof__(pcoll_##name))dlsym(host, #name);
    PCOLL_HOST_FUNCTIONS(BIND_REQUIRED)
    PCOLL_HOST_LARGE_COUNT_FUNCTIONS(BIND_OPTIONAL)
#ifdef OPEN_MPI
#define BIND_GLOBAL(global) bound_##global = dlsym(host, #global);
    PCOLL_OMPI_GLOBALS(BIND_GLOBAL)
    bind_sentinel(host, &fortran_in_place);
    bind_sentinel(host, &fortran_bottom);
#endif
    pcoll_handles = (struct pcoll_handles){
        .comm_world = MPI_COMM_WORLD,
        .comm_self = MPI_COMM_SELF,
        .comm_null = MPI_COMM_NULL,
        .byte = MPI_BYTE,
        .uint64 = MPI_UINT64_T,
        .sum = MPI_SUM,
        .info_null = MPI_INFO_NULL,
        .win_null = MPI_WIN_NULL,
        .request_null = MPI_REQUEST_NULL,
        .errors_return = MPI_ERRORS_RETURN,
        .status_ignore = MPI_STATUS_IGNORE,
        .statuses_ignore = MPI_STATUSES_IGNORE,
        .in_place = MPI_IN_PLACE,
        .undefined = MPI_UNDEFINED,
        .comm_type_shared = MPI_COMM_TYPE_SHARED,
        .any_source = MPI_ANY_SOURCE,
        .any_tag = MPI_ANY_TAG,
        .thread_multiple = MPI_THREAD_MULTIPLE,
    };
#ifdef OPEN_MPI
    /* The handles pcoll passes itself; missing under another MPI family. */
    const struct {
        const void *bound;
        const char *name;
    } needed[] = {
#define NEEDED(global) {bound_##global, #global}
        NEEDED(ompi_mpi_comm_world), NEEDED(ompi_mpi_comm_self), NEEDED(ompi_mpi_comm_null),
        NEEDED(ompi_mpi_byte),       NEEDED(ompi_mpi_uint64_t),  NEEDED(ompi_mpi_op_sum),
        NEEDED(ompi_mpi_info_null),  NEEDED(ompi_mpi_win_null),  NEEDED(ompi_request_null),
        NEEDED(ompi_mpi_datatype_null), NEEDED(ompi_mpi_errors_return),
    };
    for (size_t k = 0; k < sizeof needed / sizeof needed[0]; k++)
        if (needed[k].bound == NULL)
            note_missing(needed[k].name);
#endif
    build_dtype_table();
    build_op_table();
    if (missing[0] != '\0') {
        snprintf(message, sizeof message, "the MPI library %s lacks %s", host_library, missing);
        bind_error = message;
    }
}

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

const char *pcoll_bind(const char **library)
{
    pthread_once(&bind_once, bind_host);
    *library = host_library;
    return bind_error;
}
