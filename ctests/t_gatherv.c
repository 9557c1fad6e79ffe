/* MPI_Gatherv correctness: every root, zero counts (also at the root and
 * everywhere), gaps and out-of-order displacements, derived recvtypes at
 * the root (contiguous, vector, resized), derived sendtypes, MPI_IN_PLACE at
 * the root, NULL recv arguments at non-roots, large (>= 8 MiB) gathers.
 * The root's recvbuf outside the received blocks holds a sentinel that must
 * stay untouched. */
#include "common.h"

enum { ORD_RANK, ORD_REVERSED, ORD_SHUFFLED };

static const char *ord_name[] = {"rank-order", "reversed", "shuffled"};

/* displs in units of recvtype extent: blocks placed in the given order,
 * `lead` empty instances first and `gap` empty instances between blocks */
static void make_displs(int np, const int *scount, long per, int order, int lead, int gap, int *displs)
{
    int *ord = (int *)ct_malloc(sizeof(int) * (size_t)np);
    for (int k = 0; k < np; k++)
        ord[k] = order == ORD_REVERSED ? np - 1 - k : k;
    if (order == ORD_SHUFFLED) {
        for (int k = np - 1; k > 0; k--) {
            int j = (int)(ct_mix((uint64_t)k * 31 + (uint64_t)np) % (uint64_t)(k + 1));
            int t = ord[k];
            ord[k] = ord[j];
            ord[j] = t;
        }
    }
    int pos = lead;
    for (int k = 0; k < np; k++) {
        displs[ord[k]] = pos;
        pos += (int)(scount[ord[k]] / per) + gap;
    }
    free(ord);
}

static void gv(const char *pat, const ct_type *base, const int *scount, int order, int lead, int gap,
               const ct_layout *rl, ct_mksend_fn mksend, int root, int inplace, int nullnonroot)
{
    int np = g_size;
    int *displs = (int *)ct_malloc(sizeof(int) * (size_t)np);
    make_displs(np, scount, (long)rl->nblk * rl->blen, order, lead, gap, displs);
    char desc[160];
    snprintf(desc, sizeof desc, "%s/%s/lead=%d/gap=%d%s", pat, ord_name[order], lead, gap,
             mksend == ct_send_vec ? "/vector-sendtype(odd ranks)" : "");
    if (ct_want(1))
        ct_gatherv_case(desc, base, scount, displs, rl, mksend, root, inplace, nullnonroot, MPI_COMM_WORLD, "WORLD");
    free(displs);
}

int main(int argc, char **argv)
{
    ct_start(&argc, &argv, "t_gatherv");
    int np = g_size;
    const ct_type *ti = ct_type_by_name("MPI_INT");
    int *sc = (int *)ct_malloc(sizeof(int) * (size_t)np);
    ct_layout lint = ct_lay_base(ti, 0);

    /* every root: varying counts, contiguous and reversed-with-gaps */
    for (int root = 0; root < np; root++) {
        for (int r = 0; r < np; r++)
            sc[r] = 1 + (r * 37 + root) % 101;
        gv("varying", ti, sc, ORD_RANK, 0, 0, &lint, ct_send_base, root, root & 1, root % 3 == 0);
        for (int r = 0; r < np; r++)
            sc[r] = (r + root) % 3 == 1 ? 0 : 3 + r;
        gv("zeros", ti, sc, ORD_REVERSED, 2, 3, &lint, ct_send_base, root, !(root & 1), root & 1);
    }

    /* uniform counts, including 0 and 1 */
    static const int ucounts[] = {0, 1, 2, 7, 1001, 65539};
    for (unsigned k = 0; k < sizeof ucounts / sizeof ucounts[0]; k++) {
        for (int r = 0; r < np; r++)
            sc[r] = ucounts[k];
        gv("uniform", ti, sc, ORD_RANK, 0, 0, &lint, ct_send_base, (int)(k * 3) % np, k & 1, (k >> 1) & 1);
    }

    /* zero count at the root only; zero everywhere except one rank */
    for (int r = 0; r < np; r++)
        sc[r] = r == np - 1 ? 0 : 11 + r;
    gv("root-zero", ti, sc, ORD_SHUFFLED, 1, 1, &lint, ct_send_base, np - 1, 0, 0);
    gv("root-zero-inplace", ti, sc, ORD_RANK, 0, 0, &lint, ct_send_base, np - 1, 1, 1);
    for (int r = 0; r < np; r++)
        sc[r] = r == np / 2 ? 1001 : 0;
    gv("one-sender", ti, sc, ORD_RANK, 5, 0, &lint, ct_send_base, 0, 0, 1);

    /* gaps and out-of-order displacements */
    for (int r = 0; r < np; r++)
        sc[r] = 100 + 13 * r;
    gv("gaps", ti, sc, ORD_RANK, 1, 3, &lint, ct_send_base, 1 % np, 0, 0);
    gv("reversed", ti, sc, ORD_REVERSED, 0, 0, &lint, ct_send_base, np / 2, 1, 0);
    gv("shuffled", ti, sc, ORD_SHUFFLED, 3, 2, &lint, ct_send_base, np - 1, 0, 1);
    gv("shuffled-inplace", ti, sc, ORD_SHUFFLED, 0, 1, &lint, ct_send_base, 0, 1, 1);

    /* derived recvtypes at the root */
    {
        for (int r = 0; r < np; r++)
            sc[r] = 2 * ((r * 5) % 7); /* even, some zero */
        ct_layout c2 = ct_lay_contig(ti, 2, 0);
        gv("recv-contig2", ti, sc, ORD_RANK, 0, 0, &c2, ct_send_base, np - 1, 0, 0);
        gv("recv-contig2", ti, sc, ORD_REVERSED, 1, 2, &c2, ct_send_vec, 0, 1, 1);
        ct_lay_free(&c2);
        ct_layout rz = ct_lay_resized(ti, 2, 0); /* one int every 8 bytes */
        gv("recv-resized", ti, sc, ORD_SHUFFLED, 0, 1, &rz, ct_send_base, 1 % np, 0, 1);
        gv("recv-resized", ti, sc, ORD_RANK, 0, 0, &rz, ct_send_vec, np / 2, 1, 0);
        ct_lay_free(&rz);
        ct_layout vv = ct_lay_vector(ti, 2, 1, 3, 0); /* 2 ints per instance, 1 in 3 */
        gv("recv-vector", ti, sc, ORD_REVERSED, 0, 0, &vv, ct_send_vec, np - 1, 0, 0);
        ct_lay_free(&vv);
        for (int r = 0; r < np; r++)
            sc[r] = 2 * (3000 + r);
        ct_layout c2b = ct_lay_contig(ti, 2, 0);
        gv("recv-contig2-large", ti, sc, ORD_SHUFFLED, 0, 1, &c2b, ct_send_vec, 0, 0, 1);
        ct_lay_free(&c2b);
    }

    /* other base types */
    {
        for (int r = 0; r < np; r++)
            sc[r] = 1 + r * 3;
        const char *names[] = {"MPI_DOUBLE_INT", "MPI_BYTE", "MPI_LONG_DOUBLE", "MPI_C_FLOAT_COMPLEX", "MPI_SHORT_INT"};
        for (int k = 0; k < 5; k++) {
            const ct_type *t = ct_type_by_name(names[k]);
            ct_layout l = ct_lay_base(t, 0);
            gv("typed", t, sc, k & 1 ? ORD_REVERSED : ORD_RANK, k, k & 1, &l, ct_send_vec, (k * 2 + 1) % np, k == 2, k & 1);
        }
    }

    /* 40 KiB blocks: the node Gatherv's pieces (blocks up to 24 KiB go whole) */
    for (int r = 0; r < np; r++)
        sc[r] = 10000 + 5 * r;
    gv("pieces", ti, sc, ORD_SHUFFLED, 0, 2, &lint, ct_send_base, 1 % np, 0, 0);

    /* large: 8 MiB in total (and a medium one) */
    for (int r = 0; r < np; r++)
        sc[r] = 65536 + 7 * r;
    gv("medium", ti, sc, ORD_REVERSED, 0, 1, &lint, ct_send_base, np - 1, 1, 0);
    if (g_big) {
        int per = (2 * 1024 * 1024) / np + 1;
        for (int r = 0; r < np; r++)
            sc[r] = per;
        gv("8MiB", ti, sc, ORD_RANK, 0, 0, &lint, ct_send_base, np / 2, 0, 1);
    }

    free(sc);
    return ct_finish(MPI_COMM_WORLD);
}
