/* The program of the valgrind check (ctests/valgrind_checks.py, among
 * ctests/run.py's extra checks): a 1 MiB MPI_Bcast and a 1 MiB
 * MPI_Allreduce of doubles into heap buffers the program never wrote,
 * large enough for pcoll's zero copy between the processes.  After each,
 * memcheck's client request VALGRIND_CHECK_MEM_IS_DEFINED (a few no-op
 * instructions outside valgrind) reports "Uninitialised byte(s) found
 * during client check request" if valgrind takes any byte of the result
 * for undefined; then the values are compared.  Rank 0 prints
 * "x_valgrind: OK" at the end; exit code 1 on a wrong value. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/memcheck.h>

#define BYTES (1 << 20)

int main(int argc, char **argv)
{
    int rank, size;
    long wrong = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    unsigned char *data = malloc(BYTES);
    if (rank == 0)
        for (long i = 0; i < BYTES; i++)
            data[i] = (unsigned char)(i % 251);
    MPI_Bcast(data, BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    (void)VALGRIND_CHECK_MEM_IS_DEFINED(data, BYTES);
    for (long i = 0; i < BYTES; i++)
        wrong += data[i] != (unsigned char)(i % 251);

    long n = BYTES / sizeof(double);
    double *in = malloc(BYTES), *sum = malloc(BYTES);
    for (long i = 0; i < n; i++)
        in[i] = rank + i % 7;
    MPI_Allreduce(in, sum, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    (void)VALGRIND_CHECK_MEM_IS_DEFINED(sum, BYTES);
    for (long i = 0; i < n; i++)
        wrong += sum[i] != size * (size - 1) / 2.0 + (double)size * (i % 7);

    if (wrong)
        printf("x_valgrind: rank %d: %ld wrong values\n", rank, wrong);
    free(data);
    free(in);
    free(sum);
    MPI_Finalize();
    if (rank == 0 && !wrong)
        printf("x_valgrind: OK\n");
    return wrong != 0;
}
