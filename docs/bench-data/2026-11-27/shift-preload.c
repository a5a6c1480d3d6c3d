/* Moves everything a rank maps after its start (the MCA components dlopen'ed by MPI_Init,
 * hwbarr among them, and the shared segments) by a rank-dependent stretch of address space:
 * with SHIFT_ON=1 its constructor maps 1024 + 67 * rank + 13 pages, inaccessible, first.
 * With address-space randomization off (kernel.randomize_va_space 0) that leaves the program,
 * libmpi and libc at the same addresses in every rank and moves only what comes after.
 * Build: cc -O2 -shared -fPIC shift-preload.c -o libshift.so
 * Use:   mpirun ... -x LD_PRELOAD=<dir>/libshift.so -x SHIFT_ON=1 ./program */
#include <stdlib.h>
#include <sys/mman.h>
__attribute__((constructor)) static void shift(void) {
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    const char *on = getenv("SHIFT_ON");
    if (!r || !on || *on != '1') return;
    long pages = atol(r) * 67 + 13;
    mmap(NULL, pages * 4096 + 4096 * 1024, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}
