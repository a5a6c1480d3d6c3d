#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int iters = atoi(argv[1]), rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < iters / 10; i++) MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
    t = (MPI_Wtime() - t) / iters * 1e6;
    double mx; MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("ranks %d: %.2f us per barrier\n", size, mx);
    MPI_Finalize();
    return 0;
}
