/*
 * Collectives called from inside a user-defined reduction operator. The
 * operator calls an Allreduce, a Reduce with a user operator of its own, a
 * Bcast and a Gatherv on single-rank communicators (MPI_COMM_SELF and a
 * duplicate of it), which a rank may call any number of times, so the
 * program is valid whichever ranks combine and how often. pcoll hands a
 * collective called while its thread is inside pcoll to the host MPI,
 * rather than run it with the state the outer call holds. The outer calls
 * (Allreduce, in and out of place, and Reduce, of several sizes so that
 * every algorithm combines) run on MPI_COMM_WORLD, a duplicate and a
 * split, and are checked exactly, as is every nested call.
 */
#include "common.h"

static MPI_Comm g_self_dup;
static MPI_Op g_inner_op; /* a commutative sum that calls nothing */
static long g_nested, g_nested_bad;

static void inner_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int k = 0; k < *len; k++)
        ((int *)inout)[k] += ((int *)in)[k];
}

/* The collectives the operator calls, each checked. */
static void nested_calls(void)
{
    int one = 1, got = 0;
    g_nested_bad += MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF) != MPI_SUCCESS || got != 1;
    got = 0;
    g_nested_bad += MPI_Reduce(&one, &got, 1, MPI_INT, g_inner_op, 0, g_self_dup) != MPI_SUCCESS || got != 1;
    int v = 42;
    g_nested_bad += MPI_Bcast(&v, 1, MPI_INT, 0, g_self_dup) != MPI_SUCCESS || v != 42;
    int counts[1] = {2}, displs[1] = {1}, mine[2] = {7, 8}, out[3] = {0, 0, 0};
    g_nested_bad += MPI_Gatherv(mine, 2, MPI_INT, out, counts, displs, MPI_INT, 0, MPI_COMM_SELF) != MPI_SUCCESS ||
                    out[0] != 0 || out[1] != 7 || out[2] != 8;
    g_nested++;
}

static void nested_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    nested_calls();
    inner_sum(in, inout, len, dt);
}

static void check_sum(const int *got, int n, int np, const char *what)
{
    for (int i = 0; i < n; i++) {
        int want = 3 * np * (np - 1) / 2 + np * i;
        if (got[i] != want) {
            ct_fail("%s: %s element %d: got %d, expected %d", g_case, what, i, got[i], want);
            return;
        }
    }
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_nested");
    PMPI_Comm_dup(MPI_COMM_SELF, &g_self_dup);
    PMPI_Op_create(inner_sum, 1, &g_inner_op);
    MPI_Op nested;
    PMPI_Op_create(nested_sum, 1, &nested);
    MPI_Comm comms[3];
    const char *names[3] = {"MPI_COMM_WORLD", "a duplicate", "a split"};
    comms[0] = MPI_COMM_WORLD;
    PMPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    PMPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_size - g_rank, &comms[2]);
    const int sizes[] = {1, 100, 5000, 70000};
    int *send = (int *)ct_malloc(sizeof(int) * 70000), *recv = (int *)ct_malloc(sizeof(int) * 70000);
    for (int c = 0; c < 3; c++) {
        int r, np;
        PMPI_Comm_rank(comms[c], &r);
        PMPI_Comm_size(comms[c], &np);
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int n = sizes[s];
            for (int i = 0; i < n; i++)
                send[i] = 3 * r + i;
            ct_want(1);
            ct_set_case("Allreduce of %d on %s", n, names[c]);
            memset(recv, 0, sizeof(int) * (size_t)n);
            ct_check_rc(MPI_Allreduce(send, recv, n, MPI_INT, nested, comms[c]), "MPI_Allreduce");
            check_sum(recv, n, np, "Allreduce");
            ct_want(1);
            ct_set_case("in-place Allreduce of %d on %s", n, names[c]);
            memcpy(recv, send, sizeof(int) * (size_t)n);
            ct_check_rc(MPI_Allreduce(MPI_IN_PLACE, recv, n, MPI_INT, nested, comms[c]), "MPI_Allreduce");
            check_sum(recv, n, np, "in-place Allreduce");
            ct_want(1);
            ct_set_case("Reduce of %d on %s", n, names[c]);
            memset(recv, 0, sizeof(int) * (size_t)n);
            ct_check_rc(MPI_Reduce(send, recv, n, MPI_INT, nested, np - 1, comms[c]), "MPI_Reduce");
            if (r == np - 1)
                check_sum(recv, n, np, "Reduce");
        }
    }
    ct_set_case("nested calls");
    if (g_nested_bad)
        ct_fail("%ld of %ld collectives called from the operator failed or gave a wrong result", g_nested_bad, g_nested);
    long nested_total = 0;
    PMPI_Allreduce(&g_nested, &nested_total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_size > 1 && nested_total == 0)
        ct_fail("the operator never ran");
    free(send);
    free(recv);
    PMPI_Comm_free(&comms[1]);
    PMPI_Comm_free(&comms[2]);
    PMPI_Op_free(&nested);
    PMPI_Op_free(&g_inner_op);
    PMPI_Comm_free(&g_self_dup);
    return ct_finish(MPI_COMM_WORLD);
}
