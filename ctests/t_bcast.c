/* MPI_Bcast correctness: every root, counts 0 / 1 / odd / large / 8 MiB,
 * several datatypes, root and receivers using different (count, datatype)
 * pairs of the same type signature, non-contiguous derived types (vector,
 * resized) whose gaps must stay untouched. */
#include "common.h"

static void bc(const ct_layout *lr, const ct_layout *lo, int root)
{
    if (ct_want(1))
        ct_bcast_case(lr, lo, root, MPI_COMM_WORLD, "WORLD");
}

static void bc_base(const char *tname, int count, int root)
{
    ct_layout l = ct_lay_base(ct_type_by_name(tname), count);
    bc(&l, &l, root);
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_bcast");
    int np = g_size;
    const ct_type *ti = ct_type_by_name("MPI_INT");
    const ct_type *td = ct_type_by_name("MPI_DOUBLE");

    /* count 0 with a NULL buffer */
    if (ct_want(1)) {
        ct_set_case("MPI_Bcast count=0 buffer=NULL root=%d", np - 1);
        ct_check_rc(MPI_Bcast(NULL, 0, MPI_INT, np - 1, MPI_COMM_WORLD), "MPI_Bcast");
    }

    /* every root */
    for (int root = 0; root < np; root++) {
        bc_base("MPI_INT", 1, root);
        bc_base("MPI_DOUBLE", 1001, root);
        ct_layout c4 = ct_lay_contig(ti, 4, 25), i100 = ct_lay_base(ti, 100);
        bc(&c4, &i100, root);
        ct_lay_free(&c4);
    }

    /* counts */
    static const int counts[] = {0, 1, 2, 3, 7, 8, 1001, 65539, 262147};
    for (unsigned k = 0; k < sizeof counts / sizeof counts[0]; k++)
        bc_base("MPI_INT", counts[k], (int)(k * 3 + 1) % np);
    bc_base("MPI_INT", np - 1, np - 1);
    bc_base("MPI_INT", np + 1, 0);
    bc_base("MPI_INT", 2 * np + 1, np / 2);

    /* other types */
    bc_base("MPI_BYTE", 4097, np - 1);
    bc_base("MPI_UNSIGNED_CHAR", 1, 0);
    bc_base("MPI_SHORT", 1001, 1 % np);
    bc_base("MPI_LONG_DOUBLE", 333, np / 2);
    bc_base("MPI_C_DOUBLE_COMPLEX", 777, np - 1);
    bc_base("MPI_DOUBLE_INT", 1001, 1 % np);       /* non-contiguous predefined type */
    bc_base("MPI_SHORT_INT", 65537, 0);            /* size 6, extent 8 */
    bc_base("MPI_LONG_DOUBLE_INT", 77, np - 1);
    bc_base("MPI_C_BOOL", 9, np / 2);

    /* same signature, different (count, datatype) on root and receivers */
    {
        ct_layout c4 = ct_lay_contig(ti, 4, 1), i4 = ct_lay_base(ti, 4);
        bc(&c4, &i4, 0);
        bc(&i4, &c4, np - 1);
        ct_lay_free(&c4);
    }
    {
        ct_layout c4 = ct_lay_contig(ti, 4, 25001), i = ct_lay_base(ti, 100004);
        bc(&c4, &i, np / 2);
        bc(&i, &c4, 1 % np);
        ct_lay_free(&c4);
    }
    {
        /* vector on both sides, vector vs contiguous, vector vs other vector */
        ct_layout v = ct_lay_vector(td, 3, 2, 5, 333);        /* 1998 doubles */
        ct_layout d = ct_lay_base(td, 1998);
        ct_layout v2 = ct_lay_vector(td, 2, 3, 4, 333);       /* 1998 doubles, other shape */
        bc(&v, &v, 0);
        bc(&v, &d, 1 % np);
        bc(&d, &v, np - 1);
        bc(&v2, &v, np / 2);
        ct_lay_free(&v);
        ct_lay_free(&v2);
    }
    {
        ct_layout v = ct_lay_vector(ti, 7, 1, 2, 10001);      /* every other int, 70007 ints */
        ct_layout c = ct_lay_contig(ti, 7, 10001);
        bc(&c, &v, np - 1);
        bc(&v, &c, 0);
        ct_lay_free(&v);
        ct_lay_free(&c);
    }
    {
        ct_layout r = ct_lay_resized(ti, 3, 1001);             /* one int every 12 bytes */
        ct_layout i = ct_lay_base(ti, 1001);
        bc(&r, &i, 1 % np);
        bc(&i, &r, 0);
        ct_lay_free(&r);
    }
    {
        ct_layout dv = ct_lay_vector(ct_type_by_name("MPI_DOUBLE_INT"), 2, 1, 3, 500);
        ct_layout d = ct_lay_base(ct_type_by_name("MPI_DOUBLE_INT"), 1000);
        bc(&d, &dv, np / 2);
        ct_lay_free(&dv);
    }

    /* the same large message from one root again and again: pcoll's shm
     * Bcast times its calls of a size class and runs its third one through
     * the pipeline (the first two by zero copy), then the faster */
    for (int rep = 0; rep < 5; rep++)
        bc_base("MPI_BYTE", (256 << 10) + 3 + rep, np - 1);

    /* calls of one size from one buffer (malloc gives the freed one
     * back), roots rotating: forced, with its window as wide as the test
     * command sets it, shm_binomial hands their runs after the first to
     * the binomial tree over the host MPI */
    for (int rep = 0; rep < 40; rep++)
        bc_base("MPI_BYTE", 32 << 10, rep % np);

    /* 8 MiB */
    if (g_big) {
        ct_layout c4 = ct_lay_contig(ti, 4, 512 * 1024), i = ct_lay_base(ti, 2 * 1024 * 1024);
        bc(&c4, &i, np - 1);
        ct_lay_free(&c4);
        bc_base("MPI_BYTE", 8 * 1024 * 1024 + 5, 0);
    }

    return ct_finish(MPI_COMM_WORLD);
}
