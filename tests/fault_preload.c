/* Fault injection for hwbarr's integration tests (tests/device_refused.rs,
 * tests/p2p_faults.rs), loaded into the MPI ranks with
 * `mpirun -x LD_PRELOAD=<this .so>`. The tests
 * build it with `cc` into the target directory at test time.
 *
 *   HWBARR_FAULT        memfd  - memfd_create fails with ENOSYS
 *                       mmap   - mmap of an hwbarr memfd fails with EPERM
 *                       nodump - the rank is not dumpable (prctl), so peers
 *                                cannot open its /proc/<pid>/fd; every rank
 *                                drops CAP_SYS_PTRACE, which lets root
 *                                bypass that check
 *   HWBARR_FAULT_RANKS  "all" (default) or a comma list of world ranks
 *                       (OMPI_COMM_WORLD_RANK) where the fault applies
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

static int faulty(const char *kind)
{
    const char *f = getenv("HWBARR_FAULT");
    if (f == NULL || strcmp(f, kind) != 0) {
        return 0;
    }
    const char *ranks = getenv("HWBARR_FAULT_RANKS");
    const char *me = getenv("OMPI_COMM_WORLD_RANK");
    if (ranks == NULL || strcmp(ranks, "all") == 0) {
        return 1;
    }
    if (me == NULL) {
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ranks);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, me) == 0) {
            return 1;
        }
    }
    return 0;
}

int memfd_create(const char *name, unsigned int flags)
{
    if (faulty("memfd")) {
        errno = ENOSYS;
        return -1;
    }
    return (int)syscall(SYS_memfd_create, name, flags);
}

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

/* Whether fd is one of hwbarr's memfds ("/memfd:hwbarr (deleted)"). */
static int hwbarr_fd(int fd)
{
    if (fd < 0) {
        return 0;
    }
    char path[64], target[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = 0;
    return strncmp(target, "/memfd:hwbarr", 13) == 0;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static mmap_fn real;
    if (real == NULL) {
        real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
    }
    if ((flags & MAP_SHARED) && hwbarr_fd(fd) && faulty("mmap")) {
        errno = EPERM;
        return MAP_FAILED;
    }
    return real(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}

__attribute__((constructor)) static void setup(void)
{
    const char *f = getenv("HWBARR_FAULT");
    if (f == NULL || strcmp(f, "nodump") != 0) {
        return;
    }
    /* Root may open any process's /proc/<pid>/fd with CAP_SYS_PTRACE:
     * drop it from the effective set so the kernel's check applies. */
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) == 0) {
        d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
        if (syscall(SYS_capset, &h, d) != 0) {
            perror("fault_preload: capset");
        }
    }
    if (faulty("nodump") && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        perror("fault_preload: prctl");
    }
}
