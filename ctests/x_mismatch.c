/* Erroneous programs whose ranks pass different counts (issue 33): for
 * each collective and message sizes from 8 B to 8 MiB, the ranks that
 * receive more than their buffer holds get an error class (as the host MPI
 * reports MPI_ERR_TRUNCATE), nothing is written past any buffer (each ends
 * at a PROT_NONE guard page: a write past it is a SIGSEGV), no call hangs
 * (an alarm), and the next valid Allreduce is right.
 *
 *   Bcast      the readers pass half the root's count: MPI_ERR_TRUNCATE
 *              at every reader.
 *   Reduce     the root passes half the others' count: MPI_ERR_TRUNCATE
 *              at the root.
 *   Allreduce  rank 0 passes twice the others' count: MPI_ERR_TRUNCATE
 *              at every other rank.
 *   Gatherv    the others send twice what the root expects of them:
 *              MPI_ERR_TRUNCATE at the root.
 *
 *
 * Then arguments that only one rank sees are invalid while the others'
 * are valid: that rank gets the class the host MPI reports, the others
 * complete (with the right result where the invalid rank's input was
 * valid), no call hangs, and the next Allreduce is right.
 *
 *   Reduce     the root's recvbuf is NULL (MPI_ERR_BUFFER), then it is
 *              the send buffer (aliased: MPI_ERR_BUFFER under MPICH,
 *              MPI_ERR_ARG under Open MPI, as each host says).
 *   Allreduce  rank 0's recvbuf is its send buffer: MPI_ERR_BUFFER there,
 *              the right sums at the others.
 *   Bcast      a reader's buffer is NULL: MPI_ERR_BUFFER there, the data
 *              at the others.
 *   Gatherv    the root's recvcounts hold a negative count
 *              (MPI_ERR_COUNT), then are NULL (MPI_ERR_ARG); a sender's
 *              sendcount is negative (MPI_ERR_COUNT there, an error at the
 *              root).
 *
 * Every call runs with MPI_ERRORS_RETURN on MPI_COMM_WORLD.  Prints
 * "x_mismatch: OK" at the end when every check held on every rank. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int rank, size, failures;
static char where[200] = "(init)";

static void on_alarm(int sig)
{
    (void)sig;
    fprintf(stderr, "x_mismatch: rank %d hung in %s\n", rank, where);
    _exit(3);
}

/* `bytes` of memory that end right at a PROT_NONE page. */
static void *guarded(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (bytes + page - 1) / page * page + page;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    mprotect(p + span - page, page, PROT_NONE);
    return p + span - page - bytes;
}

static void release(void *buf, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (bytes + page - 1) / page * page + page;
    munmap((char *)buf + bytes + page - span, span);
}

static void expect_class(int rc, int want, const char *who)
{
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (cls != want) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        fprintf(stderr, "x_mismatch: rank %d, %s: %s got class %d (%s), expected %d\n", rank, where, who, cls,
                rc == MPI_SUCCESS ? "success" : text, want);
        failures++;
    }
}

static void fill(int *v, int n, int seed)
{
    for (int i = 0; i < n; i++)
        v[i] = seed * 1000 + i;
}

/* A valid Allreduce after an erroneous call. */
static void next_call_is_right(void)
{
    int mine[5], sum[5];
    fill(mine, 5, rank);
    int rc = MPI_Allreduce(mine, sum, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < 5; i++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            want += r * 1000 + i;
        if (rc != MPI_SUCCESS || sum[i] != want) {
            fprintf(stderr, "x_mismatch: rank %d, the Allreduce after %s: rc %d, [%d] = %d, expected %d\n", rank,
                    where, rc, i, sum[i], want);
            failures++;
            return;
        }
    }
}

static void bcast(int n)
{
    int root = n % size, mine = rank == root ? n : n / 2;
    int *buf = guarded((size_t)mine * 4);
    fill(buf, mine, rank == root ? 7 : 0);
    int rc = MPI_Bcast(buf, mine, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root)
        expect_class(rc, MPI_SUCCESS, "the root");
    else
        expect_class(rc, MPI_ERR_TRUNCATE, "a reader of half the count");
    release(buf, (size_t)mine * 4);
}

static void reduce(int n)
{
    int root = size - 1, mine = rank == root ? n / 2 : n;
    int *send = guarded((size_t)mine * 4), *recv = rank == root ? guarded((size_t)mine * 4) : NULL;
    fill(send, mine, rank);
    int rc = MPI_Reduce(send, recv, mine, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) {
        expect_class(rc, MPI_ERR_TRUNCATE, "the root of half the count");
        release(recv, (size_t)mine * 4);
    }
    release(send, (size_t)mine * 4);
}

static void allreduce(int n)
{
    int mine = rank == 0 ? n : n / 2;
    int *send = guarded((size_t)mine * 4), *recv = guarded((size_t)mine * 4);
    fill(send, mine, rank);
    int rc = MPI_Allreduce(send, recv, mine, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 0)
        expect_class(rc, MPI_ERR_TRUNCATE, "a rank of half the count");
    release(send, (size_t)mine * 4);
    release(recv, (size_t)mine * 4);
}

static void gatherv(int n)
{
    int root = 0, expected = n / 2, mine = rank == root ? expected : n;
    int *send = guarded((size_t)mine * 4), *recv = NULL;
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    for (int r = 0; r < size; r++) {
        counts[r] = expected;
        displs[r] = r * expected;
    }
    if (rank == root)
        recv = guarded((size_t)expected * (size_t)size * 4);
    fill(send, mine, rank);
    int rc = MPI_Gatherv(send, mine, MPI_INT, recv, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == root) {
        expect_class(rc, MPI_ERR_TRUNCATE, "the root, sent twice its count");
        release(recv, (size_t)expected * (size_t)size * 4);
    }
    release(send, (size_t)mine * 4);
    free(counts);
    free(displs);
}

/* A Reduce root's aliased buffers, as each host reports them */
#ifdef OPEN_MPI
#define ERR_ALIASED_ROOT MPI_ERR_ARG
#else
#define ERR_ALIASED_ROOT MPI_ERR_BUFFER
#endif

/* Whether a call's rc is an error (any class), else says so. */
static void expect_error(int rc, const char *who)
{
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "x_mismatch: rank %d, %s: %s succeeded, expected an error\n", rank, where, who);
        failures++;
    }
}

/* Whether `got` holds the sums of every rank's fill(seed = rank). */
static void expect_sums(const int *got, int n, const char *who)
{
    for (int i = 0; i < n; i++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            want += r * 1000 + i;
        if (got[i] != want) {
            fprintf(stderr, "x_mismatch: rank %d, %s: %s [%d] = %d, expected %d\n", rank, where, who, i, got[i], want);
            failures++;
            return;
        }
    }
}

static void reduce_invalid_root(int n)
{
    int root = n % size, *send = guarded((size_t)n * 4);
    fill(send, n, rank);
    for (int aliased = 0; aliased < 2; aliased++) {
        void *recv = rank == root && aliased ? (void *)send : NULL;
        int rc = MPI_Reduce(send, recv, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
        if (rank == root)
            expect_class(rc, aliased ? ERR_ALIASED_ROOT : MPI_ERR_BUFFER, aliased ? "an aliased root" : "a NULL root");
        next_call_is_right();
    }
    release(send, (size_t)n * 4);
}

static void allreduce_aliased(int n)
{
    int *send = guarded((size_t)n * 4), *recv = guarded((size_t)n * 4);
    fill(send, n, rank);
    int rc = MPI_Allreduce(send, rank == 0 ? send : recv, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        expect_class(rc, MPI_ERR_BUFFER, "rank 0, aliased");
    } else {
        expect_class(rc, MPI_SUCCESS, "a valid rank");
        expect_sums(recv, n, "a valid rank");
    }
    release(send, (size_t)n * 4);
    release(recv, (size_t)n * 4);
}

static void bcast_null_reader(int n)
{
    int root = n % size, bad = (root + 1) % size;
    int *buf = guarded((size_t)n * 4);
    fill(buf, n, rank == root ? 7 : 0);
    int rc = MPI_Bcast(rank == bad ? NULL : buf, n, MPI_INT, root, MPI_COMM_WORLD);
    if (rank == bad) {
        expect_class(rc, MPI_ERR_BUFFER, "a NULL reader");
    } else {
        expect_class(rc, MPI_SUCCESS, "a valid rank");
        for (int i = 0; i < n; i++)
            if (buf[i] != 7000 + i) {
                fprintf(stderr, "x_mismatch: rank %d, %s: [%d] = %d, expected %d\n", rank, where, i, buf[i], 7000 + i);
                failures++;
                break;
            }
    }
    release(buf, (size_t)n * 4);
}

static void gatherv_invalid(int n)
{
    int root = n % size, sender = (root + 1) % size;
    int *send = guarded((size_t)n * 4), *recv = rank == root ? guarded((size_t)n * (size_t)size * 4) : NULL;
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    fill(send, n, rank);
    static const char *const cases[] = {"a negative recvcount", "NULL recvcounts", "a negative sendcount"};
    for (int c = 0; c < 3; c++) {
        for (int r = 0; r < size; r++) {
            counts[r] = n;
            displs[r] = r * n;
        }
        if (c == 0)
            counts[sender] = -1;
        int sendcount = c == 2 && rank == sender ? -1 : n;
        int rc = MPI_Gatherv(send, sendcount, MPI_INT, recv, c == 1 ? NULL : counts, displs, MPI_INT, root,
                             MPI_COMM_WORLD);
        if (c < 2 && rank == root)
            expect_class(rc, c == 0 ? MPI_ERR_COUNT : MPI_ERR_ARG, cases[c]);
        else if (c == 2 && rank == sender)
            expect_class(rc, MPI_ERR_COUNT, cases[c]);
        else if (c == 2 && rank == root)
            expect_error(rc, "the root of a sender with a negative count");
        next_call_is_right();
    }
    if (recv)
        release(recv, (size_t)n * (size_t)size * 4);
    release(send, (size_t)n * 4);
    free(counts);
    free(displs);
}

/* Runs each case from 8 B to 8 MiB, followed by a valid Allreduce. */
static void run_cases(const char *what, const char *const names[], void (*const runs[])(int), size_t cases)
{
    for (size_t c = 0; c < cases; c++) {
        for (long bytes = 8; bytes <= 8L << 20; bytes *= 4) {
            snprintf(where, sizeof where, "%s of %ld B %s", names[c], bytes, what);
            alarm(60);
            runs[c]((int)(bytes / 4));
            next_call_is_right();
            alarm(0);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    signal(SIGALRM, on_alarm);
    /* A communicator's first call goes to the host (PCOLL_SETUP_AFTER=1),
     * which answers erroneous programs in its own way (stock Open MPI
     * hangs on a Bcast whose counts differ): the checks start at the
     * second. */
    snprintf(where, sizeof where, "the first call");
    next_call_is_right();
    static const char *const mismatched[] = {"MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Gatherv"};
    static void (*const mismatches[])(int) = {bcast, reduce, allreduce, gatherv};
    run_cases("against half", mismatched, mismatches, 4);
    static const char *const invalid[] = {"MPI_Reduce", "MPI_Allreduce", "MPI_Bcast", "MPI_Gatherv"};
    static void (*const invalids[])(int) = {reduce_invalid_root, allreduce_aliased, bcast_null_reader,
                                            gatherv_invalid};
    run_cases("invalid at one rank", invalid, invalids, 4);
    int all = 0;
    PMPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("x_mismatch: OK\n");
    MPI_Finalize();
    return all != 0;
}
