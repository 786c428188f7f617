// Does a proxy gain when its code sits on 2 MiB pages (fewer iTLB misses on a miss's ~140k
// instructions, each walk costlier under nested paging)? An LD_PRELOAD library: before main,
// the 2 MiB-aligned part of the executable's text is copied into anonymous memory advised
// MADV_HUGEPAGE and put back at the same address (this kernel has no READ_ONLY_THP_FOR_FS, so
// file-backed text stays on 4 KiB pages). It prints how much moved; AnonHugePages in
// /proc/PID/smaps shows whether the kernel gave huge pages. perf cannot name the moved code.
// Build: cc -O2 -shared -fPIC -o hugetext.so hugetext.c
// Use:   a wrapper script `LD_PRELOAD=/path/hugetext.so exec BIN "$@"` as cpu-per-request.sh's BIN.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE (2UL << 20)

// Runs from this library's text, never from the range it replaces.
static void remap(uintptr_t start, uintptr_t end) {
    uintptr_t first = (start + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), last = end & ~(HUGE_PAGE - 1);
    if (last <= first) return;
    size_t size = last - first;
    void *copy = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) return;
    memcpy(copy, (void *)first, size);
    void *text = mmap((void *)first, size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (text == MAP_FAILED) {
        perror("hugetext: mmap");
        abort();
    }
    madvise(text, size, MADV_HUGEPAGE);
    memcpy(text, copy, size);
    mprotect(text, size, PROT_READ | PROT_EXEC);
    munmap(copy, size);
    fprintf(stderr, "hugetext: %zu MiB of text moved to %p\n", size >> 20, text);
}

__attribute__((constructor)) static void start(void) {
    char exe[4096];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length <= 0) return;
    exe[length] = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[8192];
    unsigned long low = 0, high = 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long a, b;
        char permissions[8], path[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095s", &a, &b, permissions, path) >= 3
            && strcmp(permissions, "r-xp") == 0 && strcmp(path, exe) == 0) {
            low = a;
            high = b;
            break;
        }
    }
    fclose(maps);
    if (low) remap(low, high);
}
