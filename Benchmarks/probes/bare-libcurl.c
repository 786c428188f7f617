// The floor libcurl sets for a miss: sequential GETs on one keep-alive connection through the
// multi interface, with the options Larder sets on every transfer (header and body callbacks
// that keep nothing, a one-line header list, path as is, no decoding, TCP_NODELAY, 64 KiB
// buffer). Run by bare-libcurl.sh, which counts its instructions per transfer.
//
//   bare-libcurl URL COUNT
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>

static size_t discard(char *data, size_t size, size_t count, void *context) {
    (void)data;
    (void)context;
    return size * count;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL COUNT\n", argv[0]);
        return 2;
    }
    int count = atoi(argv[2]);
    curl_global_init(CURL_GLOBAL_ALL);
    CURLM *multi = curl_multi_init();
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Via: 1.1 larder (larder-00000000)");
    char url[2048];
    for (int index = 0; index < count; index++) {
        snprintf(url, sizeof url, "%s?r=%d", argv[1], index);
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
        curl_easy_setopt(easy, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 65536L);
        curl_multi_add_handle(multi, easy);
        int running = 1;
        while (running) {
            if (curl_multi_perform(multi, &running) != CURLM_OK) return 1;
            if (running) curl_multi_poll(multi, NULL, 0, 1000, NULL);
        }
        int queued;
        CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg == CURLMSG_DONE && message->data.result != CURLE_OK) {
                fprintf(stderr, "transfer %d: %s\n", index, curl_easy_strerror(message->data.result));
                return 1;
            }
        }
        curl_multi_remove_handle(multi, easy);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
    return 0;
}
