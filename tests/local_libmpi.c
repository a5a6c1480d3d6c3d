/* A program that loads Open MPI the way Python does (ctypes, the mpi4py
 * wheel): dlopen of libmpi into a local scope, so that none of Open MPI's
 * symbols is visible to libraries opened later, Open MPI's components
 * included. Not linked against any MPI; built by tests/install_and_select.rs
 * with `cc` at test time.
 *
 *   local_libmpi <path of libmpi> <barriers>
 *
 * Calls MPI_Init, MPI_Barrier on MPI_COMM_WORLD <barriers> times and
 * MPI_Finalize, and prints "local-scope OK" when all returned success.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <libmpi> <barriers>\n", argv[0]);
        return 2;
    }
    void *mpi = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!mpi) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    int (*init)(int *, char ***) = (int (*)(int *, char ***))dlsym(mpi, "MPI_Init");
    int (*barrier)(void *) = (int (*)(void *))dlsym(mpi, "MPI_Barrier");
    int (*finalize)(void) = (int (*)(void))dlsym(mpi, "MPI_Finalize");
    /* Open MPI's MPI_COMM_WORLD is the address of this object. */
    void *world = dlsym(mpi, "ompi_mpi_comm_world");
    if (!init || !barrier || !finalize || !world) {
        fprintf(stderr, "%s lacks MPI_Init, MPI_Barrier, MPI_Finalize or ompi_mpi_comm_world\n", argv[1]);
        return 1;
    }
    if (dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world") || dlsym(RTLD_DEFAULT, "opal_progress")) {
        fprintf(stderr, "Open MPI's symbols are in the global scope: this run proves nothing\n");
        return 1;
    }
    int n = atoi(argv[2]);
    if (init(&argc, &argv) != 0)
        return 1;
    for (int i = 0; i < n; i++)
        if (barrier(world) != 0)
            return 1;
    if (finalize() != 0)
        return 1;
    printf("local-scope OK\n");
    return 0;
}
