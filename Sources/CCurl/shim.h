// Typed wrappers around libcurl's variadic setters, which Swift cannot call directly.
// Each wrapper fixes the argument type that the option expects (long, pointer, curl_off_t or
// a callback), so a call from Swift cannot pass the wrong width through the varargs.
#ifndef LARDER_CCURL_SHIM_H
#define LARDER_CCURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*larder_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*larder_curl_socket_callback)(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp);
typedef int (*larder_curl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*larder_curl_sockopt_callback)(void *clientp, curl_socket_t fd, curlsocktype purpose);
typedef curl_socket_t (*larder_curl_opensocket_callback)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
typedef int (*larder_curl_closesocket_callback)(void *clientp, curl_socket_t fd);
typedef int (*larder_curl_prereq_callback)(void *clientp, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port);

static inline CURLcode larder_easy_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_offset(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_data_callback(CURL *h, CURLoption o, larder_curl_data_callback v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_set_sockopt_callback(CURL *h, larder_curl_sockopt_callback v) { return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, v); }
static inline CURLcode larder_easy_set_opensocket_callback(CURL *h, larder_curl_opensocket_callback v) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, v); }
static inline CURLcode larder_easy_set_prereq_callback(CURL *h, larder_curl_prereq_callback v) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, v); }
static inline CURLcode larder_easy_set_closesocket_callback(CURL *h, larder_curl_closesocket_callback v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }

// Points a URL handle at scheme://host[:port] (a NULL port: the scheme's default).
static inline CURLUcode larder_url_set_origin(CURLU *url, const char *scheme, const char *host, const char *port) {
    CURLUcode code = curl_url_set(url, CURLUPART_SCHEME, scheme, 0);
    if (code == CURLUE_OK) code = curl_url_set(url, CURLUPART_HOST, host, 0);
    if (code == CURLUE_OK) code = curl_url_set(url, CURLUPART_PORT, port, 0);
    return code;
}

static inline CURLcode larder_easy_get_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_get_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_get_offset(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_get_socket(CURL *h, CURLINFO i, curl_socket_t *v) { return curl_easy_getinfo(h, i, v); }

// The OpenSSL session (SSL *) of the connection a transfer runs on, or NULL (no TLS, or
// another backend). Valid while that connection lives: only ever read back by
// LarderTLS's OpenSSL.sessionHasPendingBytes, for a connection known to be open.
static inline void *larder_easy_tls_session(CURL *h) {
    struct curl_tlssessioninfo *info = NULL;
    if (curl_easy_getinfo(h, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || info == NULL) return NULL;
    return info->backend == CURLSSLBACKEND_OPENSSL ? info->internals : NULL;
}

static inline CURLMcode larder_multi_set_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_set_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_set_socket_callback(CURLM *m, larder_curl_socket_callback v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode larder_multi_set_timer_callback(CURLM *m, larder_curl_timer_callback v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

/// The fields of a finished-transfer message (CURLMsg holds them in a union).
static inline int larder_multi_info_done(CURLMsg *msg, CURL **easy, CURLcode *result) {
    if (msg->msg != CURLMSG_DONE) return 0;
    *easy = msg->easy_handle;
    *result = msg->data.result;
    return 1;
}

/// The running libcurl's facts (CURLVERSION_NOW is a macro).
static inline curl_version_info_data *larder_curl_version_info(void) { return curl_version_info(CURLVERSION_NOW); }

#endif
