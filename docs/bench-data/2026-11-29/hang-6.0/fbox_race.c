/* Open MPI 6.0.0a1's shared-memory fast boxes under MPI_THREAD_MULTIPLE,
 * without hwbarr: 2 ranks, T threads per rank (argv[1], default 4), each on
 * its own dup of MPI_COMM_WORLD made by the main thread, ping-pong N times
 * (argv[2], default 1000) with 16-byte messages, so that the threads of a
 * rank send to the same peer at once. A watchdog ends the run with exit code
 * 3 and "STUCK" when no round trip ended in 5 s: a lost message, not a slow
 * run (an oversubscribed run may take seconds, but never stops). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int iters, rank;
static long done_total;

static void *watchdog(void *arg)
{
    long last = -1;
    (void) arg;
    for (;;) {
        sleep(5);
        long now = __atomic_load_n(&done_total, __ATOMIC_RELAXED);
        if (now == last) {
            fprintf(stderr, "rank %d STUCK after %ld round trips\n", rank, now);
            fflush(stderr);
            _exit(3);
        }
        last = now;
    }
    return NULL;
}

static void *pingpong(void *arg)
{
    MPI_Comm c = *(MPI_Comm *) arg;
    long buf[2] = {0, 0};
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, 2, MPI_LONG, 1, 7, c);
            MPI_Recv(buf, 2, MPI_LONG, 1, 7, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 2, MPI_LONG, 0, 7, c, MPI_STATUS_IGNORE);
            MPI_Send(buf, 2, MPI_LONG, 0, 7, c);
        }
        __atomic_fetch_add(&done_total, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, t = argc > 1 ? atoi(argv[1]) : 4;
    MPI_Comm comms[64];
    pthread_t threads[64], wd;
    iters = argc > 2 ? atoi(argv[2]) : 1000;
    if (t < 1 || t > 64) {
        fprintf(stderr, "1 to 64 threads\n");
        return 2;
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "no MPI_THREAD_MULTIPLE\n");
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int k = 0; k < t; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]);
    }
    pthread_create(&wd, NULL, watchdog, NULL);
    pthread_detach(wd);
    for (int k = 0; k < t; k++) {
        pthread_create(&threads[k], NULL, pingpong, &comms[k]);
    }
    for (int k = 0; k < t; k++) {
        pthread_join(threads[k], NULL);
    }
    for (int k = 0; k < t; k++) {
        MPI_Comm_free(&comms[k]);
    }
    if (rank == 0) {
        printf("ok %d threads x %d round trips\n", t, iters);
    }
    MPI_Finalize();
    return 0;
}
