/* Collectives on other communicators and interaction with user traffic:
 *  - MPI_Comm_dup, MPI_Comm_split (odd/even, reversed key, 3-way with
 *    negative keys, MPI_UNDEFINED), nested dup, MPI_Comm_create from a
 *    reordered group, intercommunicators;
 *  - many communicators created, used and freed in a loop (sizes and
 *    rank orders vary, so a reused handle maps to a different group, and
 *    a segment pcoll keeps from a freed communicator must go only to one
 *    of the same ranks in the same order); each is used twice, since
 *    pcoll leaves the first call on a communicator to the host MPI
 *    (PCOLL_SETUP_AFTER) and sets up at the second;
 *  - a user MPI_Irecv(MPI_ANY_SOURCE, MPI_ANY_TAG) pending on
 *    MPI_COMM_WORLD during a batch of collectives must not match anything,
 *    and a user message sent before collectives on a communicator must
 *    still be there afterwards. */
#include "common.h"

static const ct_type *T_INT, *T_DBL, *T_AFF;

/* all four collectives on an intracommunicator, references via PMPI or exact */
static void intra_checks(MPI_Comm c, const char *name)
{
    int r, n;
    PMPI_Comm_rank(c, &r);
    PMPI_Comm_size(c, &n);
    (void)r;
    ct_allreduce_case(T_AFF, O_UAFF, 1001, 0, c, name, 2);
    ct_allreduce_case(T_INT, O_SUM, 65539, 1, c, name, 2);
    ct_allreduce_case(T_DBL, O_SUM, 7, 0, c, name, 2);
    ct_reduce_case(T_AFF, O_UAFF, 1001, n - 1, 1, 1, c, name);
    ct_reduce_case(T_INT, O_SUM, 30001, n / 2, 0, 0, c, name);
    ct_layout i1001 = ct_lay_base(T_INT, 1001);
    ct_bcast_case(&i1001, &i1001, n - 1, c, name);
    ct_layout v = ct_lay_vector(T_DBL, 3, 2, 5, 100), d = ct_lay_base(T_DBL, 600);
    ct_bcast_case(&d, &v, 0, c, name);
    ct_lay_free(&v);
    int *sc = (int *)ct_malloc(sizeof(int) * (size_t)n), *dp = (int *)ct_malloc(sizeof(int) * (size_t)n);
    int pos = 1;
    for (int k = 0; k < n; k++) {
        int q = n - 1 - k; /* reversed placement with gaps */
        sc[q] = (q % 3 == 1) ? 0 : 5 + 3 * q;
        dp[q] = pos;
        pos += sc[q] + 2;
    }
    ct_layout li = ct_lay_base(T_INT, 0);
    ct_gatherv_case("reversed-gaps-zeros", T_INT, sc, dp, &li, ct_send_vec, n / 2, 0, 1, c, name);
    ct_gatherv_case("reversed-gaps-zeros", T_INT, sc, dp, &li, ct_send_base, 0, 1, 0, c, name);
    free(sc);
    free(dp);
}

/* ---- intercommunicators: semantics differ (MPI_ROOT / MPI_PROC_NULL) ---- */

static void inter_checks(MPI_Comm ic, int in_a /* group A holds the root */, const char *name)
{
    int r, n, rn;
    PMPI_Comm_rank(ic, &r);
    PMPI_Comm_size(ic, &n);
    PMPI_Comm_remote_size(ic, &rn);
    int root_a = n - 1; /* root's rank inside group A */
    (void)rn;

    /* Allreduce: each group gets the reduction over the other group */
    ct_allreduce_case(T_INT, O_SUM, 1001, 0, ic, name, 0);
    ct_allreduce_case(T_AFF, O_UAFF, 77, 0, ic, name, 0);

    /* Reduce to a root in group A */
    {
        long count = 513;
        uint64_t salt = ct_salt();
        size_t bytes = (size_t)count * (size_t)T_AFF->size;
        ct_set_case("MPI_Reduce intercomm=%s root=%s count=%ld op=%s", name, in_a ? (r == root_a ? "MPI_ROOT" : "MPI_PROC_NULL") : "remote rank", count,
                    g_ops[O_UAFF].name);
        char *in = (char *)ct_malloc(bytes), *out = (char *)ct_malloc(bytes), *ref = (char *)ct_malloc(bytes);
        ct_fill(T_AFF, O_UAFF, in, count, salt, r, n);
        memset(out, 0xA5, bytes);
        int root_arg;
        if (in_a)
            root_arg = r == root_a ? MPI_ROOT : MPI_PROC_NULL;
        else {
            /* root_a in the remote group; the remote group has rn ranks */
            int rsize;
            PMPI_Comm_remote_size(ic, &rsize);
            root_arg = rsize - 1;
        }
        ct_check_rc(MPI_Reduce(in, out, (int)count, T_AFF->dt, g_ops[O_UAFF].op, root_arg, ic), "MPI_Reduce");
        PMPI_Allreduce(in, ref, (int)count, T_AFF->dt, g_ops[O_UAFF].op, ic); /* A gets B's reduction */
        if (root_arg == MPI_ROOT)
            ct_check_result("intercomm root", T_AFF, O_UAFF, out, ref, count, n, salt, rn);
        free(in);
        free(out);
        free(ref);
    }

    /* Bcast from a root in group A */
    {
        long count = 1001;
        uint64_t salt = ct_salt();
        int rsize;
        PMPI_Comm_remote_size(ic, &rsize);
        int root_arg = in_a ? (r == root_a ? MPI_ROOT : MPI_PROC_NULL) : rsize - 1;
        ct_set_case("MPI_Bcast intercomm=%s root_arg=%d count=%ld", name, root_arg, count);
        int *buf = (int *)ct_malloc(sizeof(int) * (size_t)count);
        for (long i = 0; i < count; i++)
            buf[i] = root_arg == MPI_ROOT ? (int)ct_rnd(salt, 0, i) : -12345;
        ct_check_rc(MPI_Bcast(buf, (int)count, MPI_INT, root_arg, ic), "MPI_Bcast");
        long bad = 0;
        for (long i = 0; i < count; i++) {
            int exp = (root_arg == MPI_PROC_NULL) ? -12345 : (int)ct_rnd(salt, 0, i);
            if (buf[i] != exp && bad++ < CT_MAX_ELEM_MSGS)
                ct_fail("%s: rank %d: element %ld: got %d, expected %d", g_case, r, i, buf[i], exp);
        }
        free(buf);
    }

    /* Gatherv to a root in group A from group B */
    {
        uint64_t salt = ct_salt();
        int rsize;
        PMPI_Comm_remote_size(ic, &rsize);
        int root_arg = in_a ? (r == root_a ? MPI_ROOT : MPI_PROC_NULL) : rsize - 1;
        ct_set_case("MPI_Gatherv intercomm=%s root_arg=%d", name, root_arg);
        int scount = in_a ? 0 : 3 + 2 * r;
        int *sbuf = (int *)ct_malloc(sizeof(int) * (size_t)(scount + 1));
        for (int i = 0; i < scount; i++)
            sbuf[i] = (int)ct_rnd(salt, r, i);
        if (root_arg == MPI_ROOT) {
            int *rc = (int *)ct_malloc(sizeof(int) * (size_t)rsize), *dp = (int *)ct_malloc(sizeof(int) * (size_t)rsize);
            int pos = 0;
            for (int q = 0; q < rsize; q++) {
                rc[q] = 3 + 2 * q;
                dp[q] = pos + 1;
                pos += rc[q] + 1;
            }
            int total = pos + 1;
            int *rbuf = (int *)ct_malloc(sizeof(int) * (size_t)total);
            for (int i = 0; i < total; i++)
                rbuf[i] = -777;
            ct_check_rc(MPI_Gatherv(sbuf, 0, MPI_INT, rbuf, rc, dp, MPI_INT, MPI_ROOT, ic), "MPI_Gatherv");
            char *mark = (char *)calloc((size_t)total, 1);
            for (int q = 0; q < rsize; q++) {
                for (int i = 0; i < rc[q]; i++) {
                    int exp = (int)ct_rnd(salt, q, i);
                    mark[dp[q] + i] = 1;
                    if (rbuf[dp[q] + i] != exp)
                        ct_fail("%s: block of remote rank %d, element %d: got %d, expected %d", g_case, q, i,
                                rbuf[dp[q] + i], exp);
                }
            }
            for (int i = 0; i < total; i++)
                if (!mark[i] && rbuf[i] != -777)
                    ct_fail("%s: recvbuf gap at int %d overwritten (%d)", g_case, i, rbuf[i]);
            free(mark);
            free(rbuf);
            free(rc);
            free(dp);
        } else {
            ct_check_rc(MPI_Gatherv(sbuf, scount, MPI_INT, NULL, NULL, NULL, MPI_INT, root_arg, ic), "MPI_Gatherv");
        }
        free(sbuf);
    }
}

/* ---- many communicators: one collective each (twice), exact expected values ---- */

static void aff_fold(ct_aff *acc, const ct_aff *x)
{
    /* acc := acc o x */
    ct_aff in = *acc, io = *x;
    int len = 1;
    MPI_Datatype dt = MPI_2INT;
    ct_aff_fn(&in, &io, &len, &dt);
    *acc = io;
}

static void one_coll(MPI_Comm c, int iter, int which)
{
    int r, n;
    PMPI_Comm_rank(c, &r);
    PMPI_Comm_size(c, &n);
    int root = iter % n;
    uint64_t salt = ct_salt();
    g_case_counter++;
    const long cnt = 3 + iter % 5;
    switch (which) {
    case 0:
    case 1: { /* Allreduce / Reduce with the non-commutative op */
        ct_set_case("loop iter %d: %s comm size %d root %d count %ld", iter, which ? "MPI_Reduce" : "MPI_Allreduce", n,
                    root, cnt);
        ct_aff in[8], out[8], exp[8];
        for (long i = 0; i < cnt; i++) {
            ct_gen_elem(T_AFF, O_UAFF, &in[i], salt, r, i, n);
            ct_gen_elem(T_AFF, O_UAFF, &exp[i], salt, 0, i, n);
            for (int s = 1; s < n; s++) {
                ct_aff x;
                ct_gen_elem(T_AFF, O_UAFF, &x, salt, s, i, n);
                aff_fold(&exp[i], &x);
            }
        }
        memset(out, 0, sizeof out);
        if (which == 0)
            ct_check_rc(MPI_Allreduce(in, out, (int)cnt, MPI_2INT, g_ops[O_UAFF].op, c), "MPI_Allreduce");
        else
            ct_check_rc(MPI_Reduce(in, r == root ? out : NULL, (int)cnt, MPI_2INT, g_ops[O_UAFF].op, root, c),
                        "MPI_Reduce");
        if (which == 0 || r == root)
            ct_compare("loop", T_AFF, O_UAFF, out, exp, cnt, n);
        break;
    }
    case 2: { /* Bcast */
        ct_set_case("loop iter %d: MPI_Bcast comm size %d root %d count %ld", iter, n, root, cnt);
        int buf[8];
        for (long i = 0; i < cnt; i++)
            buf[i] = r == root ? (int)ct_rnd(salt, root, i) : -1;
        ct_check_rc(MPI_Bcast(buf, (int)cnt, MPI_INT, root, c), "MPI_Bcast");
        for (long i = 0; i < cnt; i++)
            if (buf[i] != (int)ct_rnd(salt, root, i))
                ct_fail("%s: rank %d element %ld: got %d, expected %d", g_case, r, i, buf[i], (int)ct_rnd(salt, root, i));
        break;
    }
    default: { /* Gatherv: rank s sends s+1 ints, blocks in rank order */
        ct_set_case("loop iter %d: MPI_Gatherv comm size %d root %d", iter, n, root);
        int sbuf[64];
        for (int i = 0; i <= r && i < 64; i++)
            sbuf[i] = (int)ct_rnd(salt, r, i);
        int *rbuf = NULL, *rc = NULL, *dp = NULL, total = 0;
        if (r == root) {
            rc = (int *)ct_malloc(sizeof(int) * (size_t)n);
            dp = (int *)ct_malloc(sizeof(int) * (size_t)n);
            for (int s = 0; s < n; s++) {
                rc[s] = s + 1;
                dp[s] = total;
                total += s + 1;
            }
            rbuf = (int *)ct_malloc(sizeof(int) * (size_t)total);
        }
        ct_check_rc(MPI_Gatherv(sbuf, r + 1, MPI_INT, rbuf, rc, dp, MPI_INT, root, c), "MPI_Gatherv");
        if (r == root) {
            for (int s = 0; s < n; s++)
                for (int i = 0; i <= s; i++)
                    if (rbuf[dp[s] + i] != (int)ct_rnd(salt, s, i))
                        ct_fail("%s: block of rank %d element %d: got %d, expected %d", g_case, s, i, rbuf[dp[s] + i],
                                (int)ct_rnd(salt, s, i));
            free(rbuf);
            free(rc);
            free(dp);
        }
        break;
    }
    }
}

static void many_comms(int iters)
{
    int np = g_size, rank = g_rank;
    for (int it = 0; it < iters; it++) {
        MPI_Comm c;
        switch (it % 3) {
        case 0:
            PMPI_Comm_dup(MPI_COMM_WORLD, &c);
            break;
        case 1: /* two groups of varying sizes, sometimes reversed */
            PMPI_Comm_split(MPI_COMM_WORLD, rank < 1 + it % np ? 0 : 1, (it & 4) ? -rank : rank, &c);
            break;
        default: /* permuted rank order */
            PMPI_Comm_split(MPI_COMM_WORLD, rank % (1 + it % 3), (rank * 5 + it) % np, &c);
            break;
        }
        one_coll(c, it, (it / 3 + it) % 4);
        one_coll(c, it + 1, (it / 3 + it + 1) % 4);
        PMPI_Comm_free(&c);
        if (g_fail > 20)
            break;
    }
    /* a dup of a dup of ... (nested) */
    MPI_Comm cur = MPI_COMM_WORLD;
    for (int d = 0; d < 8; d++) {
        MPI_Comm nc;
        PMPI_Comm_dup(cur, &nc);
        if (cur != MPI_COMM_WORLD)
            PMPI_Comm_free(&cur);
        cur = nc;
        one_coll(cur, d, d % 4);
        one_coll(cur, d + 1, (d + 1) % 4);
    }
    PMPI_Comm_free(&cur);
}

/* ---- the same calls on communicators that come and go ----
 * A freed communicator's handle often comes back for the next one, and
 * pcoll keeps the plan of a call repeated with the same arguments: a plan
 * made for one communicator must never run on another with its handle. */
static void same_calls_new_comms(int iters)
{
    for (int it = 0; it < iters; it++) {
        MPI_Comm c;
        PMPI_Comm_split(MPI_COMM_WORLD, g_rank % (1 + it % 3), (it & 1) ? -g_rank : g_rank, &c);
        int r, n;
        PMPI_Comm_rank(c, &r);
        PMPI_Comm_size(c, &n);
        for (int rep = 0; rep < 3; rep++) {
            ct_set_case("same calls on a new communicator: iter %d rep %d comm size %d", it, rep, n);
            g_case_counter++;
            int v[4], in[2] = {r, 1}, out[2] = {-1, -1}, got[64];
            for (int k = 0; k < 4; k++)
                v[k] = r == 0 ? 1000 * it + 10 * rep + k : -1;
            ct_check_rc(MPI_Bcast(v, 4, MPI_INT, 0, c), "MPI_Bcast");
            for (int k = 0; k < 4; k++)
                if (v[k] != 1000 * it + 10 * rep + k)
                    ct_fail("%s: MPI_Bcast element %d: got %d, expected %d", g_case, k, v[k], 1000 * it + 10 * rep + k);
            ct_check_rc(MPI_Allreduce(in, out, 2, MPI_INT, MPI_SUM, c), "MPI_Allreduce");
            if (out[0] != n * (n - 1) / 2 || out[1] != n)
                ct_fail("%s: MPI_Allreduce got (%d, %d), expected (%d, %d)", g_case, out[0], out[1], n * (n - 1) / 2, n);
            out[0] = out[1] = -1;
            ct_check_rc(MPI_Reduce(in, r == 0 ? out : NULL, 2, MPI_INT, MPI_SUM, 0, c), "MPI_Reduce");
            if (r == 0 && (out[0] != n * (n - 1) / 2 || out[1] != n))
                ct_fail("%s: MPI_Reduce got (%d, %d), expected (%d, %d)", g_case, out[0], out[1], n * (n - 1) / 2, n);
            if (n <= 64) {
                int counts[64], displs[64], mine = 100 * it + r;
                for (int k = 0; k < n; k++) {
                    counts[k] = 1;
                    displs[k] = n - 1 - k;
                    got[k] = -1;
                }
                ct_check_rc(MPI_Gatherv(&mine, 1, MPI_INT, got, counts, displs, MPI_INT, 0, c), "MPI_Gatherv");
                for (int k = 0; r == 0 && k < n; k++)
                    if (got[n - 1 - k] != 100 * it + k)
                        ct_fail("%s: MPI_Gatherv block of rank %d: got %d, expected %d", g_case, k, got[n - 1 - k],
                                100 * it + k);
            }
        }
        PMPI_Comm_free(&c);
        if (g_fail > 20)
            break;
    }
}

/* ---- a user wildcard receive pending during collectives ---- */

static void wildcard_irecv(void)
{
    int np = g_size, rank = g_rank;
    int next = (rank + 1) % np, prev = (rank - 1 + np) % np;
    MPI_Comm ud;
    PMPI_Comm_dup(MPI_COMM_WORLD, &ud);

    ct_set_case("wildcard MPI_Irecv setup");
    int rbuf[4] = {-1, -1, -1, -1};
    MPI_Request rreq;
    PMPI_Irecv(rbuf, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rreq);

    /* a user message already in flight on ud while collectives run on ud */
    int umsg[3] = {rank, 4711, -rank}, urecv[3] = {0, 0, 0};
    MPI_Request ureq;
    PMPI_Isend(umsg, 3, MPI_INT, next, 99, ud, &ureq);

    /* the batch of collectives: on WORLD (where the wildcard is posted) and ud */
    MPI_Comm comms[2] = {MPI_COMM_WORLD, ud};
    const char *names[2] = {"WORLD(pending-wildcard-irecv)", "dup(pending-user-message)"};
    for (int k = 0; k < 2; k++) {
        MPI_Comm c = comms[k];
        ct_allreduce_case(T_INT, O_SUM, 7, 0, c, names[k], 2);
        ct_allreduce_case(T_AFF, O_UAFF, 65537, 1, c, names[k], 2);
        ct_allreduce_case(T_DBL, O_SUM, 100003, 0, c, names[k], 2);
        for (int root = 0; root < np && root < 3; root++)
            ct_reduce_case(T_INT, O_SUM, 1001 + 30000 * root, np - 1 - root, root & 1, 1, c, names[k]);
        ct_layout a = ct_lay_base(T_INT, 1), b = ct_lay_base(T_INT, 100003);
        ct_bcast_case(&a, &a, np - 1, c, names[k]);
        ct_bcast_case(&b, &b, np / 2, c, names[k]);
        int *sc = (int *)ct_malloc(sizeof(int) * (size_t)np), *dp = (int *)ct_malloc(sizeof(int) * (size_t)np);
        for (int q = 0, pos = 0; q < np; q++) {
            sc[q] = 1000 * (q + 1);
            dp[q] = pos;
            pos += sc[q];
        }
        ct_layout li = ct_lay_base(T_INT, 0);
        ct_gatherv_case("uniform", T_INT, sc, dp, &li, ct_send_base, 1 % np, 0, 1, c, names[k]);
        free(sc);
        free(dp);
    }

    ct_set_case("wildcard MPI_Irecv still pending after the collectives");
    int flag = 0;
    MPI_Status st;
    PMPI_Test(&rreq, &flag, &st);
    if (flag)
        ct_fail("%s: the user's MPI_Irecv(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD) matched a message during "
                "the collectives (source %d, tag %d, data %d %d %d %d)", g_case, st.MPI_SOURCE, st.MPI_TAG, rbuf[0],
                rbuf[1], rbuf[2], rbuf[3]);

    ct_set_case("user message sent before collectives on a dup");
    MPI_Status ust;
    PMPI_Recv(urecv, 3, MPI_INT, prev, 99, ud, &ust);
    PMPI_Wait(&ureq, MPI_STATUS_IGNORE);
    if (urecv[0] != prev || urecv[1] != 4711 || urecv[2] != -prev)
        ct_fail("%s: got {%d,%d,%d}, expected {%d,4711,%d}", g_case, urecv[0], urecv[1], urecv[2], prev, -prev);

    /* everyone is done with collectives: now satisfy the wildcard receive */
    PMPI_Barrier(MPI_COMM_WORLD);
    if (!flag) {
        ct_set_case("wildcard MPI_Irecv satisfied by a real message");
        int smsg[4] = {rank * 1000 + 1, 2, 3, -4};
        MPI_Request sreq;
        PMPI_Isend(smsg, 4, MPI_INT, next, 7777, MPI_COMM_WORLD, &sreq);
        PMPI_Wait(&rreq, &st);
        PMPI_Wait(&sreq, MPI_STATUS_IGNORE);
        int cnt = -1;
        PMPI_Get_count(&st, MPI_INT, &cnt);
        if (st.MPI_SOURCE != prev || st.MPI_TAG != 7777 || cnt != 4 || rbuf[0] != prev * 1000 + 1 || rbuf[1] != 2 ||
            rbuf[2] != 3 || rbuf[3] != -4)
            ct_fail("%s: source %d (expected %d), tag %d (expected 7777), count %d (expected 4), data {%d,%d,%d,%d} "
                    "(expected {%d,2,3,-4})", g_case, st.MPI_SOURCE, prev, st.MPI_TAG, cnt, rbuf[0], rbuf[1], rbuf[2],
                    rbuf[3], prev * 1000 + 1);
    }
    PMPI_Comm_free(&ud);
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_comms");
    int np = g_size, rank = g_rank;
    T_INT = ct_type_by_name("MPI_INT");
    T_DBL = ct_type_by_name("MPI_DOUBLE");
    T_AFF = ct_type_by_name("MPI_2INT(user-affine)");

    /* the wildcard receive first: nothing else is in flight yet */
    wildcard_irecv();

    MPI_Comm c;
    PMPI_Comm_dup(MPI_COMM_WORLD, &c);
    intra_checks(c, "dup(WORLD)");
    MPI_Comm cc;
    PMPI_Comm_dup(c, &cc);
    intra_checks(cc, "dup(dup(WORLD))");
    PMPI_Comm_free(&cc);
    PMPI_Comm_free(&c);

    PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c);
    intra_checks(c, rank % 2 ? "split(odd)" : "split(even)");
    PMPI_Comm_free(&c);

    PMPI_Comm_split(MPI_COMM_WORLD, 0, np - rank, &c);
    intra_checks(c, "split(reversed key)");
    PMPI_Comm_free(&c);

    PMPI_Comm_split(MPI_COMM_WORLD, rank % 3, -rank, &c);
    intra_checks(c, "split(rank%3, key=-rank)");
    PMPI_Comm_free(&c);

    PMPI_Comm_split(MPI_COMM_WORLD, (rank == 0 && np > 1) ? MPI_UNDEFINED : 0, rank, &c);
    if (c != MPI_COMM_NULL) {
        intra_checks(c, "split(all but rank 0)");
        PMPI_Comm_free(&c);
    }
    ct_salt_sync(1); /* rank 0 skipped the cases above */

    {
        /* MPI_Comm_create from a reordered group: ranks (np-1, 0, np-2, 1, ...) */
        MPI_Group wg, g;
        PMPI_Comm_group(MPI_COMM_WORLD, &wg);
        int *ranks = (int *)ct_malloc(sizeof(int) * (size_t)np);
        for (int k = 0, lo = 0, hi = np - 1; k < np; k++)
            ranks[k] = (k & 1) ? lo++ : hi--;
        PMPI_Group_incl(wg, np, ranks, &g);
        PMPI_Comm_create(MPI_COMM_WORLD, g, &c);
        intra_checks(c, "create(interleaved group)");
        PMPI_Comm_free(&c);
        PMPI_Group_free(&g);
        PMPI_Group_free(&wg);
        free(ranks);
    }

    if (np >= 2) {
        /* intercommunicator between the even and the odd ranks */
        MPI_Comm local, ic;
        PMPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local);
        PMPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 123, &ic);
        inter_checks(ic, rank % 2 == 0, rank % 2 ? "inter(odd->even)" : "inter(even<-odd)");
        PMPI_Comm_free(&ic);
        PMPI_Comm_free(&local);
    }

    const char *s = getenv("CTEST_NCOMMS");
    int iters = s ? atoi(s) : (np <= 2 ? 2100 : 200);
    many_comms(iters);
    same_calls_new_comms(iters / 10 + 6);

    return ct_finish(MPI_COMM_WORLD);
}
