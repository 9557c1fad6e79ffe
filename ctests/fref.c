/* Reference collectives for the Fortran tests (ctests/f_*.F90): the host
 * MPI's own PMPI_ functions, which pcoll never intercepts, called from
 * Fortran through bind(C) interfaces (buffers by address, Fortran handles and
 * integers by reference). Separate buffers only: no MPI_IN_PLACE or
 * MPI_BOTTOM here. */
#include <mpi.h>

void fref_allreduce(const void *s, void *r, const MPI_Fint *n, const MPI_Fint *dt, const MPI_Fint *op,
                    const MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = PMPI_Allreduce(s, r, *n, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm));
}

void fref_reduce(const void *s, void *r, const MPI_Fint *n, const MPI_Fint *dt, const MPI_Fint *op,
                 const MPI_Fint *root, const MPI_Fint *comm, MPI_Fint *ierr)
{
    *ierr = PMPI_Reduce(s, r, *n, PMPI_Type_f2c(*dt), PMPI_Op_f2c(*op), *root, PMPI_Comm_f2c(*comm));
}

void fref_bcast(void *b, const MPI_Fint *n, const MPI_Fint *dt, const MPI_Fint *root, const MPI_Fint *comm,
                MPI_Fint *ierr)
{
    *ierr = PMPI_Bcast(b, *n, PMPI_Type_f2c(*dt), *root, PMPI_Comm_f2c(*comm));
}

void fref_gatherv(const void *s, const MPI_Fint *sn, const MPI_Fint *sdt, void *r, const MPI_Fint *counts,
                  const MPI_Fint *displs, const MPI_Fint *rdt, const MPI_Fint *root, const MPI_Fint *comm,
                  MPI_Fint *ierr)
{
    *ierr = PMPI_Gatherv(s, *sn, PMPI_Type_f2c(*sdt), r, counts, displs, PMPI_Type_f2c(*rdt), *root,
                         PMPI_Comm_f2c(*comm));
}
