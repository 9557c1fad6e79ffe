/* Error handling: with MPI_ERRORS_RETURN, invalid arguments must make MPI_X
 * return an error of the same class as the host MPI's PMPI_X with the same
 * arguments.  Only arguments that every rank passes identically (so no rank
 * is left waiting) and that the host MPI itself rejects are used: PMPI_X is
 * called first, and a case the host accepts is skipped (not run through
 * MPI_X, which would then really execute it). */
#include "common.h"

static long g_cases, g_skipped;

static void errstr(int rc, char *out, int n)
{
    int len = 0, cls = -1;
    char msg[MPI_MAX_ERROR_STRING];
    PMPI_Error_class(rc, &cls);
    PMPI_Error_string(rc, msg, &len);
    snprintf(out, (size_t)n, "code %d class %d (%.120s)", rc, cls, msg);
}

static void compare(const char *what, int rc_pmpi, int rc_mpi)
{
    char a[200], b[200];
    g_cases++;
    int cp = -1, cm = -1;
    PMPI_Error_class(rc_pmpi, &cp);
    PMPI_Error_class(rc_mpi, &cm);
    if (rc_mpi == MPI_SUCCESS || cp != cm) {
        errstr(rc_mpi, a, sizeof a);
        errstr(rc_pmpi, b, sizeof b);
        ct_fail("%s: MPI call returned %s, the host's PMPI call returned %s", what, a, b);
    } else if (g_verbose && g_rank == 0) {
        errstr(rc_mpi, a, sizeof a);
        fprintf(stderr, "[t_errors] %s: both return %s\n", what, a);
    }
}

/* CTEST_ERRCASE=k runs only the k-th case (to probe which ones the host
 * survives); CTEST_ERRCASE=list prints the cases. */
static int g_only = -1, g_list, g_idx;

/* Cases that crash or abort the host MPI itself (found by running each case
 * alone against stock MPI, see CTEST_ERRCASE): never made. */
static const char *host_crashes[] = {
#if defined(MPICH_VERSION)
    /* MPICH 4.0.2 (Debian): no count check in Allreduce/Reduce (segfault in a
     * memcpy of -4 bytes); MPI_LAND on MPI_DOUBLE aborts with "Internal error" */
    "MPI_Allreduce count=-1",
    "MPI_Reduce count=-1",
    "MPI_Allreduce op=MPI_LAND on MPI_DOUBLE",
#endif
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 50000000
    /* MPICH 5.0.2 (the PyPI wheel): an assertion (dt_ptr, mpir_datatype.h)
     * aborts on MPI_DATATYPE_NULL in Allreduce and Reduce */
    "MPI_Allreduce datatype=MPI_DATATYPE_NULL",
    "MPI_Reduce datatype=MPI_DATATYPE_NULL",
#endif
#if defined(OPEN_MPI)
    /* Open MPI 4.1: segfaults in the reduction or the copy on NULL buffers */
    "MPI_Allreduce count>0 with NULL buffers",
    "MPI_Bcast NULL buffer after a valid call",
    "MPI_Reduce NULL send buffer after a valid call",
    "MPI_Gatherv NULL send buffer after a valid call",
#endif
    NULL};

static int want_case(const char *desc)
{
    for (int k = 0; host_crashes[k]; k++)
        if (strcmp(desc, host_crashes[k]) == 0) {
            g_skipped++;
            return 0;
        }
    int k = g_idx++;
    if (g_list) {
        if (g_rank == 0)
            printf("%d %s\n", k, desc);
        return 0;
    }
    return g_only < 0 || g_only == k;
}

/* Each macro runs PMPI first; only when the host rejects the arguments is
 * the same call made through MPI_X. */
#define ERRCASE(desc, PCALL, MCALL)                                                                   \
    do {                                                                                              \
        if (!want_case(desc))                                                                         \
            break;                                                                                    \
        ct_set_case("%s", desc);                                                                      \
        int rc_p_ = PCALL;                                                                            \
        int any_ok_ = 0, mine_ok_ = rc_p_ == MPI_SUCCESS;                                             \
        PMPI_Allreduce(&mine_ok_, &any_ok_, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);                     \
        if (any_ok_) {                                                                                \
            g_skipped++;                                                                              \
            if (g_rank == 0 && g_verbose)                                                             \
                fprintf(stderr, "[t_errors] skipped (host MPI accepts it): %s\n", desc);              \
        } else {                                                                                      \
            int rc_m_ = MCALL;                                                                        \
            compare(desc, rc_p_, rc_m_);                                                              \
        }                                                                                             \
    } while (0)

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_errors");
    MPI_Comm w;
    PMPI_Comm_dup(MPI_COMM_WORLD, &w);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    int np = g_size;
    const char *oc = getenv("CTEST_ERRCASE");
    if (oc && strcmp(oc, "list") == 0)
        g_list = 1;
    else if (oc)
        g_only = atoi(oc);
    int sbuf[64], rbuf[64], counts[64], displs[64];
    memset(sbuf, 0, sizeof sbuf);
    for (int k = 0; k < 64; k++) {
        counts[k] = 1;
        displs[k] = k;
    }
    MPI_Datatype uncommitted;
    PMPI_Type_contiguous(2, MPI_INT, &uncommitted);

    /* warm up: pcoll may set up per-communicator state on first use */
    ct_set_case("valid MPI_Allreduce before the error cases");
    ct_check_rc(MPI_Allreduce(sbuf, rbuf, 4, MPI_INT, MPI_SUM, w), "MPI_Allreduce");

    for (int pass = 0; pass < 2; pass++) {
        MPI_Comm c = pass == 0 ? w : MPI_COMM_WORLD;
        /* Allreduce */
        ERRCASE("MPI_Allreduce count=-1", PMPI_Allreduce(sbuf, rbuf, -1, MPI_INT, MPI_SUM, c),
                MPI_Allreduce(sbuf, rbuf, -1, MPI_INT, MPI_SUM, c));
        ERRCASE("MPI_Allreduce datatype=MPI_DATATYPE_NULL",
                PMPI_Allreduce(sbuf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, c),
                MPI_Allreduce(sbuf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, c));
        ERRCASE("MPI_Allreduce op=MPI_OP_NULL", PMPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_OP_NULL, c),
                MPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_OP_NULL, c));
        ERRCASE("MPI_Allreduce uncommitted datatype", PMPI_Allreduce(sbuf, rbuf, 1, uncommitted, MPI_SUM, c),
                MPI_Allreduce(sbuf, rbuf, 1, uncommitted, MPI_SUM, c));
        ERRCASE("MPI_Allreduce op=MPI_LAND on MPI_DOUBLE", PMPI_Allreduce(sbuf, rbuf, 1, MPI_DOUBLE, MPI_LAND, c),
                MPI_Allreduce(sbuf, rbuf, 1, MPI_DOUBLE, MPI_LAND, c));
        ERRCASE("MPI_Allreduce op=MPI_SUM on MPI_2INT", PMPI_Allreduce(sbuf, rbuf, 1, MPI_2INT, MPI_SUM, c),
                MPI_Allreduce(sbuf, rbuf, 1, MPI_2INT, MPI_SUM, c));
        ERRCASE("MPI_Allreduce op=MPI_MINLOC on MPI_INT", PMPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_MINLOC, c),
                MPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_MINLOC, c));
        ERRCASE("MPI_Allreduce sendbuf == recvbuf (not MPI_IN_PLACE)",
                PMPI_Allreduce(sbuf, sbuf, 2, MPI_INT, MPI_SUM, c), MPI_Allreduce(sbuf, sbuf, 2, MPI_INT, MPI_SUM, c));
        ERRCASE("MPI_Allreduce count>0 with NULL buffers", PMPI_Allreduce(NULL, NULL, 3, MPI_INT, MPI_SUM, c),
                MPI_Allreduce(NULL, NULL, 3, MPI_INT, MPI_SUM, c));
        /* Reduce */
        ERRCASE("MPI_Reduce count=-1", PMPI_Reduce(sbuf, rbuf, -1, MPI_INT, MPI_SUM, 0, c),
                MPI_Reduce(sbuf, rbuf, -1, MPI_INT, MPI_SUM, 0, c));
        ERRCASE("MPI_Reduce root=-1", PMPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, -1, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, -1, c));
        ERRCASE("MPI_Reduce root=size", PMPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, np, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, np, c));
        ERRCASE("MPI_Reduce root=MPI_ROOT on an intracommunicator",
                PMPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, MPI_ROOT, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, MPI_ROOT, c));
        ERRCASE("MPI_Reduce datatype=MPI_DATATYPE_NULL", PMPI_Reduce(sbuf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, 0, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_DATATYPE_NULL, MPI_SUM, 0, c));
        ERRCASE("MPI_Reduce op=MPI_OP_NULL", PMPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_OP_NULL, 0, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_OP_NULL, 0, c));
        ERRCASE("MPI_Reduce op=MPI_BXOR on MPI_FLOAT", PMPI_Reduce(sbuf, rbuf, 1, MPI_FLOAT, MPI_BXOR, 0, c),
                MPI_Reduce(sbuf, rbuf, 1, MPI_FLOAT, MPI_BXOR, 0, c));
        /* Bcast */
        ERRCASE("MPI_Bcast count=-1", PMPI_Bcast(sbuf, -1, MPI_INT, 0, c), MPI_Bcast(sbuf, -1, MPI_INT, 0, c));
        ERRCASE("MPI_Bcast root=-1", PMPI_Bcast(sbuf, 1, MPI_INT, -1, c), MPI_Bcast(sbuf, 1, MPI_INT, -1, c));
        ERRCASE("MPI_Bcast root=size", PMPI_Bcast(sbuf, 1, MPI_INT, np, c), MPI_Bcast(sbuf, 1, MPI_INT, np, c));
        ERRCASE("MPI_Bcast datatype=MPI_DATATYPE_NULL", PMPI_Bcast(sbuf, 1, MPI_DATATYPE_NULL, 0, c),
                MPI_Bcast(sbuf, 1, MPI_DATATYPE_NULL, 0, c));
        ERRCASE("MPI_Bcast uncommitted datatype", PMPI_Bcast(sbuf, 1, uncommitted, 0, c),
                MPI_Bcast(sbuf, 1, uncommitted, 0, c));
        /* Gatherv */
        ERRCASE("MPI_Gatherv sendcount=-1", PMPI_Gatherv(sbuf, -1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, c),
                MPI_Gatherv(sbuf, -1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, c));
        ERRCASE("MPI_Gatherv root=-1", PMPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, -1, c),
                MPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, -1, c));
        ERRCASE("MPI_Gatherv root=size", PMPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, np, c),
                MPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, np, c));
        ERRCASE("MPI_Gatherv sendtype=MPI_DATATYPE_NULL",
                PMPI_Gatherv(sbuf, 1, MPI_DATATYPE_NULL, rbuf, counts, displs, MPI_INT, 0, c),
                MPI_Gatherv(sbuf, 1, MPI_DATATYPE_NULL, rbuf, counts, displs, MPI_INT, 0, c));
        /* The arguments of a valid call just made, but for a buffer: pcoll
         * keeps the plan of a repeated call and must still check buffers. */
        ct_set_case("valid calls before the repeated ones with NULL buffers");
        ct_check_rc(MPI_Bcast(sbuf, 3, MPI_INT, 0, c), "MPI_Bcast");
        ERRCASE("MPI_Bcast NULL buffer after a valid call", PMPI_Bcast(NULL, 3, MPI_INT, 0, c),
                MPI_Bcast(NULL, 3, MPI_INT, 0, c));
        ct_check_rc(MPI_Reduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, 0, c), "MPI_Reduce");
        ERRCASE("MPI_Reduce NULL send buffer after a valid call", PMPI_Reduce(NULL, rbuf, 3, MPI_INT, MPI_SUM, 0, c),
                MPI_Reduce(NULL, rbuf, 3, MPI_INT, MPI_SUM, 0, c));
        ct_check_rc(MPI_Allreduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, c), "MPI_Allreduce");
        ERRCASE("MPI_Allreduce aliased buffers after a valid call", PMPI_Allreduce(sbuf, sbuf, 3, MPI_INT, MPI_SUM, c),
                MPI_Allreduce(sbuf, sbuf, 3, MPI_INT, MPI_SUM, c));
        if (np <= 64) {
            ct_check_rc(MPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, c), "MPI_Gatherv");
            ERRCASE("MPI_Gatherv NULL send buffer after a valid call",
                    PMPI_Gatherv(NULL, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, c),
                    MPI_Gatherv(NULL, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, c));
        }
        /* MPI_COMM_NULL (the error is raised on MPI_COMM_WORLD / SELF) */
        if (pass == 1) {
            ERRCASE("MPI_Allreduce comm=MPI_COMM_NULL", PMPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL),
                    MPI_Allreduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL));
            ERRCASE("MPI_Reduce comm=MPI_COMM_NULL", PMPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_NULL),
                    MPI_Reduce(sbuf, rbuf, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_NULL));
            ERRCASE("MPI_Bcast comm=MPI_COMM_NULL", PMPI_Bcast(sbuf, 1, MPI_INT, 0, MPI_COMM_NULL),
                    MPI_Bcast(sbuf, 1, MPI_INT, 0, MPI_COMM_NULL));
            ERRCASE("MPI_Gatherv comm=MPI_COMM_NULL",
                    PMPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, MPI_COMM_NULL),
                    MPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, MPI_COMM_NULL));
        }
    }

    /* the communicators must still work */
    ct_set_case("valid collectives after the error cases");
    for (int k = 0; k < 4; k++)
        sbuf[k] = g_rank + k;
    ct_check_rc(MPI_Allreduce(sbuf, rbuf, 4, MPI_INT, MPI_SUM, w), "MPI_Allreduce");
    for (int k = 0; k < 4; k++)
        if (rbuf[k] != np * (np - 1) / 2 + np * k)
            ct_fail("%s: MPI_Allreduce element %d: got %d, expected %d", g_case, k, rbuf[k], np * (np - 1) / 2 + np * k);
    rbuf[0] = g_rank == np - 1 ? 4242 : -1;
    ct_check_rc(MPI_Bcast(rbuf, 1, MPI_INT, np - 1, MPI_COMM_WORLD), "MPI_Bcast");
    if (rbuf[0] != 4242)
        ct_fail("%s: MPI_Bcast got %d, expected 4242", g_case, rbuf[0]);
    ct_check_rc(MPI_Reduce(sbuf, g_rank == 0 ? rbuf : NULL, 1, MPI_INT, MPI_MAX, 0, w), "MPI_Reduce");
    if (g_rank == 0 && rbuf[0] != np - 1)
        ct_fail("%s: MPI_Reduce got %d, expected %d", g_case, rbuf[0], np - 1);
    if (np <= 64) {
        sbuf[0] = 100 + g_rank;
        ct_check_rc(MPI_Gatherv(sbuf, 1, MPI_INT, rbuf, counts, displs, MPI_INT, 0, w), "MPI_Gatherv");
        if (g_rank == 0)
            for (int k = 0; k < np; k++)
                if (rbuf[k] != 100 + k)
                    ct_fail("%s: MPI_Gatherv element %d: got %d, expected %d", g_case, k, rbuf[k], 100 + k);
    }

    if (g_rank == 0)
        fprintf(stderr, "[t_errors] %ld error cases compared, %ld skipped (the host MPI accepts them or crashes on them)\n", g_cases,
                g_skipped);
    g_case_counter = g_cases;
    PMPI_Type_free(&uncommitted);
    PMPI_Comm_free(&w);
    return ct_finish(MPI_COMM_WORLD);
}
