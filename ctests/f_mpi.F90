! pcoll Fortran test through `use mpi` (the body is ctests/fcoll.inc).
#define PROG "f_mpi"
#define F_USE_MPI
#include "fcoll.inc"
