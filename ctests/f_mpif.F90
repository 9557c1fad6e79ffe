! pcoll Fortran test through `mpif.h` (the body is ctests/fcoll.inc).
#define PROG "f_mpif"
#define F_MPIF_H
#include "fcoll.inc"
