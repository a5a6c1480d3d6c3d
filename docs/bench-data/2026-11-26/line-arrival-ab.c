#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#define ROUNDS 20
static void line_barrier(volatile unsigned char *w, int rank, int size) {
    unsigned char c = (unsigned char)((__atomic_load_n(&w[rank], __ATOMIC_RELAXED) + 1) & 0x7f);
    __atomic_store_n(&w[rank], c, __ATOMIC_RELEASE);
    for (;;) {
        int all = 1;
        for (int r = 0; r < size && all; r++)
            all = ((unsigned char)(__atomic_load_n(&w[r], __ATOMIC_SEQ_CST) - c) & 0x7f) <= 1;
        if (all) return;
        __builtin_ia32_pause();
    }
}
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n) { qsort(v, n, sizeof(double), cmp); return (v[n / 2 - 1] + v[n / 2]) / 2; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long per = argc > 1 ? atol(argv[1]) : 20000;
    MPI_Win win; unsigned char *base; MPI_Aint bytes; int unit; unsigned char *mem;
    MPI_Win_allocate_shared(rank == 0 ? 4096 : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_shared_query(win, 0, &bytes, &unit, &mem);
    volatile unsigned char *w = (volatile unsigned char *)(((uintptr_t)mem + 64 + 127) & ~(uintptr_t)127);
    if (rank == 0) memset((void *)w, 0, 128);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 2000; i++) { MPI_Barrier(MPI_COMM_WORLD); line_barrier(w, rank, size); }
    double hb[ROUNDS], fl[ROUNDS], se[ROUNDS], ra[ROUNDS];
    for (int b = 0; b < ROUNDS; b++) {
        for (int k = 0; k < 2; k++) {
            int f = (k + b) % 2;
            line_barrier(w, rank, size);
            double t0 = MPI_Wtime();
            if (f) for (long i = 0; i < per; i++) line_barrier(w, rank, size);
            else for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_WORLD);
            (f ? fl : hb)[b] = (MPI_Wtime() - t0) * 1e9 / per;
        }
        line_barrier(w, rank, size);
        double t0 = MPI_Wtime();
        for (long i = 0; i < per; i++) MPI_Barrier(MPI_COMM_SELF);
        se[b] = (MPI_Wtime() - t0) * 1e9 / per;
        ra[b] = hb[b] / fl[b];
    }
    if (rank == 0) printf("barrier %.1f floor %.1f ratio %.2f self %.2f\n", med(hb, ROUNDS), med(fl, ROUNDS), med(ra, ROUNDS), med(se, ROUNDS));
    MPI_Win_free(&win);
    MPI_Finalize();
}
