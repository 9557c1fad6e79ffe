/* How a job ends must not leave pcoll's shared segments in /dev/shm.
 * Run by ctests/run.py's extra checks (not by the matrix, hence no t_
 * prefix), which forces node algorithms, snapshots /dev/shm around the job
 * and looks for segments created by this job's processes.
 *
 * usage: shm_exit finalize|abort|kill MARKER PIDDIR
 *
 * Every rank writes its pid to PIDDIR/pid.<rank> (so that the runner knows
 * the job's processes), runs an Allreduce on MPI_COMM_WORLD and a Bcast on
 * pairs of consecutive ranks, then checks that it maps a segment: a line of
 * /proc/self/maps containing MARKER (the segment's name is unlinked at once,
 * so the mapping is the only trace). World rank 0 writes the verdict to
 * PIDDIR/verdict ("segments mapped on every rank", or what is wrong): a
 * file, because a launcher may drop the output of an aborted job. Then:
 *   finalize: MPI_Finalize; prints "ctest shm_exit: OK";
 *   abort:    the last rank calls MPI_Abort while the others wait in a
 *             barrier;
 *   kill:     the last rank SIGKILLs itself while the others enter another
 *             Allreduce, which cannot complete: the launcher must end them.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int maps_segment(const char *marker)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int n = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, marker) != NULL;
    fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4 ||
        (strcmp(argv[1], "finalize") && strcmp(argv[1], "abort") && strcmp(argv[1], "kill"))) {
        fprintf(stderr, "usage: shm_exit finalize|abort|kill MARKER PIDDIR\n");
        return 2;
    }
    const char *mode = argv[1], *marker = argv[2];
    MPI_Init(&argc, &argv);
    int rank, size;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);

    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%d", argv[3], rank);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
        fprintf(stderr, "shm_exit rank %d: cannot write %s\n", rank, path);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* every pid is on disk before any segment exists */
    PMPI_Barrier(MPI_COMM_WORLD);

    int v[1024], sum[1024];
    for (int k = 0; k < 1024; k++)
        v[k] = rank + k;
    MPI_Allreduce(v, sum, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm pair;
    PMPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
    static char buf[1 << 16];
    memset(buf, rank, sizeof buf);
    MPI_Bcast(buf, sizeof buf, MPI_BYTE, 0, pair);
    int bad = sum[1] != size * (size - 1) / 2 + size || buf[sizeof buf - 1] != (char)(rank / 2 * 2);

    int mapped = maps_segment(marker) > 0, all_mapped = 0, any_bad = 0;
    PMPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    PMPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/verdict", argv[3]);
        f = fopen(path, "w");
        if (f) {
            fprintf(f, "%s\n", !all_mapped ? "a rank maps no segment"
                               : any_bad  ? "wrong results"
                                          : "segments mapped on every rank");
            fclose(f);
        }
    }
    /* the verdict is on disk before any rank goes */
    PMPI_Barrier(MPI_COMM_WORLD);

    if (!strcmp(mode, "abort")) {
        if (rank == size - 1)
            MPI_Abort(MPI_COMM_WORLD, 7);
        PMPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "kill")) {
        if (rank == size - 1)
            raise(SIGKILL);
        MPI_Allreduce(v, sum, 1024, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    PMPI_Comm_free(&pair);
    MPI_Finalize();
    if (rank == 0 && all_mapped && !any_bad && !strcmp(mode, "finalize"))
        printf("ctest shm_exit: OK\n");
    return all_mapped && !any_bad ? 0 : 1;
}
