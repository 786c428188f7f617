#define _GNU_SOURCE
#include "CLarderSystem.h"
#include <sys/mman.h>
#include <unistd.h>
#include <signal.h>
#include <sys/syscall.h>

int larder_available_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return 1;
    }
    int count = CPU_COUNT(&set);
    return count > 0 ? count : 1;
}

int larder_accept4(int fd, struct sockaddr *address, socklen_t *length) {
    return accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int larder_sigrtmin(void) { return SIGRTMIN; }
int larder_sigrtmax(void) { return SIGRTMAX; }

int larder_dup3_cloexec(int source, int target) {
    return dup3(source, target, O_CLOEXEC);
}

int larder_memfd_create(const char *name) {
    return memfd_create(name, MFD_CLOEXEC);
}

int larder_set_thread_name(pthread_t thread, const char *name) {
    return pthread_setname_np(thread, name);
}

ssize_t larder_pread_nowait(int fd, void *buffer, size_t count, off_t offset) {
    struct iovec vector = {buffer, count};
    return preadv2(fd, &vector, 1, offset, RWF_NOWAIT);
}

int larder_cached_pages(int fd, uint64_t offset, uint64_t length, uint64_t *cached) {
    // cachestat(2), Linux 6.5: glibc has no wrapper. Its number is the same on every
    // architecture (new calls are numbered once for all).
    struct {
        uint64_t offset, length;
    } range = {offset, length};
    struct {
        uint64_t cache, dirty, writeback, evicted, recentlyEvicted;
    } stats;
    if (syscall(451, fd, &range, &stats, 0) != 0) {
        return -1;
    }
    *cached = stats.cache;
    return 0;
}
