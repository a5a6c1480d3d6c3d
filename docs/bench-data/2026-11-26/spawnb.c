/* Spawn to N total ranks on one node, merge, time barriers on the merged comm. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent, inter, merged;
    MPI_Comm_get_parent(&parent);
    int nchild = atoi(argv[1]);
    int iters = atoi(argv[2]);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_spawn(argv[0], argv + 1, nchild, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    } else inter = parent;
    MPI_Intercomm_merge(inter, parent != MPI_COMM_NULL, &merged);
    int rank, size; MPI_Comm_rank(merged, &rank); MPI_Comm_size(merged, &size);
    for (int i = 0; i < iters / 10; i++) MPI_Barrier(merged);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Barrier(merged);
    t = (MPI_Wtime() - t) / iters * 1e6;
    double mx; MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, merged);
    if (rank == 0) printf("ranks %d: %.2f us per barrier\n", size, mx);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return 0;
}
