// What sending a checked disk hit costs the sending thread, four ways, over loopback TCP to a
// thread that drains the socket: 0 pread into a fresh buffer, CRC, write (what Larder does);
// 1 the same into a buffer kept from send to send; 2 splice the file into a pipe (page
// references), tee it into a second pipe and read that one to check exactly the pipe's bytes,
// splice the pipe into the socket; 3 the same but checking with a pread of the file (the pages
// the pipe pins). Needs Larder's CRC (Sources/CChecksum).
// cc -O2 -ISources/CChecksum/include -o splice-send Benchmarks/probes/splice-send.c Sources/CChecksum/Crc64.c -lpthread
// taskset -c 1 ./splice-send SIZE MODE REPS /dev/shm/probe.dat
#define _GNU_SOURCE
#include "CChecksum.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void *drain(void *listener) {
    int connection = accept(*(int *)listener, 0, 0);
    char *buffer = malloc(1 << 20);
    while (read(connection, buffer, 1 << 20) > 0) {}
    return 0;
}

static double threadCPU(void) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

static void all(ssize_t done, size_t wanted) {
    if (done != (ssize_t)wanted) abort();
}

int main(int argc, char **argv) {
    if (argc != 5) return fprintf(stderr, "usage: splice-send SIZE MODE(0-3) REPS FILE\n"), 2;
    size_t size = strtoul(argv[1], 0, 10);
    int mode = atoi(argv[2]), reps = atoi(argv[3]);
    int file = open(argv[4], O_RDWR | O_CREAT | O_TRUNC, 0600);
    char *data = malloc(size), *buffer = malloc(size);
    for (size_t i = 0; i < size; i++) data[i] = (char)(i * 7);
    all(write(file, data, size), size);
    uint64_t expected = larder_crc64(0, data, size);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t length = sizeof address;
    bind(listener, (void *)&address, length);
    listen(listener, 1);
    getsockname(listener, (void *)&address, &length);
    pthread_t drainer;
    pthread_create(&drainer, 0, drain, &listener);
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sock, (void *)&address, length) != 0) return perror("connect"), 1;
    int pages[2], copy[2];
    if (pipe(pages) != 0 || pipe(copy) != 0) return perror("pipe"), 1;
    fcntl(pages[1], F_SETPIPE_SZ, 1 << 20);
    fcntl(copy[1], F_SETPIPE_SZ, 1 << 20);
    double start = threadCPU();
    for (int rep = 0; rep < reps; rep++) {
        if (mode <= 1) {
            char *into = mode == 0 ? malloc(size) : buffer;
            all(pread(file, into, size, 0), size);
            if (larder_crc64(0, into, size) != expected) abort();
            for (size_t sent = 0; sent < size;) {
                ssize_t n = write(sock, into + sent, size - sent);
                if (n <= 0) abort();
                sent += n;
            }
            if (mode == 0) free(into);
            continue;
        }
        loff_t offset = 0;
        for (size_t moved = 0; moved < size;) {
            ssize_t n = splice(file, &offset, pages[1], 0, size - moved, SPLICE_F_MOVE);
            if (n <= 0) abort();
            moved += n;
        }
        if (mode == 2) {
            all(tee(pages[0], copy[1], size, 0), size);
            for (size_t got = 0; got < size;) {
                ssize_t n = read(copy[0], buffer + got, size - got);
                if (n <= 0) abort();
                got += n;
            }
        } else {
            all(pread(file, buffer, size, 0), size);
        }
        if (larder_crc64(0, buffer, size) != expected) abort();
        for (size_t sent = 0; sent < size;) {
            ssize_t n = splice(pages[0], 0, sock, 0, size - sent, SPLICE_F_MOVE);
            if (n <= 0) abort();
            sent += n;
        }
    }
    printf("%zu bytes, mode %d: %.1f us of the sending thread's CPU a send\n", size, mode, (threadCPU() - start) / reps * 1e6);
    unlink(argv[4]);
    return 0;
}
