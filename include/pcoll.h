/*
 * pcoll.h -- the C and C++ interface of libpcoll, pcoll's MPI collective
 * library.
 *
 * pcoll defines MPI_Allreduce, MPI_Reduce, MPI_Bcast and MPI_Gatherv (C,
 * large-count and Fortran names) over the host MPI's PMPI interface:
 * programs call them through <mpi.h> as always, and need this header only
 * for pcoll's own functions below. Every function here is pcoll's alone;
 * a program that must also run without pcoll can look them up with
 * dlsym(RTLD_DEFAULT, "pcoll_version") instead of linking them.
 *
 * Include <mpi.h> first: the declarations use its handle types.
 *
 * Licence: MIT OR Apache-2.0.
 */
#ifndef PCOLL_H
#define PCOLL_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version this header comes with; pcoll_version() says which library
 * runs. */
#define PCOLL_VERSION_MAJOR 0
#define PCOLL_VERSION_MINOR 1
#define PCOLL_VERSION_PATCH 0
#define PCOLL_VERSION_STRING "0.1.0"

/* The library's version, "MAJOR.MINOR.PATCH" (also in its log banner, its
 * summary at MPI_Finalize and `pcoll --version`). The string is static:
 * the caller neither frees nor changes it. Callable at any time, before
 * MPI_Init too. Never fails. */
const char *pcoll_version(void);

/* Sets how one collective runs from the next call on, as the variable
 * PCOLL_<COLL> would: `coll` is "allreduce", "reduce", "bcast" or
 * "gatherv"; `value` an algorithm with its parameters (e.g. "ring" or
 * "salar:chunk=64K"), "mpi" (the host MPI's own), "auto" (pcoll's built-in
 * rules), or "" (back to the configuration the job started with). For
 * benchmarks and tuners that compare choices within one run.
 *
 * Both strings are the caller's, read during the call only. Every rank
 * of a communicator must make the same change between the same two
 * collectives on it; the setting holds for the whole process.
 *
 * Returns MPI_SUCCESS; MPI_ERR_ARG for a NULL argument, an unknown
 * collective or a value the collective does not accept (with a message
 * on stderr), the setting unchanged; MPI_ERR_OTHER for an internal
 * failure. */
int pcoll_set_algorithm(const char *coll, const char *value);

/* inoutbuf[i] = inbuf[i] op inoutbuf[i] for `count` elements of
 * `datatype`, with pcoll's reduction kernels: what pcoll's collectives
 * combine with, behind MPI_Reduce_local's interface. The buffers are the
 * caller's and must not overlap. Pairs of datatype and operator that
 * pcoll has no kernel for (user-defined operators, long double, derived
 * datatypes), and invalid arguments, go to the host's
 * PMPI_Reduce_local, whose return code and error handling apply.
 * Returns MPI_SUCCESS, or the host's error code. */
int pcoll_reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op);

#ifdef __cplusplus
}
#endif

#endif /* PCOLL_H */
