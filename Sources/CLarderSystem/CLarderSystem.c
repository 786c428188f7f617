#define _GNU_SOURCE
#include "CLarderSystem.h"
#include <sys/mman.h>
#include <sys/vfs.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

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
    return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

int larder_unsent_bytes(int fd, int *bytes) {
    return ioctl(fd, SIOCOUTQ, bytes);
}

int larder_fs_magic(int fd, long *magic) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) {
        return -1;
    }
    *magic = (long)info.f_type;
    return 0;
}

int larder_seal_memfd(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
}

intptr_t larder_map_shared_readonly(int fd, size_t length) {
    void *address = mmap(NULL, length, PROT_READ, MAP_SHARED, fd, 0);
    return address == MAP_FAILED ? -1 : (intptr_t)address;
}

int larder_unmap(intptr_t address, size_t length) {
    return munmap((void *)address, length);
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
