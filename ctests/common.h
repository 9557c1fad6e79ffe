/*
 * Shared helpers for the pcoll C correctness tests.
 *
 * Every test calls the MPI_X entry points (which are pcoll's when libpcoll is
 * preloaded or linked first) and compares with a reference: for reductions
 * the host MPI's own PMPI_Allreduce on copies of the same inputs and, where
 * results are exact, the exact value computed locally; for Bcast and Gatherv
 * the exact expected bytes, computed locally from the deterministic input
 * generator.  All bookkeeping communication (failure
 * counts, cross-rank checksums) goes through PMPI_* so it never depends on
 * pcoll.
 *
 * Environment knobs (all optional):
 *   CTEST_SHARD=i/n   run only every n-th case of the type/op sweeps
 *                     (starting at i); "core" cases always run.
 *   CTEST_BIG=0       skip the >= 8 MiB cases.
 *   CTEST_NCOMMS=N    iterations of the communicator create/free loops.
 *   CTEST_TIMEOUT=S   self-imposed alarm: print the current case and exit.
 *   CTEST_VERBOSE=1   print every case as it runs (rank 0).
 *   CTEST_GATHERV_ALL_ARGS=1  every rank passes the root's recvcounts and
 *                     displs to MPI_Gatherv (what PCOLL_GATHERV_MODE=aggressive
 *                     requires), never NULL.
 *   CTEST_AVOID_HOST_BUGS=1  for runs where MPI_X is the host's X (stock MPI,
 *                     PCOLL_ENABLE=0): avoid calls known to crash the host
 *                     (MPICH 4.0.2: in-place Reduce at a non-zero root above
 *                     2 KiB) and accept the host's own result where it is
 *                     known to be wrong (both hosts compare some unsigned
 *                     types as signed in MPI_MIN/MPI_MAX).
 *
 * Reduction results of integer, logical, bitwise, MINLOC/MAXLOC and user
 * ops are checked exactly against a local reference (every rank regenerates
 * every rank's input); the host's PMPI_Allreduce result is the reference
 * for floating point (with a tolerance) and is compared with the exact
 * value, a disagreement being reported as a NOTE about the host MPI.
 */
#ifndef PCOLL_CTEST_COMMON_H
#define PCOLL_CTEST_COMMON_H

#include <mpi.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <complex.h>

#define CT_UNUSED __attribute__((unused))

/* ------------------------------------------------------------------ */
/* globals                                                              */
/* ------------------------------------------------------------------ */

static int g_rank, g_size;
static const char *g_prog = "?";
static long g_fail;           /* failures detected on this rank */
static long g_msgs;           /* failure messages printed on this rank */
static int g_shard, g_nshard = 1;
static int g_big = 1;
static int g_verbose;
static int g_avoid_host_bugs; /* CTEST_AVOID_HOST_BUGS=1: dodge known host MPI bugs */
static long g_case_counter;   /* cases seen (for sharding and salts) */
static char g_case[512] = "(init)";

#define CT_MAX_MSGS 40
#define CT_MAX_ELEM_MSGS 4

/* cross-rank checksums of Allreduce results, checked at the end */
static uint64_t *g_hashes;
static char **g_hash_desc;
static int g_nhash, g_caphash;

static CT_UNUSED void ct_fail(const char *fmt, ...)
{
    g_fail++;
    if (g_msgs++ >= CT_MAX_MSGS) {
        if (g_msgs == CT_MAX_MSGS + 1)
            fprintf(stderr, "[%s rank %d] (further failure messages suppressed)\n", g_prog, g_rank);
        return;
    }
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[%s rank %d] FAIL %s\n", g_prog, g_rank, buf);
    fflush(stderr);
}

static CT_UNUSED void ct_set_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_case, sizeof g_case, fmt, ap);
    va_end(ap);
    if (g_verbose && g_rank == 0) {
        static double last;
        double now = PMPI_Wtime();
        fprintf(stderr, "[%s] (+%.3fs) case: %s\n", g_prog, last ? now - last : 0.0, g_case);
        last = now;
        fflush(stderr);
    }
}

/* Sharding of the sweeps: core cases always run. */
static CT_UNUSED int ct_want(int core)
{
    long k = g_case_counter++;
    if (core)
        return 1;
    return (k % g_nshard) == g_shard;
}

static void *ct_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "[%s rank %d] out of memory (%zu bytes)\n", g_prog, g_rank, n);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* ------------------------------------------------------------------ */
/* signal handlers / watchdog: say which case crashed or hung           */
/* ------------------------------------------------------------------ */

static struct sigaction g_old_sa[32];

static void ct_write_case(const char *what)
{
    char buf[800];
    int n = snprintf(buf, sizeof buf, "[%s rank %d] %s during case: %s\n", g_prog, g_rank, what, g_case);
    if (n > 0) {
        ssize_t w = write(2, buf, (size_t)(n < (int)sizeof buf ? n : (int)sizeof buf - 1));
        (void)w;
    }
}

static void ct_alarm(int sig)
{
    (void)sig;
    ct_write_case("TIMEOUT (CTEST_TIMEOUT expired, probable hang)");
    _exit(3);
}

static void ct_crash(int sig, siginfo_t *si, void *uc)
{
    ct_write_case(sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE" : "SIGABRT");
    struct sigaction *old = &g_old_sa[sig];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN && old->sa_handler != NULL) {
        old->sa_handler(sig);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void ct_install_handlers(void)
{
    int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
    for (unsigned k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = ct_crash;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[k], &sa, &g_old_sa[sigs[k]]);
    }
    const char *t = getenv("CTEST_TIMEOUT");
    if (t && atoi(t) > 0) {
        signal(SIGALRM, ct_alarm);
        alarm((unsigned)atoi(t));
    }
}

/* ------------------------------------------------------------------ */
/* deterministic pseudo random numbers                                  */
/* ------------------------------------------------------------------ */

static inline uint64_t ct_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static inline uint64_t ct_rnd(uint64_t salt, int rank, long i)
{
    return ct_mix(salt ^ ct_mix((uint64_t)rank * 0x100000001B3ULL + 0x51ED27ULL) ^ ((uint64_t)i * 0xD6E8FEB86659FD93ULL));
}

/* ------------------------------------------------------------------ */
/* types and ops                                                        */
/* ------------------------------------------------------------------ */

enum {
    K_SINT, K_UINT, K_FLT, K_DBL, K_LDBL, K_BOOL, K_CFLT, K_CDBL, K_BYTE,
    K_PFI, K_PDI, K_PLI, K_P2I, K_PSI, K_PLDI,
    K_UAFF,  /* MPI_2INT with the non-commutative affine-composition user op */
    K_UCOM,  /* MPI_UNSIGNED with a commutative user op */
    K_UVEC,  /* contiguous(3, MPI_UNSIGNED) with a commutative user op */
};

enum {
    O_MIN, O_MAX, O_SUM, O_PROD, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR,
    O_MINLOC, O_MAXLOC, O_UAFF, O_UCOM, O_UVEC, O_COUNT
};

typedef struct { float v; int i; } ct_fi;
typedef struct { double v; int i; } ct_di;
typedef struct { long v; int i; } ct_li;
typedef struct { int v; int i; } ct_2i;
typedef struct { short v; int i; } ct_si;
typedef struct { long double v; int i; } ct_ldi;
typedef struct { int a; int b; } ct_aff;
typedef struct { unsigned c[3]; } ct_vec3;

typedef struct {
    const char *name;
    MPI_Datatype dt;
    int kind;
    int size;   /* bytes per element (C stride == MPI extent) */
    int isize;  /* integer width for K_SINT/K_UINT */
} ct_type;

typedef struct {
    const char *name;
    MPI_Op op;
    int id;
} ct_op;

#define CT_MAXTYPES 64
static ct_type g_types[CT_MAXTYPES];
static int g_ntypes;
static ct_op g_ops[O_COUNT];
static MPI_Datatype g_vec3_type;
static long g_userop_bad;   /* user op called with an unexpected datatype/len */

#if LDBL_MANT_DIG == 64
#define CT_LD_SIG 10
#else
#define CT_LD_SIG ((int)sizeof(long double))
#endif

static void ct_aff_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != MPI_2INT || *len < 0) {
        g_userop_bad++;
        return;
    }
    ct_aff *x = (ct_aff *)in, *y = (ct_aff *)inout;
    for (int k = 0; k < *len; k++) {
        /* y := x o y  (x comes from the lower ranks) */
        unsigned a1 = (unsigned)x[k].a, b1 = (unsigned)x[k].b;
        unsigned a2 = (unsigned)y[k].a, b2 = (unsigned)y[k].b;
        y[k].a = (int)(a1 * a2);
        y[k].b = (int)(a1 * b2 + b1);
    }
}

static void ct_ucom_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != MPI_UNSIGNED || *len < 0) {
        g_userop_bad++;
        return;
    }
    unsigned *x = (unsigned *)in, *y = (unsigned *)inout;
    for (int k = 0; k < *len; k++)
        y[k] = x[k] + y[k] + x[k] * y[k]; /* (1+x)(1+y)-1 */
}

static void ct_uvec_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != g_vec3_type || *len < 0) {
        g_userop_bad++;
        return;
    }
    ct_vec3 *x = (ct_vec3 *)in, *y = (ct_vec3 *)inout;
    for (int k = 0; k < *len; k++) {
        y[k].c[0] += x[k].c[0];
        y[k].c[1] = x[k].c[1] > y[k].c[1] ? x[k].c[1] : y[k].c[1];
        y[k].c[2] ^= x[k].c[2];
    }
}

static void ct_add_type(const char *name, MPI_Datatype dt, int kind, int size, int isize)
{
    ct_type *t = &g_types[g_ntypes++];
    t->name = name;
    t->dt = dt;
    t->kind = kind;
    t->size = size;
    t->isize = isize;
    MPI_Aint lb, ext;
    PMPI_Type_get_extent(dt, &lb, &ext);
    if (ext != size || lb != 0) {
        fprintf(stderr, "[%s] test setup: extent of %s is %ld, expected %d\n", g_prog, name, (long)ext, size);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
}

#define CT_SINT(nm, dt, ct) ct_add_type(nm, dt, K_SINT, (int)sizeof(ct), (int)sizeof(ct))
#define CT_UINT(nm, dt, ct) ct_add_type(nm, dt, K_UINT, (int)sizeof(ct), (int)sizeof(ct))

static void ct_init_types(void)
{
    CT_SINT("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, signed char);
    /* Not in the standard's reduction table: both host families reduce it
     * as the C compiler's char, with every C integer operator (pcoll too). */
    if ((char)-1 < 0)
        CT_SINT("MPI_CHAR", MPI_CHAR, char);
    else
        CT_UINT("MPI_CHAR", MPI_CHAR, char);
    CT_UINT("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, unsigned char);
    CT_SINT("MPI_SHORT", MPI_SHORT, short);
    CT_UINT("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, unsigned short);
    CT_SINT("MPI_INT", MPI_INT, int);
    CT_UINT("MPI_UNSIGNED", MPI_UNSIGNED, unsigned);
    CT_SINT("MPI_LONG", MPI_LONG, long);
    CT_UINT("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, unsigned long);
    CT_SINT("MPI_LONG_LONG", MPI_LONG_LONG, long long);
    CT_SINT("MPI_LONG_LONG_INT", MPI_LONG_LONG_INT, long long);
    CT_UINT("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, unsigned long long);
    CT_SINT("MPI_INT8_T", MPI_INT8_T, int8_t);
    CT_SINT("MPI_INT16_T", MPI_INT16_T, int16_t);
    CT_SINT("MPI_INT32_T", MPI_INT32_T, int32_t);
    CT_SINT("MPI_INT64_T", MPI_INT64_T, int64_t);
    CT_UINT("MPI_UINT8_T", MPI_UINT8_T, uint8_t);
    CT_UINT("MPI_UINT16_T", MPI_UINT16_T, uint16_t);
    CT_UINT("MPI_UINT32_T", MPI_UINT32_T, uint32_t);
    CT_UINT("MPI_UINT64_T", MPI_UINT64_T, uint64_t);
    CT_SINT("MPI_AINT", MPI_AINT, MPI_Aint);
    CT_SINT("MPI_OFFSET", MPI_OFFSET, MPI_Offset);
    CT_SINT("MPI_COUNT", MPI_COUNT, MPI_Count);
    ct_add_type("MPI_FLOAT", MPI_FLOAT, K_FLT, (int)sizeof(float), 0);
    ct_add_type("MPI_DOUBLE", MPI_DOUBLE, K_DBL, (int)sizeof(double), 0);
    ct_add_type("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, K_LDBL, (int)sizeof(long double), 0);
    ct_add_type("MPI_C_BOOL", MPI_C_BOOL, K_BOOL, (int)sizeof(_Bool), 0);
    ct_add_type("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, K_CFLT, (int)sizeof(float _Complex), 0);
    ct_add_type("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_CDBL, (int)sizeof(double _Complex), 0);
    ct_add_type("MPI_BYTE", MPI_BYTE, K_BYTE, 1, 1);
    ct_add_type("MPI_FLOAT_INT", MPI_FLOAT_INT, K_PFI, (int)sizeof(ct_fi), 0);
    ct_add_type("MPI_DOUBLE_INT", MPI_DOUBLE_INT, K_PDI, (int)sizeof(ct_di), 0);
    ct_add_type("MPI_LONG_INT", MPI_LONG_INT, K_PLI, (int)sizeof(ct_li), 0);
    ct_add_type("MPI_2INT", MPI_2INT, K_P2I, (int)sizeof(ct_2i), 0);
    ct_add_type("MPI_SHORT_INT", MPI_SHORT_INT, K_PSI, (int)sizeof(ct_si), 0);
    ct_add_type("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, K_PLDI, (int)sizeof(ct_ldi), 0);
    ct_add_type("MPI_2INT(user-affine)", MPI_2INT, K_UAFF, (int)sizeof(ct_aff), 0);
    ct_add_type("MPI_UNSIGNED(user-commutative)", MPI_UNSIGNED, K_UCOM, (int)sizeof(unsigned), 0);
    PMPI_Type_contiguous(3, MPI_UNSIGNED, &g_vec3_type);
    PMPI_Type_commit(&g_vec3_type);
    ct_add_type("contig(3,MPI_UNSIGNED)(user-commutative)", g_vec3_type, K_UVEC, (int)sizeof(ct_vec3), 0);

    static const char *opnames[O_COUNT] = {"MPI_MIN", "MPI_MAX", "MPI_SUM", "MPI_PROD", "MPI_LAND", "MPI_LOR",
                                           "MPI_LXOR", "MPI_BAND", "MPI_BOR", "MPI_BXOR", "MPI_MINLOC", "MPI_MAXLOC",
                                           "user-affine(noncommutative)", "user-commutative", "user-vec3(commutative)"};
    MPI_Op ops[O_COUNT] = {MPI_MIN, MPI_MAX, MPI_SUM, MPI_PROD, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR,
                           MPI_BXOR, MPI_MINLOC, MPI_MAXLOC, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
    PMPI_Op_create(ct_aff_fn, 0, &ops[O_UAFF]);
    PMPI_Op_create(ct_ucom_fn, 1, &ops[O_UCOM]);
    PMPI_Op_create(ct_uvec_fn, 1, &ops[O_UVEC]);
    for (int k = 0; k < O_COUNT; k++) {
        g_ops[k].name = opnames[k];
        g_ops[k].op = ops[k];
        g_ops[k].id = k;
    }
}

static CT_UNUSED const ct_type *ct_type_by_name(const char *name)
{
    for (int k = 0; k < g_ntypes; k++)
        if (strcmp(g_types[k].name, name) == 0)
            return &g_types[k];
    fprintf(stderr, "[%s] test setup: no type %s\n", g_prog, name);
    PMPI_Abort(MPI_COMM_WORLD, 2);
    return NULL;
}

/* Is op valid for the type per the MPI standard (plus our user ops)? */
static CT_UNUSED int ct_valid(const ct_type *t, int op)
{
    switch (t->kind) {
    case K_SINT:
    case K_UINT:
        return op <= O_BXOR;
    case K_FLT:
    case K_DBL:
    case K_LDBL:
        return op <= O_PROD;
    case K_CFLT:
    case K_CDBL:
        return op == O_SUM || op == O_PROD;
    case K_BOOL:
        return op == O_LAND || op == O_LOR || op == O_LXOR;
    case K_BYTE:
        return op == O_BAND || op == O_BOR || op == O_BXOR;
    case K_PFI:
    case K_PDI:
    case K_PLI:
    case K_P2I:
    case K_PSI:
    case K_PLDI:
        return op == O_MINLOC || op == O_MAXLOC;
    case K_UAFF:
        return op == O_UAFF;
    case K_UCOM:
        return op == O_UCOM;
    case K_UVEC:
        return op == O_UVEC;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* element generation                                                   */
/* ------------------------------------------------------------------ */

static void ct_store_int(void *p, int isize, uint64_t v)
{
    switch (isize) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: { uint64_t x = v; memcpy(p, &x, 8); break; }
    }
}

static uint64_t ct_load_uint(const void *p, int isize)
{
    switch (isize) {
    case 1: { uint8_t x; memcpy(&x, p, 1); return x; }
    case 2: { uint16_t x; memcpy(&x, p, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, p, 4); return x; }
    default: { uint64_t x; memcpy(&x, p, 8); return x; }
    }
}

static int64_t ct_load_sint(const void *p, int isize)
{
    switch (isize) {
    case 1: { int8_t x; memcpy(&x, p, 1); return x; }
    case 2: { int16_t x; memcpy(&x, p, 2); return x; }
    case 4: { int32_t x; memcpy(&x, p, 4); return x; }
    default: { int64_t x; memcpy(&x, p, 8); return x; }
    }
}

/* a value that is non-zero when truncated to isize bytes */
static uint64_t ct_nonzero(uint64_t h, int isize)
{
    int bits = isize * 8;
    uint64_t v;
    switch ((h >> 40) % 4) {
    case 0: v = 1; break;
    case 1: v = 1ULL << (bits - 1); break;          /* only the top bit */
    case 2: v = bits > 8 ? 256 : 2; break;          /* not in the low byte */
    default: v = h; break;
    }
    if (bits < 64)
        v &= (1ULL << bits) - 1;
    return v ? v : 1;
}

static uint64_t ct_gen_int(int sgn, int isize, int op, uint64_t h, int rank, long i, int np)
{
    int bits = isize * 8;
    uint64_t h2 = ct_mix(h), h3 = ct_mix(h2);
    switch (op) {
    case O_SUM:
        if (sgn) {
            int64_t range = bits == 8 ? 15 : bits == 16 ? 2000 : bits == 32 ? (1LL << 27) : (1LL << 59);
            return (uint64_t)((int64_t)(h % (uint64_t)(2 * range + 1)) - range);
        }
        return h; /* unsigned: wraps around */
    case O_PROD:
        if (sgn) {
            int64_t v = (h & 1) ? 1 : -1;
            if (i % np == rank) {
                if (bits <= 16) {
                    static const int64_t small[] = {2, -2, 3, -3, 0, 1};
                    v = small[h2 % 6];
                } else if (bits == 32) {
                    v = (int64_t)(h2 % 15) - 7;
                } else {
                    v = (int64_t)(h2 % 401) - 200;
                }
            } else if (bits >= 32 && (h2 & 3) == 0) {
                v = (int64_t)(h3 % 5) + 2; /* 2..6: at most 8 ranks -> 6^8 < 2^31 */
                if (bits == 32 && np > 8)
                    v = 1;
            }
            return (uint64_t)v;
        }
        return (h2 & 7) ? (h | 1) : h; /* mostly odd: product stays non-zero mod 2^n */
    case O_MIN:
    case O_MAX:
        return h;
    case O_LAND:
        return (h2 % (uint64_t)(2 * np) == 0) ? 0 : ct_nonzero(h, isize);
    case O_LOR:
        return (h2 % (uint64_t)(2 * np) == 0) ? ct_nonzero(h, isize) : 0;
    case O_LXOR:
        return (h2 & 1) ? ct_nonzero(h, isize) : 0;
    case O_BAND:
        return h | h2 | h3;
    case O_BOR:
        return h & h2 & h3;
    case O_BXOR:
    default:
        return h;
    }
}

/* floating point value as long double (converted to the element type by the caller) */
static long double ct_gen_real(int op, uint64_t h, int rank, long i, int np)
{
    uint64_t h2 = ct_mix(h);
    switch (op) {
    case O_SUM:
        if ((h2 & 15) == 0) /* not exactly representable: tolerance needed */
            return (long double)((double)(h % 1000) / 10.0 - 50.0);
        return (long double)((int64_t)(h % 257) - 128) / 8.0L; /* dyadic: sums exact */
    case O_PROD: {
        static const double vals[] = {1.0, -1.0, 2.0, 0.5, -0.5, -2.0, 1.5, 1.0};
        (void)rank; (void)i; (void)np;
        return vals[h % 8];
    }
    default: { /* MIN / MAX: distinct, non-zero */
        long double v = (long double)((int64_t)(h % 2000001) - 1000000) / 64.0L;
        return v == 0 ? 1.0L : v;
    }
    }
}

static double _Complex ct_gen_cplx(int op, uint64_t h, int rank, long i, int np)
{
    if (op == O_SUM) {
        double re = (double)((int64_t)(h % 65) - 32) / 4.0;
        double im = (double)((int64_t)((h >> 20) % 65) - 32) / 4.0;
        return re + im * I;
    }
    /* PROD: units and the occasional (1 +- i): exact */
    static const double re[] = {1, -1, 0, 0, 1, 1};
    static const double im[] = {0, 0, 1, -1, 1, -1};
    int k = (int)(h % 4);
    if (i % np == rank || (ct_mix(h) & 7) == 0)
        k = 4 + (int)((h >> 8) & 1);
    return re[k] + im[k] * I;
}

/* Fill element i of a buffer of type t for op, as rank `rank` would. */
static void ct_gen_elem(const ct_type *t, int op, void *p, uint64_t salt, int rank, long i, int np)
{
    uint64_t h = ct_rnd(salt, rank, i);
    switch (t->kind) {
    case K_SINT:
    case K_UINT:
    case K_BYTE:
        ct_store_int(p, t->isize, ct_gen_int(t->kind == K_SINT, t->isize, op, h, rank, i, np));
        break;
    case K_BOOL: {
        uint64_t h2 = ct_mix(h);
        _Bool b;
        if (op == O_LAND)
            b = !(h2 % (uint64_t)(2 * np) == 0);
        else if (op == O_LOR)
            b = (h2 % (uint64_t)(2 * np) == 0);
        else
            b = h2 & 1;
        memcpy(p, &b, 1);
        break;
    }
    case K_FLT: { float v = (float)ct_gen_real(op, h, rank, i, np); memcpy(p, &v, sizeof v); break; }
    case K_DBL: { double v = (double)ct_gen_real(op, h, rank, i, np); memcpy(p, &v, sizeof v); break; }
    case K_LDBL: { long double v = ct_gen_real(op, h, rank, i, np); memcpy(p, &v, CT_LD_SIG); break; }
    case K_CFLT: { float _Complex v = (float _Complex)ct_gen_cplx(op, h, rank, i, np); memcpy(p, &v, sizeof v); break; }
    case K_CDBL: { double _Complex v = ct_gen_cplx(op, h, rank, i, np); memcpy(p, &v, sizeof v); break; }
    case K_PFI: case K_PDI: case K_PLI: case K_P2I: case K_PSI: case K_PLDI: {
        int val = (int)(h % 5) - 2;      /* small range: many ties */
        int idx = (int)((h >> 16) % 1000); /* ties broken by the smallest index */
        switch (t->kind) {
        case K_PFI: { ct_fi e; memset(&e, 0, sizeof e); e.v = (float)val + 0.5f; e.i = idx; memcpy(p, &e, sizeof e); break; }
        case K_PDI: { ct_di e; memset(&e, 0, sizeof e); e.v = val - 0.25; e.i = idx; memcpy(p, &e, sizeof e); break; }
        case K_PLI: { ct_li e; memset(&e, 0, sizeof e); e.v = (long)val * 1000000007L; e.i = idx; memcpy(p, &e, sizeof e); break; }
        case K_P2I: { ct_2i e; e.v = val; e.i = idx; memcpy(p, &e, sizeof e); break; }
        case K_PSI: { ct_si e; memset(&e, 0, sizeof e); e.v = (short)val; e.i = idx; memcpy(p, &e, sizeof e); break; }
        default: { ct_ldi e; memset(&e, 0, sizeof e); e.v = val + 0.125L; e.i = idx; memcpy(p, &e, sizeof e); break; }
        }
        break;
    }
    case K_UAFF: {
        ct_aff e;
        e.a = (int)(uint32_t)(h | 1);
        e.b = (int)(uint32_t)(h >> 32);
        memcpy(p, &e, sizeof e);
        break;
    }
    case K_UCOM: { unsigned v = (unsigned)h; memcpy(p, &v, sizeof v); break; }
    case K_UVEC: {
        ct_vec3 e;
        e.c[0] = (unsigned)h;
        e.c[1] = (unsigned)(h >> 32);
        e.c[2] = (unsigned)ct_mix(h);
        memcpy(p, &e, sizeof e);
        break;
    }
    }
}

static CT_UNUSED void ct_fill(const ct_type *t, int op, void *buf, long count, uint64_t salt, int rank, int np)
{
    memset(buf, 0, (size_t)count * (size_t)t->size); /* deterministic padding */
    for (long i = 0; i < count; i++)
        ct_gen_elem(t, op, (char *)buf + (size_t)i * (size_t)t->size, salt, rank, i, np);
}

/* ------------------------------------------------------------------ */
/* element formatting / comparison / hashing                            */
/* ------------------------------------------------------------------ */

static void ct_fmt(const ct_type *t, const void *p, char *out, size_t n)
{
    switch (t->kind) {
    case K_SINT: snprintf(out, n, "%lld", (long long)ct_load_sint(p, t->isize)); break;
    case K_UINT:
    case K_BYTE: snprintf(out, n, "%llu (0x%llx)", (unsigned long long)ct_load_uint(p, t->isize),
                          (unsigned long long)ct_load_uint(p, t->isize)); break;
    case K_BOOL: snprintf(out, n, "%u", (unsigned)*(const unsigned char *)p); break;
    case K_FLT: { float v; memcpy(&v, p, sizeof v); snprintf(out, n, "%.9g", (double)v); break; }
    case K_DBL: { double v; memcpy(&v, p, sizeof v); snprintf(out, n, "%.17g", v); break; }
    case K_LDBL: { long double v = 0; memcpy(&v, p, CT_LD_SIG); snprintf(out, n, "%.21Lg", v); break; }
    case K_CFLT: { float _Complex v; memcpy(&v, p, sizeof v); snprintf(out, n, "(%.9g,%.9g)", (double)crealf(v), (double)cimagf(v)); break; }
    case K_CDBL: { double _Complex v; memcpy(&v, p, sizeof v); snprintf(out, n, "(%.17g,%.17g)", creal(v), cimag(v)); break; }
    case K_PFI: { ct_fi e; memcpy(&e, p, sizeof e); snprintf(out, n, "(%.9g,%d)", (double)e.v, e.i); break; }
    case K_PDI: { ct_di e; memcpy(&e, p, sizeof e); snprintf(out, n, "(%.17g,%d)", e.v, e.i); break; }
    case K_PLI: { ct_li e; memcpy(&e, p, sizeof e); snprintf(out, n, "(%ld,%d)", e.v, e.i); break; }
    case K_P2I: { ct_2i e; memcpy(&e, p, sizeof e); snprintf(out, n, "(%d,%d)", e.v, e.i); break; }
    case K_PSI: { ct_si e; memcpy(&e, p, sizeof e); snprintf(out, n, "(%d,%d)", e.v, e.i); break; }
    case K_PLDI: { ct_ldi e; memset(&e, 0, sizeof e); memcpy(&e.v, p, CT_LD_SIG); memcpy(&e.i, (const char *)p + offsetof(ct_ldi, i), sizeof e.i);
                   snprintf(out, n, "(%.21Lg,%d)", e.v, e.i); break; }
    case K_UAFF: { ct_aff e; memcpy(&e, p, sizeof e); snprintf(out, n, "(a=0x%08x,b=0x%08x)", (unsigned)e.a, (unsigned)e.b); break; }
    case K_UCOM: { unsigned v; memcpy(&v, p, sizeof v); snprintf(out, n, "0x%08x", v); break; }
    case K_UVEC: { ct_vec3 e; memcpy(&e, p, sizeof e); snprintf(out, n, "(0x%08x,0x%08x,0x%08x)", e.c[0], e.c[1], e.c[2]); break; }
    default: snprintf(out, n, "?");
    }
}

/* Copy the significant bytes of an element (no padding) to out; return length. */
static int ct_canon(const ct_type *t, const void *p, unsigned char *out)
{
    switch (t->kind) {
    case K_LDBL: memcpy(out, p, CT_LD_SIG); return CT_LD_SIG;
    case K_PFI: memcpy(out, p, sizeof(float)); memcpy(out + sizeof(float), (const char *)p + offsetof(ct_fi, i), 4); return (int)sizeof(float) + 4;
    case K_PDI: memcpy(out, p, 8); memcpy(out + 8, (const char *)p + offsetof(ct_di, i), 4); return 12;
    case K_PLI: memcpy(out, p, sizeof(long)); memcpy(out + sizeof(long), (const char *)p + offsetof(ct_li, i), 4); return (int)sizeof(long) + 4;
    case K_PSI: memcpy(out, p, 2); memcpy(out + 2, (const char *)p + offsetof(ct_si, i), 4); return 6;
    case K_PLDI: memcpy(out, p, CT_LD_SIG); memcpy(out + CT_LD_SIG, (const char *)p + offsetof(ct_ldi, i), 4); return CT_LD_SIG + 4;
    default: memcpy(out, p, (size_t)t->size); return t->size;
    }
}

static CT_UNUSED uint64_t ct_hash_buf(const ct_type *t, const void *buf, long count)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)count;
    unsigned char tmp[64];
    for (long i = 0; i < count; i++) {
        int n = ct_canon(t, (const char *)buf + (size_t)i * (size_t)t->size, tmp);
        for (int k = 0; k < n; k++) {
            h ^= tmp[k];
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

static int ct_close(long double got, long double exp, long double eps, int np)
{
    if (got == exp)
        return 1;
    if (isnan(got) || isnan(exp))
        return 0;
    long double tol = 4.0L * np * eps * (fabsl(exp) + 64.0L * np);
    return fabsl(got - exp) <= tol;
}

/* 1 if the element matches the reference for this op */
static int ct_elem_ok(const ct_type *t, int op, const void *g, const void *e, int np)
{
    int exact = (op != O_SUM && op != O_PROD);
    switch (t->kind) {
    case K_FLT: { float a, b; memcpy(&a, g, 4); memcpy(&b, e, 4); return exact ? a == b : ct_close(a, b, FLT_EPSILON, np); }
    case K_DBL: { double a, b; memcpy(&a, g, 8); memcpy(&b, e, 8); return exact ? a == b : ct_close(a, b, DBL_EPSILON, np); }
    case K_LDBL: { long double a = 0, b = 0; memcpy(&a, g, CT_LD_SIG); memcpy(&b, e, CT_LD_SIG);
                   return exact ? a == b : ct_close(a, b, LDBL_EPSILON, np); }
    case K_CFLT: { float _Complex a, b; memcpy(&a, g, sizeof a); memcpy(&b, e, sizeof b);
                   return ct_close(crealf(a), crealf(b), FLT_EPSILON, np) && ct_close(cimagf(a), cimagf(b), FLT_EPSILON, np); }
    case K_CDBL: { double _Complex a, b; memcpy(&a, g, sizeof a); memcpy(&b, e, sizeof b);
                   return ct_close(creal(a), creal(b), DBL_EPSILON, np) && ct_close(cimag(a), cimag(b), DBL_EPSILON, np); }
    case K_BOOL: {
        /* compare truth values: any non-zero byte is true */
        unsigned char a = *(const unsigned char *)g, b = *(const unsigned char *)e;
        return (a != 0) == (b != 0) && a <= 1;
    }
    default: {
        unsigned char ca[64], cb[64];
        int na = ct_canon(t, g, ca), nb = ct_canon(t, e, cb);
        return na == nb && memcmp(ca, cb, (size_t)na) == 0;
    }
    }
}

/* Compare count elements; report mismatches; return number of bad elements. */
static CT_UNUSED long ct_compare(const char *what, const ct_type *t, int op, const void *got, const void *exp,
                                 long count, int np)
{
    long bad = 0;
    for (long i = 0; i < count; i++) {
        const char *g = (const char *)got + (size_t)i * (size_t)t->size;
        const char *e = (const char *)exp + (size_t)i * (size_t)t->size;
        if (!ct_elem_ok(t, op, g, e, np)) {
            if (bad < CT_MAX_ELEM_MSGS) {
                char gs[128], es[128];
                ct_fmt(t, g, gs, sizeof gs);
                ct_fmt(t, e, es, sizeof es);
                ct_fail("%s: %s: element %ld: got %s, expected %s", g_case, what, i, gs, es);
            }
            bad++;
        }
    }
    if (bad > CT_MAX_ELEM_MSGS)
        ct_fail("%s: %s: %ld mismatching elements in total (of %ld)", g_case, what, bad, count);
    return bad;
}

/* ------------------------------------------------------------------ */
/* exact local reference for the kinds whose results are exact          */
/* (integers, logical, bitwise, MINLOC/MAXLOC, the user ops): every     */
/* rank can regenerate every other rank's input.  The host MPI's own    */
/* result is not trusted blindly: Debian's MPICH 4.0.2 compares         */
/* unsigned types as signed in MPI_MIN/MPI_MAX, Open MPI 4.1.4 does so  */
/* for MPI_UNSIGNED_LONG.                                               */
/* ------------------------------------------------------------------ */

static CT_UNUSED int ct_exact_kind(const ct_type *t)
{
    switch (t->kind) {
    case K_FLT: case K_DBL: case K_LDBL: case K_CFLT: case K_CDBL:
        return 0;
    default:
        return 1;
    }
}

#define CT_PAIR_COMBINE(T)                                                                       \
    do {                                                                                         \
        T a_, b_;                                                                                \
        memcpy(&a_, acc, sizeof a_);                                                             \
        memcpy(&b_, x, sizeof b_);                                                               \
        if (op == O_MINLOC ? b_.v < a_.v : b_.v > a_.v) {                                        \
            a_.v = b_.v;                                                                         \
            a_.i = b_.i;                                                                         \
        } else if (b_.v == a_.v && b_.i < a_.i) {                                                \
            a_.i = b_.i;                                                                         \
        }                                                                                        \
        memcpy(acc, &a_, sizeof a_);                                                             \
    } while (0)

/* acc := acc (op) x, where acc holds the lower ranks' contribution */
static void ct_combine(const ct_type *t, int op, char *acc, const char *x)
{
    int len = 1;
    MPI_Datatype dt;
    switch (t->kind) {
    case K_SINT:
    case K_UINT:
    case K_BYTE: {
        int sz = t->isize, sg = t->kind == K_SINT;
        uint64_t a = ct_load_uint(acc, sz), b = ct_load_uint(x, sz), r;
        int64_t sa = ct_load_sint(acc, sz), sb = ct_load_sint(x, sz);
        switch (op) {
        case O_SUM: r = a + b; break;
        case O_PROD: r = a * b; break;
        case O_MIN: r = sg ? (sa <= sb ? a : b) : (a <= b ? a : b); break;
        case O_MAX: r = sg ? (sa >= sb ? a : b) : (a >= b ? a : b); break;
        case O_LAND: r = (a != 0) && (b != 0); break;
        case O_LOR: r = (a != 0) || (b != 0); break;
        case O_LXOR: r = (a != 0) != (b != 0); break;
        case O_BAND: r = a & b; break;
        case O_BOR: r = a | b; break;
        default: r = a ^ b; break;
        }
        ct_store_int(acc, sz, r);
        break;
    }
    case K_BOOL: {
        int a = *(unsigned char *)acc != 0, b = *(const unsigned char *)x != 0;
        _Bool r = op == O_LAND ? (a && b) : op == O_LOR ? (a || b) : (a != b);
        memcpy(acc, &r, 1);
        break;
    }
    case K_PFI: CT_PAIR_COMBINE(ct_fi); break;
    case K_PDI: CT_PAIR_COMBINE(ct_di); break;
    case K_PLI: CT_PAIR_COMBINE(ct_li); break;
    case K_P2I: CT_PAIR_COMBINE(ct_2i); break;
    case K_PSI: CT_PAIR_COMBINE(ct_si); break;
    case K_PLDI: CT_PAIR_COMBINE(ct_ldi); break;
    case K_UAFF: {
        ct_aff y;
        memcpy(&y, x, sizeof y);
        dt = MPI_2INT;
        ct_aff_fn(acc, &y, &len, &dt); /* y := acc o y */
        memcpy(acc, &y, sizeof y);
        break;
    }
    case K_UCOM:
        dt = MPI_UNSIGNED;
        ct_ucom_fn((void *)x, acc, &len, &dt);
        break;
    case K_UVEC:
        dt = g_vec3_type;
        ct_uvec_fn((void *)x, acc, &len, &dt);
        break;
    default:
        break;
    }
}

/* the exact reduction over ranks 0..n-1 (inputs generated for a group of n) */
static void ct_exact(const ct_type *t, int op, uint64_t salt, long count, int n, char *out)
{
    char tmp[64];
    memset(out, 0, (size_t)count * (size_t)t->size);
    for (long i = 0; i < count; i++) {
        char *acc = out + (size_t)i * (size_t)t->size;
        ct_gen_elem(t, op, acc, salt, 0, i, n);
        for (int r = 1; r < n; r++) {
            memset(tmp, 0, sizeof tmp);
            ct_gen_elem(t, op, tmp, salt, r, i, n);
            ct_combine(t, op, acc, tmp);
        }
    }
}

static unsigned char g_host_bug_seen[CT_MAXTYPES][O_COUNT];

/* Checks a reduction result: against the exact reference for exact kinds
 * (the host's result `host` only reported when it disagrees, and accepted
 * instead of the exact one under CTEST_AVOID_HOST_BUGS=1, i.e. when the call
 * may legitimately reach the host's own implementation), else against the
 * host's result with a tolerance. n: size of the group whose inputs are
 * reduced. */
static CT_UNUSED long ct_check_result(const char *what, const ct_type *t, int op, const void *got, const void *host,
                                      long count, int np, uint64_t salt, int n)
{
    if (!ct_exact_kind(t))
        return ct_compare(what, t, op, got, host, count, np);
    size_t sz = (size_t)t->size;
    char *ex = (char *)ct_malloc((size_t)count * sz);
    ct_exact(t, op, salt, count, n, ex);
    long hostbad = 0, first = -1;
    for (long i = 0; i < count; i++)
        if (!ct_elem_ok(t, op, (const char *)host + i * sz, ex + i * sz, np) && hostbad++ == 0)
            first = i;
    int ti = (int)(t - g_types);
    if (hostbad && !g_host_bug_seen[ti][op]) {
        g_host_bug_seen[ti][op] = 1;
        if (g_rank == 0 || g_verbose) {
            char hs[128], es[128];
            ct_fmt(t, (const char *)host + first * sz, hs, sizeof hs);
            ct_fmt(t, ex + first * sz, es, sizeof es);
            fprintf(stderr, "[%s rank %d] NOTE host MPI bug: its own reduction of %s with %s is wrong (%ld of %ld "
                    "elements; element %ld: host %s, exact %s); results are checked against the exact value%s\n",
                    g_prog, g_rank, t->name, g_ops[op].name, hostbad, count, first, hs, es,
                    g_avoid_host_bugs ? " or the host's" : "");
        }
    }
    long bad = 0;
    for (long i = 0; i < count; i++) {
        const char *g = (const char *)got + i * sz, *e = ex + i * sz;
        if (ct_elem_ok(t, op, g, e, np))
            continue;
        if (g_avoid_host_bugs && ct_elem_ok(t, op, g, (const char *)host + i * sz, np))
            continue;
        if (bad < CT_MAX_ELEM_MSGS) {
            char gs[128], es[128];
            ct_fmt(t, g, gs, sizeof gs);
            ct_fmt(t, e, es, sizeof es);
            ct_fail("%s: %s: element %ld: got %s, expected %s", g_case, what, i, gs, es);
        }
        bad++;
    }
    if (bad > CT_MAX_ELEM_MSGS)
        ct_fail("%s: %s: %ld mismatching elements in total (of %ld)", g_case, what, bad, count);
    free(ex);
    return bad;
}

static CT_UNUSED void ct_check_rc(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        PMPI_Error_string(rc, msg, &len);
        ct_fail("%s: %s returned %d (%s)", g_case, call, rc, msg);
    }
}

static CT_UNUSED void ct_record_hash(uint64_t h)
{
    if (g_nhash == g_caphash) {
        g_caphash = g_caphash ? 2 * g_caphash : 256;
        g_hashes = (uint64_t *)realloc(g_hashes, sizeof(uint64_t) * (size_t)g_caphash);
        g_hash_desc = (char **)realloc(g_hash_desc, sizeof(char *) * (size_t)g_caphash);
        if (!g_hashes || !g_hash_desc)
            PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    g_hashes[g_nhash] = h;
    g_hash_desc[g_nhash] = strdup(g_case);
    g_nhash++;
}

/* ------------------------------------------------------------------ */
/* start / finish                                                       */
/* ------------------------------------------------------------------ */

static CT_UNUSED void ct_start(int *argc, char ***argv, const char *name)
{
    g_prog = name;
    MPI_Init(argc, argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *s = getenv("CTEST_SHARD");
    if (s) {
        int a, b;
        if (sscanf(s, "%d/%d", &a, &b) == 2 && b > 0 && a >= 0 && a < b) {
            g_shard = a;
            g_nshard = b;
        }
    }
    s = getenv("CTEST_BIG");
    if (s)
        g_big = atoi(s) != 0;
    s = getenv("CTEST_AVOID_HOST_BUGS");
    if (s)
        g_avoid_host_bugs = atoi(s) != 0;
    s = getenv("CTEST_VERBOSE");
    if (s)
        g_verbose = atoi(s);
    ct_install_handlers();
    ct_init_types();
}

/* Checks the cross-rank hashes and the failure count; prints the verdict
 * on rank 0, finalizes and returns the process exit code. */
static CT_UNUSED int ct_finish(MPI_Comm hash_comm)
{
    ct_set_case("final checks");
    if (g_userop_bad)
        ct_fail("user-defined op function was called %ld times with an unexpected datatype or negative length",
                g_userop_bad);
    /* all ranks of hash_comm recorded the same sequence of cases */
    if (g_nhash > 0) {
        uint64_t *mn = (uint64_t *)ct_malloc(sizeof(uint64_t) * (size_t)g_nhash);
        uint64_t *mx = (uint64_t *)ct_malloc(sizeof(uint64_t) * (size_t)g_nhash);
        PMPI_Allreduce(g_hashes, mn, g_nhash, MPI_UINT64_T, MPI_MIN, hash_comm);
        PMPI_Allreduce(g_hashes, mx, g_nhash, MPI_UINT64_T, MPI_MAX, hash_comm);
        int reported = 0;
        for (int k = 0; k < g_nhash; k++) {
            if (mn[k] != mx[k] && g_hashes[k] != mn[k]) {
                if (reported++ < 5)
                    ct_fail("%s: Allreduce result differs between ranks (this rank's checksum 0x%016llx, "
                            "min over ranks 0x%016llx, max 0x%016llx)",
                            g_hash_desc[k], (unsigned long long)g_hashes[k], (unsigned long long)mn[k],
                            (unsigned long long)mx[k]);
                else
                    g_fail++;
            }
        }
        free(mn);
        free(mx);
    }
    long total = 0;
    PMPI_Allreduce(&g_fail, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        if (total == 0)
            printf("ctest %s: OK (%d ranks, %ld cases)\n", g_prog, g_size, g_case_counter);
        else
            printf("ctest %s: FAIL (%ld failures over %d ranks)\n", g_prog, total, g_size);
        fflush(stdout);
    }
    alarm(0);
    PMPI_Type_free(&g_vec3_type);
    for (int k = O_UAFF; k <= O_UVEC; k++)
        PMPI_Op_free(&g_ops[k].op);
    MPI_Finalize();
    return total ? 1 : 0;
}

/* ------------------------------------------------------------------ */
/* reduction cases shared by several programs                           */
/* ------------------------------------------------------------------ */

/* Per-case data salt: all ranks of a communicator must draw the same salts,
 * so code paths that only some ranks take must call ct_salt_sync after. */
static uint64_t g_salt_n;
static CT_UNUSED uint64_t ct_salt(void)
{
    return ct_mix(++g_salt_n * 7919ULL + 17ULL);
}

static CT_UNUSED void ct_salt_sync(uint64_t stage)
{
    g_salt_n = stage << 32;
}

/* The buffers of a Reduce or Allreduce case: input, output, and the
 * reference's. */
typedef struct {
    char *in, *out, *refin, *refout;
} ct_reduction_bufs;

static CT_UNUSED ct_reduction_bufs ct_reduction_alloc(size_t bytes)
{
    ct_reduction_bufs b = {(char *)ct_malloc(bytes), (char *)ct_malloc(bytes), (char *)ct_malloc(bytes),
                           (char *)ct_malloc(bytes)};
    return b;
}

static CT_UNUSED void ct_reduction_free(ct_reduction_bufs b)
{
    free(b.in);
    free(b.out);
    free(b.refin);
    free(b.refout);
}

/* Allreduce of `count` elements on comm in the buffers b (at least
 * count elements each); compares with PMPI_Allreduce.
 * record_hash: 0 no cross-rank check, 1 record for the final check over
 * MPI_COMM_WORLD (all ranks must run the same cases), 2 check now on comm. */
static CT_UNUSED void ct_allreduce_case_in(ct_reduction_bufs b, const ct_type *t, int op, long count, int inplace,
                                           MPI_Comm comm, const char *cname, int record_hash)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    uint64_t salt = ct_salt();
    size_t bytes = (size_t)count * (size_t)t->size;
    ct_set_case("MPI_Allreduce comm=%s type=%s op=%s count=%ld%s", cname, t->name, g_ops[op].name, count,
                inplace ? " MPI_IN_PLACE" : "");
    char *in = b.in, *out = b.out, *refin = b.refin, *refout = b.refout;
    ct_fill(t, op, in, count, salt, rank, np);
    memcpy(refin, in, bytes);
    int rc;
    if (inplace) {
        memcpy(out, in, bytes);
        rc = MPI_Allreduce(MPI_IN_PLACE, out, (int)count, t->dt, g_ops[op].op, comm);
    } else {
        memset(out, 0xA5, bytes);
        rc = MPI_Allreduce(in, out, (int)count, t->dt, g_ops[op].op, comm);
    }
    ct_check_rc(rc, "MPI_Allreduce");
    if (!inplace && memcmp(in, refin, bytes) != 0)
        ct_fail("%s: rank %d: the send buffer was modified", g_case, rank);
    PMPI_Allreduce(refin, refout, (int)count, t->dt, g_ops[op].op, comm);
    char what[64];
    snprintf(what, sizeof what, "rank %d of %d", rank, np);
    int inter = 0, n = np;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) /* the result is the reduction over the remote group */
        PMPI_Comm_remote_size(comm, &n);
    ct_check_result(what, t, op, out, refout, count, np, salt, n);
    if (record_hash == 1) {
        ct_record_hash(ct_hash_buf(t, out, count));
    } else if (record_hash == 2) {
        /* immediate cross-rank check on comm */
        uint64_t h = ct_hash_buf(t, out, count), mn, mx;
        PMPI_Allreduce(&h, &mn, 1, MPI_UINT64_T, MPI_MIN, comm);
        PMPI_Allreduce(&h, &mx, 1, MPI_UINT64_T, MPI_MAX, comm);
        if (mn != mx)
            ct_fail("%s: Allreduce result differs between ranks (checksums: this rank 0x%016llx, min 0x%016llx, "
                    "max 0x%016llx)", g_case, (unsigned long long)h, (unsigned long long)mn, (unsigned long long)mx);
    }
}

/* ct_allreduce_case_in on buffers of its own. */
static CT_UNUSED void ct_allreduce_case(const ct_type *t, int op, long count, int inplace, MPI_Comm comm,
                                        const char *cname, int record_hash)
{
    ct_reduction_bufs b = ct_reduction_alloc((size_t)count * (size_t)t->size);
    ct_allreduce_case_in(b, t, op, count, inplace, comm, cname, record_hash);
    ct_reduction_free(b);
}

/* Reduce to root in the buffers b (at least count elements each);
 * reference via PMPI_Allreduce (never stock PMPI_Reduce).
 * inplace: root uses MPI_IN_PLACE; nullrecv: non-roots pass recvbuf NULL. */
static CT_UNUSED void ct_reduce_case_in(ct_reduction_bufs b, const ct_type *t, int op, long count, int root,
                                        int inplace, int nullrecv, MPI_Comm comm, const char *cname)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    uint64_t salt = ct_salt();
    size_t bytes = (size_t)count * (size_t)t->size;
#ifdef MPICH_VERSION
    /* MPICH 4.0.2's own Reduce segfaults with MPI_IN_PLACE at a non-zero
     * root above ~2 KiB; when the call may reach it, do not go there. */
    if (g_avoid_host_bugs && inplace && root != 0 && bytes > 2048)
        inplace = 0;
#endif
    ct_set_case("MPI_Reduce comm=%s type=%s op=%s count=%ld root=%d%s%s", cname, t->name, g_ops[op].name, count,
                root, inplace ? " MPI_IN_PLACE(root)" : "", nullrecv ? " recvbuf=NULL(non-root)" : "");
    char *in = b.in, *out = b.out, *refin = b.refin, *refout = b.refout;
    ct_fill(t, op, in, count, salt, rank, np);
    memcpy(refin, in, bytes);
    int rc;
    if (rank == root && inplace) {
        memcpy(out, in, bytes);
        rc = MPI_Reduce(MPI_IN_PLACE, out, (int)count, t->dt, g_ops[op].op, root, comm);
    } else {
        memset(out, 0xA5, bytes);
        rc = MPI_Reduce(in, (rank != root && nullrecv) ? NULL : out, (int)count, t->dt, g_ops[op].op, root, comm);
    }
    ct_check_rc(rc, "MPI_Reduce");
    if (!(rank == root && inplace) && memcmp(in, refin, bytes) != 0)
        ct_fail("%s: rank %d: the send buffer was modified", g_case, rank);
    PMPI_Allreduce(refin, refout, (int)count, t->dt, g_ops[op].op, comm);
    if (rank == root) {
        char what[64];
        snprintf(what, sizeof what, "root %d of %d", rank, np);
        ct_check_result(what, t, op, out, refout, count, np, salt, np);
    } else if (!nullrecv) {
        /* recvbuf is not significant at non-roots: it must not be written */
        for (size_t i = 0; i < bytes; i++) {
            if ((unsigned char)out[i] != 0xA5) {
                ct_fail("%s: rank %d: non-root recvbuf was written (byte offset %zu)", g_case, rank, i);
                break;
            }
        }
    }
}

/* ct_reduce_case_in on buffers of its own. */
static CT_UNUSED void ct_reduce_case(const ct_type *t, int op, long count, int root, int inplace, int nullrecv,
                                     MPI_Comm comm, const char *cname)
{
    ct_reduction_bufs b = ct_reduction_alloc((size_t)count * (size_t)t->size);
    ct_reduce_case_in(b, t, op, count, root, inplace, nullrecv, comm, cname);
    ct_reduction_free(b);
}

/* ------------------------------------------------------------------ */
/* buffer layouts for Bcast / Gatherv: `count` instances of a datatype  */
/* that is built from `base` elements (contiguous, vector or resized)   */
/* ------------------------------------------------------------------ */

typedef struct {
    const ct_type *base;
    MPI_Datatype dt;
    int count;            /* count passed to MPI */
    int nblk, blen, stride; /* elements per instance = nblk*blen */
    MPI_Aint extent;      /* bytes per instance */
    int owned;
    char desc[96];
} ct_layout;

static CT_UNUSED ct_layout ct_lay_base(const ct_type *base, int count)
{
    ct_layout l;
    memset(&l, 0, sizeof l);
    l.base = base; l.dt = base->dt; l.count = count;
    l.nblk = 1; l.blen = 1; l.stride = 1; l.extent = base->size;
    snprintf(l.desc, sizeof l.desc, "%d x %s", count, base->name);
    return l;
}

static CT_UNUSED ct_layout ct_lay_contig(const ct_type *base, int m, int count)
{
    ct_layout l = ct_lay_base(base, count);
    PMPI_Type_contiguous(m, base->dt, &l.dt);
    PMPI_Type_commit(&l.dt);
    l.owned = 1; l.blen = m; l.stride = m; l.extent = (MPI_Aint)m * base->size;
    snprintf(l.desc, sizeof l.desc, "%d x contiguous(%d,%s)", count, m, base->name);
    return l;
}

static CT_UNUSED ct_layout ct_lay_vector(const ct_type *base, int nblk, int blen, int stride, int count)
{
    ct_layout l = ct_lay_base(base, count);
    PMPI_Type_vector(nblk, blen, stride, base->dt, &l.dt);
    PMPI_Type_commit(&l.dt);
    l.owned = 1; l.nblk = nblk; l.blen = blen; l.stride = stride;
    l.extent = (MPI_Aint)((nblk - 1) * stride + blen) * base->size;
    snprintf(l.desc, sizeof l.desc, "%d x vector(%d,%d,%d,%s)", count, nblk, blen, stride, base->name);
    return l;
}

/* base element with extent k*size: gaps after every element */
static CT_UNUSED ct_layout ct_lay_resized(const ct_type *base, int k, int count)
{
    ct_layout l = ct_lay_base(base, count);
    PMPI_Type_create_resized(base->dt, 0, (MPI_Aint)k * base->size, &l.dt);
    PMPI_Type_commit(&l.dt);
    l.owned = 1; l.extent = (MPI_Aint)k * base->size;
    snprintf(l.desc, sizeof l.desc, "%d x resized(%s,extent=%d*size)", count, base->name, k);
    return l;
}

static CT_UNUSED void ct_lay_free(ct_layout *l)
{
    if (l->owned)
        PMPI_Type_free(&l->dt);
    l->owned = 0;
}

static CT_UNUSED long ct_lay_elems(const ct_layout *l)
{
    return (long)l->count * l->nblk * l->blen;
}

static CT_UNUSED size_t ct_lay_bytes(const ct_layout *l)
{
    return (size_t)l->count * (size_t)l->extent;
}

static CT_UNUSED size_t ct_lay_off(const ct_layout *l, long j)
{
    long per = (long)l->nblk * l->blen;
    long q = j / per, r = j % per;
    return (size_t)q * (size_t)l->extent + (size_t)((r / l->blen) * l->stride + r % l->blen) * (size_t)l->base->size;
}

/* Write elements [0, n) generated for (salt, src) into buf at layout offsets + byte offset `at`. */
static CT_UNUSED void ct_lay_fill(const ct_layout *l, char *buf, size_t at, long n, uint64_t salt, int src)
{
    for (long j = 0; j < n; j++)
        ct_gen_elem(l->base, O_SUM, buf + at + ct_lay_off(l, j), salt, src, j, 1);
}

/* Mark bytes of elements [0, n) as covered (1) in map. */
static CT_UNUSED void ct_lay_mark(const ct_layout *l, unsigned char *map, size_t at, long n)
{
    for (long j = 0; j < n; j++)
        memset(map + at + ct_lay_off(l, j), 1, (size_t)l->base->size);
}

/* Check elements [0, n) of buf against the generator; returns number of bad elements. */
static CT_UNUSED long ct_lay_check(const ct_layout *l, const char *buf, size_t at, long n, uint64_t salt, int src,
                                   const char *what)
{
    long bad = 0;
    char exp[64];
    for (long j = 0; j < n; j++) {
        const char *g = buf + at + ct_lay_off(l, j);
        memset(exp, 0, sizeof exp);
        ct_gen_elem(l->base, O_SUM, exp, salt, src, j, 1);
        unsigned char ca[64], cb[64];
        int na = ct_canon(l->base, g, ca), nb = ct_canon(l->base, exp, cb);
        if (na != nb || memcmp(ca, cb, (size_t)na) != 0) {
            if (bad < CT_MAX_ELEM_MSGS) {
                char gs[128], es[128];
                ct_fmt(l->base, g, gs, sizeof gs);
                ct_fmt(l->base, exp, es, sizeof es);
                ct_fail("%s: %s: element %ld (from rank %d, byte offset %zu): got %s, expected %s", g_case, what, j,
                        src, at + ct_lay_off(l, j), gs, es);
            }
            bad++;
        }
    }
    if (bad > CT_MAX_ELEM_MSGS)
        ct_fail("%s: %s: %ld mismatching elements from rank %d in total (of %ld)", g_case, what, bad, src, n);
    return bad;
}

/* Bytes not covered by map must still hold the sentinel. */
static CT_UNUSED long ct_check_sentinel(const char *buf, const unsigned char *map, size_t bytes, unsigned char sentinel,
                                        const char *what)
{
    long bad = 0;
    size_t first = 0;
    for (size_t b = 0; b < bytes; b++) {
        if (!map[b] && (unsigned char)buf[b] != sentinel) {
            if (!bad)
                first = b;
            bad++;
        }
    }
    if (bad)
        ct_fail("%s: %s: %ld bytes outside the received data were overwritten (first at byte offset %zu: 0x%02x, "
                "sentinel 0x%02x)", g_case, what, bad, first, (unsigned char)buf[first], sentinel);
    return bad;
}

#define CT_SENTINEL 0x5A

/* Bcast: root uses layout lr, the others lo (same type signature). The
 * data is a function of the salt only. Checks the received elements, that
 * the gaps of the receive layout keep their sentinel and that the root's
 * buffer is unchanged. */
static CT_UNUSED void ct_bcast_case(const ct_layout *lr, const ct_layout *lo, int root, MPI_Comm comm, const char *cname)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    uint64_t salt = ct_salt();
    const ct_layout *l = rank == root ? lr : lo;
    ct_set_case("MPI_Bcast comm=%s root=%d root_type=[%s] other_type=[%s]", cname, root, lr->desc, lo->desc);
    if (ct_lay_elems(lr) != ct_lay_elems(lo)) {
        ct_fail("test setup: signature mismatch in %s", g_case);
        return;
    }
    size_t bytes = ct_lay_bytes(l);
    long n = ct_lay_elems(l);
    char *buf = (char *)ct_malloc(bytes), *copy = NULL;
    /* the root's gaps hold another byte: copying whole extents shows */
    memset(buf, rank == root ? CT_SENTINEL ^ 0xFF : CT_SENTINEL, bytes);
    if (rank == root) {
        ct_lay_fill(l, buf, 0, n, salt, 0);
        copy = (char *)ct_malloc(bytes);
        memcpy(copy, buf, bytes);
    }
    ct_check_rc(MPI_Bcast(buf, l->count, l->dt, root, comm), "MPI_Bcast");
    if (rank == root) {
        if (memcmp(buf, copy, bytes) != 0)
            ct_fail("%s: the root's buffer was modified", g_case);
        free(copy);
    } else {
        char what[64];
        snprintf(what, sizeof what, "rank %d of %d", rank, np);
        ct_lay_check(l, buf, 0, n, salt, 0, what);
        unsigned char *map = (unsigned char *)calloc(bytes ? bytes : 1, 1);
        ct_lay_mark(l, map, 0, n);
        ct_check_sentinel(buf, map, bytes, CT_SENTINEL, what);
        free(map);
    }
    free(buf);
}

/* Gatherv.  scount[r]: number of base elements rank r sends (with sendtype
 * layout built by mksend(r, scount[r]): base or vector); root receives with
 * recvtype rl (rl.count ignored) at displs[r] (units of rl.extent), with
 * recvcounts[r] = scount[r] / elements-per-instance(rl).
 * inplace: root passes MPI_IN_PLACE (its block pre-filled in recvbuf).
 * nullnonroot: non-roots pass NULL recvbuf/recvcounts/displs. */
typedef ct_layout (*ct_mksend_fn)(const ct_type *base, int rank, int n);

static CT_UNUSED ct_layout ct_send_base(const ct_type *base, int rank, int n)
{
    (void)rank;
    return ct_lay_base(base, n);
}

/* odd ranks send through a vector type (2 of every 3 elements), when n allows */
static CT_UNUSED ct_layout ct_send_vec(const ct_type *base, int rank, int n)
{
    if ((rank & 1) && n % 2 == 0)
        return ct_lay_vector(base, 2, 1, 3, n / 2);
    return ct_lay_base(base, n);
}

static CT_UNUSED void ct_gatherv_case(const char *pattern, const ct_type *base, const int *scount, const int *displs,
                                      const ct_layout *rl, ct_mksend_fn mksend, int root, int inplace, int nullnonroot,
                                      MPI_Comm comm, const char *cname)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    uint64_t salt = ct_salt();
    long per = (long)rl->nblk * rl->blen;
    const char *all_args = getenv("CTEST_GATHERV_ALL_ARGS");
    int every_rank_args = all_args && atoi(all_args) == 1;
    if (every_rank_args)
        nullnonroot = 0;
    ct_set_case("MPI_Gatherv comm=%s root=%d pattern=%s base=%s recvtype=%s%s%s", cname, root, pattern, base->name,
                rl->desc + 4 /* skip the count */, inplace ? " MPI_IN_PLACE(root)" : "",
                nullnonroot ? " NULL-args(non-root)" : "");
    /* send side */
    ct_layout sl = mksend(base, rank, scount[rank]);
    size_t sbytes = ct_lay_bytes(&sl);
    char *sbuf = (char *)ct_malloc(sbytes);
    memset(sbuf, CT_SENTINEL, sbytes);
    ct_lay_fill(&sl, sbuf, 0, scount[rank], salt, rank);
    char *scopy = (char *)ct_malloc(sbytes);
    memcpy(scopy, sbuf, sbytes);
    /* receive side (root) */
    char *rbuf = NULL;
    int *rcounts = NULL;
    size_t rbytes = 0;
    if (rank == root || !nullnonroot) {
        rcounts = (int *)ct_malloc(sizeof(int) * (size_t)np);
        for (int r = 0; r < np; r++) {
            rcounts[r] = (int)(scount[r] / per);
            size_t end = (size_t)displs[r] * (size_t)rl->extent + (size_t)rcounts[r] * (size_t)rl->extent;
            if (scount[r] && end > rbytes)
                rbytes = end;
        }
        rbytes += 16;
        rbuf = (char *)ct_malloc(rbytes);
        memset(rbuf, CT_SENTINEL, rbytes);
        if (rank == root && inplace)
            ct_lay_fill(rl, rbuf, (size_t)displs[root] * (size_t)rl->extent, scount[root], salt, root);
    }
    int rc;
    if (rank == root && inplace)
        rc = MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, rcounts, displs, rl->dt, root, comm);
    else if (rank != root && nullnonroot)
        rc = MPI_Gatherv(sbuf, sl.count, sl.dt, NULL, NULL, NULL, rl->dt, root, comm);
    else
        rc = MPI_Gatherv(sbuf, sl.count, sl.dt, rbuf, rcounts, rank == root || every_rank_args ? displs : NULL,
                         rl->dt, root, comm);
    ct_check_rc(rc, "MPI_Gatherv");
    if (!(rank == root && inplace) && memcmp(sbuf, scopy, sbytes) != 0)
        ct_fail("%s: rank %d: the send buffer was modified", g_case, rank);
    if (rank == root) {
        unsigned char *map = (unsigned char *)calloc(rbytes, 1);
        char what[64];
        snprintf(what, sizeof what, "root %d of %d", rank, np);
        for (int r = 0; r < np; r++) {
            size_t at = (size_t)displs[r] * (size_t)rl->extent;
            ct_lay_check(rl, rbuf, at, scount[r], salt, r, what);
            ct_lay_mark(rl, map, at, scount[r]);
        }
        ct_check_sentinel(rbuf, map, rbytes, CT_SENTINEL, what);
        free(map);
    } else if (!nullnonroot) {
        /* recvbuf is not significant at non-roots: it must not be written */
        unsigned char *map = (unsigned char *)calloc(rbytes, 1);
        ct_check_sentinel(rbuf, map, rbytes, CT_SENTINEL, "non-root recvbuf");
        free(map);
    }
    ct_lay_free(&sl);
    free(sbuf);
    free(scopy);
    free(rbuf);
    free(rcounts);
}

#endif
