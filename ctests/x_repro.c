/* PCOLL_REPRODUCIBLE's test program (run by ctests/run.py's extra checks,
 * not by the matrix): floating-point sums and products whose values differ
 * wildly in magnitude, so that every combination order gives other bits,
 * through MPI_Allreduce and MPI_Reduce (several lengths, roots, in place or
 * not, float, double and double complex).  World rank 0 prints one line per
 * case with a hash of the result's bytes; the runner runs this program
 * under several algorithms and layouts and compares the lines bitwise.
 *
 * Every rank of an Allreduce must hold the same bits (checked here through
 * PMPI); a Reduce's hash comes from its root.  Exit code 1 on a failure of
 * that check, 0 otherwise.  Bookkeeping goes through PMPI_* only.  Rank 0
 * prints "x_repro: initialised" once MPI_Init has returned, before any
 * collective.  Per rank: 16 MPI_Allreduce and 32 MPI_Reduce calls. */
#include <mpi.h>
#include <complex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

/* FNV-1a over the result's bytes. */
static uint64_t hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* Element i of rank r: huge values that cancel next to tiny ones, and
 * for products factors near one. */
static double value(int r, long i, int prod)
{
    static const double pattern[] = {1e300, 1.0, -1e300, 1e-3, 0.1, -3.0e16, 7.5e-9, 2.0 / 3.0};
    if (prod)
        return 1.0 + ((double)((r * 131 + i * 71) % 997) - 498.0) * 1e-4 / 3.0;
    return pattern[(r * 5 + i) % 8] * (double)(1 + (r + i) % 3) / 3.0;
}

static void fill(MPI_Datatype t, void *buf, long n, int prod)
{
    for (long i = 0; i < n; i++) {
        double v = value(rank, i, prod);
        if (t == MPI_FLOAT)
            ((float *)buf)[i] = (float)(prod ? v : v * 1e-280);
        else if (t == MPI_DOUBLE)
            ((double *)buf)[i] = v;
        else
            ((double _Complex *)buf)[i] = v + value(rank + 1, i, prod) * I;
    }
}

static int failures;

static void one(const char *tname, MPI_Datatype t, size_t esize, MPI_Op op, const char *oname, long n,
                int root, int inplace)
{
    int prod = op == MPI_PROD;
    size_t bytes = (size_t)n * esize;
    char *send = malloc(bytes ? bytes : 1), *recv = malloc(bytes ? bytes : 1);
    fill(t, send, n, prod);
    memset(recv, 0, bytes);
    if (inplace && (root < 0 || rank == root))
        memcpy(recv, send, bytes);
    const void *sb = inplace && (root < 0 || rank == root) ? MPI_IN_PLACE : send;
    int rc = root < 0 ? MPI_Allreduce(sb, recv, (int)n, t, op, MPI_COMM_WORLD)
                      : MPI_Reduce(sb, recv, (int)n, t, op, root, MPI_COMM_WORLD);
    uint64_t h = hash(recv, bytes), h0 = h;
    if (root < 0) {
        /* every rank the same bits */
        uint64_t hmin, hmax;
        PMPI_Allreduce(&h, &hmin, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        PMPI_Allreduce(&h, &hmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (hmin != hmax) {
            if (rank == 0)
                fprintf(stderr, "x_repro: FAIL allreduce %s %s n=%ld: ranks disagree\n", tname, oname, n);
            failures++;
        }
    } else {
        PMPI_Bcast(&h0, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("%s %s %s n=%ld root=%d in_place=%d rc=%d hash=%016llx\n", root < 0 ? "allreduce" : "reduce", tname,
               oname, n, root, inplace, rc, (unsigned long long)h0);
    free(send);
    free(recv);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) { /* the runner checks that a bad configuration stops the job before this */
        printf("x_repro: initialised\n");
        fflush(stdout);
    }
    static const long counts[] = {1, 7, 1000, 40000};
    for (unsigned k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        long n = counts[k];
        int roots[] = {-1, 0, size - 1}; /* -1: Allreduce */
        for (int j = 0; j < (size > 1 ? 3 : 2); j++) {
            int root = roots[j], inplace = (int)(k + (unsigned)j) & 1;
            one("double", MPI_DOUBLE, sizeof(double), MPI_SUM, "sum", n, root, inplace);
            one("float", MPI_FLOAT, sizeof(float), MPI_SUM, "sum", n, root, !inplace);
            one("double", MPI_DOUBLE, sizeof(double), MPI_PROD, "prod", n, root, !inplace);
            one("double_complex", MPI_C_DOUBLE_COMPLEX, sizeof(double _Complex), MPI_PROD, "prod", n, root, inplace);
        }
    }
    int all;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("x_repro: %s (%d ranks)\n", all ? "FAILED" : "OK", size);
    MPI_Finalize();
    return all ? 1 : 0;
}
