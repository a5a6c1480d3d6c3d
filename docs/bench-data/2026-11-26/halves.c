#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* Even/odd halves each run barriers on their own communicator; each rank computes `work` us between barriers. */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm half; MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
    int iters = atoi(argv[1]); double work = atof(argv[2]) * 1e-6;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) { double s = MPI_Wtime(); while (MPI_Wtime() - s < work) ; MPI_Barrier(half); }
    t = (MPI_Wtime() - t) / iters * 1e6;
    double mx; MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (r == 0) printf("%.2f us per iteration\n", mx);
    MPI_Finalize();
}
