/* Oversubscribed A/B harness: in one launch, blocks of MPI_Barrier against the floor's
 * protocol run by the same MPI ranks (a line barrier on an MPI shared window: store our byte,
 * poll every byte, sched_yield between polls; no MPI call in the loop), the same floor touching
 * `touch` more pages after each yield, and the floor followed by MPI_Barrier(MPI_COMM_SELF).
 * 10 rounds of the 4 blocks in rotated order; rank 0 prints the median ns of each and
 * ratio = barrier / floor (medians).
 * Usage: mpirun -np <n> --oversubscribe --map-by core --bind-to core:overload-allowed ./a.out
 *        [iterations per block] [mode: 0 all, 1 barrier only, 2 floor only] [touch pages]
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ROUNDS 10
static unsigned char mine;
static volatile unsigned char *junk; static int npages;
static void fbar2(volatile unsigned char *w, int rank, int size, int pause) {
    unsigned char c = mine = (unsigned char)((mine + 1) & 0x7f);
    __atomic_store_n(&w[rank], c, __ATOMIC_RELEASE);
    for (;;) {
        int ok = 1;
        for (int r = 0; r < size; r++)
            if (((unsigned char)(__atomic_load_n(&w[r], __ATOMIC_SEQ_CST) - c) & 0x7f) > 1) { ok = 0; break; }
        if (ok) return;
        if (pause) __builtin_ia32_pause();
        sched_yield();
        for (int p = 0; p < npages; p++) (void)junk[p * 4096 + 64 * (p % 64)];
    }
}
static void fbar(volatile unsigned char *w, int rank, int size) { fbar2(w, rank, size, 0); }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    long per = argc > 1 ? atol(argv[1]) : 10000; int mode = argc > 2 ? atoi(argv[2]) : 0; npages = 0; int touch = argc > 3 ? atoi(argv[3]) : 12; junk = malloc(4096 * 64); for (int i = 0; i < 4096 * 64; i++) junk[i] = 0;
    MPI_Win win; unsigned char *base, *mem; MPI_Aint bytes; int unit;
    MPI_Win_allocate_shared(rank == 0 ? 8192 : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_shared_query(win, 0, &bytes, &unit, &mem);
    volatile unsigned char *w = (volatile unsigned char *)(((uintptr_t)mem + 64 + 127) & ~(uintptr_t)127);
    if (rank == 0) memset((void *)w, 0, 128);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 1000; i++) { MPI_Barrier(MPI_COMM_WORLD); fbar(w, rank, size); }
    double t[4][ROUNDS];
    for (int b = 0; b < ROUNDS; b++) for (int k = 0; k < 4; k++) {
        int l = (k + b) % 4;
        fbar(w, rank, size);
        double t0 = MPI_Wtime();
        if (mode == 1 && l != 0) continue;
        if (mode == 2 && l != 1) continue;
        if (l == 0) for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_WORLD);
        else if (l == 1) for (long i = 0; i < per; i++) fbar(w, rank, size);
        else if (l == 2) { npages = touch; for (long i = 0; i < per; i++) fbar2(w, rank, size, 0); npages = 0; }
        else for (long i = 0; i < per; i++) { fbar(w, rank, size); MPI_Barrier(MPI_COMM_SELF); }
        t[l][b] = (MPI_Wtime() - t0) * 1e9 / per;
    }
    if (rank == 0) { for (int l = 0; l < 4; l++) qsort(t[l], ROUNDS, sizeof(double), cmp);
        printf("barrier %.0f floor %.0f floor_touch %.0f floor_self %.0f ratio %.2f\n", t[0][ROUNDS/2], t[1][ROUNDS/2], t[2][ROUNDS/2], t[3][ROUNDS/2], t[0][ROUNDS/2]/t[1][ROUNDS/2]); }
    MPI_Win_free(&win); MPI_Finalize();
}
