/*
 * pcoll_bench -- pcoll versus the host MPI's own collectives, in one run.
 *
 * With libpcoll.so preloaded (or linked before libmpi), MPI_Allreduce & co.
 * run pcoll while PMPI_Allreduce & co. run the host MPI's algorithm, so one
 * process can time both side by side under identical conditions.  Without
 * the library both names resolve to the host MPI and the ratios sit near 1,
 * which is how the harness itself is checked.
 *
 * Method, for every collective and message size:
 *   - check once that pcoll and the stock MPI produce the correct result
 *     (exact integer-valued doubles, so any summation order is bitwise exact)
 *     and that pcoll left the send buffer alone; a cell that fails is
 *     reported as WRONG and pcoll is not timed for it;
 *   - a few warm-up pairs estimate the cost; rank 0 picks the iteration
 *     count so the point takes about --time seconds (clamped to
 *     [--min-iters, --max-iters]), unless --iters fixes it;
 *   - timed loop alternates pcoll and stock in pairs (the order inside a
 *     pair is a deterministic coin flip, to break period-2 aliasing); every
 *     call uses a fresh buffer slot from arenas larger than twice the
 *     last-level cache, so the data is never cache-hot from the previous
 *     iteration;
 *   - every call starts on all ranks at once (--sync): with "window" (the
 *     default when all ranks share one node and have a core each) the
 *     ranks agree (PMPI_Allreduce, maximum) on an instant of the node's
 *     monotonic clock a few microseconds after the last of them arrived,
 *     and every rank starts the call then, so no rank
 *     starts late because of how the MPI's barrier releases it (MPICH's
 *     and Open MPI's differ by tenths of a microsecond, which would be
 *     charged to the call timed next); with "barrier" each rank starts
 *     when it leaves a PMPI_Barrier.  A call's time runs from its start
 *     to its return;
 *   - per iteration the time is the maximum over ranks (the collective is
 *     as slow as its slowest rank); we report the median (p10/p90 in CSV).
 * Each run first reports how node ranks 0 and 1 hand 32 KiB over through
 * shared memory (probe_handoff): on a virtual machine this changes between
 * runs and during them, and times with it; each point probes it again
 * before and after its timing (the CSV's handoff_before_us and
 * handoff_after_us).
 * memcpy_us is the median time of one copy of the message size, done by
 * all ranks at once (slowest rank), the faster of memcpy and a copy with
 * streaming stores (bench_memcpy), through buffers in the state the
 * mode's calls meet (rotating, cold, in sync and b2b-cold; the same, hot,
 * in osu and b2b): the physical reference for moving that many bytes
 * once, from which scripts/bench.sh derives each point's memory bound.
 *
 * Reduce/Allreduce: MPI_DOUBLE, MPI_SUM, bytes = count * 8.
 * Bcast: MPI_BYTE, root 0.  Gatherv: MPI_BYTE, equal blocks, root 0,
 * bytes = the per-rank block.
 *
 * All harness traffic (barriers, the max over ranks, parameter broadcast)
 * goes through PMPI_* so pcoll is never part of the measurement machinery.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include "pcoll.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

enum { C_ALLREDUCE, C_REDUCE, C_BCAST, C_GATHERV, NCOLL };
static const char *const coll_name[NCOLL] = {"allreduce", "reduce", "bcast", "gatherv"};
static const char *const coll_sym[NCOLL] = {"Allreduce", "Reduce", "Bcast", "Gatherv"};

#define PAGE 4096UL
#define MAX_SIZES 64
#define MAX_CAND 32

/* bits of the verification result */
#define BAD_PCOLL 1
#define BAD_STOCK 2
#define BAD_SENDBUF 4
#define BAD_RC 8

struct opts {
    unsigned colls;        /* bitmask over coll ids */
    size_t min_bytes, max_bytes;
    int step;              /* size multiplier: 2 or 4 */
    size_t sizes[MAX_SIZES];
    int nsizes;            /* explicit --sizes list, 0 = generate */
    int iters;             /* fixed iteration count, 0 = adaptive */
    int min_iters, max_iters, warmup;
    double time_per_point; /* seconds for pcoll+stock of one point */
    const char *csv;
    const char *label;     /* free text for the header / csv (e.g. "mpich") */
    size_t llc_bytes;      /* 0 = detect */
    int no_memcpy;
    int sync;              /* SYNC_* */
    int mode;              /* MODE_*: how calls are timed */
    char *cand[MAX_CAND];  /* --candidates: pcoll choices timed against stock */
    int ncand;
    size_t offset;         /* --offset: buffers start this far past a page */
};

/* pcoll_set_algorithm (include/pcoll.h), looked up in libpcoll.so when it
 * is preloaded (candidates mode): the benchmark also runs without it */
static __typeof__(&pcoll_set_algorithm) set_alg;

static int rank, nranks;
static int local_ranks = 1; /* ranks on rank 0's node */
static MPI_Comm world;

/* ------------------------------------------------------ starting together */

enum { SYNC_AUTO, SYNC_WINDOW, SYNC_BARRIER };

/* How calls are timed (--mode), the ways users time collectives:
 *   sync: every call starts on all ranks at once on buffers rotated through
 *     arenas larger than the cache (cold), root 0; the slowest rank's time;
 *   osu: calls separated by a barrier, the same (hot) buffers every call,
 *     root 0; each rank's time, averaged over the ranks (as OSU's
 *     osu_reduce & co. report it); a sample is a run of OSU_CALLS such
 *     calls after OSU_WARM untimed ones of the same library, so that each
 *     timed call follows its own library's call, as in OSU's loop (one
 *     call a sample, after the other library's, put both in a state no
 *     OSU run has: 2 ranks, Open MPI, 8 B Gatherv stock 0.40 / pcoll
 *     0.43 us one a sample, 0.48 / 0.35 in runs);
 *   b2b: blocks of B2B_CALLS calls back to back, the root rotating from
 *     call to call, the same (hot) buffers; the block starts on all ranks
 *     at once, its time per call on the slowest rank (as IMB-MPI1 loops);
 *   b2b-cold: b2b on buffers rotated as in sync (IMB's off-cache mode). */
enum { MODE_SYNC, MODE_OSU, MODE_B2B, MODE_B2B_COLD, NMODE };
static const char *const mode_name[NMODE] = {"sync", "osu", "b2b", "b2b-cold"};
#define B2B_CALLS 32
#define OSU_WARM 1  /* untimed calls that start an osu sample */
#define OSU_CALLS 4 /* timed calls of an osu sample */
static int sync_window; /* the window method is in use (see the method above) */
/* How far past the last rank's arrival a window starts: more than the
 * agreement on the instant takes to release every rank. */
#define WINDOW_LEAD 5e-6
static long window_starts, late_starts; /* this rank's, and those it reached after the instant */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits until every rank may start the next timed call; returns the
 * instant the call's time counts from. */
static double start_together(void)
{
    if (!sync_window) {
        PMPI_Barrier(world);
        return now_s();
    }
    /* the latest arrival, agreed by all: a broadcast would let its root run
     * ahead into later windows, the others falling ever further behind */
    double arrived = now_s(), at;
    PMPI_Allreduce(&arrived, &at, 1, MPI_DOUBLE, MPI_MAX, world);
    at += WINDOW_LEAD;
    double t = now_s();
    window_starts++;
    if (t > at)
        late_starts++;
    while (t < at)
        t = now_s();
    return at;
}

/* rotating buffer arenas */
static char *send_arena, *recv_arena;
static size_t send_arena_sz, recv_arena_sz;
static size_t slot_counter;
static int *gv_counts, *gv_displs;

static void die(const char *msg)
{
    if (rank == 0)
        fprintf(stderr, "pcoll_bench: %s\n", msg);
    PMPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* ---------------------------------------------------------------- options */

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': v *= 1024.0; end++; break;
    case 'M': v *= 1024.0 * 1024.0; end++; break;
    case 'G': v *= 1024.0 * 1024.0 * 1024.0; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'I')
        end++;
    if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end != '\0')
        return 0;
    return (size_t)v;
}

static void usage(void)
{
    if (rank != 0)
        return;
    printf(
        "usage: pcoll_bench [options]\n"
        "  --colls LIST      comma list of allreduce,reduce,bcast,gatherv (default all)\n"
        "  --min-bytes N     smallest message (default 8)\n"
        "  --max-bytes N     largest message (default 16M); K/M/G suffixes allowed\n"
        "  --step 2|4        size multiplier (default 4; max-bytes is always included)\n"
        "  --sizes LIST      explicit comma list of sizes instead of min/max/step\n"
        "  --iters N         fixed iterations per point (default: adaptive)\n"
        "  --time SEC        adaptive target seconds per point (default 1.0)\n"
        "  --min-iters N     adaptive lower bound (default 5)\n"
        "  --max-iters N     adaptive upper bound (default 20000)\n"
        "  --warmup N        warm-up pairs per point (default 3)\n"
        "  --llc-mb N        last-level cache size to defeat (default: detected)\n"
        "  --no-memcpy       skip the memcpy reference column\n"
        "  --sync window|barrier  how timed calls start on all ranks (default: window when\n"
        "                    all ranks share one node and have a core each, else barrier)\n"
"  --mode sync|osu|b2b|b2b-cold  how calls are timed (default sync; see the source)\n"
        "  --offset BYTES    buffers start BYTES past a page (default 0; malloc's large\n"
        "                    buffers start 16 past one)\n"
        "  --label TEXT      label for the header and CSV (e.g. mpich)\n"
        "  --candidates LIST with one collective in --colls: time the stock MPI and each\n"
        "                    pcoll choice in LIST (as PCOLL_<COLL> takes them, e.g.\n"
        "                    shm_flat,rabenseifner,auto) interleaved in one run\n"
        "  --csv FILE        write raw per-point statistics to FILE\n");
}

static unsigned parse_colls(const char *s)
{
    unsigned mask = 0;
    char *dup = strdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        if (!strcmp(t, "all")) {
            mask |= (1u << NCOLL) - 1;
            continue;
        }
        for (int c = 0; c < NCOLL; c++)
            if (!strcasecmp(t, coll_name[c])) {
                mask |= 1u << c;
                found = 1;
            }
        if (!found) {
            free(dup);
            return 0;
        }
    }
    free(dup);
    return mask;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->colls = (1u << NCOLL) - 1;
    o->min_bytes = 8;
    o->max_bytes = 16UL << 20;
    o->step = 4;
    o->min_iters = 5;
    o->max_iters = 20000;
    o->warmup = 3;
    o->time_per_point = 1.0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) die("missing value for option"); i++; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            PMPI_Finalize();
            exit(0);
        } else if (!strcmp(a, "--colls")) {
            NEEDV();
            if (!(o->colls = parse_colls(v)))
                die("--colls: expected a comma list of allreduce,reduce,bcast,gatherv");
        } else if (!strcmp(a, "--min-bytes")) {
            NEEDV();
            if (!(o->min_bytes = parse_size(v)))
                die("--min-bytes: bad size");
        } else if (!strcmp(a, "--max-bytes")) {
            NEEDV();
            if (!(o->max_bytes = parse_size(v)))
                die("--max-bytes: bad size");
        } else if (!strcmp(a, "--step")) {
            NEEDV();
            o->step = atoi(v);
            if (o->step != 2 && o->step != 4)
                die("--step must be 2 or 4");
        } else if (!strcmp(a, "--sizes")) {
            NEEDV();
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->nsizes == MAX_SIZES)
                    die("--sizes: too many sizes");
                if (!(o->sizes[o->nsizes++] = parse_size(t)))
                    die("--sizes: bad size");
            }
            free(dup);
        } else if (!strcmp(a, "--iters")) {
            NEEDV();
            if ((o->iters = atoi(v)) < 1)
                die("--iters must be >= 1");
        } else if (!strcmp(a, "--time")) {
            NEEDV();
            if ((o->time_per_point = atof(v)) <= 0)
                die("--time must be > 0");
        } else if (!strcmp(a, "--min-iters")) {
            NEEDV();
            o->min_iters = atoi(v) < 1 ? 1 : atoi(v);
        } else if (!strcmp(a, "--max-iters")) {
            NEEDV();
            o->max_iters = atoi(v) < 1 ? 1 : atoi(v);
        } else if (!strcmp(a, "--warmup")) {
            NEEDV();
            o->warmup = atoi(v) < 1 ? 1 : atoi(v);
        } else if (!strcmp(a, "--llc-mb")) {
            NEEDV();
            o->llc_bytes = (size_t)(atof(v) * 1024 * 1024);
        } else if (!strcmp(a, "--offset")) {
            NEEDV();
            char *end;
            o->offset = strtoul(v, &end, 10);
            if (*end || o->offset >= PAGE || o->offset % sizeof(double))
                die("--offset: a multiple of 8 below a page expected");
        } else if (!strcmp(a, "--no-memcpy")) {
            o->no_memcpy = 1;
        } else if (!strcmp(a, "--sync")) {
            NEEDV();
            if (!strcmp(v, "window"))
                o->sync = SYNC_WINDOW;
            else if (!strcmp(v, "barrier"))
                o->sync = SYNC_BARRIER;
            else
                die("--sync takes window or barrier");
        } else if (!strcmp(a, "--mode")) {
            NEEDV();
            o->mode = -1;
            for (int m = 0; m < NMODE; m++)
                if (!strcmp(v, mode_name[m]))
                    o->mode = m;
            if (o->mode < 0)
                die("--mode takes sync, osu, b2b or b2b-cold");
        } else if (!strcmp(a, "--candidates")) {
            NEEDV();
            char *dup = strdup(v), *save = NULL;
            for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->ncand == MAX_CAND)
                    die("--candidates: too many");
                o->cand[o->ncand++] = strdup(t);
            }
            free(dup);
        } else if (!strcmp(a, "--label")) {
            NEEDV();
            o->label = v;
        } else if (!strcmp(a, "--csv")) {
            NEEDV();
            o->csv = v;
        } else {
            if (rank == 0)
                fprintf(stderr, "pcoll_bench: unknown option '%s'\n", a);
            usage();
            die("bad command line");
        }
#undef NEEDV
    }
    if (o->max_iters < o->min_iters)
        o->max_iters = o->min_iters;
}

static int build_sizes(const struct opts *o, size_t *sizes)
{
    int n = 0;
    if (o->nsizes) {
        memcpy(sizes, o->sizes, o->nsizes * sizeof *sizes);
        return o->nsizes;
    }
    if (o->min_bytes > o->max_bytes)
        die("--min-bytes is larger than --max-bytes");
    for (size_t b = o->min_bytes; b <= o->max_bytes && n < MAX_SIZES; b *= (size_t)o->step)
        sizes[n++] = b;
    if (n && sizes[n - 1] != o->max_bytes && n < MAX_SIZES)
        sizes[n++] = o->max_bytes;
    return n;
}

/* ------------------------------------------------------------ environment */

/* largest data/unified cache size from sysfs (sysconf lies under some VMs) */
static size_t detect_llc(void)
{
    size_t best = 0;
    for (int idx = 0; idx < 16; idx++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        int ok = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
        fclose(f);
        if (!ok)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof buf, f)) {
            size_t v = parse_size(strtok(buf, " \n"));
            if (v > best)
                best = v;
        }
        fclose(f);
    }
    if (!best) {
        long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
        if (v <= 0)
            v = sysconf(_SC_LEVEL2_CACHE_SIZE);
        best = v > 0 ? (size_t)v : 0;
    }
    if (!best || best > (256UL << 20))
        best = 32UL << 20;
    if (best < (8UL << 20))
        best = 8UL << 20;
    return best;
}

/* Runnable tasks right now (4th field of /proc/loadavg, "running/total").
 * Sampled on rank 0 while the other ranks spin in a barrier: anything
 * above our own local rank count is another process competing for the
 * CPUs, which makes the timings unreliable.  -1 if unknown. */
static int procs_running(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    int running = -1;
    if (f) {
        double a, b, c;
        if (fscanf(f, "%lf %lf %lf %d/", &a, &b, &c, &running) != 4)
            running = -1;
        fclose(f);
    }
    return running;
}

static double load_sum;
static int load_max = -1, load_samples;

/* rank 0 only: record how many tasks beyond our own ranks are runnable */
static void sample_load(void)
{
    if (rank != 0)
        return;
    int r = procs_running();
    if (r < 0)
        return;
    int others = r - local_ranks;
    if (others < 0)
        others = 0;
    load_sum += others;
    load_samples++;
    if (others > load_max)
        load_max = others;
}

/* first line of MPI_Get_library_version, whitespace collapsed, cut at ',' */
static void mpi_version(char *out, size_t outsz)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    size_t j = 0;
    int space = 0;
    for (int i = 0; i < len && v[i] && v[i] != '\n' && v[i] != ','; i++) {
        if (isspace((unsigned char)v[i])) {
            space = 1;
            continue;
        }
        if (space && j && j + 1 < outsz)
            out[j++] = ' ';
        space = 0;
        if (j + 1 < outsz)
            out[j++] = v[i];
    }
    out[j] = '\0';
}

/* Is pcoll interposed on MPI_<coll>?  Returns the providing object or NULL. */
static const char *pcoll_provider(int c)
{
    char mpi[32], pmpi[32];
    snprintf(mpi, sizeof mpi, "MPI_%s", coll_sym[c]);
    snprintf(pmpi, sizeof pmpi, "PMPI_%s", coll_sym[c]);
    void *a = dlsym(RTLD_DEFAULT, mpi), *b = dlsym(RTLD_DEFAULT, pmpi);
    if (!a || !b || a == b)
        return NULL;
    Dl_info info;
    if (dladdr(a, &info) && info.dli_fname)
        return info.dli_fname;
    return "?";
}

/* ---------------------------------------------------------------- buffers */

static size_t buffer_offset; /* --offset */

/* Bytes of whole pages a buffer of b bytes takes from its --offset on. */
static size_t slot_bytes(size_t b) { return (b + buffer_offset + PAGE - 1) / PAGE * PAGE; }

static size_t send_stride(int c, size_t b) { (void)c; return slot_bytes(b ? b : 1); }
static size_t recv_stride(int c, size_t b)
{
    return slot_bytes(c == C_GATHERV ? b * (size_t)nranks : (b ? b : 1));
}

/* The slot count is kept odd: calls alternate pcoll/stock, so with an even
 * count pcoll would always get the even slots and stock the odd ones, and
 * any per-buffer effect (page backing, registration caches) would show up
 * as a fake difference between the two. */
static size_t nslots(int c, size_t b)
{
    size_t s = send_arena_sz / send_stride(c, b), r = recv_arena_sz / recv_stride(c, b);
    size_t n = s < r ? s : r;
    return (n % 2 == 0 && n > 1) ? n - 1 : n;
}

static char *sslot(int c, size_t b, size_t k)
{
    return send_arena + (k % nslots(c, b)) * send_stride(c, b) + buffer_offset;
}
static char *rslot(int c, size_t b, size_t k)
{
    return recv_arena + (k % nslots(c, b)) * recv_stride(c, b) + buffer_offset;
}

static void *xalloc(size_t sz)
{
    void *p = NULL;
    if (posix_memalign(&p, PAGE, sz ? sz : PAGE))
        return NULL;
    return p;
}

static void fill_send_arena(void)
{
    /* sane, normal doubles everywhere: garbage could be NaN/denormal and
     * make reductions slow for reasons unrelated to the algorithm */
    double *d = (double *)send_arena;
    size_t n = send_arena_sz / sizeof(double);
    for (size_t i = 0; i < n; i++)
        d[i] = (double)(rank + 1) + (double)(i & 7);
}

/* ------------------------------------------------------------ collectives */

static int run_coll_at(int c, int use_pcoll, size_t b, void *sb, void *rb, int root)
{
    int cnt = (int)(c == C_ALLREDUCE || c == C_REDUCE ? b / sizeof(double) : b);
    switch (c) {
    case C_ALLREDUCE:
        return use_pcoll ? MPI_Allreduce(sb, rb, cnt, MPI_DOUBLE, MPI_SUM, world)
                         : PMPI_Allreduce(sb, rb, cnt, MPI_DOUBLE, MPI_SUM, world);
    case C_REDUCE:
        return use_pcoll ? MPI_Reduce(sb, rb, cnt, MPI_DOUBLE, MPI_SUM, root, world)
                         : PMPI_Reduce(sb, rb, cnt, MPI_DOUBLE, MPI_SUM, root, world);
    case C_BCAST:
        /* the buffer lives in the recv arena on every rank */
        return use_pcoll ? MPI_Bcast(rb, cnt, MPI_BYTE, root, world)
                         : PMPI_Bcast(rb, cnt, MPI_BYTE, root, world);
    case C_GATHERV:
        return use_pcoll ? MPI_Gatherv(sb, cnt, MPI_BYTE, rb, gv_counts, gv_displs, MPI_BYTE, root, world)
                         : PMPI_Gatherv(sb, cnt, MPI_BYTE, rb, gv_counts, gv_displs, MPI_BYTE, root, world);
    }
    return MPI_ERR_OTHER;
}

/* A call with root 0. */
static int run_coll(int c, int use_pcoll, size_t b, void *sb, void *rb)
{
    return run_coll_at(c, use_pcoll, b, sb, rb, 0);
}

/* bytes the collective needs at a size: reductions round down to doubles */
static size_t eff_bytes(int c, size_t b)
{
    if (c == C_ALLREDUCE || c == C_REDUCE)
        return b / sizeof(double) * sizeof(double);
    return b;
}

static double red_val(int r, size_t i) { return (double)(r + 1) * (double)(1 + i % 251); }
static unsigned char bc_val(size_t i) { return (unsigned char)(i * 7 + 13 + i / 251); }
static unsigned char gv_val(int r, size_t i) { return (unsigned char)(r * 37 + i * 11 + 5 + i / 253); }

static void report_first_bad(const char *who, int c, size_t b, size_t i)
{
    fprintf(stderr, "pcoll_bench: rank %d: %s %s at %zu bytes: wrong result (first bad element %zu)\n",
            rank, who, coll_name[c], b, i);
}

/* check a result buffer; returns 0 if fine */
static int check_result(int c, size_t b, const void *rbuf, const char *who)
{
    size_t n = c == C_ALLREDUCE || c == C_REDUCE ? b / sizeof(double) : b;
    if (c == C_ALLREDUCE || (c == C_REDUCE && rank == 0)) {
        const double *r = rbuf;
        double tri = (double)nranks * (nranks + 1) / 2.0;
        for (size_t i = 0; i < n; i++)
            if (r[i] != (double)(1 + i % 251) * tri) {
                report_first_bad(who, c, b, i);
                return 1;
            }
    } else if (c == C_BCAST) {
        const unsigned char *r = rbuf;
        for (size_t i = 0; i < n; i++)
            if (r[i] != bc_val(i)) {
                report_first_bad(who, c, b, i);
                return 1;
            }
    } else if (c == C_GATHERV && rank == 0) {
        const unsigned char *r = rbuf;
        for (int p = 0; p < nranks; p++)
            for (size_t i = 0; i < n; i++)
                if (r[(size_t)p * n + i] != gv_val(p, i)) {
                    report_first_bad(who, c, b, (size_t)p * n + i);
                    return 1;
                }
    }
    return 0;
}

static void fill_send(int c, size_t b, void *sb)
{
    if (c == C_ALLREDUCE || c == C_REDUCE) {
        double *d = sb;
        for (size_t i = 0; i < b / sizeof(double); i++)
            d[i] = red_val(rank, i);
    } else if (c == C_GATHERV) {
        unsigned char *d = sb;
        for (size_t i = 0; i < b; i++)
            d[i] = gv_val(rank, i);
    }
}

static int send_intact(int c, size_t b, const void *sb)
{
    if (c == C_ALLREDUCE || c == C_REDUCE) {
        const double *d = sb;
        for (size_t i = 0; i < b / sizeof(double); i++)
            if (d[i] != red_val(rank, i))
                return 0;
    } else if (c == C_GATHERV) {
        const unsigned char *d = sb;
        for (size_t i = 0; i < b; i++)
            if (d[i] != gv_val(rank, i))
                return 0;
    }
    return 1;
}

static void prepare_recv(int c, size_t b, void *rb)
{
    size_t span = c == C_GATHERV ? b * (size_t)nranks : b;
    if (c == C_BCAST && rank == 0) {
        unsigned char *d = rb;
        for (size_t i = 0; i < b; i++)
            d[i] = bc_val(i);
    } else {
        memset(rb, 0xff, span); /* NaN for doubles, 0xff bytes */
    }
}

/* One correctness check of pcoll and stock at (c, b).  Collective.
 * Returns the OR over ranks of the BAD_* bits. */
static int verify(int c, size_t b)
{
    int bad = 0;
    void *sb = sslot(c, b, 0), *ra = rslot(c, b, 0), *rb = rslot(c, b, 1);

    fill_send(c, b, sb);
    prepare_recv(c, b, ra);
    prepare_recv(c, b, rb);
    PMPI_Barrier(world);
    if (run_coll(c, 1, b, sb, ra) != MPI_SUCCESS)
        bad |= BAD_RC;
    if (!send_intact(c, b, sb)) {
        fprintf(stderr, "pcoll_bench: rank %d: pcoll %s at %zu bytes modified the send buffer\n",
                rank, coll_name[c], b);
        bad |= BAD_SENDBUF;
        fill_send(c, b, sb);
    }
    PMPI_Barrier(world);
    if (run_coll(c, 0, b, sb, rb) != MPI_SUCCESS)
        bad |= BAD_STOCK;
    if (check_result(c, b, ra, "pcoll"))
        bad |= BAD_PCOLL;
    if (check_result(c, b, rb, "stock"))
        bad |= BAD_STOCK;
    int all = 0;
    PMPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_BOR, world);
    return all;
}

/* One timed sample of pcoll (which = 1) or stock at (c, b) as o->mode
 * says: this rank's seconds per call (see MODE_*). */
static double sample(const struct opts *o, int c, int which, size_t b)
{
    double a;
    switch (o->mode) {
    case MODE_OSU: {
        double sum = 0;
        for (int k = -OSU_WARM; k < OSU_CALLS; k++) {
            PMPI_Barrier(world);
            a = now_s();
            run_coll(c, which, b, sslot(c, b, 0), rslot(c, b, 0));
            if (k >= 0)
                sum += now_s() - a;
        }
        return sum / OSU_CALLS;
    }
    case MODE_B2B:
    case MODE_B2B_COLD:
        a = start_together();
        for (int k = 0; k < B2B_CALLS; k++) {
            size_t slot = o->mode == MODE_B2B ? 0 : slot_counter++;
            run_coll_at(c, which, b, sslot(c, b, slot), rslot(c, b, slot), k % nranks);
        }
        return (now_s() - a) / B2B_CALLS;
    default: {
        size_t slot = slot_counter++;
        void *sb = sslot(c, b, slot), *rb = rslot(c, b, slot);
        a = start_together();
        run_coll(c, which, b, sb, rb);
        return now_s() - a;
    }
    }
}

/* The samples of all ranks combined per iteration, as the mode reports
 * them: the slowest rank's, or (osu) the ranks' average. */
static void combine_ranks(const struct opts *o, double *t, int n)
{
    PMPI_Allreduce(MPI_IN_PLACE, t, n, MPI_DOUBLE, o->mode == MODE_OSU ? MPI_SUM : MPI_MAX, world);
    if (o->mode == MODE_OSU)
        for (int i = 0; i < n; i++)
            t[i] /= nranks;
}

/* ------------------------------------------------------------ statistics */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct stats { double p10, med, p90; };

static double quantile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0;
    double pos = q * (n - 1);
    int lo = (int)pos;
    if (lo >= n - 1)
        return sorted[n - 1];
    double f = pos - lo;
    return sorted[lo] * (1 - f) + sorted[lo + 1] * f;
}

/* stats of every stride-th element of v starting at off (n samples) */
static struct stats stats_of(const double *v, int n, int off, int stride)
{
    struct stats s = {0, 0, 0};
    if (n <= 0)
        return s;
    double *t = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        t[i] = v[(size_t)i * stride + off] * 1e6;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s.p10 = quantile(t, n, 0.10);
    s.med = quantile(t, n, 0.50);
    s.p90 = quantile(t, n, 0.90);
    free(t);
    return s;
}

/* The estimate of an iteration's cost after warm-up round w took
 * `took` seconds: the fastest round so far. The first round of a run
 * carries one-time set-up (pcoll's segment and probes, the MPI's lazy
 * connections); averaged in, it gave the first point of every table
 * about 20 iterations instead of thousands. */
static double fastest_round(int w, double est, double took)
{
    return w == 0 || took < est ? took : est;
}

static int pick_iters(const struct opts *o, double est_per_iter)
{
    int iters = o->iters;
    if (!iters) {
        double n = est_per_iter > 0 ? o->time_per_point / est_per_iter : o->max_iters;
        iters = n > o->max_iters ? o->max_iters : (n < o->min_iters ? o->min_iters : (int)n);
    }
    PMPI_Bcast(&iters, 1, MPI_INT, 0, world);
    return iters;
}

/* ----------------------------------------------------------------- memcpy */

/* Whether the mode's calls reuse their buffers (hot) rather than rotate
 * them (cold). */
static int hot_mode(const struct opts *o) { return o->mode == MODE_OSU || o->mode == MODE_B2B; }

/* The slot of the next copy: the same one where the calls meet hot
 * buffers, else the next of the rotation. */
static size_t memcpy_slot(const struct opts *o) { return hot_mode(o) ? 0 : slot_counter++; }

/* A copy that bypasses the cache with streaming stores (x86-64; memcpy
 * elsewhere): into cold buffers it skips reading the lines it writes,
 * which memcpy below glibc's non-temporal threshold does not (cold 2 MiB
 * on the development VM: about a fifth less time than memcpy). */
static void stream_copy(char *dst, const char *src, size_t b)
{
#if defined(__x86_64__)
    size_t head = (64 - (uintptr_t)dst % 64) % 64, i;
    if (head > b)
        head = b;
    memcpy(dst, src, head);
    for (i = head; i + 64 <= b; i += 64)
        for (int k = 0; k < 64; k += 16)
            _mm_stream_si128((__m128i *)(dst + i + k), _mm_loadu_si128((const __m128i *)(src + i + k)));
    _mm_sfence();
    memcpy(dst + i, src + i, b - i);
#else
    memcpy(dst, src, b);
#endif
}

/* The copy reference, every rank at once: memcpy, and on cold buffers
 * also the streaming copy, alternating, taking the faster of the two (by
 * median), so that the memory bound derived from it (scripts/bench.sh)
 * errs low. On hot buffers streaming stores only push the lines out. */
static struct stats bench_memcpy(const struct opts *o, size_t b, int *iters_out)
{
    /* use the allreduce slot geometry: one send and one recv slot of b */
    const int c = C_ALLREDUCE;
    double est = 0;

    PMPI_Barrier(world);
    for (int w = 0; w < o->warmup; w++) {
        size_t slot = memcpy_slot(o);
        double t0 = MPI_Wtime();
        start_together();
        memcpy(rslot(c, b, slot), sslot(c, b, slot), b);
        est = fastest_round(w, est, MPI_Wtime() - t0);
    }
    /* cold: t[2 i] memcpy, t[2 i + 1] the streaming copy */
    const int kinds = hot_mode(o) ? 1 : 2;
    struct opts mo = *o;
    mo.time_per_point = o->time_per_point / 4 / kinds; /* the reference needs less */
    int iters = pick_iters(&mo, est);

    double *t = malloc(sizeof(double) * (size_t)kinds * (size_t)iters);
    for (int i = 0; i < kinds * iters; i++) {
        size_t slot = memcpy_slot(o);
        char *dst = rslot(c, b, slot), *src = sslot(c, b, slot);
        double a = start_together();
        if (i % kinds)
            stream_copy(dst, src, b);
        else
            memcpy(dst, src, b);
        __asm__ __volatile__("" ::: "memory");
        t[i] = now_s() - a;
    }
    PMPI_Allreduce(MPI_IN_PLACE, t, kinds * iters, MPI_DOUBLE, MPI_MAX, world);
    struct stats s = stats_of(t, iters, 0, kinds);
    if (kinds == 2) {
        struct stats streamed = stats_of(t, iters, 1, kinds);
        if (streamed.med < s.med)
            s = streamed;
    }
    free(t);
    *iters_out = iters;
    return s;
}

/* ---------------------------------------------------- barrier release probe */

/* How unevenly the host's barrier releases the ranks: over BARRIER_ROUNDS
 * barriers, the median of (the last rank's exit - rank 0's exit), read on
 * the node's one monotonic clock (so only where all ranks share rank 0's
 * node). In the osu mode a call of root 0 starts after such a barrier and
 * cannot end before the others' data arrives, so this lag is in the
 * root's time, and in the ranks' average, whatever the collective does:
 * MPICH's barrier releases rank 0 first (2 ranks, the development VM:
 * 0.09-0.11 us), Open MPI's both ranks together (0.02-0.035 us). */
#define BARRIER_ROUNDS 1000
static double probe_barrier_release(void)
{
    double *exits = malloc(sizeof(double) * BARRIER_ROUNDS);
    double *all = rank == 0 ? malloc(sizeof(double) * BARRIER_ROUNDS * (size_t)nranks) : NULL;
    for (int k = 0; k < BARRIER_ROUNDS; k++) {
        PMPI_Barrier(world);
        exits[k] = now_s();
    }
    PMPI_Gather(exits, BARRIER_ROUNDS, MPI_DOUBLE, all, BARRIER_ROUNDS, MPI_DOUBLE, 0, world);
    double lag = 0;
    if (rank == 0) {
        /* the last rank's exit after rank 0's, per barrier, into exits */
        for (int k = 0; k < BARRIER_ROUNDS; k++) {
            double last = all[k];
            for (int r = 1; r < nranks; r++)
                if (all[(size_t)r * BARRIER_ROUNDS + k] > last)
                    last = all[(size_t)r * BARRIER_ROUNDS + k];
            exits[k] = last - all[k];
        }
        lag = stats_of(exits, BARRIER_ROUNDS, 0, 1).med;
    }
    free(all);
    free(exits);
    return lag;
}

/* ---------------------------------------------------------- handoff probe */

/* How the machine placed node ranks 0 and 1: 32 KiB handed from one to the
 * other through shared memory, in rounds. Rank 0 writes the block with
 * ordinary stores into lines rank 1 read the round before and raises a
 * flag; rank 1 copies the block out and answers. Where the two cores share
 * a cache the write takes a few microseconds; where they do not (another
 * CCD or socket, or wherever a hypervisor put the vCPUs) every line must
 * first be taken back from the reader, and it takes several times longer.
 * Stock MPIs' large-message times move with this (runs differ by up to 2x
 * on one VM), so each run reports it. Medians, microseconds. */
#define HANDOFF_BYTES (32 << 10)
#define HANDOFF_ROUNDS 400
/* Around each point (before and after it, into the CSV), fewer rounds:
 * the placement can change during a run, and scripts/bench.sh compares
 * pcoll with the stock MPIs of other runs only where the points met the
 * same placement. 100 rounds take 0.4-2 ms. */
#define HANDOFF_POINT_ROUNDS 100
static void probe_handoff(MPI_Comm node, int rounds, double out[2])
{
    int me, n;
    PMPI_Comm_rank(node, &me);
    PMPI_Comm_size(node, &n);
    out[0] = out[1] = 0;
    if (n < 2)
        return;
    /* the block, then a flag (rounds written) and an answer (rounds read),
     * each on its own cache line */
    MPI_Aint bytes = me == 0 ? HANDOFF_BYTES + 256 : 0;
    char *base;
    MPI_Win win;
    if (PMPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &win) != MPI_SUCCESS)
        return;
    MPI_Aint size;
    int unit;
    PMPI_Win_shared_query(win, 0, &size, &unit, &base);
    long *flag = (long *)(base + HANDOFF_BYTES), *answer = (long *)(base + HANDOFF_BYTES + 128);
    if (me == 0)
        *flag = *answer = 0;
    char *mine = malloc(HANDOFF_BYTES);
    double *t = malloc(sizeof(double) * (size_t)rounds);
    memset(mine, me + 1, HANDOFF_BYTES);
    /* rank 0 writes a round once rank 1 has answered the one before; rank 1
     * reads it once flagged */
    long *wait_on = me == 0 ? answer : flag, *notify = me == 0 ? flag : answer;
    char *dst = me == 0 ? base : mine, *src = me == 0 ? mine : base;
    PMPI_Barrier(node);
    for (long k = 1; k <= rounds && me < 2; k++) {
        while (__atomic_load_n(wait_on, __ATOMIC_ACQUIRE) != k - (me == 0))
            ;
        double a = now_s();
        memcpy(dst, src, HANDOFF_BYTES);
        __asm__ __volatile__("" ::: "memory");
        t[k - 1] = now_s() - a;
        __atomic_store_n(notify, k, __ATOMIC_RELEASE);
    }
    double mine_med[2] = {0, 0};
    if (me < 2)
        mine_med[me] = stats_of(t, rounds, 0, 1).med;
    PMPI_Allreduce(mine_med, out, 2, MPI_DOUBLE, MPI_MAX, node);
    free(t);
    free(mine);
    PMPI_Win_free(&win);
}

/* ------------------------------------------------------------------- main */

struct point {
    int iters, bad;
    struct stats stock, pcoll;
};

static struct point bench_point(const struct opts *o, int c, size_t b)
{
    struct point p;
    memset(&p, 0, sizeof p);
    p.bad = verify(c, b);
    int do_pcoll = !(p.bad & (BAD_PCOLL | BAD_SENDBUF | BAD_RC));

    /* restore sane doubles in the send slot the check used */
    if (c == C_ALLREDUCE || c == C_REDUCE)
        fill_send(c, b, sslot(c, b, 0));

    /* warm-up pairs; rank 0 estimates the cost of one A+B iteration */
    PMPI_Barrier(world);
    double est = 0;
    for (int w = 0; w < o->warmup; w++) {
        double t0 = MPI_Wtime();
        for (int which = do_pcoll ? 1 : 0; which >= 0; which--)
            sample(o, c, which, b);
        est = fastest_round(w, est, MPI_Wtime() - t0);
    }
    p.iters = pick_iters(o, est);

    /* timed loop: pairs of one pcoll and one stock call, t[2i] = pcoll,
     * t[2i+1] = stock.  Which of the two goes first in a pair is a coin
     * flip (the same sequence on every rank): a strict A B A B order lets
     * period-2 state in the MPI (shared-memory ring positions, buffer
     * parity) favour one side by 10-30% for small messages. */
    double *t = calloc((size_t)p.iters * 2, sizeof(double));
    uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(c * 1000003 + (int)(b % 1000003));
    for (int i = 0; i < p.iters; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int first = (int)(rng >> 63);
        for (int n = 0; n < 2; n++) {
            int which = n == 0 ? first : !first;
            if (which && !do_pcoll)
                continue;
            t[2 * i + (which ? 0 : 1)] = sample(o, c, which, b);
        }
        if ((i & 63) == 0)
            sample_load(); /* untimed; the other ranks wait in the barrier */
    }
    combine_ranks(o, t, p.iters * 2);
    p.pcoll = stats_of(t, p.iters, 0, 2);
    p.stock = stats_of(t, p.iters, 1, 2);
    free(t);
    return p;
}

/* Candidates mode: the stock MPI (variant 0) and every pcoll choice
 * (variants 1..ncand), each iteration running all of them in a random
 * order (the same on every rank), so that they share the machine's state
 * of the moment; comparisons across runs on a noisy machine are not fair. */
struct cand_point {
    int iters;
    int bad[MAX_CAND + 1];
    struct stats st[MAX_CAND + 1];
};

static void choose(int c, const struct opts *o, int v)
{
    if (v > 0 && set_alg(coll_name[c], o->cand[v - 1]) != MPI_SUCCESS)
        die("pcoll_set_algorithm refused a candidate (see above)");
}

static struct cand_point bench_candidates(const struct opts *o, int c, size_t b)
{
    struct cand_point p;
    memset(&p, 0, sizeof p);
    int nv = o->ncand + 1;
    for (int v = 1; v < nv; v++) {
        choose(c, o, v);
        p.bad[v] = verify(c, b) & (BAD_PCOLL | BAD_SENDBUF | BAD_RC);
        p.bad[0] |= verify(c, b) & BAD_STOCK;
    }
    if (c == C_ALLREDUCE || c == C_REDUCE)
        fill_send(c, b, sslot(c, b, 0));
    PMPI_Barrier(world);
    double est = 0;
    for (int w = 0; w < o->warmup; w++) {
        double t0 = MPI_Wtime();
        for (int v = 0; v < nv; v++) {
            if (p.bad[v] && v > 0)
                continue;
            choose(c, o, v);
            sample(o, c, v > 0, b);
        }
        est = fastest_round(w, est, MPI_Wtime() - t0);
    }
    /* --time is per variant, as in the default mode's pairs */
    struct opts scaled = *o;
    scaled.time_per_point = o->time_per_point * nv / 2;
    p.iters = pick_iters(&scaled, est);
    double *t = calloc((size_t)p.iters * (size_t)nv, sizeof(double));
    int order[MAX_CAND + 1];
    uint64_t rng = 0xD1B54A32D192ED03ULL ^ (uint64_t)(c * 1000003 + (int)(b % 1000003));
    for (int i = 0; i < p.iters; i++) {
        for (int v = 0; v < nv; v++)
            order[v] = v;
        for (int v = nv - 1; v > 0; v--) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int j = (int)((rng >> 33) % (uint64_t)(v + 1));
            int tmp = order[v];
            order[v] = order[j];
            order[j] = tmp;
        }
        for (int n = 0; n < nv; n++) {
            int v = order[n];
            if (p.bad[v] && v > 0)
                continue;
            choose(c, o, v);
            t[(size_t)i * (size_t)nv + (size_t)v] = sample(o, c, v > 0, b);
        }
        if ((i & 63) == 0)
            sample_load();
    }
    combine_ranks(o, t, p.iters * nv);
    for (int v = 0; v < nv; v++)
        p.st[v] = stats_of(t, p.iters, v, nv);
    free(t);
    set_alg(coll_name[c], "");
    return p;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    world = MPI_COMM_WORLD;
    PMPI_Comm_rank(world, &rank);
    PMPI_Comm_size(world, &nranks);

    struct opts o;
    parse_args(argc, argv, &o);
    buffer_offset = o.offset;
    if (o.ncand) {
        if (__builtin_popcount(o.colls) != 1)
            die("--candidates needs exactly one collective in --colls");
        set_alg = (__typeof__(set_alg))dlsym(RTLD_DEFAULT, "pcoll_set_algorithm");
        if (!set_alg)
            die("--candidates needs libpcoll.so (pcoll_set_algorithm not found)");
    }

    size_t sizes[MAX_SIZES];
    int nsz = build_sizes(&o, sizes);

    /* ranks sharing rank 0's node vs its online cores */
    MPI_Comm node;
    int local = 1;
    PMPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    PMPI_Comm_size(node, &local);
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    PMPI_Bcast(&local, 1, MPI_INT, 0, world);
    PMPI_Bcast(&cores, 1, MPI_INT, 0, world);
    int oversub = local > cores;
    /* spinning ranks 0 and 1 need a core each */
    double handoff[2] = {0, 0};
    if (!oversub)
        probe_handoff(node, HANDOFF_ROUNDS, handoff);
    double barrier_lag = local == nranks && !oversub ? probe_barrier_release() : -1;
    local_ranks = local;
    /* one clock for all ranks, and a core each to wait on it */
    sync_window = o.sync == SYNC_WINDOW || (o.sync == SYNC_AUTO && local == nranks && !oversub);

    /* arenas: each at least 2x the LLC, and at least three slots of the
     * largest footprint so every point rotates through >= 3 slots */
    size_t llc = o.llc_bytes ? o.llc_bytes : detect_llc();
    size_t maxb = 0;
    for (int i = 0; i < nsz; i++)
        if (sizes[i] > maxb)
            maxb = sizes[i];
    if ((o.colls & (1u << C_GATHERV)) && maxb * (size_t)nranks > (size_t)INT_MAX)
        die("gatherv: max-bytes * ranks exceeds INT_MAX displacements");
    size_t rmax = (o.colls & (1u << C_GATHERV)) ? maxb * (size_t)nranks : maxb;
    send_arena_sz = 2 * llc > 3 * slot_bytes(maxb) ? 2 * llc : 3 * slot_bytes(maxb);
    recv_arena_sz = 2 * llc > 3 * slot_bytes(rmax) ? 2 * llc : 3 * slot_bytes(rmax);
    send_arena = xalloc(send_arena_sz);
    recv_arena = xalloc(recv_arena_sz);
    if (!send_arena || !recv_arena)
        die("out of memory for buffer arenas (try --max-bytes smaller)");
    fill_send_arena();
    memset(recv_arena, 0, recv_arena_sz); /* fault the pages in now */
    gv_counts = malloc(sizeof(int) * (size_t)nranks);
    gv_displs = malloc(sizeof(int) * (size_t)nranks);

    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    mpi_version(ver, sizeof ver);

    FILE *csv = NULL;
    if (rank == 0 && o.csv) {
        csv = fopen(o.csv, "w");
        if (!csv)
            fprintf(stderr, "pcoll_bench: cannot write %s: %s\n", o.csv, strerror(errno));
    }

    if (rank == 0) {
        static const char *const mode_text[NMODE] = {
            "calls start together on cold buffers, root 0; medians of the slowest rank's time",
            "calls after a barrier on hot buffers, root 0; medians of the ranks' average time",
            "blocks of calls back to back on hot buffers, roots rotating; medians of the slowest rank's time per call",
            "blocks of calls back to back on cold buffers, roots rotating; medians of the slowest rank's time per call",
        };
        printf("# pcoll bench: MPI=%s ranks=%d (cores=%d%s)%s%s  mode=%s: %s, us\n", ver, nranks, cores,
               local != nranks ? ", multi-node" : "", o.label ? "  label=" : "", o.label ? o.label : "",
               mode_name[o.mode], mode_text[o.mode]);
        int any = 0;
        for (int c = 0; c < NCOLL; c++) {
            if (!(o.colls & (1u << c)))
                continue;
            const char *prov = pcoll_provider(c);
            if (prov)
                any = 1;
            printf("#   MPI_%-9s -> %s\n", coll_sym[c], prov ? prov : "host MPI (pcoll NOT interposed: both columns are stock)");
        }
        if (!any)
            printf("# NOTE: libpcoll.so is not loaded; pcoll_us measures the stock MPI too (ratios ~1 are the noise floor)\n");
        extern char **environ;
        for (char **e = environ; *e; e++)
            if (!strncmp(*e, "PCOLL_", 6))
                printf("#   env %s\n", *e);
        printf("#   buffers rotate through %zu MiB send + %zu MiB recv per rank (LLC %zu MiB), each %zu B past a "
               "page; %s; calls start %s\n",
               send_arena_sz >> 20, recv_arena_sz >> 20, llc >> 20, buffer_offset,
               o.iters ? "fixed iterations" : "adaptive iterations",
               sync_window ? "together (window)" : "after a barrier");
        if (handoff[0] > 0)
            printf("# handoff: write %.2f us, read %.2f us (32 KiB from node rank 0 to 1 through lines rank 1 had"
                   " read; a few us to write where the two cores share a cache)\n",
                   handoff[0], handoff[1]);
        if (barrier_lag >= 0)
            printf("# barrier: the last rank leaves the host's barrier %.3f us after rank 0 (median of %d; part of"
                   " every root-0 call's time in the osu mode)\n",
                   barrier_lag, BARRIER_ROUNDS);
        if (oversub)
            printf("# OVERSUBSCRIBED (ranks > cores): timings measure the scheduler\n");
        if (!o.ncand)
            printf("%-10s %9s %6s %11s %11s %8s %10s   %-21s %-21s\n", "coll", "bytes", "iters",
                   "stock_us", "pcoll_us", "ratio", "memcpy_us", "stock_p10..p90", "pcoll_p10..p90");
        fflush(stdout);
        if (csv && !o.ncand) {
            fprintf(csv, "mpi,label,mode,ranks,local_ranks,cores,oversubscribed,coll,bytes,iters,"
                         "stock_med_us,stock_p10_us,stock_p90_us,pcoll_med_us,pcoll_p10_us,pcoll_p90_us,"
                         "ratio,memcpy_med_us,check,pcoll_interposed,other_tasks,handoff_before_us,handoff_after_us\n");
        }
    }
    for (char *s = ver; *s; s++)
        if (*s == ',')
            *s = ';';

    /* memcpy reference per size, measured once */
    struct stats mc[MAX_SIZES];
    memset(mc, 0, sizeof mc);
    if (!o.no_memcpy)
        for (int i = 0; i < nsz; i++) {
            int it;
            mc[i] = bench_memcpy(&o, sizes[i], &it);
        }

    int failures = 0;
    double t_start = MPI_Wtime();
    if (o.ncand) {
        int c = __builtin_ctz(o.colls);
        if (rank == 0) {
            printf("# candidates, median us (ratio = stock / fastest pcoll candidate)\n%-10s %9s %6s %11s", "coll",
                   "bytes", "iters", "stock");
            for (int k = 0; k < o.ncand; k++)
                printf(" %18s", o.cand[k]);
            printf(" %8s\n", "ratio");
            if (csv)
                fprintf(csv, "mpi,label,mode,ranks,local_ranks,cores,oversubscribed,coll,bytes,iters,variant,med_us,p10_us,"
                             "p90_us,check,other_tasks\n");
        }
        for (int si = 0; si < nsz; si++) {
            size_t b = eff_bytes(c, sizes[si]);
            if (b == 0)
                continue;
            for (int r = 0; r < nranks; r++) {
                gv_counts[r] = (int)b;
                gv_displs[r] = (int)(b * (size_t)r);
            }
            double ls0 = load_sum;
            int ln0 = load_samples;
            struct cand_point p = bench_candidates(&o, c, b);
            double point_load = load_samples > ln0 ? (load_sum - ls0) / (load_samples - ln0) : 0;
            if (rank != 0)
                continue;
            double best = 0;
            printf("%-10s %9zu %6d %11.2f", coll_name[c], b, p.iters, p.st[0].med);
            for (int k = 1; k <= o.ncand; k++) {
                if (p.bad[k]) {
                    printf(" %18s", "WRONG");
                    failures++;
                } else {
                    printf(" %18.2f", p.st[k].med);
                    if (best == 0 || p.st[k].med < best)
                        best = p.st[k].med;
                }
            }
            printf(" %8.2f%s\n", best > 0 ? p.st[0].med / best : 0.0, point_load > 0.5 ? "  (busy machine)" : "");
            fflush(stdout);
            for (int v = 0; csv && v <= o.ncand; v++)
                fprintf(csv, "%s,%s,%s,%d,%d,%d,%d,%s,%zu,%d,%s,%.3f,%.3f,%.3f,%s,%.2f\n", ver,
                        o.label ? o.label : "", mode_name[o.mode], nranks, local, cores, oversub, coll_name[c], b, p.iters, v ? o.cand[v - 1] : "stock",
                        p.st[v].med, p.st[v].p10, p.st[v].p90, p.bad[v] ? "WRONG" : "ok", point_load);
        }
    }
    for (int c = 0; c < NCOLL && !o.ncand; c++) {
        if (!(o.colls & (1u << c)))
            continue;
        for (int si = 0; si < nsz; si++) {
            size_t b = eff_bytes(c, sizes[si]);
            if (b == 0)
                continue;
            for (int r = 0; r < nranks; r++) {
                gv_counts[r] = (int)b;
                gv_displs[r] = (int)(b * (size_t)r);
            }
            double ls0 = load_sum;
            int ln0 = load_samples;
            double before[2] = {0, 0}, after[2] = {0, 0};
            if (!oversub)
                probe_handoff(node, HANDOFF_POINT_ROUNDS, before);
            struct point p = bench_point(&o, c, b);
            if (!oversub)
                probe_handoff(node, HANDOFF_POINT_ROUNDS, after);
            double point_load = load_samples > ln0 ? (load_sum - ls0) / (load_samples - ln0) : 0;
            if (rank != 0)
                continue;
            const char *check = p.bad & (BAD_PCOLL | BAD_SENDBUF | BAD_RC) ? "WRONG"
                                : p.bad & BAD_STOCK                         ? "STOCK-WRONG"
                                                                            : "ok";
            failures += strcmp(check, "ok") != 0;
            double ratio = p.pcoll.med > 0 ? p.stock.med / p.pcoll.med : 0;
            char mcs[32], sspread[48], pspread[48], pcs[32], rs[32];
            if (o.no_memcpy)
                snprintf(mcs, sizeof mcs, "-");
            else
                snprintf(mcs, sizeof mcs, "%.2f", mc[si].med);
            snprintf(sspread, sizeof sspread, "%.1f..%.1f", p.stock.p10, p.stock.p90);
            if (!strcmp(check, "WRONG")) {
                snprintf(pcs, sizeof pcs, "WRONG");
                snprintf(rs, sizeof rs, "-");
                snprintf(pspread, sizeof pspread, "-");
            } else {
                snprintf(pcs, sizeof pcs, "%.2f", p.pcoll.med);
                snprintf(rs, sizeof rs, "%.2f", ratio);
                snprintf(pspread, sizeof pspread, "%.1f..%.1f", p.pcoll.p10, p.pcoll.p90);
            }
            printf("%-10s %9zu %6d %11.2f %11s %8s %10s   %-21s %-21s%s%s\n", coll_name[c], b, p.iters,
                   p.stock.med, pcs, rs, mcs, sspread, pspread,
                   strcmp(check, "ok") ? (strcmp(check, "WRONG") ? "  !! stock MPI result wrong"
                                                                 : "  !! pcoll result WRONG (not timed)")
                                       : "",
                   point_load > 0.5 ? "  (busy machine)" : "");
            fflush(stdout);
            if (csv) {
                fprintf(csv, "%s,%s,%s,%d,%d,%d,%d,%s,%zu,%d,%.3f,%.3f,%.3f,", ver, o.label ? o.label : "",
                        mode_name[o.mode], nranks, local, cores, oversub, coll_name[c], b, p.iters, p.stock.med, p.stock.p10,
                        p.stock.p90);
                if (!strcmp(check, "WRONG"))
                    fprintf(csv, ",,,,");
                else
                    fprintf(csv, "%.3f,%.3f,%.3f,%.4f,", p.pcoll.med, p.pcoll.p10, p.pcoll.p90, ratio);
                if (o.no_memcpy)
                    fprintf(csv, ",");
                else
                    fprintf(csv, "%.3f,", mc[si].med);
                fprintf(csv, "%s,%d,%.2f,", check, pcoll_provider(c) != NULL, point_load);
                if (before[0] > 0 && after[0] > 0)
                    fprintf(csv, "%.2f,%.2f\n", before[0], after[0]);
                else
                    fprintf(csv, ",\n");
                fflush(csv);
            }
        }
    }
    long starts[2] = {window_starts, late_starts}, all_starts[2] = {0, 0};
    PMPI_Reduce(starts, all_starts, 2, MPI_LONG, MPI_SUM, 0, world);
    if (rank == 0) {
        if (sync_window)
            printf("# %ld of %ld window starts found a rank past the instant (its time includes the delay)%s\n",
                   all_starts[1], all_starts[0],
                   all_starts[1] * 100 > all_starts[0] ? "  -- WARNING: more than 1%: rerun on a quiet machine" : "");
        printf("# ratio = stock/pcoll (>1: pcoll faster).  %d point(s) failed the check.  %.1f s%s\n",
               failures, MPI_Wtime() - t_start,
               oversub ? "  [OVERSUBSCRIBED (ranks > cores): timings measure the scheduler]" : "");
        if (load_samples) {
            double avg = load_sum / load_samples;
            printf("# other runnable tasks during the run: avg %.2f, max %d (sampled %d times)%s\n", avg,
                   load_max, load_samples,
                   avg > 0.25 ? "  -- WARNING: the machine was busy; timings are unreliable" : "");
        }
        if (csv)
            fclose(csv);
    }
    PMPI_Bcast(&failures, 1, MPI_INT, 0, world);
    free(send_arena);
    free(recv_arena);
    free(gv_counts);
    free(gv_displs);
    PMPI_Comm_free(&node);
    MPI_Finalize();
    return failures ? 1 : 0;
}
