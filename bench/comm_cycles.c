/*
 * comm_cycles -- what a communicator costs: cycles of MPI_Comm_dup(MPI_COMM_WORLD),
 * a few 8-byte Allreduces on the new communicator, MPI_Comm_free, with the
 * host MPI's Allreduce (PMPI_Allreduce: "stock") and pcoll's (MPI_Allreduce),
 * run with libpcoll.so preloaded (scripts/bench.sh --comm-cycles).
 *
 *   comm_cycles [--cycles N] [--calls LIST] [--blocks B] [--label TEXT] [--csv FILE]
 *
 * For each count of calls per communicator in LIST (default 1,3: pcoll
 * leaves the first call on a communicator to the host and sets up at the
 * second, reusing the segment the last communicator of the same ranks
 * left), N cycles (default 5000) of each variant run in B blocks (default
 * 21) that alternate stock and pcoll, the order flipping from block to
 * block, so that a drift of the machine reaches both alike. A block's time
 * is its slowest rank's; the table gives the median over blocks of the time
 * per cycle, and pcoll/stock. Every Allreduce's result is checked (WRONG in
 * the table otherwise, and exit code 1).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CALLS 8
#define MAX_BLOCKS 101

static int rank, nranks, wrong;

static void die(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "comm_cycles: %s\n", msg);
    MPI_Finalize();
    exit(2);
}

/* `cycles` cycles of one variant (pcoll: MPI_Allreduce, else
 * PMPI_Allreduce), `calls` Allreduces each; the slowest rank's seconds. */
static double block(int pcoll, int cycles, int calls)
{
    double mine = rank + 1.0, want = nranks * (nranks + 1) / 2.0;
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < cycles; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        for (int k = 0; k < calls; k++) {
            double sum = 0;
            if (pcoll)
                MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, c);
            else
                PMPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, c);
            wrong += sum != want;
        }
        MPI_Comm_free(&c);
    }
    double t = MPI_Wtime() - t0, slowest;
    PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int cycles = 5000, blocks = 21, ncalls = 0, calls[MAX_CALLS];
    const char *label = "", *csv = NULL, *list = "1,3";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            die("every option takes a value");
        if (!strcmp(argv[i], "--cycles"))
            cycles = atoi(v);
        else if (!strcmp(argv[i], "--blocks"))
            blocks = atoi(v);
        else if (!strcmp(argv[i], "--calls"))
            list = v;
        else if (!strcmp(argv[i], "--label"))
            label = v;
        else if (!strcmp(argv[i], "--csv"))
            csv = v;
        else
            die("usage: comm_cycles [--cycles N] [--calls LIST] [--blocks B] [--label TEXT] [--csv FILE]");
        i++;
    }
    for (const char *p = list; *p && ncalls < MAX_CALLS; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        calls[ncalls++] = atoi(p);
    if (cycles < 1 || blocks < 1 || blocks > MAX_BLOCKS || cycles < blocks || ncalls == 0)
        die("--cycles and --blocks take 1 <= B <= 101, B <= N; --calls a list of counts");
    for (int k = 0; k < ncalls; k++)
        if (calls[k] < 1)
            die("--calls: counts of at least 1");

    MPI_Comm node;
    int local = 1, cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_size(node, &local);
    PMPI_Comm_free(&node);
    FILE *out = NULL;
    if (rank == 0) {
        printf("# communicator cycles, %s, %d ranks on %d cores%s: MPI_Comm_dup(MPI_COMM_WORLD), K 8-byte "
               "Allreduces, MPI_Comm_free\n",
               label, nranks, cores, local > cores ? " -- OVERSUBSCRIBED" : "");
        printf("# %d cycles per variant and K, in %d blocks alternating stock and pcoll; median us per cycle over "
               "the blocks (slowest rank)\n",
               cycles, blocks);
        printf("%-6s %10s %10s %12s  %s\n", "calls", "stock_us", "pcoll_us", "pcoll/stock", "check");
        if (csv && !(out = fopen(csv, "w")))
            fprintf(stderr, "comm_cycles: cannot write %s\n", csv);
        if (out)
            fprintf(out, "label,ranks,calls,cycles,stock_us,pcoll_us,ratio,check\n");
    }
    int failed = 0;
    for (int k = 0; k < ncalls; k++) {
        double stock[MAX_BLOCKS], pcoll[MAX_BLOCKS];
        int per = (cycles + blocks - 1) / blocks;
        wrong = 0;
        block(0, per / 10 + 1, calls[k]); /* warm-up of both */
        block(1, per / 10 + 1, calls[k]);
        for (int b = 0; b < blocks; b++) {
            int first = b % 2;
            double t0 = block(first, per, calls[k]), t1 = block(!first, per, calls[k]);
            stock[b] = 1e6 * (first ? t1 : t0) / per;
            pcoll[b] = 1e6 * (first ? t0 : t1) / per;
        }
        int bad = 0;
        PMPI_Allreduce(&wrong, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        failed |= bad != 0;
        double s = median(stock, blocks), p = median(pcoll, blocks);
        if (rank == 0) {
            printf("%-6d %10.2f %10.2f %12.2f  %s\n", calls[k], s, p, p / s, bad ? "WRONG" : "ok");
            if (out)
                fprintf(out, "%s,%d,%d,%d,%.3f,%.3f,%.4f,%s\n", label, nranks, calls[k], per * blocks, s, p, p / s,
                        bad ? "WRONG" : "ok");
        }
    }
    if (out)
        fclose(out);
    MPI_Finalize();
    return failed;
}
