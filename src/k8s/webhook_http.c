/*
 * The mutating webhook over HTTPS (contract in include/gpusched/webhook.h): libmicrohttpd with
 * its GnuTLS backend, on its own polling thread. Each request's body is gathered into a buffer
 * of its own (bounded by GS_WEBHOOK_BODY_MAX), answered by gs_webhook_review() once complete,
 * and freed when libmicrohttpd reports the request done. No state is shared with the
 * scheduler's loop: the review reads only the request, so this thread needs no lock.
 *
 * The certificate and key are checked with GnuTLS before the daemon starts, so that a mismatch
 * is reported by name ("The key and the certificate do not match") rather than as a daemon
 * that would not start.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpusched/webhook.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"
#include "hostport.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define PEM_MAX 1048576 /* 1 MiB */

struct gs_webhook_server {
    struct MHD_Daemon *daemon;  /**< the server; NULL once stopped */
    char *cert_pem, *key_pem;   /**< the files' text: libmicrohttpd borrows them while it runs */
    const char *scheduler_name; /**< borrowed from the options */
    void (*log)(void *ud, const char *level, const char *msg);
    void *log_ud;
};

/* One request's body as it arrives. */
struct req {
    char *buf;
    size_t len, cap;
    bool too_large; /* more than GS_WEBHOOK_BODY_MAX came: answered 413 */
};

static void logw(struct gs_webhook_server *w, const char *level, const char *fmt, ...)
    GS_PRINTF(3, 4);

static void logw(struct gs_webhook_server *w, const char *level, const char *fmt, ...)
{
    if (!w->log)
        return;
    char msg[800];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    w->log(w->log_ud, level, msg);
}

static void errf(char *err, size_t cap, const char *fmt, ...) GS_PRINTF(3, 4);

static void errf(char *err, size_t cap, const char *fmt, ...)
{
    if (!err || !cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* Reads a whole file of at most PEM_MAX bytes. @return GS_OK, GS_EIO, GS_ELIMIT or GS_ENOMEM. */
static int read_file(const char *path, char **out, size_t *len_out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return GS_EIO;
    char *buf = malloc(PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    int rc = !buf ? GS_ENOMEM : ferror(f) ? GS_EIO : n > PEM_MAX ? GS_ELIMIT : GS_OK;
    (void)fclose(f);
    if (rc != GS_OK) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len_out = n;
    return GS_OK;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static const char text_type[] = "text/plain; charset=utf-8";
static const char json_type[] = "application/json";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct gs_webhook_server *w = cls;
    (void)version;
    bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    bool ours = strcmp(url, GS_WEBHOOK_PATH) == 0;
    if (*req_cls == NULL) { /* the headers: a body buffer for a review */
        struct req *rq = calloc(1, sizeof(*rq));
        if (!rq)
            return MHD_NO;
        *req_cls = rq;
        return MHD_YES;
    }
    struct req *rq = *req_cls;
    if (*upload_data_size != 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (!post || !ours || rq->too_large)
            return MHD_YES; /* a body we do not want: drop it */
        if (rq->len + n > GS_WEBHOOK_BODY_MAX) {
            rq->too_large = true;
            free(rq->buf);
            rq->buf = NULL;
            rq->len = rq->cap = 0;
            return MHD_YES;
        }
        if (rq->len + n > rq->cap) {
            size_t cap = rq->cap ? rq->cap : 16384;
            while (cap < rq->len + n)
                cap *= 2;
            if (cap > GS_WEBHOOK_BODY_MAX)
                cap = GS_WEBHOOK_BODY_MAX;
            char *b = realloc(rq->buf, cap);
            if (!b)
                return MHD_NO;
            rq->buf = b;
            rq->cap = cap;
        }
        memcpy(rq->buf + rq->len, upload_data, n);
        rq->len += n;
        return MHD_YES;
    }
    if (strcmp(url, "/healthz") == 0 && !post)
        return reply(c, MHD_HTTP_OK, text_type, "ok", 2);
    if (!ours)
        return reply(c, MHD_HTTP_NOT_FOUND, text_type, "not found\n", 10);
    if (!post)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text_type, "POST an AdmissionReview\n", 24);
    if (rq->too_large) {
        logw(w, "warn", "webhook: refused a review over %u bytes (413)", GS_WEBHOOK_BODY_MAX);
        return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, text_type, "review too large\n", 17);
    }
    struct gs_webhook_answer a;
    int rc = gs_webhook_review(w->scheduler_name, rq->buf, rq->len, &a);
    if (rc != GS_OK) {
        logw(w, "warn", "webhook: cannot answer a review: %s", gs_strerror(rc));
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text_type, "out of memory\n", 14);
    }
    logw(w, a.outcome == GS_WEBHOOK_BAD_REVIEW ? "warn" : "info", "webhook: pod=%s %s: %s",
         a.pod[0] ? a.pod : "?",
         a.outcome == GS_WEBHOOK_PATCHED     ? "patched"
         : a.outcome == GS_WEBHOOK_UNCHANGED ? "unchanged"
                                             : "bad review (400)",
         a.detail);
    enum MHD_Result res = reply(c, a.http_status, json_type, a.body, a.body_len);
    gs_webhook_answer_fini(&a);
    return res;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct req *rq = *req_cls;
    if (rq) {
        free(rq->buf);
        free(rq);
        *req_cls = NULL;
    }
}

/* The certificate and key as GnuTLS reads them. @return GS_OK or GS_EPARSE (err says why). */
static int check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len,
                      const struct gs_webhook_server_opts *o, char *err, size_t cap)
{
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS) {
        errf(err, cap, "out of memory checking the certificate");
        return GS_ENOMEM;
    }
    gnutls_datum_t c = {(unsigned char *)(uintptr_t)cert, (unsigned)cert_len};
    gnutls_datum_t k = {(unsigned char *)(uintptr_t)key, (unsigned)key_len};
    int g = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (g < 0) {
        errf(err, cap, "--webhook-cert %s / --webhook-key %s: %s", o->cert_file, o->key_file,
             gnutls_strerror(g));
        return GS_EPARSE;
    }
    return GS_OK;
}

int gs_webhook_server_start(const struct gs_webhook_server_opts *o, struct gs_webhook_server **out,
                            uint16_t *port_out, char *err, size_t err_cap)
{
    if (out)
        *out = NULL;
    if (!o || !out || !o->addr || !o->cert_file || !o->key_file || !o->scheduler_name) {
        errf(err, err_cap, "the webhook needs an address, a certificate and a key");
        return GS_EINVAL;
    }
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS)) {
        errf(err, err_cap, "this libmicrohttpd was built without TLS");
        return GS_EIO;
    }
    struct gs_webhook_server *w = calloc(1, sizeof(*w));
    if (!w) {
        errf(err, err_cap, "out of memory");
        return GS_ENOMEM;
    }
    w->scheduler_name = o->scheduler_name;
    w->log = o->log;
    w->log_ud = o->log_ud;
    size_t cert_len = 0, key_len = 0;
    struct addrinfo *ai = NULL;
    int rc = read_file(o->cert_file, &w->cert_pem, &cert_len);
    if (rc != GS_OK) {
        errf(err, err_cap, "--webhook-cert %s: %s", o->cert_file,
             rc == GS_EIO      ? strerror(errno)
             : rc == GS_ELIMIT ? "larger than 1 MiB"
                               : gs_strerror(rc));
        goto fail;
    }
    rc = read_file(o->key_file, &w->key_pem, &key_len);
    if (rc != GS_OK) {
        errf(err, err_cap, "--webhook-key %s: %s", o->key_file,
             rc == GS_EIO      ? strerror(errno)
             : rc == GS_ELIMIT ? "larger than 1 MiB"
                               : gs_strerror(rc));
        goto fail;
    }
    rc = check_pair(w->cert_pem, cert_len, w->key_pem, key_len, o, err, err_cap);
    if (rc != GS_OK)
        goto fail;
    rc = gs__hostport_resolve(o->addr, &ai);
    if (rc != GS_OK) {
        errf(err, err_cap, "--webhook-addr %s: want HOST:PORT with a numeric host", o->addr);
        goto fail;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_TLS;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    w->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, w, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_HTTPS_MEM_CERT, w->cert_pem, MHD_OPTION_HTTPS_MEM_KEY, w->key_pem,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!w->daemon) {
        errf(err, err_cap, "--webhook-addr %s: cannot listen there", o->addr);
        rc = GS_EIO;
        goto fail;
    }
    if (port_out) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(w->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *port_out = info ? info->port : 0;
    }
    *out = w;
    return GS_OK;
fail:
    gs_webhook_server_free(w);
    return rc;
}

void gs_webhook_server_free(struct gs_webhook_server *w)
{
    if (!w)
        return;
    if (w->daemon)
        MHD_stop_daemon(w->daemon); /* joins its thread */
    free(w->cert_pem);
    free(w->key_pem);
    free(w);
}
