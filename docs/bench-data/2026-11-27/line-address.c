/* Where the line lies: a 2-thread line barrier (the floor's protocol: each
 * thread bumps its byte, polls with a pause until both bytes agree) on each
 * of 32 lines of one page, 128 bytes apart, threads pinned to cpus 0 and 1;
 * every line timed once per sweep, sweeps repeated. Prints one row per
 * line: its index and ns per barrier in each sweep.
 * Build: cc -O2 -pthread line-address.c -o line-address
 * Run:   ./line-address [sweeps]   (a fresh page each run) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LINES 32
#define ITERS 50000
#define MAX_SWEEPS 16

static volatile unsigned char *page;
static volatile int line_now = -1, done = 0;
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

static void barrier(volatile unsigned char *w, int me, unsigned char *mine) {
    unsigned char c = *mine = (unsigned char)((*mine + 1) & 0x7f);
    __atomic_store_n(&w[me], c, __ATOMIC_RELEASE);
    for (;;) {
        int all = 1;
        for (int r = 0; r < 2 && all; r++)
            all = ((unsigned char)(__atomic_load_n(&w[r], __ATOMIC_SEQ_CST) - c) & 0x7f) <= 1;
        if (all) return;
        __builtin_ia32_pause();
    }
}

static void *peer(void *arg) {
    (void)arg;
    pin(1);
    unsigned char mine[LINES] = {0};
    for (;;) {
        pthread_barrier_wait(&sync2);
        if (done) return NULL;
        int l = line_now;
        for (int i = 0; i < ITERS; i++) barrier(page + 128 * l, 1, &mine[l]);
        pthread_barrier_wait(&sync2);
    }
}

int main(int argc, char **argv) {
    int sweeps = argc > 1 ? atoi(argv[1]) : 5;
    if (sweeps < 1 || sweeps > MAX_SWEEPS) sweeps = 5;
    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (page == MAP_FAILED) return 1;
    pthread_barrier_init(&sync2, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, peer, NULL);
    pin(0);
    unsigned char mine[LINES] = {0};
    static double ns[MAX_SWEEPS][LINES];
    for (int s = 0; s < sweeps; s++)
        for (int l = 0; l < LINES; l++) {
            line_now = l;
            pthread_barrier_wait(&sync2);
            double t0 = now_ns();
            for (int i = 0; i < ITERS; i++) barrier(page + 128 * l, 0, &mine[l]);
            ns[s][l] = (now_ns() - t0) / ITERS;
            pthread_barrier_wait(&sync2);
        }
    done = 1;
    pthread_barrier_wait(&sync2);
    pthread_join(t, NULL);
    for (int l = 0; l < LINES; l++) {
        printf("%2d", l);
        for (int s = 0; s < sweeps; s++) printf(" %6.1f", ns[s][l]);
        printf("\n");
    }
    return 0;
}
