// The floor libcurl sets for a miss: GETs on keep-alive connections through the multi socket
// interface on an epoll loop, as Larder drives it (one handle per connection, removed and added
// again for each transfer), with the options Larder sets on every transfer (header and body
// callbacks that keep nothing, the request fields Larder sends for wrk's request, path as is,
// no decoding, TCP_NODELAY, 64 KiB buffer), and the URL given as Larder gives it: the origin as
// a URL handle, the path and query as the request target. Run by bare-libcurl.sh.
//
//   bare-libcurl URL COUNT [CONCURRENCY]
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

static int epoll_fd;
static long timeout_ms = -1;
static long started;
static char path[1024];
static CURLM *multi;

static size_t discard(char *data, size_t size, size_t count, void *context) {
    (void)data;
    (void)context;
    return size * count;
}

// CURLMOPT_SOCKETFUNCTION: curl's interest in a socket, kept in the epoll set.
static int on_socket(CURL *easy, curl_socket_t socket, int what, void *context, void *assigned) {
    (void)easy;
    (void)context;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, socket, NULL);
        return 0;
    }
    struct epoll_event event = {.data.fd = socket};
    event.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (!assigned) {
        curl_multi_assign(multi, socket, (void *)1);
        if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, socket, &event) == 0) return 0;
    }
    return epoll_ctl(epoll_fd, EPOLL_CTL_MOD, socket, &event) == 0 ? 0 : -1;
}

// CURLMOPT_TIMERFUNCTION: when curl next wants CURL_SOCKET_TIMEOUT.
static int on_timer(CURLM *unused, long milliseconds, void *context) {
    (void)unused;
    (void)context;
    timeout_ms = milliseconds;
    return 0;
}

static void start(CURL *easy) {
    char target[2048];
    snprintf(target, sizeof target, "%s?r=%ld", path, started++);
    curl_easy_setopt(easy, CURLOPT_REQUEST_TARGET, target);
    curl_multi_add_handle(multi, easy);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s URL COUNT [CONCURRENCY]\n", argv[0]);
        return 2;
    }
    CURLU *origin = curl_url();
    char *given = NULL;
    if (curl_url_set(origin, CURLUPART_URL, argv[1], 0) != CURLUE_OK ||
        curl_url_get(origin, CURLUPART_PATH, &given, 0) != CURLUE_OK) {
        fprintf(stderr, "bad URL %s\n", argv[1]);
        return 2;
    }
    snprintf(path, sizeof path, "%s", given);
    curl_free(given);
    curl_url_set(origin, CURLUPART_PATH, NULL, 0);
    long count = atol(argv[2]);
    int concurrency = argc == 4 ? atoi(argv[3]) : 1;
    if (count < 1 || concurrency < 1) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    multi = curl_multi_init();
    epoll_fd = epoll_create1(0);
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    struct curl_slist *headers = curl_slist_append(NULL, "Accept: */*");
    headers = curl_slist_append(headers, "User-Agent: wrk");
    headers = curl_slist_append(headers, "Via: 1.1 larder (larder-00000000)");
    for (int index = 0; index < concurrency && index < count; index++) {
        CURL *easy = curl_easy_init();
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_CURLU, origin);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
        curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 65536L);
        // As Larder: no proxy from the environment (curl reads it with getenv on every transfer).
        curl_easy_setopt(easy, CURLOPT_PROXY, "");
        start(easy);
    }
    long done = 0;
    int running;
    struct epoll_event events[64];
    while (done < count) {
        int ready = epoll_wait(epoll_fd, events, 64, timeout_ms < 0 ? 10000 : (int)timeout_ms);
        if (ready < 0) {
            perror("epoll_wait");
            return 1;
        }
        if (ready == 0 && timeout_ms < 0) {
            fprintf(stderr, "no progress for 10 s after %ld transfers\n", done);
            return 1;
        }
        for (int index = 0; index < ready; index++) {
            int mask = (events[index].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                       (events[index].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                       (events[index].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(multi, events[index].data.fd, mask, &running);
        }
        if (ready == 0 || timeout_ms == 0) {
            timeout_ms = -1;
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        int queued;
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg != CURLMSG_DONE) continue;
            if (message->data.result != CURLE_OK) {
                fprintf(stderr, "transfer %ld: %s\n", done, curl_easy_strerror(message->data.result));
                return 1;
            }
            CURL *easy = message->easy_handle;
            curl_multi_remove_handle(multi, easy);
            done++;
            if (started < count) start(easy);
        }
    }
    curl_slist_free_all(headers);
    curl_multi_cleanup(multi);
    return 0;
}
