// What a page of anonymous memory costs the first time it is written, on this host: maps SIZE
// MiB, writes one byte per 4 KiB page, prints ns per page, then the same again (warm); unmaps,
// waits and repeats (a guest whose balloon reports freed pages hands them back to the host).
// Usage: first-touch [MIB=512] [ROUNDS=3] [PAUSE_S=5] [HUGE=0 (1: MADV_HUGEPAGE)]
// Build: cc -O2 -o first-touch first-touch.c
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char **argv) {
    size_t mib = argc > 1 ? atol(argv[1]) : 512;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int pause_s = argc > 3 ? atoi(argv[3]) : 5;
    int huge = argc > 4 ? atoi(argv[4]) : 0;
    size_t size = mib << 20;
    for (int r = 0; r < rounds; r++) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        if (huge) madvise(p, size, MADV_HUGEPAGE);
        double t0 = now();
        for (size_t i = 0; i < size; i += 4096) p[i] = 1;
        double t1 = now();
        double t2 = now();
        for (size_t i = 0; i < size; i += 4096) p[i] = 2;
        double t3 = now();
        printf("round %d: first touch %.0f ns per 4 KiB page, second %.0f ns\n", r, (t1 - t0) / (size / 4096), (t3 - t2) / (size / 4096));
        munmap(p, size);
        sleep(pause_s);
    }
    return 0;
}
