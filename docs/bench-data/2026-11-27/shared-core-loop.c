/* N blocking barriers after one, rank 0 prints the microseconds per barrier.
 * Build: mpicc -O2 shared-core-loop.c -o loopb
 * Run:   taskset -c 0 mpirun -np 2 --oversubscribe --bind-to none ./loopb 20000 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int c, char **v) {
    MPI_Init(&c, &v);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    long n = c > 1 ? atol(v[1]) : 1000;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    if (r == 0) printf("%.2f us per barrier\n", t / n * 1e6);
    MPI_Finalize();
}
