/*
 * Client configuration (contract in include/gpusched/kube.h): a kubeconfig file in clientcmd's
 * format, the in-cluster service account, and the $KUBECONFIG / in-cluster / ~/.kube/config
 * choice. The kubeconfig is loaded into a libyaml document and only the current context's
 * entries are read; every problem with them stops the load with the file, the line and
 * column of the YAML node (libyaml's marks, 1-based) and the key's path ("users[0].user.token")
 * in the diagnostic, so a user can find it. The rules follow client-go's
 * tools/clientcmd/validation.go where it refuses a configuration (both a CA file and CA data,
 * the insecure flag with a CA, a certificate without a key).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "kube_int.h"

#include "gpusched/compiler.h"
#include "gpusched/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/yaml.h"

/** Largest kubeconfig read, bytes. */
#define KUBECONFIG_MAX_BYTES (1u << 20)

/* The kubeconfig's limits for the shared YAML walker: a small file of a few levels; aliases and
 * tags are YAML that client-go's reader accepts, so they are accepted here too. */
static const struct gs_yaml_limits kubeconfig_limits = {
    .bytes_max = KUBECONFIG_MAX_BYTES,
    .depth_max = 32,
    .nodes_max = 100000,
    .aliases = true,
    .tags = true,
    .what = "a kubeconfig",
};
/** Largest certificate or key file checked / CA read, bytes (not enforced on files curl reads). */
#define SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"

void gs__kube_diag_set(struct gs_kube_diag *d, const char *file, const char *fmt, ...)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof *d);
    (void)snprintf(d->file, sizeof d->file, "%s", file != NULL ? file : "");
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
}

int gs_kube_diag_format(const struct gs_kube_diag *d, char *buf, size_t cap)
{
    char pos[32] = "";
    char field[160] = "";
    if (d->line > 0)
        (void)snprintf(pos, sizeof pos, ":%u:%u", d->line, d->column);
    if (d->field[0] != '\0')
        (void)snprintf(field, sizeof field, "field '%s': ", d->field);
    if (d->file[0] == '\0')
        return snprintf(buf, cap, "%s%s", field, d->msg);
    return snprintf(buf, cap, "%s%s: %s%s", d->file, pos, field, d->msg);
}

/* Reads a whole file of at most max bytes; "cannot read 'PATH': REASON" on failure. */
static int read_all(const char *path, size_t max, char **buf, size_t *len, struct gs_kube_diag *d,
                    const char *diag_file)
{
    int rc = GS_EIO;
    char *b = NULL;
    FILE *f = fopen(path, "rb");
    *buf = NULL;
    *len = 0;
    if (f == NULL) {
        gs__kube_diag_set(d, diag_file, "cannot read '%s': %s", path, strerror(errno));
        return GS_EIO;
    }
    b = malloc(max + 2);
    if (b == NULL) {
        rc = GS_ENOMEM;
        gs__kube_diag_set(d, diag_file, "out of memory");
        goto out;
    }
    size_t n = fread(b, 1, max + 1, f);
    if (ferror(f)) {
        gs__kube_diag_set(d, diag_file, "cannot read '%s': %s", path, strerror(errno));
        goto out;
    }
    if (n > max) {
        gs__kube_diag_set(d, diag_file, "file is over the limit of %zu bytes", max);
        goto out;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    b = NULL;
    rc = GS_OK;
out:
    free(b);
    (void)fclose(f);
    return rc;
}

int gs__kube_read_token(const char *path, char **token, struct gs_kube_diag *diag)
{
    char *b = NULL;
    size_t n = 0;
    *token = NULL;
    int rc = read_all(path, GS__KUBE_TOKEN_MAX_BYTES, &b, &n, diag, path);
    if (rc != GS_OK)
        return rc;
    size_t s = 0;
    while (s < n && (b[s] == ' ' || b[s] == '\t' || b[s] == '\r' || b[s] == '\n'))
        s++;
    while (n > s && (b[n - 1] == ' ' || b[n - 1] == '\t' || b[n - 1] == '\r' || b[n - 1] == '\n'))
        n--;
    if (n == s || memchr(b + s, '\0', n - s) != NULL) {
        gs__kube_diag_set(diag, path, "token file is empty");
        free(b);
        return GS_EPARSE;
    }
    memmove(b, b + s, n - s);
    b[n - s] = '\0';
    *token = b;
    return GS_OK;
}

void gs_kube_config_fini(struct gs_kube_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->server);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->tls_server_name);
    free(cfg->cert_file);
    free(cfg->cert_data);
    free(cfg->key_file);
    free(cfg->key_data);
    free(cfg->token);
    free(cfg->token_file);
    free(cfg->namespace_);
    memset(cfg, 0, sizeof *cfg);
}

/* ---- the YAML walk ------------------------------------------------------------------------ */

/** State of one kubeconfig load. */
struct rd {
    struct gs_yaml_doc doc; /**< the loaded document (the shared walker's tree) */
    const char *file;       /**< the kubeconfig's name, for diagnostics */
    const char *dir;        /**< its directory ("." when none), for relative paths */
    struct gs_kube_diag *d; /**< where errors go; may be NULL */
};

GS_PRINTF(5, 6)
static int fail_at(struct rd *r, int err, const struct gs_yaml_node *n, const char *field,
                   const char *fmt, ...)
{
    if (r->d == NULL)
        return err;
    memset(r->d, 0, sizeof *r->d);
    (void)snprintf(r->d->file, sizeof r->d->file, "%s", r->file);
    if (n != NULL) {
        r->d->line = n->at.line;
        r->d->column = n->at.col;
    }
    (void)snprintf(r->d->field, sizeof r->d->field, "%s", field != NULL ? field : "");
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(r->d->msg, sizeof r->d->msg, fmt, ap);
    va_end(ap);
    return err;
}

static int expect(struct rd *r, const struct gs_yaml_node *n, enum gs_yaml_kind kind,
                  const char *field)
{
    static const char *const names[] = {"a scalar", "a list", "a mapping"};
    if (n->kind == kind)
        return GS_OK;
    return fail_at(r, GS_EPARSE, n, field, "expected %s, found %s", names[kind],
                   gs__yaml_kind_name(n));
}

/* The value of `key` in mapping m, or NULL when absent or null. */
static const struct gs_yaml_node *map_get(const struct gs_yaml_node *m, const char *key)
{
    if (m == NULL)
        return NULL;
    const struct gs_yaml_node *v = gs__yaml_map_get(m, key);
    return v == NULL || gs__yaml_is_null(v) ? NULL : v;
}

/* A scalar's text (NUL bytes refused); a mapping or list is an error. */
static int scalar(struct rd *r, const struct gs_yaml_node *n, const char *field, const char **out)
{
    int rc = expect(r, n, GS_YAML_SCALAR, field);
    if (rc != GS_OK)
        return rc;
    if (strlen(n->u.s) != n->n)
        return fail_at(r, GS_EPARSE, n, field, "value holds a NUL byte");
    *out = n->u.s;
    return GS_OK;
}

/* A string value of map m (copied), or NULL when absent. */
static int get_str(struct rd *r, const struct gs_yaml_node *m, const char *key, const char *prefix,
                   char **out, const struct gs_yaml_node **node)
{
    char field[128];
    const char *s = "";
    const struct gs_yaml_node *v = map_get(m, key);
    *out = NULL;
    if (node != NULL)
        *node = v;
    if (v == NULL)
        return GS_OK;
    (void)snprintf(field, sizeof field, "%s%s", prefix, key);
    int rc = scalar(r, v, field, &s);
    if (rc != GS_OK)
        return rc;
    *out = strdup(s);
    return *out != NULL ? GS_OK : fail_at(r, GS_ENOMEM, v, field, "out of memory");
}

/*
 * Finds the entry named `name` in the list under root key `list_key` ("contexts") and returns
 * its `inner_key` mapping ("context"), NULL when the entry has none. `*index` gets its
 * position. Every entry is checked (a mapping with a scalar name; names unique), so a broken
 * list is reported even when the entry sought comes first.
 */
static int find_named(struct rd *r, const struct gs_yaml_node *root, const char *list_key,
                      const char *inner_key, const char *name, const struct gs_yaml_node *ref,
                      const char *ref_field, const char *what, const struct gs_yaml_node **inner,
                      size_t *index)
{
    char field[128];
    const struct gs_yaml_node *list = map_get(root, list_key);
    const struct gs_yaml_node *found = NULL;
    int rc;
    *inner = NULL;
    *index = 0;
    if (list != NULL) {
        rc = expect(r, list, GS_YAML_SEQ, list_key);
        if (rc != GS_OK)
            return rc;
        size_t n = list->n;
        for (size_t i = 0; i < n; i++) {
            const struct gs_yaml_node *e = list->u.items[i];
            (void)snprintf(field, sizeof field, "%s[%zu]", list_key, i);
            if (e == NULL)
                continue;
            rc = expect(r, e, GS_YAML_MAP, field);
            if (rc != GS_OK)
                return rc;
            (void)snprintf(field, sizeof field, "%s[%zu].name", list_key, i);
            const struct gs_yaml_node *nn = map_get(e, "name");
            const char *s = "";
            if (nn == NULL)
                return fail_at(r, GS_EPARSE, e, field, "a name is required");
            rc = scalar(r, nn, field, &s);
            if (rc != GS_OK)
                return rc;
            /* Later duplicates are reported at the later entry. */
            for (size_t j = 0; j < i; j++) {
                const struct gs_yaml_node *o = list->u.items[j];
                const struct gs_yaml_node *on = map_get(o, "name");
                if (on != NULL && on->kind == GS_YAML_SCALAR && strcmp(on->u.s, s) == 0)
                    return fail_at(r, GS_EPARSE, nn, field, "duplicate name '%.80s'", s);
            }
            if (strcmp(s, name) == 0) {
                found = e;
                *index = i;
            }
        }
    }
    if (found == NULL)
        return fail_at(r, GS_EPARSE, ref, ref_field, "%s '%.80s' is not in %s", what, name,
                       list_key);
    const struct gs_yaml_node *in = map_get(found, inner_key);
    if (in != NULL) {
        (void)snprintf(field, sizeof field, "%s[%zu].%s", list_key, *index, inner_key);
        rc = expect(r, in, GS_YAML_MAP, field);
        if (rc != GS_OK)
            return rc;
    }
    *inner = in;
    return GS_OK;
}

/* Resolves a kubeconfig-relative path (malloc'd). */
static char *resolve(const struct rd *r, const char *p)
{
    if (p[0] == '/' || strcmp(r->dir, ".") == 0)
        return strdup(p);
    size_t n = strlen(r->dir) + strlen(p) + 2;
    char *s = malloc(n);
    if (s != NULL)
        (void)snprintf(s, n, "%s/%s", r->dir, p);
    return s;
}

/* A path value: resolved against the kubeconfig's directory and checked to be readable. */
static int get_path(struct rd *r, const struct gs_yaml_node *m, const char *key, const char *prefix,
                    char **out)
{
    char *raw = NULL;
    const struct gs_yaml_node *v = NULL;
    char field[128];
    int rc = get_str(r, m, key, prefix, &raw, &v);
    *out = NULL;
    if (rc != GS_OK || raw == NULL)
        return rc;
    (void)snprintf(field, sizeof field, "%s%s", prefix, key);
    char *p = resolve(r, raw);
    free(raw);
    if (p == NULL)
        return fail_at(r, GS_ENOMEM, v, field, "out of memory");
    FILE *f = fopen(p, "rb");
    if (f == NULL) {
        rc = fail_at(r, GS_EPARSE, v, field, "cannot read '%.150s': %s", p, strerror(errno));
        free(p);
        return rc;
    }
    (void)fclose(f);
    *out = p;
    return GS_OK;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/*
 * Decodes standard base64 (RFC 4648 section 4) with optional padding; whitespace is skipped, as
 * YAML block scalars bring line breaks. @return GS_OK or GS_EPARSE; *out is malloc'd.
 */
static int b64_decode(const char *s, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(s);
    unsigned char *o = malloc(n / 4 * 3 + 4);
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    *out = NULL;
    *out_len = 0;
    if (o == NULL)
        return GS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || pad > 0)
            goto bad;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    /* 6 leftover bits cannot be; leftover bits must be zero; padding must complete a quad. */
    if (bits == 6 || (acc & ((1u << bits) - 1)) != 0 || pad > 2 || (pad > 0 && (bits / 2 != pad)))
        goto bad;
    *out = o;
    *out_len = k;
    return GS_OK;
bad:
    free(o);
    return GS_EPARSE;
}

/* An inline `-data` value: base64 of a non-empty PEM. */
static int get_data(struct rd *r, const struct gs_yaml_node *m, const char *key, const char *prefix,
                    unsigned char **out, size_t *out_len)
{
    char *raw = NULL;
    const struct gs_yaml_node *v = NULL;
    char field[128];
    int rc = get_str(r, m, key, prefix, &raw, &v);
    *out = NULL;
    *out_len = 0;
    if (rc != GS_OK || raw == NULL)
        return rc;
    (void)snprintf(field, sizeof field, "%s%s", prefix, key);
    rc = b64_decode(raw, out, out_len);
    free(raw);
    if (rc == GS_ENOMEM)
        return fail_at(r, rc, v, field, "out of memory");
    if (rc != GS_OK)
        return fail_at(r, rc, v, field, "not valid base64");
    if (*out_len == 0) {
        free(*out);
        *out = NULL;
        return fail_at(r, GS_EPARSE, v, field, "decoded data is empty");
    }
    return GS_OK;
}

static int get_bool(struct rd *r, const struct gs_yaml_node *m, const char *key, const char *prefix,
                    bool *out)
{
    char field[128];
    const char *s = "";
    const struct gs_yaml_node *v = map_get(m, key);
    *out = false;
    if (v == NULL)
        return GS_OK;
    (void)snprintf(field, sizeof field, "%s%s", prefix, key);
    int rc = scalar(r, v, field, &s);
    if (rc != GS_OK)
        return rc;
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
        *out = true;
    else if (strcmp(s, "false") != 0 && strcmp(s, "False") != 0 && strcmp(s, "FALSE") != 0)
        return fail_at(r, GS_EPARSE, v, field, "not a boolean: '%.40s'", s);
    return GS_OK;
}

/* Refuses a key of mapping m (an unsupported feature), naming it. */
static int refuse(struct rd *r, const struct gs_yaml_node *m, const char *key, const char *prefix,
                  const char *msg)
{
    char field[128];
    const struct gs_yaml_node *v = map_get(m, key);
    if (v == NULL)
        return GS_OK;
    (void)snprintf(field, sizeof field, "%s%s", prefix, key);
    return fail_at(r, GS_EPARSE, v, field, "%s", msg);
}

static int read_cluster(struct rd *r, const struct gs_yaml_node *cl, size_t idx, const char *name,
                        const struct gs_yaml_node *ref, struct gs_kube_config *cfg)
{
    char prefix[64];
    const struct gs_yaml_node *sv = NULL;
    int rc;
    (void)snprintf(prefix, sizeof prefix, "clusters[%zu].cluster.", idx);
    if (cl == NULL)
        return fail_at(r, GS_EPARSE, ref, "", "cluster '%.80s' has no server", name);
    if ((rc = get_str(r, cl, "server", prefix, &cfg->server, &sv)) != GS_OK)
        return rc;
    char field[128];
    (void)snprintf(field, sizeof field, "%sserver", prefix);
    if (cfg->server == NULL || cfg->server[0] == '\0')
        return fail_at(r, GS_EPARSE, sv != NULL ? sv : cl, field, "cluster '%.80s' has no server",
                       name);
    if (strncmp(cfg->server, "https://", 8) != 0 && strncmp(cfg->server, "http://", 7) != 0)
        return fail_at(r, GS_EPARSE, sv, field, "server '%.100s' is not an http:// or https:// URL",
                       cfg->server);
    size_t n = strlen(cfg->server);
    while (n > 0 && cfg->server[n - 1] == '/')
        cfg->server[--n] = '\0';
    if ((rc = get_path(r, cl, "certificate-authority", prefix, &cfg->ca_file)) != GS_OK)
        return rc;
    if ((rc = get_data(r, cl, "certificate-authority-data", prefix, &cfg->ca_data, &cfg->ca_len)) !=
        GS_OK)
        return rc;
    if ((rc = get_bool(r, cl, "insecure-skip-tls-verify", prefix,
                       &cfg->insecure_skip_tls_verify)) != GS_OK)
        return rc;
    if ((rc = get_str(r, cl, "tls-server-name", prefix, &cfg->tls_server_name, NULL)) != GS_OK)
        return rc;
    (void)snprintf(field, sizeof field, "%scertificate-authority-data", prefix);
    if (cfg->ca_file != NULL && cfg->ca_data != NULL)
        return fail_at(r, GS_EPARSE, map_get(cl, "certificate-authority-data"), field,
                       "both certificate-authority and certificate-authority-data are set");
    (void)snprintf(field, sizeof field, "%sinsecure-skip-tls-verify", prefix);
    if (cfg->insecure_skip_tls_verify && (cfg->ca_file != NULL || cfg->ca_data != NULL))
        return fail_at(r, GS_EPARSE, map_get(cl, "insecure-skip-tls-verify"), field,
                       "insecure-skip-tls-verify cannot be combined with a certificate authority");
    return GS_OK;
}

static int read_user(struct rd *r, const struct gs_yaml_node *u, size_t idx,
                     struct gs_kube_config *cfg)
{
    char prefix[64], field[128];
    int rc;
    if (u == NULL)
        return GS_OK;
    (void)snprintf(prefix, sizeof prefix, "users[%zu].user.", idx);
    if ((rc = refuse(r, u, "exec", prefix, "exec credential plugins are not supported")) != GS_OK ||
        (rc = refuse(r, u, "auth-provider", prefix, "auth-provider plugins are not supported")) !=
            GS_OK ||
        (rc = refuse(r, u, "username", prefix,
                     "basic authentication (username/password) is not supported")) != GS_OK ||
        (rc = refuse(r, u, "password", prefix,
                     "basic authentication (username/password) is not supported")) != GS_OK)
        return rc;
    if ((rc = get_path(r, u, "client-certificate", prefix, &cfg->cert_file)) != GS_OK ||
        (rc = get_data(r, u, "client-certificate-data", prefix, &cfg->cert_data, &cfg->cert_len)) !=
            GS_OK ||
        (rc = get_path(r, u, "client-key", prefix, &cfg->key_file)) != GS_OK ||
        (rc = get_data(r, u, "client-key-data", prefix, &cfg->key_data, &cfg->key_len)) != GS_OK ||
        (rc = get_str(r, u, "token", prefix, &cfg->token, NULL)) != GS_OK ||
        (rc = get_path(r, u, "tokenFile", prefix, &cfg->token_file)) != GS_OK)
        return rc;
    if (cfg->cert_file != NULL && cfg->cert_data != NULL) {
        (void)snprintf(field, sizeof field, "%sclient-certificate-data", prefix);
        return fail_at(r, GS_EPARSE, map_get(u, "client-certificate-data"), field,
                       "both client-certificate and client-certificate-data are set");
    }
    if (cfg->key_file != NULL && cfg->key_data != NULL) {
        (void)snprintf(field, sizeof field, "%sclient-key-data", prefix);
        return fail_at(r, GS_EPARSE, map_get(u, "client-key-data"), field,
                       "both client-key and client-key-data are set");
    }
    bool has_cert = cfg->cert_file != NULL || cfg->cert_data != NULL;
    bool has_key = cfg->key_file != NULL || cfg->key_data != NULL;
    if (has_cert && !has_key) {
        const char *k = cfg->cert_file != NULL ? "client-certificate" : "client-certificate-data";
        (void)snprintf(field, sizeof field, "%s%s", prefix, k);
        return fail_at(r, GS_EPARSE, map_get(u, k), field, "client-certificate without client-key");
    }
    if (has_key && !has_cert) {
        const char *k = cfg->key_file != NULL ? "client-key" : "client-key-data";
        (void)snprintf(field, sizeof field, "%s%s", prefix, k);
        return fail_at(r, GS_EPARSE, map_get(u, k), field, "client-key without client-certificate");
    }
    if (cfg->token != NULL && cfg->token[0] == '\0') {
        free(cfg->token);
        cfg->token = NULL;
    }
    if (cfg->token_file != NULL) {
        /* client-go: a tokenFile's content wins over `token` once read. */
        char *t = NULL;
        rc = gs__kube_read_token(cfg->token_file, &t, r->d);
        if (rc != GS_OK)
            return rc;
        free(cfg->token);
        cfg->token = t;
    }
    return GS_OK;
}

static int walk(struct rd *r, struct gs_kube_config *cfg)
{
    const struct gs_yaml_node *root = r->doc.root;
    const char *cur = "", *cluster = "", *user = "", *ns = "";
    const struct gs_yaml_node *ctx = NULL, *cl = NULL, *u = NULL;
    size_t ci = 0, cli = 0, ui = 0;
    int rc;
    if (root == NULL || gs__yaml_is_null(root))
        return fail_at(r, GS_EPARSE, NULL, "", "the file is empty");
    if ((rc = expect(r, root, GS_YAML_MAP, "")) != GS_OK)
        return rc;
    const struct gs_yaml_node *cc = map_get(root, "current-context");
    if (cc == NULL)
        return fail_at(r, GS_EPARSE, NULL, "current-context", "no current-context is set");
    if ((rc = scalar(r, cc, "current-context", &cur)) != GS_OK)
        return rc;
    rc = find_named(r, root, "contexts", "context", cur, cc, "current-context", "context", &ctx,
                    &ci);
    if (rc != GS_OK)
        return rc;
    char field[128];
    (void)snprintf(field, sizeof field, "contexts[%zu].context.cluster", ci);
    const struct gs_yaml_node *cn = map_get(ctx, "cluster");
    if (cn == NULL)
        return fail_at(r, GS_EPARSE, ctx != NULL ? ctx : cc, field,
                       "context '%.80s' names no cluster", cur);
    if ((rc = scalar(r, cn, field, &cluster)) != GS_OK)
        return rc;
    rc = find_named(r, root, "clusters", "cluster", cluster, cn, field, "cluster", &cl, &cli);
    if (rc != GS_OK)
        return rc;
    if ((rc = read_cluster(r, cl, cli, cluster, cn, cfg)) != GS_OK)
        return rc;
    (void)snprintf(field, sizeof field, "contexts[%zu].context.namespace", ci);
    const struct gs_yaml_node *nsn = map_get(ctx, "namespace");
    if (nsn != NULL) {
        if ((rc = scalar(r, nsn, field, &ns)) != GS_OK)
            return rc;
        if ((cfg->namespace_ = strdup(ns)) == NULL)
            return fail_at(r, GS_ENOMEM, nsn, field, "out of memory");
    }
    (void)snprintf(field, sizeof field, "contexts[%zu].context.user", ci);
    const struct gs_yaml_node *un = map_get(ctx, "user");
    if (un == NULL)
        return GS_OK;
    if ((rc = scalar(r, un, field, &user)) != GS_OK)
        return rc;
    rc = find_named(r, root, "users", "user", user, un, field, "user", &u, &ui);
    if (rc != GS_OK)
        return rc;
    return read_user(r, u, ui, cfg);
}

int gs_kube_config_load_file(const char *path, struct gs_kube_config *cfg,
                             struct gs_kube_diag *diag)
{
    struct rd r = {.file = path, .d = diag};
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    int rc;
    if (diag != NULL)
        memset(diag, 0, sizeof *diag);
    if (path == NULL || cfg == NULL)
        return GS_EINVAL;
    memset(cfg, 0, sizeof *cfg);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        gs__kube_diag_set(diag, path, "cannot open: %s", strerror(errno));
        return GS_EIO;
    }
    (void)fclose(f);
    rc = read_all(path, KUBECONFIG_MAX_BYTES, &text, &len, diag, path);
    if (rc != GS_OK)
        goto out;
    dir = strdup(path);
    if (dir == NULL) {
        rc = GS_ENOMEM;
        goto out;
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        free(dir); /* "." may not fit in the copy of a one-character path */
        if ((dir = strdup(".")) == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
    } else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    r.dir = dir;
    struct gs_diag yd;
    memset(&yd, 0, sizeof yd);
    rc = gs__yaml_load(text, len, &kubeconfig_limits, &r.doc, &yd);
    if (rc != GS_OK) {
        if (diag != NULL) {
            gs__kube_diag_set(diag, path, "%s", yd.msg);
            diag->line = (uint32_t)(yd.line > UINT32_MAX ? UINT32_MAX : yd.line);
            diag->column = yd.column;
        }
        goto out;
    }
    rc = walk(&r, cfg);
out:
    gs__yaml_doc_fini(&r.doc);
    if (rc != GS_OK)
        gs_kube_config_fini(cfg);
    free(text);
    free(dir);
    return rc;
}

int gs_kube_config_load_in_cluster(const char *sa_dir, struct gs_kube_config *cfg,
                                   struct gs_kube_diag *diag)
{
    char path[512];
    int rc = GS_ENOMEM;
    if (diag != NULL)
        memset(diag, 0, sizeof *diag);
    if (cfg == NULL)
        return GS_EINVAL;
    memset(cfg, 0, sizeof *cfg);
    if (sa_dir == NULL)
        sa_dir = SA_DIR_DEFAULT;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0') {
        gs__kube_diag_set(diag, "",
                          "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not "
                          "running in a cluster?)");
        return GS_ENOENT;
    }
    size_t n = strlen(host) + strlen(port) + 16;
    if ((cfg->server = malloc(n)) == NULL)
        goto out;
    /* An IPv6 literal needs brackets in a URL (net.JoinHostPort). */
    (void)snprintf(cfg->server, n, strchr(host, ':') != NULL ? "https://[%s]:%s" : "https://%s:%s",
                   host, port);
    (void)snprintf(path, sizeof path, "%s/token", sa_dir);
    if ((cfg->token_file = strdup(path)) == NULL)
        goto out;
    if ((rc = gs__kube_read_token(path, &cfg->token, diag)) != GS_OK)
        goto out;
    (void)snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        gs__kube_diag_set(diag, path, "cannot read '%s': %s", path, strerror(errno));
        rc = GS_EIO;
        goto out;
    }
    (void)fclose(f);
    rc = GS_ENOMEM;
    if ((cfg->ca_file = strdup(path)) == NULL)
        goto out;
    (void)snprintf(path, sizeof path, "%s/namespace", sa_dir);
    char *ns = NULL;
    struct gs_kube_diag ignore;
    if (gs__kube_read_token(path, &ns, &ignore) == GS_OK)
        cfg->namespace_ = ns;
    rc = GS_OK;
out:
    if (rc != GS_OK)
        gs_kube_config_fini(cfg);
    return rc;
}

int gs_kube_config_load_default(struct gs_kube_config *cfg, struct gs_kube_diag *diag)
{
    char path[1024];
    const char *kc = getenv("KUBECONFIG");
    if (kc != NULL && kc[0] != '\0') {
        size_t n = strcspn(kc, ":");
        if (n >= sizeof path)
            n = sizeof path - 1;
        memcpy(path, kc, n);
        path[n] = '\0';
        return gs_kube_config_load_file(path, cfg, diag);
    }
    const char *h = getenv("KUBERNETES_SERVICE_HOST");
    if (h != NULL && h[0] != '\0')
        return gs_kube_config_load_in_cluster(NULL, cfg, diag);
    const char *home = getenv("HOME");
    (void)snprintf(path, sizeof path, "%s/.kube/config", home != NULL ? home : "");
    return gs_kube_config_load_file(path, cfg, diag);
}
