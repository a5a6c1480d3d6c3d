/* The first barrier's time on a new communicator (where hwbarr sets up its
 * device, and on the line barrier tries its candidate lines) against the
 * second's: COMMS duplicates of MPI_COMM_WORLD, each timed on rank 0 from
 * an MPI_Barrier on MPI_COMM_WORLD (untimed) to the end of the new one's
 * first MPI_Barrier, then its second. Prints first_us=<median> second_us=<median>.
 * Build: mpicc -O2 first-barrier.c -o first-barrier */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define COMMS 40

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double first[COMMS], second[COMMS];
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < COMMS; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Barrier(c);
        double t1 = MPI_Wtime();
        MPI_Barrier(c);
        double t2 = MPI_Wtime();
        first[i] = (t1 - t0) * 1e6;
        second[i] = (t2 - t1) * 1e6;
        MPI_Comm_free(&c);
    }
    qsort(first, COMMS, sizeof(double), cmp);
    qsort(second, COMMS, sizeof(double), cmp);
    if (rank == 0) printf("first_us=%.1f second_us=%.2f\n", first[COMMS / 2], second[COMMS / 2]);
    MPI_Finalize();
    return 0;
}
