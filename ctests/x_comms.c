/* Many communicators (issue 33): run by ctests/small_shm_checks.py, not by
 * the matrix (hence no t_ prefix), in a /dev/shm of 64 MiB as in a
 * container, and where /dev/shm is as large as the machine makes it.
 *
 * usage: x_comms live N | cycles N
 *
 *   live N:   creates N communicators and keeps them all alive (dups of
 *             MPI_COMM_WORLD, and splits with the rank order reversed:
 *             the same processes in another order), then runs every
 *             collective on each, twice (pcoll sets a communicator up at
 *             its second call, PCOLL_SETUP_AFTER), results checked; then
 *             frees them all.
 *   cycles N: N times: creates a communicator (in turn a dup, a reversed
 *             split, a dup of a dup), runs every collective on it three
 *             times, results checked, frees it. pcoll keeps a freed
 *             communicator's segment for the next one of the same ranks
 *             in the same order: a reused segment must carry no state of
 *             the last communicator into the next, nor go to one whose
 *             ranks sit in another order.
 *
 * The collectives: Allreduce and Reduce of ints (MPI_SUM), Bcast of ints,
 * Gatherv of ints with blocks of every rank's own length placed in reverse
 * order; 2 ints and 16384 ints (64 KiB, where pcoll's node algorithms run
 * with the defaults). Bookkeeping goes through PMPI_* only. Prints
 * "x_comms: OK" at the end; exit code 1 after a wrong result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int wrank, wsize, failures;

#define FAIL(...)                                                                                                     \
    do {                                                                                                              \
        if (failures++ < 10) {                                                                                        \
            fprintf(stderr, "x_comms rank %d: FAIL ", wrank);                                                          \
            fprintf(stderr, __VA_ARGS__);                                                                             \
            fprintf(stderr, "\n");                                                                                    \
        }                                                                                                             \
    } while (0)

static int value(int r, int j, int salt)
{
    return r * 7919 + j * 3 + salt;
}

/* Checks a reduction's result: element j is the sum over the n ranks. */
static void check_sums(const int *out, int count, int n, int salt, const char *coll, const char *what, int index)
{
    for (int j = 0; j < count; j++) {
        int want = 0;
        for (int q = 0; q < n; q++)
            want += value(q, j, salt);
        if (out[j] != want) {
            FAIL("%s %d: %s count %d element %d: got %d, expected %d", what, index, coll, count, j, out[j], want);
            return;
        }
    }
}

/* Every collective on `c`, once per size; `salt` changes the data from
 * call to call, so that a stale result cannot pass. */
static void use(MPI_Comm c, int salt, const char *what, int index)
{
    static const int counts[2] = {2, 16384};
    int r, n;
    PMPI_Comm_rank(c, &r);
    PMPI_Comm_size(c, &n);
    for (int k = 0; k < 2; k++) {
        int count = counts[k], root = (salt + k) % n;
        /* room for the Gatherv block too: count/n + r ints */
        int *in = malloc(sizeof(int) * (size_t)(count + n)), *out = malloc(sizeof(int) * (size_t)count);
        for (int j = 0; j < count + n; j++)
            in[j] = value(r, j, salt);
        /* Allreduce */
        memset(out, 0xA5, sizeof(int) * (size_t)count);
        if (MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, c) != MPI_SUCCESS)
            FAIL("%s %d: MPI_Allreduce count %d failed", what, index, count);
        check_sums(out, count, n, salt, "MPI_Allreduce", what, index);
        /* Reduce */
        memset(out, 0xA5, sizeof(int) * (size_t)count);
        if (MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, root, c) != MPI_SUCCESS)
            FAIL("%s %d: MPI_Reduce count %d failed", what, index, count);
        if (r == root)
            check_sums(out, count, n, salt, "MPI_Reduce", what, index);
        /* Bcast */
        for (int j = 0; j < count; j++)
            out[j] = r == root ? value(root, j, salt + 1) : -1;
        if (MPI_Bcast(out, count, MPI_INT, root, c) != MPI_SUCCESS)
            FAIL("%s %d: MPI_Bcast count %d failed", what, index, count);
        for (int j = 0; j < count; j++)
            if (out[j] != value(root, j, salt + 1)) {
                FAIL("%s %d: MPI_Bcast count %d element %d: got %d, expected %d", what, index, count, j, out[j],
                     value(root, j, salt + 1));
                break;
            }
        /* Gatherv: rank q sends count/n + q ints, placed in reverse rank order */
        int *rc = malloc(sizeof(int) * (size_t)n), *dp = malloc(sizeof(int) * (size_t)n), total = 0;
        for (int q = n - 1; q >= 0; q--) {
            rc[q] = count / n + q;
            dp[q] = total;
            total += rc[q];
        }
        int *all = malloc(sizeof(int) * (size_t)total);
        for (int j = 0; j < total; j++)
            all[j] = -1;
        if (MPI_Gatherv(in, rc[r], MPI_INT, all, rc, dp, MPI_INT, root, c) != MPI_SUCCESS)
            FAIL("%s %d: MPI_Gatherv count %d failed", what, index, count);
        for (int q = 0; r == root && q < n; q++)
            for (int j = 0; j < rc[q]; j++)
                if (all[dp[q] + j] != value(q, j, salt)) {
                    FAIL("%s %d: MPI_Gatherv count %d block of rank %d element %d: got %d, expected %d", what, index,
                         count, q, j, all[dp[q] + j], value(q, j, salt));
                    q = n;
                    break;
                }
        free(all);
        free(rc);
        free(dp);
        free(in);
        free(out);
    }
}

/* The i-th communicator: a dup of MPI_COMM_WORLD, the world's ranks in
 * reverse order, or a dup of `prev` (a dup of a dup). */
static MPI_Comm make(int i, MPI_Comm prev)
{
    MPI_Comm c;
    switch (i % 3) {
    case 0:
        PMPI_Comm_dup(MPI_COMM_WORLD, &c);
        break;
    case 1:
        PMPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &c);
        break;
    default:
        PMPI_Comm_dup(prev == MPI_COMM_NULL ? MPI_COMM_WORLD : prev, &c);
        break;
    }
    return c;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "live") && strcmp(argv[1], "cycles")) || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: x_comms live N | cycles N\n");
        return 2;
    }
    int n = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (!strcmp(argv[1], "live")) {
        MPI_Comm *comms = malloc(sizeof(MPI_Comm) * (size_t)n);
        for (int i = 0; i < n; i++)
            comms[i] = make(i, i > 0 ? comms[i - 1] : MPI_COMM_NULL);
        for (int rep = 0; rep < 2; rep++)
            for (int i = 0; i < n; i++)
                use(comms[i], 10 * i + rep, "live communicator", i);
        for (int i = 0; i < n; i++)
            PMPI_Comm_free(&comms[i]);
        free(comms);
    } else {
        MPI_Comm prev = MPI_COMM_NULL;
        for (int i = 0; i < n; i++) {
            MPI_Comm c = make(i, prev);
            for (int rep = 0; rep < 3; rep++)
                use(c, 10 * i + rep, "cycle", i);
            if (prev != MPI_COMM_NULL)
                PMPI_Comm_free(&prev);
            /* every third communicator stays for the next one's dup */
            if (i % 3 == 1)
                prev = c;
            else
                PMPI_Comm_free(&c);
        }
        if (prev != MPI_COMM_NULL)
            PMPI_Comm_free(&prev);
    }
    int all = 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0 && all == 0)
        printf("x_comms: OK\n");
    MPI_Finalize();
    return all != 0;
}
