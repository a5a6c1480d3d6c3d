#include <mpi.h>
#if OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* nb <ibarrier|persistent|blocking> <iters>: µs per barrier (rank 0) */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *m = argc > 1 ? argv[1] : "ibarrier";
    long n = argc > 2 ? atol(argv[2]) : 1000;
    MPI_Request r;
#if OMPI_MAJOR_VERSION < 5
#define BI MPIX_Barrier_init
#else
#define BI MPI_Barrier_init
#endif
    int pers = !strcmp(m, "persistent");
    double imb = getenv("IMB") ? atof(getenv("IMB")) * 1e-6 : 0;
    if (pers) BI(MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    for (int k = 0; k < 2; k++) {
        long it = k ? n : n / 10 + 1;
        if (!getenv("NOBAR")) MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (long i = 0; i < it; i++) {
            if (imb > 0 && rank == 1) { double s = MPI_Wtime(); while (MPI_Wtime() - s < imb) ; }
            if (pers) { MPI_Start(&r); MPI_Wait(&r, MPI_STATUS_IGNORE); }
            else if (!strcmp(m, "ibarrier")) { MPI_Ibarrier(MPI_COMM_WORLD, &r); MPI_Wait(&r, MPI_STATUS_IGNORE); }
            else MPI_Barrier(MPI_COMM_WORLD);
        }
        t = MPI_Wtime() - t;
        if (k && rank == 0) printf("%s %.3f us\n", m, t / n * 1e6);
    }
    if (pers) MPI_Request_free(&r);
    MPI_Finalize();
}
