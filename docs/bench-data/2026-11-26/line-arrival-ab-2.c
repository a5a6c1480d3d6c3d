/* A/B of hwbarr builds at 2 ranks against floor loops in the same launch.
 * Per round (20 rounds, order rotated each round), 20,000 iterations of:
 *   barrier      MPI_Barrier(MPI_COMM_WORLD) (the component under test)
 *   floor        line barrier on one shared line, own count kept in process memory
 *                (the store-only arrival of hwbarr's line barrier and of examples/sched_floor.rs)
 *   floor_read   the same, reading its own count back from the line before storing
 *   reread       floor + a second read of the wires after the release (hwbarr's look for sleepers)
 *   other_page   floor on a line in another page of the window
 *   nopause      floor without the pause between polls
 *   floor_self   floor + MPI_Barrier(MPI_COMM_SELF) after each barrier
 *   self         MPI_Barrier(MPI_COMM_SELF) alone (how fast this cpu runs code now)
 * Prints rank 0's median ns per loop and the median of per-round ratios barrier/floor and
 * barrier/floor_read. Usage: mpirun -np 2 --bind-to core ... ./a.out [iters] */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ROUNDS 20
#define NL 8
static const char *names[NL] = {"barrier", "floor", "floor_read", "reread", "other_page", "nopause", "floor_self", "self"};
static unsigned char mine[2]; /* own count per line used (0: main line, 1: other page) */
static inline int released(volatile unsigned char *w, int size, unsigned char c) {
    for (int r = 0; r < size; r++)
        if (((unsigned char)(__atomic_load_n(&w[r], __ATOMIC_SEQ_CST) - c) & 0x7f) > 1) return 0;
    return 1;
}
static void floor_barrier(volatile unsigned char *w, int rank, int size, int which, int pause) {
    unsigned char c = mine[which] = (unsigned char)((mine[which] + 1) & 0x7f);
    __atomic_store_n(&w[rank], c, __ATOMIC_RELEASE);
    while (!released(w, size, c))
        if (pause) __builtin_ia32_pause();
}
static void floor_read(volatile unsigned char *w, int rank, int size) {
    unsigned char c = (unsigned char)((__atomic_load_n(&w[rank], __ATOMIC_RELAXED) + 1) & 0x7f);
    mine[0] = c;
    __atomic_store_n(&w[rank], c, __ATOMIC_RELEASE);
    while (!released(w, size, c)) __builtin_ia32_pause();
}
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { qsort(v, n, sizeof(double), cmp); return (v[n / 2 - 1] + v[n / 2]) / 2; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long per = argc > 1 ? atol(argv[1]) : 20000;
    MPI_Win win;
    unsigned char *base, *mem;
    MPI_Aint bytes;
    int unit;
    MPI_Win_allocate_shared(rank == 0 ? 8192 : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_shared_query(win, 0, &bytes, &unit, &mem);
    volatile unsigned char *w = (volatile unsigned char *)(((uintptr_t)mem + 64 + 127) & ~(uintptr_t)127);
    volatile unsigned char *w2 = w + 4096;
    if (rank == 0) memset((void *)w, 0, 4096 + 128);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2000; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        floor_barrier(w, rank, size, 0, 1);
        floor_barrier(w2, rank, size, 1, 1);
    }
    double t[NL][ROUNDS], rf[ROUNDS], rr[ROUNDS];
    for (int b = 0; b < ROUNDS; b++) {
        for (int k = 0; k < NL; k++) {
            int l = (k + b) % NL;
            floor_barrier(w, rank, size, 0, 1);
            double t0 = MPI_Wtime();
            switch (l) {
            case 0: for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_WORLD); break;
            case 1: for (long i = 0; i < per; i++) floor_barrier(w, rank, size, 0, 1); break;
            case 2: for (long i = 0; i < per; i++) floor_read(w, rank, size); break;
            case 3:
                for (long i = 0; i < per; i++) {
                    floor_barrier(w, rank, size, 0, 1);
                    int any = 0;
                    for (int r = 0; r < size; r++) any |= __atomic_load_n(&w[r], __ATOMIC_SEQ_CST) & 0x80;
                    if (any) abort();
                }
                break;
            case 4: for (long i = 0; i < per; i++) floor_barrier(w2, rank, size, 1, 1); break;
            case 5: for (long i = 0; i < per; i++) floor_barrier(w, rank, size, 0, 0); break;
            case 6: for (long i = 0; i < per; i++) { floor_barrier(w, rank, size, 0, 1); MPI_Barrier(MPI_COMM_SELF); } break;
            case 7: for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_SELF); break;
            }
            t[l][b] = (MPI_Wtime() - t0) * 1e9 / per;
        }
        rf[b] = t[0][b] / t[1][b];
        rr[b] = t[0][b] / t[2][b];
    }
    if (rank == 0) {
        for (int l = 0; l < NL; l++) printf("%s %.1f ", names[l], med(t[l], ROUNDS));
        printf("ratio %.2f ratio_read %.2f\n", med(rf, ROUNDS), med(rr, ROUNDS));
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
