/* What a rank's own work costs a 2-rank line barrier, by where it lies:
 * between seeing a release and the next arrival ("before arrival", where
 * MPI_Barrier's return and entry and a component's dispatch lie), or
 * between an arrival and the first look ("after arrival"). Two threads
 * pinned to cpus 0 and 1 run the floor's line barrier (bump a byte, poll
 * with a pause) on one line, each adding `w` turns of an empty loop (a
 * non-inlined function) at one place; the rows repeat the sweep.
 * Build: cc -O2 -pthread release-to-arrival.c -o release-to-arrival
 * Run:   ./release-to-arrival [line index within the page] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define ITERS 200000
static volatile unsigned char *line;
static volatile int work_now = 0, where_now = 0, done = 0;
static pthread_barrier_t sync2;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) static void work(int n) {
    for (int i = 0; i < n; i++) __asm__ volatile("" ::: "memory");
}

/* where 0: the work before the arrival; 1: after it, before the first look. */
static void barrier(int me, unsigned char *mine, int w, int where) {
    if (where == 0) work(w);
    unsigned char c = *mine = (unsigned char)((*mine + 1) & 0x7f);
    __atomic_store_n(&line[me], c, __ATOMIC_RELEASE);
    if (where == 1) work(w);
    for (;;) {
        int all = 1;
        for (int r = 0; r < 2 && all; r++)
            all = ((unsigned char)(__atomic_load_n(&line[r], __ATOMIC_SEQ_CST) - c) & 0x7f) <= 1;
        if (all) return;
        __builtin_ia32_pause();
    }
}

static void *peer(void *arg) {
    (void)arg;
    pin(1);
    unsigned char mine = 0;
    for (;;) {
        pthread_barrier_wait(&sync2);
        if (done) return NULL;
        int w = work_now, where = where_now;
        for (int i = 0; i < ITERS; i++) barrier(1, &mine, w, where);
        pthread_barrier_wait(&sync2);
    }
}

int main(int argc, char **argv) {
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (page == MAP_FAILED) return 1;
    line = page + 128 * (argc > 1 ? atoi(argv[1]) % 32 : 0);
    pthread_barrier_init(&sync2, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, peer, NULL);
    pin(0);
    unsigned char mine = 0;
    int ws[] = {0, 5, 10, 20, 40, 80, 160};
    double t0 = now_ns();
    for (int i = 0; i < 10000000; i++) __asm__ volatile("" ::: "memory");
    printf("one empty turn: %.2f ns\n", (now_ns() - t0) / 1e7);
    for (int sweep = 0; sweep < 3; sweep++)
        for (int where = 0; where < 2; where++) {
            printf("%s:", where ? "after arrival " : "before arrival");
            for (int k = 0; k < 7; k++) {
                work_now = ws[k];
                where_now = where;
                pthread_barrier_wait(&sync2);
                double s = now_ns();
                for (int i = 0; i < ITERS; i++) barrier(0, &mine, ws[k], where);
                printf(" w%d=%.1f", ws[k], (now_ns() - s) / ITERS);
                pthread_barrier_wait(&sync2);
            }
            printf("\n");
        }
    done = 1;
    pthread_barrier_wait(&sync2);
    pthread_join(t, NULL);
    return 0;
}
