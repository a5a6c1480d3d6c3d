/* Two separate mpiruns: "server" opens a port and publishes it, "client" looks it up;
 * connect/accept, merge, time barriers on the merged communicator, check with a counter. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int server = strcmp(argv[1], "server") == 0, iters = atoi(argv[2]);
    char port[MPI_MAX_PORT_NAME];
    MPI_Comm inter, merged;
    if (server) {
        int r; MPI_Comm_rank(MPI_COMM_WORLD, &r);
        if (r == 0) { MPI_Open_port(MPI_INFO_NULL, port); MPI_Publish_name("hwbarr-ca", MPI_INFO_NULL, port); }
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    } else {
        MPI_Lookup_name("hwbarr-ca", MPI_INFO_NULL, port);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    }
    MPI_Intercomm_merge(inter, !server, &merged);
    int rank, size; MPI_Comm_rank(merged, &rank); MPI_Comm_size(merged, &size);
    /* A consistency print only ("bad" cannot be non-zero: collectives run in
       order); barrier semantics are checked by the test suite, not here. */
    int bad = 0;
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(merged);
        if (i % 100 == 0) { int mn, mx; MPI_Allreduce(&i, &mn, 1, MPI_INT, MPI_MIN, merged); MPI_Allreduce(&i, &mx, 1, MPI_INT, MPI_MAX, merged); bad += mn != mx; }
    }
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Barrier(merged);
    t = (MPI_Wtime() - t) / iters * 1e6;
    printf("%s rank %d of %d: %.2f us per barrier, bad %d\n", server ? "server" : "client", rank, size, t, bad);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    if (server) { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); if (r == 0) { MPI_Unpublish_name("hwbarr-ca", MPI_INFO_NULL, port); MPI_Close_port(port); } }
    MPI_Finalize();
    return 0;
}
