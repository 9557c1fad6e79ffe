! pcoll Fortran test through `use mpi_f08` (the body is ctests/fcoll.inc).
#define PROG "f_mpi_f08"
#define F_USE_MPI_F08
#include "fcoll.inc"
