/* pcoll's own functions through include/pcoll.h (issue 32), in a program
 * linked with -lpcoll-<mpi>; the same file compiles as C++ (checked with
 * the MPI's C++ compiler). On every rank:
 *   - pcoll_version() is the header's PCOLL_VERSION_STRING;
 *   - pcoll_set_algorithm takes an algorithm, "mpi", "auto" and "" and
 *     refuses an unknown collective or value with MPI_ERR_ARG;
 *   - pcoll_reduce_local sums ints as MPI_Reduce_local does.
 * Prints "x_header: OK pcoll <version>" when every check held on every
 * rank (ctests/install_checks.py runs it at 2 ranks, built with the
 * flags of an installed pcoll's pkg-config file). */
#include <mpi.h>
#include "pcoll.h"
#include <stdio.h>
#include <string.h>

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "x_header: %s\n", what);
        failures++;
    }
}

int main(int argc, char **argv)
{
    const char *before_init = pcoll_version();
    MPI_Init(&argc, &argv);
    const char *version = pcoll_version();
    expect(version != NULL && strcmp(version, PCOLL_VERSION_STRING) == 0, "pcoll_version() is not the header's");
    expect(before_init == version, "pcoll_version() changed at MPI_Init");

    static const char *const accepted[] = {"ring", "mpi", "auto", ""};
    for (int i = 0; i < 4; i++)
        expect(pcoll_set_algorithm("allreduce", accepted[i]) == MPI_SUCCESS, "a valid setting was refused");
    expect(pcoll_set_algorithm("alltoall", "auto") == MPI_ERR_ARG, "an unknown collective was accepted");
    expect(pcoll_set_algorithm("allreduce", "no_such_algorithm") == MPI_ERR_ARG, "an unknown value was accepted");
    expect(pcoll_set_algorithm(NULL, "auto") == MPI_ERR_ARG, "a NULL collective was accepted");

    int in[4] = {1, 2, 3, 4}, inout[4] = {10, 20, 30, 40};
    expect(pcoll_reduce_local(in, inout, 4, MPI_INT, MPI_SUM) == MPI_SUCCESS, "pcoll_reduce_local failed");
    expect(inout[0] == 11 && inout[3] == 44, "pcoll_reduce_local's sums are wrong");

    /* three times: a communicator's first call goes to the host MPI */
    int all = 0;
    for (int i = 0; i < 3; i++)
        MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (all == 0)
        printf("x_header: OK pcoll %s\n", version);
    MPI_Finalize();
    return all != 0;
}
