/* MPI_Allreduce correctness: every predefined type with every valid op,
 * user ops (commutative, non-commutative, derived type), MPI_IN_PLACE,
 * counts 0 / 1 / odd / large / >= 8 MiB, cross-rank identical results. */
#include "common.h"

static void core(const char *tname, int op, long count, int inplace)
{
    if (ct_want(1))
        ct_allreduce_case(ct_type_by_name(tname), op, count, inplace, MPI_COMM_WORLD, "WORLD", 1);
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_allreduce");
    MPI_Comm w = MPI_COMM_WORLD;
    int np = g_size;

    /* count 0 with NULL buffers */
    if (ct_want(1)) {
        ct_set_case("MPI_Allreduce count=0 sendbuf=recvbuf=NULL");
        ct_check_rc(MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, w), "MPI_Allreduce");
        ct_set_case("MPI_Allreduce count=0 MPI_IN_PLACE recvbuf=NULL");
        ct_check_rc(MPI_Allreduce(MPI_IN_PLACE, NULL, 0, MPI_DOUBLE, MPI_MAX, w), "MPI_Allreduce");
    }

    /* core cases: always run (they exercise the algorithms) */
    static const long icounts[] = {0, 1, 2, 3, 7, 8, 1001, 65539};
    for (unsigned k = 0; k < sizeof icounts / sizeof icounts[0]; k++)
        core("MPI_INT", O_SUM, icounts[k], 0);
    core("MPI_INT", O_SUM, np - 1, 0);
    core("MPI_INT", O_SUM, np + 1, 1);
    core("MPI_INT", O_SUM, 2 * np + 1, 0);
    core("MPI_INT", O_SUM, 1, 1);
    core("MPI_INT", O_SUM, 7, 1);
    core("MPI_INT", O_SUM, 1001, 1);
    core("MPI_INT", O_SUM, 65539, 1);
    core("MPI_DOUBLE", O_SUM, 1001, 0);
    core("MPI_DOUBLE", O_SUM, 100003, 1);
    core("MPI_FLOAT", O_PROD, 1001, 0);
    core("MPI_LONG_DOUBLE", O_SUM, 1001, 1);
    core("MPI_C_DOUBLE_COMPLEX", O_PROD, 1001, 0);
    core("MPI_INT8_T", O_PROD, 1001, 1);
    core("MPI_UINT8_T", O_SUM, 100003, 0);
    core("MPI_C_BOOL", O_LXOR, 1001, 0);
    core("MPI_BYTE", O_BXOR, 4097, 1);
    core("MPI_UNSIGNED_LONG", O_MAX, 30001, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 1, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 2, 1);
    core("MPI_2INT(user-affine)", O_UAFF, 7, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 1001, 0);
    core("MPI_2INT(user-affine)", O_UAFF, 1001, 1);
    core("MPI_2INT(user-affine)", O_UAFF, 65537, 0);
    core("MPI_UNSIGNED(user-commutative)", O_UCOM, 7, 0);
    core("MPI_UNSIGNED(user-commutative)", O_UCOM, 4099, 1);
    core("contig(3,MPI_UNSIGNED)(user-commutative)", O_UVEC, 1, 0);
    core("contig(3,MPI_UNSIGNED)(user-commutative)", O_UVEC, 1001, 1);
    core("contig(3,MPI_UNSIGNED)(user-commutative)", O_UVEC, 33333, 0);
    core("MPI_DOUBLE_INT", O_MINLOC, 1001, 0);
    core("MPI_DOUBLE_INT", O_MAXLOC, 100003, 1);
    core("MPI_SHORT_INT", O_MAXLOC, 7, 0);
    core("MPI_LONG_DOUBLE_INT", O_MINLOC, 1001, 1);
    core("MPI_2INT", O_MAXLOC, 65537, 0);
    /* One size class again and again: shm_flat's adaptive copy-in
     * (PCOLL_SHM_ADAPT) uses ordinary stores from a class's third call. */
    for (int rep = 0; rep < 4; rep++)
        core("MPI_DOUBLE", O_SUM, 40000 + rep, rep & 1);
    /* One size class on the same buffers again and again, as loops meet
     * them: shm_flat_zcopy goes by zero copy, and shm_flat_ring hands the
     * runs of calls (16) that every rank votes hot for to the ring over
     * the host. In place in the last calls: the input moves once. */
    if (ct_want(1)) {
        const long count = 5000; /* 40000 B of doubles */
        ct_reduction_bufs b = ct_reduction_alloc((size_t)count * sizeof(double));
        for (int rep = 0; rep < 40; rep++)
            ct_allreduce_case_in(b, ct_type_by_name("MPI_DOUBLE"), O_SUM, count, rep >= 32, w, "WORLD", 1);
        ct_reduction_free(b);
    }
    if (g_big) {
        core("MPI_INT", O_SUM, 2L * 1024 * 1024, 0);    /* 8 MiB */
        core("MPI_DOUBLE", O_SUM, 1024L * 1024 + 3, 1); /* 8 MiB + 24 B, in place */
    }

    /* sweep: every type with every op valid for it (sharded) */
    static const long sweep_counts[] = {1, 7, 1001, 3, 0, 64, 257};
    const int nsc = (int)(sizeof sweep_counts / sizeof sweep_counts[0]);
    int k = 0;
    for (int ti = 0; ti < g_ntypes; ti++) {
        for (int op = 0; op < O_COUNT; op++) {
            if (!ct_valid(&g_types[ti], op))
                continue;
            long c = sweep_counts[k % nsc];
            int inplace = ((k / nsc) + k) & 1;
            k++;
            if (ct_want(0))
                ct_allreduce_case(&g_types[ti], op, c, inplace, w, "WORLD", 1);
        }
    }

    return ct_finish(w);
}
