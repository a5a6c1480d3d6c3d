/* Rank 1 computes `us` microseconds (a clock loop) before each of N barriers; rank 0 waits.
 * Build: mpicc -O2 shared-core-imbalance.c -o imbal
 * Run:   mpirun -np 2 --bind-to core ./imbal 2000 300 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static double spin_us(double us){double t=MPI_Wtime();volatile double x=0;while((MPI_Wtime()-t)*1e6<us)x+=1;return x;}
int main(int c, char **v) {
    MPI_Init(&c, &v);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    long n = c > 1 ? atol(v[1]) : 1000; double us = c > 2 ? atof(v[2]) : 500;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) { if (r == 1) spin_us(us); MPI_Barrier(MPI_COMM_WORLD); }
    double t = MPI_Wtime() - t0;
    if (r == 0) printf("%.2f us per iteration (work %.0f us on rank 1)\n", t / n * 1e6, us);
    MPI_Finalize();
}
