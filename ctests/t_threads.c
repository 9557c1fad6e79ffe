/*
 * MPI_THREAD_MULTIPLE: two threads per rank run collectives at the same
 * time, each on its own communicator (duplicates of MPI_COMM_WORLD). The
 * first collective on each communicator creates pcoll's private duplicate
 * concurrently in both threads. Results are checked exactly (integer data).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 2
#define ITERS 20
#define COUNT 1001

static int g_rank, g_size;

struct job {
    MPI_Comm comm;
    int id;
    long failures;
};

static void *worker(void *arg)
{
    struct job *job = arg;
    int *a = malloc(sizeof(int) * COUNT), *b = malloc(sizeof(int) * COUNT);
    int *counts = malloc(sizeof(int) * g_size), *displs = malloc(sizeof(int) * g_size);
    int *gathered = malloc(sizeof(int) * g_size * 2);
    for (int it = 0; it < ITERS; it++) {
        int root = (it + job->id) % g_size;
        for (int i = 0; i < COUNT; i++)
            a[i] = g_rank * 3 + i + it + job->id;
        MPI_Allreduce(a, b, COUNT, MPI_INT, MPI_SUM, job->comm);
        for (int i = 0; i < COUNT; i++) {
            long expect = 3L * g_size * (g_size - 1) / 2 + (long)g_size * (i + it + job->id);
            if (b[i] != expect)
                job->failures++;
        }
        memset(b, 0, sizeof(int) * COUNT);
        MPI_Reduce(a, b, COUNT, MPI_INT, MPI_MAX, root, job->comm);
        if (g_rank == root)
            for (int i = 0; i < COUNT; i++)
                if (b[i] != (g_size - 1) * 3 + i + it + job->id)
                    job->failures++;
        for (int i = 0; i < COUNT; i++)
            b[i] = g_rank == root ? i * 7 + it + job->id : -1;
        MPI_Bcast(b, COUNT, MPI_INT, root, job->comm);
        for (int i = 0; i < COUNT; i++)
            if (b[i] != i * 7 + it + job->id)
                job->failures++;
        for (int r = 0; r < g_size; r++) {
            counts[r] = r % 3; /* zero counts included */
            displs[r] = 2 * (g_size - 1 - r); /* reversed order */
        }
        int mine[2] = {g_rank * 100 + it, g_rank * 100 + it + 1};
        for (int i = 0; i < 2 * g_size; i++)
            gathered[i] = -7;
        MPI_Gatherv(mine, g_rank % 3, MPI_INT, gathered, counts, displs, MPI_INT, root, job->comm);
        if (g_rank == root)
            for (int r = 0; r < g_size; r++)
                for (int k = 0; k < 2; k++) {
                    int expect = k < counts[r] ? r * 100 + it + k : -7;
                    if (gathered[displs[r] + k] != expect)
                        job->failures++;
                }
    }
    free(a);
    free(b);
    free(counts);
    free(displs);
    free(gathered);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (g_rank == 0)
            printf("ctest t_threads: OK (MPI_THREAD_MULTIPLE not provided, nothing to test)\n");
        MPI_Finalize();
        return 0;
    }
    struct job jobs[NTHREADS];
    pthread_t threads[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        PMPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
        jobs[t].id = t;
        jobs[t].failures = 0;
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_create(&threads[t], NULL, worker, &jobs[t]);
    long failures = 0, total = 0;
    for (int t = 0; t < NTHREADS; t++) {
        pthread_join(threads[t], NULL);
        failures += jobs[t].failures;
        PMPI_Comm_free(&jobs[t].comm);
    }
    if (failures)
        fprintf(stderr, "[t_threads rank %d] FAIL %ld wrong elements\n", g_rank, failures);
    PMPI_Allreduce(&failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("ctest t_threads: %s\n", total ? "FAIL" : "OK");
    MPI_Finalize();
    return total ? 1 : 0;
}
