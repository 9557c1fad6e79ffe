/* MPI_Reduce correctness: every root, every predefined type with every valid
 * op, user ops (incl. non-commutative), MPI_IN_PLACE at the root, recvbuf
 * NULL at non-roots, counts 0 / 1 / odd / large / >= 8 MiB.
 * The reference is PMPI_Allreduce on copies (stock PMPI_Reduce is not
 * trusted: MPICH 4.0.2 crashes on in-place Reduce at a non-zero root). */
#include "common.h"

static void core(const char *tname, int op, long count, int root, int inplace, int nullrecv)
{
    if (ct_want(1))
        ct_reduce_case(ct_type_by_name(tname), op, count, root, inplace, nullrecv, MPI_COMM_WORLD, "WORLD");
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_reduce");
    MPI_Comm w = MPI_COMM_WORLD;
    int np = g_size;

    /* count 0 with NULL buffers */
    if (ct_want(1)) {
        ct_set_case("MPI_Reduce count=0 sendbuf=recvbuf=NULL root=%d", np - 1);
        ct_check_rc(MPI_Reduce(NULL, NULL, 0, MPI_INT, MPI_SUM, np - 1, w), "MPI_Reduce");
    }

    /* every root */
    for (int root = 0; root < np; root++) {
        core("MPI_INT", O_SUM, 7, root, root & 1, root % 3 == 0);
        core("MPI_2INT(user-affine)", O_UAFF, 1001, root, !(root & 1), 1);
        core("MPI_DOUBLE", O_SUM, 3001, root, root % 3 == 1, root & 1);
    }

    /* core cases with rotating roots */
    static const long icounts[] = {0, 1, 2, 3, 8, 1001, 65539};
    int k = 0;
    for (unsigned c = 0; c < sizeof icounts / sizeof icounts[0]; c++, k++)
        core("MPI_INT", O_SUM, icounts[c], (k * 5 + 1) % np, k & 1, (k >> 1) & 1);
    core("MPI_INT", O_SUM, np - 1, np - 1, 0, 0);
    /* One size class on the same buffers again and again, roots rotating,
     * as benchmarks loop them: shm_flat_zcopy goes by zero copy, and
     * shm_flat_binomial hands the runs of calls (16) that every rank votes
     * hot and back to back for to the binomial tree over the host (the
     * checks between these calls take longer than PCOLL_SHM_BACK_TO_BACK's
     * default: the forced runs set it high). In place at the root in the
     * last calls: its input moves once. */
    if (ct_want(1)) {
        const long count = 5000; /* 40000 B of doubles */
        ct_reduction_bufs b = ct_reduction_alloc((size_t)count * sizeof(double));
        for (int rep = 0; rep < 40; rep++)
            ct_reduce_case_in(b, ct_type_by_name("MPI_DOUBLE"), O_SUM, count, rep % np, rep >= 32, rep % 5 == 4, w,
                              "WORLD");
        ct_reduction_free(b);
    }
    core("MPI_INT", O_SUM, np + 1, 0, 1, 1);
    core("MPI_INT", O_SUM, 2 * np + 1, np / 2, 0, 1);
    core("MPI_2INT(user-affine)", O_UAFF, 1, np - 1, 0, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 7, np / 2, 1, 1);
    core("MPI_2INT(user-affine)", O_UAFF, 65537, np - 1, 1, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 65537, 0, 0, 1);
    core("MPI_UNSIGNED(user-commutative)", O_UCOM, 4099, 1 % np, 0, 1);
    core("contig(3,MPI_UNSIGNED)(user-commutative)", O_UVEC, 33333, np - 1, 1, 0);
    core("MPI_DOUBLE_INT", O_MINLOC, 100003, np / 2, 0, 1);
    core("MPI_LONG_DOUBLE_INT", O_MAXLOC, 1001, np - 1, 1, 1);
    core("MPI_C_FLOAT_COMPLEX", O_SUM, 1001, 1 % np, 0, 0);
    core("MPI_UINT16_T", O_PROD, 20001, 0, 1, 0);
    core("MPI_C_BOOL", O_LAND, 1001, np - 1, 0, 1);
    core("MPI_BYTE", O_BOR, 4097, 1 % np, 1, 1);
    if (g_big) {
        core("MPI_INT", O_SUM, 2L * 1024 * 1024, np - 1, 1, 1);      /* 8 MiB, in place at the last rank */
        core("MPI_DOUBLE", O_MAX, 1024L * 1024 + 1, np / 2, 0, 0);    /* 8 MiB + 8 B */
    }

    /* sweep: every type with every op valid for it (sharded) */
    static const long sweep_counts[] = {1, 7, 1001, 3, 0, 64, 257};
    const int nsc = (int)(sizeof sweep_counts / sizeof sweep_counts[0]);
    k = 0;
    for (int ti = 0; ti < g_ntypes; ti++) {
        for (int op = 0; op < O_COUNT; op++) {
            if (!ct_valid(&g_types[ti], op))
                continue;
            long c = sweep_counts[k % nsc];
            int root = (k * 3) % np;
            int inplace = ((k / nsc) + k) & 1;
            int nullrecv = (k >> 2) & 1;
            k++;
            if (ct_want(0))
                ct_reduce_case(&g_types[ti], op, c, root, inplace, nullrecv, w, "WORLD");
        }
    }

    return ct_finish(w);
}
