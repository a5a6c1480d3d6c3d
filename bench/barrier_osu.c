/* MPI_Barrier latency the OSU way (osu_barrier: warm-up, a timed loop, each
 * rank's mean, then the average, min and max of those over ranks), plus what
 * an average hides: the exit-time skew across ranks and where the ranks ran.
 * Plain C and MPI only, so that the same source is built with the mpicc of
 * every MPI under test (Open MPI 4.1, 5.0, 6.0, MPICH).
 *
 * Usage: barrier_osu [blocking|persistent|pace|progress] [iters] [warmup] [sample]
 * The blocking, persistent and pace modes start with `warmup` MPI_Barrier calls alone (default
 * iters/10), so that a component that tunes itself over a communicator's
 * first barriers tunes on a loop like the timed ones.
 * With BARRIER_OSU_THREADS=multiple in the environment it starts MPI with
 * MPI_Init_thread(MPI_THREAD_MULTIPLE) (one thread still makes every call),
 * as mpi4py and hybrid programs do; else with MPI_Init.
 *
 * blocking (default):
 *   1. warm-up barriers, then `iters` timed MPI_Barrier calls (MPI_Wtime
 *      around the whole loop; nothing else inside it);
 *   2. right after, `sample` more barriers, each followed by a
 *      clock_gettime(CLOCK_MONOTONIC) and a sched_getcpu() (the clock is
 *      common to all processes of one machine); kept apart from the timed
 *      loop because the two calls cost tens of ns, a large part of a
 *      2-rank barrier;
 *   3. rank 0 gathers the exit times and reports, per sampled barrier, the
 *      spread max - min over ranks: its median, 99th percentile and max.
 *   Prints: ranks= mode=blocking avg_us= min_us= max_us= iters=
 *           sample= sample_avg_us= skew_med_us= skew_p99_us= skew_max_us=
 *           placement=<rank>:<cpu at start>><cpu at end>/<distinct cpus
 *           seen in the sample>,...  (the /<distinct> part in blocking mode only)
 *
 * pace (one node, 64 ranks at most):
 *   what a barrier's time follows, in one launch: `BLOCKS` rounds of
 *   three timed loops of iters/BLOCKS each on every rank (barrier and
 *   floor swap places every round; each loop starts together):
 *     barrier: MPI_Barrier(MPI_COMM_WORLD);
 *     floor:   a barrier on one shared cache line without MPI (each rank
 *              bumps its own byte, then polls with a pause until every
 *              byte has caught up: the protocol of hwbarr's line barrier
 *              and of the bench's floor), on an MPI shared window; with
 *              more ranks than cpus each look is followed by sched_yield
 *              instead of the pause (the scheduler's floor, as in
 *              examples/sched_floor.rs), run by the same MPI processes.
 *              With no more ranks than cpus, the fastest of FLOOR_LINES
 *              lines of the window (a line's transfer costs more or less
 *              by its address), picked by rank 0 timing each the way
 *              hwbarr's line barrier picks its own (`line_candidates`);
 *     self:    MPI_Barrier(MPI_COMM_SELF), a short MPI call path that
 *              waits for nobody: it measures how fast this rank's cpu runs
 *              code just now (on a virtual machine the cpu a rank is bound
 *              to can be slowed by what runs beside it on the host).
 *   Prints, per round: round=<b> barrier_ns=<rank 0's> floor_ns=<rank
 *   0's> self_ns=<rank 0's>,<rank 1's>,... then
 *   ranks=<n> mode=pace iters=<timed iterations of each loop>
 *   floor_line=<line picked> floor_first_ns=<ns per barrier on the first
 *   line in the trial> floor_picked_ns=<on the line picked> placement=...
 *
 * progress (at least 2 ranks; `iters` operations of each kind, default 100):
 *   whether a rank waiting in MPI_Barrier still serves its peers' traffic,
 *   as MPI's progress rule asks. Rank 1 enters MPI_Barrier at once; rank 0
 *   first idles 1 ms (so rank 1 waits long), then times
 *     rma: MPI_Put of 4 bytes + MPI_Win_flush to rank 1 on a window of
 *          MPI_Win_create (passive target, inside one MPI_Win_lock), and
 *     p2p: MPI_Send of 64 KiB (a rendezvous) to receives rank 1 posted
 *          before its barrier,
 *   then enters the barrier too. The other ranks wait in the barrier.
 *   Prints: ranks= mode=progress rma_us= p2p_us= iters=  (µs per operation)
 *
 * persistent:
 *   MPI_Barrier and the persistent barrier (MPI_Barrier_init, or
 *   MPIX_Barrier_init on Open MPI 4.1) in the same launch, interleaved in
 *   `BLOCKS` blocks of iters/BLOCKS each, the order alternating per block.
 *   Prints: ranks= mode=persistent blocking_us= persistent_us= ratio=
 *           ratio_med= iters= placement=...
 *   (blocking_us and persistent_us: averages over ranks of each rank's
 *   mean; ratio = persistent_us / blocking_us; ratio_med: the median over
 *   blocks of the per-block ratio.)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#define BARRIER_INIT MPIX_Barrier_init
#else
#define BARRIER_INIT MPI_Barrier_init
#endif

#define BLOCKS 20
#define MAX_CPUS 4096

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_f64(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "barrier_osu: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Gathers each rank's {cpu at start, cpu at end, distinct cpus} and prints
 * them on rank 0 as placement=r:s>e/d,... */
static void print_placement(int rank, int size, int start, int end, int distinct) {
    int mine[3] = {start, end, distinct};
    int *all = rank == 0 ? xmalloc(sizeof(int) * 3 * size) : NULL;
    MPI_Gather(mine, 3, MPI_INT, all, 3, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf(" placement=");
        for (int r = 0; r < size; r++)
        {
            printf("%s%d:%d>%d", r ? "," : "", r, all[3 * r], all[3 * r + 1]);
            if (all[3 * r + 2] > 0) printf("/%d", all[3 * r + 2]);
        }
        free(all);
    }
}

static void blocking(int rank, int size, long iters, long warmup, long sample) {
    int cpu0 = sched_getcpu();
    for (long i = 0; i < warmup; i++)
        MPI_Barrier(MPI_COMM_WORLD);

    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) * 1e6 / iters;

    int64_t *exit_ns = xmalloc(sizeof(int64_t) * sample);
    int *cpus = xmalloc(sizeof(int) * sample);
    double s0 = MPI_Wtime();
    for (long i = 0; i < sample; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        exit_ns[i] = now_ns();
        cpus[i] = sched_getcpu();
    }
    double sample_mine = sample ? (MPI_Wtime() - s0) * 1e6 / sample : 0.0;
    int cpu1 = sched_getcpu();

    static unsigned char seen[MAX_CPUS];
    int distinct = 0;
    for (long i = 0; i < sample; i++) {
        int c = cpus[i];
        if (c >= 0 && c < MAX_CPUS && !seen[c]) {
            seen[c] = 1;
            distinct++;
        }
    }

    double sum = 0, lo = 0, hi = 0, ssum = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sample_mine, &ssum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    int64_t *all = rank == 0 ? xmalloc(sizeof(int64_t) * sample * size) : NULL;
    MPI_Gather(exit_ns, (int)sample, MPI_INT64_T, all, (int)sample, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int64_t *skew = xmalloc(sizeof(int64_t) * sample);
        for (long i = 0; i < sample; i++) {
            int64_t mn = all[i], mx = all[i];
            for (int r = 1; r < size; r++) {
                int64_t v = all[(size_t)r * sample + i];
                if (v < mn) mn = v;
                if (v > mx) mx = v;
            }
            skew[i] = mx - mn;
        }
        qsort(skew, sample, sizeof(int64_t), cmp_i64);
        double med = sample ? skew[sample / 2] / 1e3 : 0;
        double p99 = sample ? skew[(sample * 99) / 100 < sample ? (sample * 99) / 100 : sample - 1] / 1e3 : 0;
        double mx = sample ? skew[sample - 1] / 1e3 : 0;
        printf("ranks=%d mode=blocking avg_us=%.4f min_us=%.4f max_us=%.4f iters=%ld sample=%ld sample_avg_us=%.4f "
               "skew_med_us=%.4f skew_p99_us=%.4f skew_max_us=%.4f",
               size, sum / size, lo, hi, iters, sample, ssum / size, med, p99, mx);
        free(skew);
        free(all);
    }
    print_placement(rank, size, cpu0, cpu1, distinct);
    if (rank == 0) printf("\n");
    free(exit_ns);
    free(cpus);
}

static void persistent(int rank, int size, long iters, long warmup) {
    int cpu0 = sched_getcpu();
    MPI_Request req;
    if (BARRIER_INIT(MPI_COMM_WORLD, MPI_INFO_NULL, &req) != MPI_SUCCESS) {
        fprintf(stderr, "barrier_osu: persistent barrier init failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* MPI_Barrier warmed alone first, as in blocking mode: a component that
     * tunes itself over a communicator's first barriers (hwbarr's line
     * trial) tunes on a loop like the timed ones, not on the two kinds
     * taking turns. */
    for (long i = 0; i < warmup; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < warmup; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Start(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    long per = iters / BLOCKS > 0 ? iters / BLOCKS : 1;
    /* t[2b] blocking, t[2b+1] persistent: this rank's µs per barrier. */
    double t[2 * BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        for (int k = 0; k < 2; k++) {
            int pers = (k + b) % 2; /* alternate which kind goes first */
            double t0 = MPI_Wtime();
            if (pers) {
                for (long i = 0; i < per; i++) {
                    MPI_Start(&req);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                }
            } else {
                for (long i = 0; i < per; i++)
                    MPI_Barrier(MPI_COMM_WORLD);
            }
            t[2 * b + pers] = (MPI_Wtime() - t0) * 1e6 / per;
        }
    }
    MPI_Request_free(&req);
    int cpu1 = sched_getcpu();

    double sums[2 * BLOCKS];
    MPI_Reduce(t, sums, 2 * BLOCKS, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double blk = 0, per_sum = 0, ratios[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
            blk += sums[2 * b];
            per_sum += sums[2 * b + 1];
            ratios[b] = sums[2 * b + 1] / sums[2 * b];
        }
        qsort(ratios, BLOCKS, sizeof(double), cmp_f64);
        double bl = blk / BLOCKS / size, pe = per_sum / BLOCKS / size;
        printf("ranks=%d mode=persistent blocking_us=%.4f persistent_us=%.4f ratio=%.4f ratio_med=%.4f iters=%ld", size,
               bl, pe, pe / bl, (ratios[BLOCKS / 2 - 1] + ratios[BLOCKS / 2]) / 2, per * BLOCKS);
    }
    print_placement(rank, size, cpu0, cpu1, 0);
    if (rank == 0) printf("\n");
}

/* The floor's barrier on `wires` (one byte per rank, one cache line):
 * bump our byte (7-bit count, kept in this process's memory so that an
 * arrival only stores, as hwbarr's line barrier does), then poll until
 * every byte is at our count or one past it (a peer already in the next
 * barrier). `*mine` is this process's count on that line. */
/* The floor's candidate lines, its trial's barriers per line and passes. */
#define FLOOR_LINES 16
#define FLOOR_TRIAL 200
#define FLOOR_PASSES 3
/* More ranks than cpus: the floor's waiters give their cpu up after each look. */
static int floor_yields;
static void line_barrier(volatile unsigned char *wires, unsigned char *mine, int rank, int size) {
    unsigned char c = *mine = (unsigned char)((*mine + 1) & 0x7f);
    __atomic_store_n(&wires[rank], c, __ATOMIC_RELEASE);
    for (;;) {
        int all = 1;
        for (int r = 0; r < size && all; r++)
            all = ((unsigned char)(__atomic_load_n(&wires[r], __ATOMIC_SEQ_CST) - c) & 0x7f) <= 1;
        if (all) return;
        if (floor_yields) {
            sched_yield();
            continue;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void pace(int rank, int size, long iters, long warmup) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (size > 64) {
        /* Rank 0 says why and ends the job; the others wait to be ended. */
        if (rank == 0) {
            fprintf(stderr, "barrier_osu: pace needs at most 64 ranks (one byte each on one line)\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    floor_yields = size > ncpu;
    int cpu0 = sched_getcpu();
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nsize;
    MPI_Comm_size(node, &nsize);
    if (nsize != size) {
        if (rank == 0) {
            fprintf(stderr, "barrier_osu: pace needs every rank on one node\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Win win;
    unsigned char *base;
    MPI_Win_allocate_shared(rank == 0 ? 64 + 128 * (FLOOR_LINES + 1) : 0, 1, MPI_INFO_NULL, node, &base, &win);
    MPI_Aint bytes;
    int unit;
    unsigned char *mem;
    MPI_Win_shared_query(win, 0, &bytes, &unit, &mem);
    /* The candidate lines: the first 128-byte boundary inside the window
     * past its first 64 bytes (MPI does not promise an aligned base), then
     * every 128 bytes (x86 fetches lines in pairs; hwbarr's candidates are
     * 128 bytes apart too): the same lines for every rank, as the mapping's
     * offset within a page is the same. */
    volatile unsigned char *lines = (volatile unsigned char *)(((uintptr_t)mem + 64 + 127) & ~(uintptr_t)127);
    if (rank == 0) memset((void *)lines, 0, 128 * FLOOR_LINES);
    unsigned char counts[FLOOR_LINES] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    /* Rank 0 times FLOOR_TRIAL barriers on each line, FLOOR_PASSES times,
     * and keeps the line with the fastest pass. Oversubscribed, the
     * scheduler sets the floor: the first line. */
    int pick = 0;
    double trial[FLOOR_LINES];
    for (int l = 0; l < FLOOR_LINES; l++) trial[l] = 1e300;
    if (!floor_yields) {
        for (int pass = 0; pass < FLOOR_PASSES; pass++) {
            for (int l = 0; l < FLOOR_LINES; l++) {
                volatile unsigned char *w = lines + 128 * l;
                line_barrier(w, &counts[l], rank, size);
                double t0 = MPI_Wtime();
                for (int i = 0; i < FLOOR_TRIAL; i++) line_barrier(w, &counts[l], rank, size);
                double ns = (MPI_Wtime() - t0) * 1e9 / FLOOR_TRIAL;
                if (ns < trial[l]) trial[l] = ns;
            }
        }
        for (int l = 1; l < FLOOR_LINES; l++)
            if (trial[l] < trial[pick]) pick = l;
        MPI_Bcast(&pick, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    volatile unsigned char *wires = lines + 128 * pick;
    unsigned char *mine = &counts[pick];
    /* MPI_Barrier warmed alone first (as in persistent mode), then both
     * taking turns. */
    for (long i = 0; i < warmup; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < warmup; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        line_barrier(wires, mine, rank, size);
    }
    long per = iters / BLOCKS > 0 ? iters / BLOCKS : 1;
    double t[3 * BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        /* The barrier and the floor swap places every round; each timed
         * loop starts together on every rank (an untimed floor barrier). */
        for (int k = 0; k < 2; k++) {
            int floor_loop = (k + b) % 2;
            line_barrier(wires, mine, rank, size);
            double t0 = MPI_Wtime();
            if (floor_loop)
                for (long i = 0; i < per; i++) line_barrier(wires, mine, rank, size);
            else
                for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_WORLD);
            t[3 * b + floor_loop] = (MPI_Wtime() - t0) * 1e9 / per;
        }
        line_barrier(wires, mine, rank, size);
        double t2 = MPI_Wtime();
        for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_SELF);
        t[3 * b + 2] = (MPI_Wtime() - t2) * 1e9 / per;
    }
    int cpu1 = sched_getcpu();
    double *all = rank == 0 ? xmalloc(sizeof(double) * 3 * BLOCKS * size) : NULL;
    MPI_Gather(t, 3 * BLOCKS, MPI_DOUBLE, all, 3 * BLOCKS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int b = 0; b < BLOCKS; b++) {
            printf("round=%d barrier_ns=%.1f floor_ns=%.1f self_ns=", b, all[3 * b], all[3 * b + 1]);
            for (int r = 0; r < size; r++) printf("%s%.2f", r ? "," : "", all[(size_t)r * 3 * BLOCKS + 3 * b + 2]);
            printf("\n");
        }
        printf("ranks=%d mode=pace iters=%ld", size, per * BLOCKS);
        if (!floor_yields)
            printf(" floor_line=%d floor_first_ns=%.1f floor_picked_ns=%.1f", pick, trial[0], trial[pick]);
        free(all);
    }
    print_placement(rank, size, cpu0, cpu1, 0);
    if (rank == 0) printf("\n");
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
}

#define PROGRESS_BYTES (64 * 1024)

static void progress(int rank, int size, long n) {
    if (size < 2) {
        if (rank == 0) printf("mode=progress needs at least 2 ranks\n");
        return;
    }
    int *mem = xmalloc(16 * sizeof(int));
    memset(mem, 0, 16 * sizeof(int));
    MPI_Win win;
    MPI_Win_create(mem, 16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Barrier(MPI_COMM_WORLD);
    double rma = 0, p2p = 0;
    if (rank == 0) {
        usleep(1000);
        int v = 42;
        double t0 = MPI_Wtime();
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (long i = 0; i < n; i++) {
            MPI_Put(&v, 1, MPI_INT, 1, (int)(i % 16), 1, MPI_INT, win);
            MPI_Win_flush(1, win);
        }
        MPI_Win_unlock(1, win);
        rma = (MPI_Wtime() - t0) / n * 1e6;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    char *buf = xmalloc((size_t)PROGRESS_BYTES * (rank == 1 ? n : 1));
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * n);
    if (rank == 1)
        for (long i = 0; i < n; i++)
            MPI_Irecv(buf + (size_t)i * PROGRESS_BYTES, PROGRESS_BYTES, MPI_CHAR, 0, (int)i, MPI_COMM_WORLD, &reqs[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        memset(buf, 1, PROGRESS_BYTES);
        usleep(1000);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) MPI_Send(buf, PROGRESS_BYTES, MPI_CHAR, 1, (int)i, MPI_COMM_WORLD);
        p2p = (MPI_Wtime() - t0) / n * 1e6;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) MPI_Waitall((int)n, reqs, MPI_STATUSES_IGNORE);
    if (rank == 0) printf("ranks=%d mode=progress rma_us=%.3f p2p_us=%.3f iters=%ld\n", size, rma, p2p, n);
    MPI_Win_free(&win);
    free(reqs);
    free(buf);
    free(mem);
}

int main(int argc, char **argv) {
    const char *threads = getenv("BARRIER_OSU_THREADS");
    if (threads && strcmp(threads, "multiple") == 0) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "barrier_osu: MPI_THREAD_MULTIPLE asked, %d provided\n", provided);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int argi = 1;
    const char *mode = "blocking";
    if (argc > 1 && (strcmp(argv[1], "blocking") == 0 || strcmp(argv[1], "persistent") == 0 ||
                     strcmp(argv[1], "pace") == 0 || strcmp(argv[1], "progress") == 0)) mode = argv[argi++];
    long iters = argc > argi ? atol(argv[argi]) : 10000;
    long warmup = argc > argi + 1 ? atol(argv[argi + 1]) : iters / 10;
    long sample = argc > argi + 2 ? atol(argv[argi + 2]) : 1000;
    if (iters < 1) iters = 1;
    if (warmup < 0) warmup = 0;
    if (sample < 0) sample = 0;
    if (strcmp(mode, "progress") == 0)
        progress(rank, size, argc > 2 ? iters : 100);
    else if (strcmp(mode, "persistent") == 0)
        persistent(rank, size, iters, warmup);
    else if (strcmp(mode, "pace") == 0)
        pace(rank, size, iters, warmup);
    else
        blocking(rank, size, iters, warmup, sample);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
