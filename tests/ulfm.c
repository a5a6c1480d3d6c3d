/* A fault-tolerant MPI program (ULFM: Open MPI 5.0 and later, run with
 * `mpirun --with-ft ulfm`), for tests/ulfm.rs.
 *
 *   ulfm <kill|node|revoke> <barrier|ibarrier|persistent> <rounds>
 *
 * Every rank runs <rounds> barriers of each kind on a duplicate of
 * MPI_COMM_WORLD. Then the last rank SIGKILLs itself (kill), or every rank
 * on the last rank's node does (node: its leader and its shared memory
 * gone at once; the launcher's daemon there lives, for PRRTE ends the
 * whole job when it loses one), or rank 0 calls MPIX_Comm_revoke
 * (revoke), 300 ms after the others entered a barrier of the kind named,
 * where they must get MPI_ERR_PROC_FAILED (kill, node; MPI_ERR_REVOKED if
 * a survivor that learned first has revoked already) or MPI_ERR_REVOKED
 * (revoke) rather than wait for ever. The survivors then revoke,
 * shrink, and run <rounds> barriers of each kind on the shrunk
 * communicator, which must all succeed. Prints one OK line per survivor;
 * exits 1 at the first surprise. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;

static void fail(const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, s, &len);
    printf("rank %d: FAILED: %s: %d (%s)\n", rank, what, rc, s);
    fflush(stdout);
    exit(1);
}

/* One barrier of `kind` on `comm`: its code. */
static int barrier(MPI_Comm comm, const char *kind, MPI_Request *persistent)
{
    MPI_Request req;
    int rc;
    if (0 == strcmp(kind, "barrier")) {
        return MPI_Barrier(comm);
    }
    if (0 == strcmp(kind, "ibarrier")) {
        rc = MPI_Ibarrier(comm, &req);
        return MPI_SUCCESS != rc ? rc : MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    rc = MPI_Start(persistent);
    return MPI_SUCCESS != rc ? rc : MPI_Wait(persistent, MPI_STATUS_IGNORE);
}

static const char *kinds[] = {"barrier", "ibarrier", "persistent"};

/* <rounds> barriers of every kind on `comm`, all successful. */
static void rounds_of_all(MPI_Comm comm, int rounds, const char *where)
{
    MPI_Request p;
    int rc = MPI_Barrier_init(comm, MPI_INFO_NULL, &p);
    if (MPI_SUCCESS != rc) {
        fail("MPI_Barrier_init", rc);
    }
    for (int i = 0; i < rounds; i++) {
        for (int k = 0; k < 3; k++) {
            rc = barrier(comm, kinds[k], &p);
            if (MPI_SUCCESS != rc) {
                char what[128];
                snprintf(what, sizeof what, "%s %d on %s", kinds[k], i, where);
                fail(what, rc);
            }
        }
    }
    MPI_Request_free(&p);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ulfm <kill|node|revoke> <barrier|ibarrier|persistent> <rounds>\n");
        return 2;
    }
    /* Open MPI 5.0.10's TCP transport sends with writev, so a message to a
     * dead peer's socket (MPIX_Comm_revoke's broadcast) raises SIGPIPE;
     * 6.0 sends with MSG_NOSIGNAL. As a fault-tolerant program must. */
    signal(SIGPIPE, SIG_IGN);
    const char *how = argv[1], *kind = argv[2];
    int rounds = atoi(argv[3]), size, rc;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm, shrunk;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    rounds_of_all(comm, rounds, "the duplicate");

    /* The ranks that fail: the last one, or every one on its node. */
    int node = 0 == strcmp(how, "node"), kill_me = node || 0 == strcmp(how, "kill");
    char host[MPI_MAX_PROCESSOR_NAME] = "", *hosts = calloc(size, MPI_MAX_PROCESSOR_NAME);
    int len = 0, victims = 0;
    if (NULL == hosts) {
        fail("calloc of the host names", MPI_ERR_NO_MEM);
    }
    MPI_Get_processor_name(host, &len);
    rc = MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                       MPI_COMM_WORLD);
    if (MPI_SUCCESS != rc) {
        fail("MPI_Allgather of the host names", rc);
    }
    const char *last_host = hosts + (size_t)(size - 1) * MPI_MAX_PROCESSOR_NAME;
    int actor = !kill_me && rank == 0;
    for (int r = 0; r < size; r++) {
        int victim = kill_me && (r == size - 1 || (node && 0 == strcmp(hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, last_host)));
        victims += victim;
        actor |= victim && r == rank;
    }
    if (node && victims == size) {
        printf("rank %d: FAILED: a lost node needs another node that survives it (all %d ranks on %s)\n", rank,
               size, host);
        fflush(stdout);
        exit(1);
    }
    free(hosts);
    int expected = kill_me ? MPI_ERR_PROC_FAILED : MPI_ERR_REVOKED;
    double waited = 0;
    if (actor) {
        usleep(300000);
        if (kill_me) {
            raise(SIGKILL);
        }
        rc = MPIX_Comm_revoke(comm);
        if (MPI_SUCCESS != rc) {
            fail("MPIX_Comm_revoke", rc);
        }
    } else {
        MPI_Request p;
        MPI_Barrier_init(comm, MPI_INFO_NULL, &p);
        double t0 = MPI_Wtime();
        rc = barrier(comm, kind, &p);
        waited = MPI_Wtime() - t0;
        /* In hwbarr's barrier when it came, not turned away at its entry. */
        if (waited < 0.1) {
            printf("rank %d: FAILED: the barrier ended after %.1f ms, before the failure came\n", rank, waited * 1e3);
            fflush(stdout);
            exit(1);
        }
        int class = MPI_SUCCESS;
        MPI_Error_class(rc, &class);
        /* A peer that learned of the failure first may have revoked. */
        if (class != expected && !(kill_me && MPI_ERR_REVOKED == class)) {
            fail("the barrier the failure interrupts", rc);
        }
        MPI_Request_free(&p);
        /* Every survivor revokes: none waits in an operation on `comm`. */
        MPIX_Comm_revoke(comm);
    }
    rc = MPIX_Comm_shrink(comm, &shrunk);
    if (MPI_SUCCESS != rc) {
        fail("MPIX_Comm_shrink", rc);
    }
    int shrunk_size;
    MPI_Comm_size(shrunk, &shrunk_size);
    if (shrunk_size != size - victims) {
        fail("the shrunk communicator's size", shrunk_size);
    }
    rounds_of_all(shrunk, rounds, "the shrunk communicator");
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&comm);
    /* The OK line: every barrier on both communicators done. */
    printf("rank %d: ulfm %s %s OK (interrupted after %.0f ms; %d barriers of each kind on %d ranks)\n", rank, how,
           kind, waited * 1e3, rounds, shrunk_size);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
