#define _GNU_SOURCE
#include "CLarderSystem.h"
#include <sys/mman.h>
#include <unistd.h>
#include <signal.h>

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
