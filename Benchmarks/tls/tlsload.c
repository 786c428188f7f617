// tlsload: a load client for HTTPS through a forward proxy that intercepts TLS (Larder's
// tls.intercept, Squid's ssl-bump). wrk cannot send CONNECT, so this does what a real client
// does: CONNECT host:port, a TLS handshake that verifies the proxy's certificate for `host`
// against --ca, then HTTP/1.1 GETs on the session.
//
//   tlsload --proxy 127.0.0.1:3128 --host localhost --port 8443 --ca ca.pem --path /obj
//           [--connections 8] [--seconds 5] [--new-connections]
//
// Keep-alive mode: each connection sends GETs back to back for the whole run. With
// --new-connections every request gets a connection (CONNECT, full handshake: no session
// resumption, as a fresh pip or curl process has none) of its own. Prints one JSON line:
// requests, handshakes, errors, body bytes, seconds, and the rates.
//
// Build: cc -O2 -o tlsload tlsload.c -lssl -lcrypto -lpthread
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *proxy_host = "127.0.0.1";
static int proxy_port = 3128;
static const char *host = "localhost";
static int port = 443;
static const char *ca_file;
static const char *path = "/";
static int connections = 8;
static double seconds = 5;
static int new_connections = 0;

static SSL_CTX *context;
static double deadline;
static atomic_long requests, handshakes, errors, body_bytes;
static atomic_int first_error_reported;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report_error(const char *what) {
    atomic_fetch_add(&errors, 1);
    if (atomic_exchange(&first_error_reported, 1) == 0) {
        unsigned long code = ERR_peek_error();
        fprintf(stderr, "tlsload: first error: %s%s%s\n", what, code ? ": " : "", code ? ERR_error_string(code, NULL) : "");
    }
    ERR_clear_error();
}

/// A connection through the proxy: the socket, the session, and a read buffer.
struct link {
    int fd;
    SSL *ssl;
    char buffer[256 * 1024];
    size_t start, end;
};

/// Reads from the socket (plain, before the session exists) into the buffer.
static int fill_plain(struct link *link) {
    if (link->end == sizeof link->buffer) return -1;
    ssize_t count = read(link->fd, link->buffer + link->end, sizeof link->buffer - link->end);
    if (count <= 0) return -1;
    link->end += (size_t)count;
    return 0;
}

static int fill_tls(struct link *link) {
    if (link->start == link->end) link->start = link->end = 0;
    if (link->end == sizeof link->buffer) {
        memmove(link->buffer, link->buffer + link->start, link->end - link->start);
        link->end -= link->start;
        link->start = 0;
    }
    size_t count = 0;
    if (SSL_read_ex(link->ssl, link->buffer + link->end, sizeof link->buffer - link->end, &count) != 1) return -1;
    link->end += count;
    return 0;
}

/// The end of a head in the buffer, or NULL.
static char *head_end(struct link *link) {
    return memmem(link->buffer + link->start, link->end - link->start, "\r\n\r\n", 4);
}

static void close_link(struct link *link) {
    if (link->ssl) SSL_free(link->ssl);
    if (link->fd >= 0) close(link->fd);
    link->ssl = NULL;
    link->fd = -1;
    link->start = link->end = 0;
}

/// TCP to the proxy, CONNECT, then the TLS handshake. Returns 0 when the session is open.
static int open_link(struct link *link) {
    link->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(link->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)proxy_port)};
    inet_pton(AF_INET, proxy_host, &address.sin_addr);
    if (connect(link->fd, (struct sockaddr *)&address, sizeof address) != 0) {
        report_error("connect to the proxy");
        return -1;
    }
    char request[512];
    int length = snprintf(request, sizeof request, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port, host, port);
    if (write(link->fd, request, (size_t)length) != length) {
        report_error("CONNECT");
        return -1;
    }
    char *end;
    while ((end = head_end(link)) == NULL) {
        if (fill_plain(link) != 0) {
            report_error("CONNECT answer");
            return -1;
        }
    }
    if (strncmp(link->buffer, "HTTP/1.1 200", 12) != 0 && strncmp(link->buffer, "HTTP/1.0 200", 12) != 0) {
        report_error("CONNECT refused");
        return -1;
    }
    if (end + 4 != link->buffer + link->end) {
        report_error("bytes after the CONNECT answer");
        return -1;
    }
    link->start = link->end = 0;
    link->ssl = SSL_new(context);
    SSL_set_fd(link->ssl, link->fd);
    SSL_set_tlsext_host_name(link->ssl, host);
    SSL_set1_host(link->ssl, host);
    if (SSL_connect(link->ssl) != 1) {
        report_error("TLS handshake");
        return -1;
    }
    atomic_fetch_add(&handshakes, 1);
    return 0;
}

/// One GET on the session; returns 0 when a complete 200 response was read.
static int get(struct link *link) {
    char request[1024];
    int length = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: tlsload\r\n\r\n", path, host, port);
    size_t written = 0;
    if (SSL_write_ex(link->ssl, request, (size_t)length, &written) != 1) {
        report_error("write");
        return -1;
    }
    char *end;
    while ((end = head_end(link)) == NULL) {
        if (fill_tls(link) != 0) {
            report_error("response head");
            return -1;
        }
    }
    char *head = link->buffer + link->start;
    if (strncmp(head, "HTTP/1.1 200", 12) != 0) {
        report_error("status not 200");
        return -1;
    }
    *end = 0;
    long content_length = -1;
    for (char *line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "content-length:", 15) == 0) content_length = strtol(line + 17, NULL, 10);
    }
    if (content_length < 0) {
        report_error("no Content-Length");
        return -1;
    }
    link->start = (size_t)(end + 4 - link->buffer);
    long remaining = content_length;
    while (remaining > 0) {
        if (link->start == link->end && fill_tls(link) != 0) {
            report_error("body");
            return -1;
        }
        long available = (long)(link->end - link->start);
        long taken = available < remaining ? available : remaining;
        link->start += (size_t)taken;
        remaining -= taken;
    }
    atomic_fetch_add(&body_bytes, content_length);
    atomic_fetch_add(&requests, 1);
    return 0;
}

static void *run(void *unused) {
    (void)unused;
    struct link *link = calloc(1, sizeof *link);
    link->fd = -1;
    while (now() < deadline) {
        if (open_link(link) != 0) {
            close_link(link);
            usleep(10000);
            continue;
        }
        do {
            if (get(link) != 0) break;
        } while (!new_connections && now() < deadline);
        close_link(link);
    }
    free(link);
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--new-connections") == 0) {
            new_connections = 1;
            continue;
        }
        if (value == NULL) {
            fprintf(stderr, "tlsload: %s needs a value\n", option);
            return 2;
        }
        i++;
        if (strcmp(option, "--proxy") == 0) {
            static char text[256];
            snprintf(text, sizeof text, "%s", value);
            char *colon = strrchr(text, ':');
            if (colon == NULL) return 2;
            *colon = 0;
            proxy_host = text;
            proxy_port = atoi(colon + 1);
        } else if (strcmp(option, "--host") == 0) {
            host = value;
        } else if (strcmp(option, "--port") == 0) {
            port = atoi(value);
        } else if (strcmp(option, "--ca") == 0) {
            ca_file = value;
        } else if (strcmp(option, "--path") == 0) {
            path = value;
        } else if (strcmp(option, "--connections") == 0) {
            connections = atoi(value);
        } else if (strcmp(option, "--seconds") == 0) {
            seconds = atof(value);
        } else {
            fprintf(stderr, "tlsload: unknown option %s\n", option);
            return 2;
        }
    }
    if (ca_file == NULL || connections < 1 || connections > 1024) {
        fprintf(stderr, "usage: tlsload --proxy HOST:PORT --host NAME --port N --ca FILE --path P [--connections N] "
                        "[--seconds S] [--new-connections]\n");
        return 2;
    }
    context = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(context, SSL_OP_NO_TICKET);
    if (SSL_CTX_load_verify_locations(context, ca_file, NULL) != 1) {
        fprintf(stderr, "tlsload: cannot read %s\n", ca_file);
        return 2;
    }
    double start = now();
    deadline = start + seconds;
    pthread_t threads[1024];
    for (int i = 0; i < connections; i++) pthread_create(&threads[i], NULL, run, NULL);
    for (int i = 0; i < connections; i++) pthread_join(threads[i], NULL);
    double elapsed = now() - start;
    printf("{\"requests\": %ld, \"handshakes\": %ld, \"errors\": %ld, \"bytes\": %ld, \"seconds\": %.3f, "
           "\"requests_per_second\": %.1f, \"handshakes_per_second\": %.1f}\n",
           atomic_load(&requests), atomic_load(&handshakes), atomic_load(&errors), atomic_load(&body_bytes), elapsed,
           atomic_load(&requests) / elapsed, atomic_load(&handshakes) / elapsed);
    return atomic_load(&errors) > 0 && atomic_load(&requests) == 0 ? 1 : 0;
}
