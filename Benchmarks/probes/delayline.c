// A packet delay line for kernels without netem: two TUN devices, one in this process's network
// namespace and one in a named namespace, joined by a program that holds every packet for a fixed
// delay before passing it on. Both TCP stacks are real; only the wire is this program.
//
//   delayline NETNS DELAY_US          (prints "ready" once both devices exist, runs until killed)
//
// Creates tun "dl-host" here and "dl-peer" inside /run/netns/NETNS; the caller gives them
// addresses. A constant delay keeps each direction in order, so each is a FIFO.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

enum { SLOTS = 65536, PACKET = 2048 };

struct queue {
    unsigned char (*data)[PACKET];
    int length[SLOTS];
    uint64_t due[SLOTS];
    unsigned head, tail;  // head: next to send; tail: next free
    unsigned long dropped;
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int open_tun(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { perror("open /dev/net/tun"); exit(1); }
    struct ifreq request;
    memset(&request, 0, sizeof request);
    request.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &request) < 0) { perror("TUNSETIFF"); exit(1); }
    return fd;
}

// Reads every packet waiting on `from` into `queue`, due `delay` from now. A full queue drops,
// as a full router buffer would; the count is printed at exit.
static void take(int from, struct queue *queue, uint64_t delay) {
    for (int budget = 512; budget > 0; budget--) {  // bounded, so the other direction is served
        unsigned slot = queue->tail % SLOTS;
        if (queue->tail - queue->head == SLOTS) {
            unsigned char scratch[PACKET];
            if (read(from, scratch, sizeof scratch) < 0) return;
            queue->dropped++;
            continue;
        }
        ssize_t n = read(from, queue->data[slot], PACKET);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;  // EAGAIN: drained
        }
        queue->length[slot] = (int)n;
        queue->due[slot] = now_ns() + delay;
        queue->tail++;
    }
}

// Writes every packet whose time has come to `to`; returns the next due time, or 0.
static uint64_t give(int to, struct queue *queue, uint64_t now) {
    while (queue->head != queue->tail) {
        unsigned slot = queue->head % SLOTS;
        if (queue->due[slot] > now) return queue->due[slot];
        if (write(to, queue->data[slot], (size_t)queue->length[slot]) < 0 && errno == EINTR) continue;
        queue->head++;  // a write the device refuses is a lost packet, as on a wire
    }
    return 0;
}

static volatile sig_atomic_t stopping;
static void stop(int signal) { (void)signal; stopping = 1; }

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: delayline NETNS DELAY_US\n"); return 2; }
    uint64_t delay = strtoull(argv[2], NULL, 10) * 1000u;
    int host = open_tun("dl-host");
    char path[256];
    snprintf(path, sizeof path, "/run/netns/%s", argv[1]);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) { perror(path); return 1; }
    int peer = open_tun("dl-peer");
    struct queue *out = calloc(1, sizeof *out), *back = calloc(1, sizeof *back);
    out->data = malloc((size_t)SLOTS * PACKET);
    back->data = malloc((size_t)SLOTS * PACKET);
    if (!out->data || !back->data) { perror("malloc"); return 1; }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    printf("ready\n");
    fflush(stdout);
    struct pollfd fds[2] = {{.fd = host, .events = POLLIN}, {.fd = peer, .events = POLLIN}};
    while (!stopping) {
        uint64_t now = now_ns();
        uint64_t next1 = give(peer, out, now), next2 = give(host, back, now);
        uint64_t next = next1 && next2 ? (next1 < next2 ? next1 : next2) : (next1 ? next1 : next2);
        struct timespec wait = {1, 0};
        if (next) {
            uint64_t left = next > now ? next - now : 0;
            wait.tv_sec = (time_t)(left / 1000000000u);
            wait.tv_nsec = (long)(left % 1000000000u);
        }
        if (ppoll(fds, 2, &wait, NULL) < 0 && errno != EINTR) { perror("ppoll"); return 1; }
        if (fds[0].revents & POLLIN) take(host, out, delay);
        if (fds[1].revents & POLLIN) take(peer, back, delay);
    }
    fprintf(stderr, "delayline: dropped %lu out, %lu back\n", out->dropped, back->dropped);
    return 0;
}
