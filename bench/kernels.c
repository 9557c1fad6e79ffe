/*
 * pcoll_kernels -- pcoll's reduction kernels against the host MPI's own,
 * through the same interface: pcoll_reduce_local (exported by libpcoll.so,
 * found with dlsym) and PMPI_Reduce_local, inoutbuf = inbuf op inoutbuf.
 *
 * For every predefined datatype and operator pair the standard defines
 * and three sizes (in L1, in L2,
 * beyond the last-level cache): the median time of repeated calls, as
 * GB/s of the inout vector, and the ratio pcoll/host (>1: pcoll faster).
 * Each pair is first checked: both kernels must give the same bytes
 * (NaN-free inputs).  One rank; run it under mpiexec -n 1 with
 * LD_PRELOAD=libpcoll.so (scripts/bench.sh --kernels does).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include "pcoll.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI_Reduce_local's and pcoll_reduce_local's type (include/pcoll.h) */
typedef __typeof__(&pcoll_reduce_local) reduce_local_fn;

/* The MPI standard's datatype groups, which decide the valid operators. */
enum group { G_INT, G_FLOAT, G_LOGICAL, G_COMPLEX, G_BYTE, G_PAIR };

struct named_type {
    const char *name;
    MPI_Datatype dt;
    enum group group;
};
struct named_op {
    const char *name;
    MPI_Op op;
    unsigned groups; /* bit per enum group the standard defines it on */
};

#define GB(g) (1u << (g))

static double now(void) { return PMPI_Wtime(); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of one call over `reps` timed calls. */
static double time_calls(reduce_local_fn f, const void *in, void *inout, int count, MPI_Datatype dt, MPI_Op op,
                         int reps)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    f(in, inout, count, dt, op);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        f(in, inout, count, dt, op);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

/* Bytes that make valid, NaN-free elements of any of the types below:
 * 0 and 1 only (C _Bool must hold 0 or 1; floats are zeros and
 * subnormals, whose products stay finite). */
static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)((i * 7 + seed) % 2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    reduce_local_fn mine = (reduce_local_fn)dlsym(RTLD_DEFAULT, "pcoll_reduce_local");
    if (!mine) {
        fprintf(stderr, "pcoll_kernels: pcoll_reduce_local not found: preload libpcoll.so\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    const struct named_type types[] = {
        {"MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, G_INT}, {"MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, G_INT},
        {"MPI_SHORT", MPI_SHORT, G_INT}, {"MPI_INT", MPI_INT, G_INT}, {"MPI_UNSIGNED", MPI_UNSIGNED, G_INT},
        {"MPI_LONG", MPI_LONG, G_INT}, {"MPI_UINT64_T", MPI_UINT64_T, G_INT}, {"MPI_FLOAT", MPI_FLOAT, G_FLOAT},
        {"MPI_DOUBLE", MPI_DOUBLE, G_FLOAT}, {"MPI_C_BOOL", MPI_C_BOOL, G_LOGICAL},
        {"MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, G_COMPLEX},
        {"MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, G_COMPLEX}, {"MPI_BYTE", MPI_BYTE, G_BYTE},
        {"MPI_2INT", MPI_2INT, G_PAIR}, {"MPI_FLOAT_INT", MPI_FLOAT_INT, G_PAIR},
        {"MPI_DOUBLE_INT", MPI_DOUBLE_INT, G_PAIR}, {"MPI_SHORT_INT", MPI_SHORT_INT, G_PAIR},
    };
    const struct named_op ops[] = {
        {"SUM", MPI_SUM, GB(G_INT) | GB(G_FLOAT) | GB(G_COMPLEX)},
        {"PROD", MPI_PROD, GB(G_INT) | GB(G_FLOAT) | GB(G_COMPLEX)},
        {"MAX", MPI_MAX, GB(G_INT) | GB(G_FLOAT)}, {"MIN", MPI_MIN, GB(G_INT) | GB(G_FLOAT)},
        {"LAND", MPI_LAND, GB(G_INT) | GB(G_LOGICAL)}, {"LOR", MPI_LOR, GB(G_INT) | GB(G_LOGICAL)},
        {"LXOR", MPI_LXOR, GB(G_INT) | GB(G_LOGICAL)}, {"BAND", MPI_BAND, GB(G_INT) | GB(G_BYTE)},
        {"BOR", MPI_BOR, GB(G_INT) | GB(G_BYTE)}, {"BXOR", MPI_BXOR, GB(G_INT) | GB(G_BYTE)},
        {"MINLOC", MPI_MINLOC, GB(G_PAIR)}, {"MAXLOC", MPI_MAXLOC, GB(G_PAIR)},
    };
    const size_t sizes[] = {4096, 256 * 1024, 64 << 20};
    const size_t maxb = 64 << 20;
    unsigned char *in = malloc(maxb), *a = malloc(maxb), *b = malloc(maxb), *a0 = malloc(4096), *b0 = malloc(4096);
    if (!in || !a || !b || !a0 || !b0) {
        fprintf(stderr, "pcoll_kernels: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fill(in, maxb, 1);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    PMPI_Get_library_version(ver, &len);
    ver[strcspn(ver, "\n")] = 0;
    printf("# pcoll_kernels: pcoll_reduce_local against PMPI_Reduce_local (%s)\n", ver);
    printf("# GB/s of the inout vector (medians); ratio = pcoll/host (>1: pcoll faster)\n");
    printf("%-22s %-7s %10s %10s %10s %7s\n", "datatype", "op", "bytes", "host_GB/s", "pcoll_GB/s", "ratio");
    int wrong = 0, pairs = 0;
    double log_sum = 0;
    int logs = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        MPI_Aint lb, extent;
        PMPI_Type_get_extent(types[t].dt, &lb, &extent);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            if (!(ops[o].groups & GB(types[t].group)))
                continue; /* undefined by the standard (MPICH asserts on some) */
            /* fresh small values for every pair: timing runs grow them, and
             * both hosts compare unsigned types as signed in MIN/MAX */
            fill(a, maxb, 2);
            memcpy(b, a, maxb);
            /* does the host accept the pair? and do both agree? */
            int n0 = (int)(4096 / (size_t)extent);
            memcpy(a0, a, 4096);
            memcpy(b0, a, 4096);
            if (PMPI_Reduce_local(in, a0, n0, types[t].dt, ops[o].op) != MPI_SUCCESS)
                continue;
            mine(in, b0, n0, types[t].dt, ops[o].op);
            pairs++;
            /* both leave the padding of pair types as it was in inout */
            if (memcmp(a0, b0, (size_t)n0 * (size_t)extent) != 0) {
                printf("%-22s %-7s  WRONG: pcoll's result differs from the host's\n", types[t].name, ops[o].name);
                wrong++;
                continue;
            }
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                int count = (int)(sizes[s] / (size_t)extent);
                size_t bytes = (size_t)count * (size_t)extent;
                int reps = sizes[s] > (1 << 20) ? 7 : 41;
                double th = time_calls(PMPI_Reduce_local, in, a, count, types[t].dt, ops[o].op, reps);
                double tp = time_calls(mine, in, b, count, types[t].dt, ops[o].op, reps);
                double ratio = th / tp;
                log_sum += log(ratio);
                logs++;
                printf("%-22s %-7s %10zu %10.2f %10.2f %7.2f\n", types[t].name, ops[o].name, bytes, bytes / th / 1e9,
                       bytes / tp / 1e9, ratio);
                fflush(stdout);
            }
        }
    }
    printf("# %d pairs, %d WRONG; geometric-mean ratio pcoll/host %.2f\n", pairs, wrong,
           logs ? exp(log_sum / logs) : 0.0);
    free(in);
    free(a);
    free(b);
    free(a0);
    free(b0);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
