/*
 * Paged lists (contract in include/gpusched/kube.h), as the API Concepts page describes
 * "Retrieving large results sets in chunks": ask with `limit`, follow `metadata.continue` until
 * it is empty; every page is served from the snapshot of the first, so the list's
 * resourceVersion is one. A continue token lives about five minutes; when it has expired the
 * server answers 410 and the list starts again from the first page (client-go's pager does
 * the same, falling back to a full list).
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include "kube_int.h"

#include "gpusched/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/** Restarts after an expired continue token before giving up. */
#define LIST_MAX_RESTARTS 3

void gs_kube_list_fini(struct gs_kube_list *l)
{
    if (l == NULL)
        return;
    json_decref(l->items);
    free(l->resource_version);
    memset(l, 0, sizeof *l);
}

/* Percent-encodes everything but RFC 3986 unreserved bytes. */
static char *escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(n * 3 + 1), *p = o;
    if (o == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
        }
    }
    *p = '\0';
    return o;
}

/* The URL path of one page. */
static char *page_path(const char *path, const char *query, uint32_t limit, const char *cont)
{
    char *ec = cont != NULL ? escape(cont) : NULL;
    if (cont != NULL && ec == NULL)
        return NULL;
    size_t n =
        strlen(path) + (query != NULL ? strlen(query) : 0) + (ec != NULL ? strlen(ec) : 0) + 64;
    char *o = malloc(n);
    if (o != NULL) {
        int k = snprintf(o, n, "%s", path);
        char sep = '?';
        if (query != NULL && query[0] != '\0') {
            k += snprintf(o + k, n - (size_t)k, "%c%s", sep, query);
            sep = '&';
        }
        if (limit > 0) {
            k += snprintf(o + k, n - (size_t)k, "%climit=%u", sep, limit);
            sep = '&';
        }
        if (ec != NULL)
            (void)snprintf(o + k, n - (size_t)k, "%ccontinue=%s", sep, ec);
    }
    free(ec);
    return o;
}

/* Appends a page's items, giving each the kind and apiVersion the server leaves out. */
static int take_items(json_t *body, json_t *items)
{
    json_t *v = json_object_get(body, "items");
    json_t *kind = json_object_get(body, "kind");
    json_t *api = json_object_get(body, "apiVersion");
    char item_kind[128] = "";
    if (v == NULL || json_is_null(v))
        return GS_OK;
    if (!json_is_array(v))
        return GS_EPARSE;
    if (json_is_string(kind)) {
        const char *k = json_string_value(kind);
        size_t n = strlen(k);
        if (n > 4 && n < sizeof item_kind && strcmp(k + n - 4, "List") == 0) {
            memcpy(item_kind, k, n - 4);
            item_kind[n - 4] = '\0';
        }
    }
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it)
    {
        if (!json_is_object(it))
            return GS_EPARSE;
        if (item_kind[0] != '\0' && json_object_get(it, "kind") == NULL &&
            json_object_set_new(it, "kind", json_string(item_kind)) != 0)
            return GS_ENOMEM;
        if (json_is_string(api) && json_object_get(it, "apiVersion") == NULL &&
            json_object_set(it, "apiVersion", api) != 0)
            return GS_ENOMEM;
        if (json_array_append(items, it) != 0)
            return GS_ENOMEM;
    }
    return GS_OK;
}

int gs_kube_list(struct gs_kube_client *c, const char *path, const char *query, uint32_t limit,
                 struct gs_kube_list *out, struct gs_kube_response *resp_out)
{
    struct gs_kube_response resp = {.retry_after_s = -1};
    char *cont = NULL, *url = NULL;
    int rc = GS_EINVAL;
    uint32_t restarts = 0;
    if (resp_out != NULL) {
        memset(resp_out, 0, sizeof *resp_out);
        resp_out->retry_after_s = -1;
    }
    if (out == NULL)
        return GS_EINVAL;
    memset(out, 0, sizeof *out);
    if (c == NULL || path == NULL || path[0] != '/' || strchr(path, '?') != NULL)
        return GS_EINVAL;
restart:
    gs_kube_list_fini(out);
    out->restarts = restarts;
    rc = GS_ENOMEM;
    if ((out->items = json_array()) == NULL)
        goto out;
    for (;;) {
        free(url);
        if ((url = page_path(path, query, limit, cont)) == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
        rc = gs_kube_request(c, GS_KUBE_GET, url, NULL, &resp);
        if (rc == GS_EGONE && cont != NULL && restarts < LIST_MAX_RESTARTS) {
            /* The continue token expired: start over from a fresh snapshot. */
            restarts++;
            free(cont);
            cont = NULL;
            gs_kube_response_fini(&resp);
            goto restart;
        }
        if (rc != GS_OK)
            goto out;
        out->pages++;
        json_t *md = json_object_get(resp.body, "metadata");
        if (!json_is_object(resp.body) || !json_is_object(md)) {
            rc = GS_EPARSE;
            (void)snprintf(resp.message, sizeof resp.message, "list response has no metadata");
            goto out;
        }
        rc = take_items(resp.body, out->items);
        if (rc != GS_OK) {
            (void)snprintf(resp.message, sizeof resp.message, "list items are not objects");
            goto out;
        }
        json_t *rv = json_object_get(md, "resourceVersion");
        if (json_is_string(rv)) {
            free(out->resource_version);
            if ((out->resource_version = strdup(json_string_value(rv))) == NULL) {
                rc = GS_ENOMEM;
                goto out;
            }
        }
        json_t *next = json_object_get(md, "continue");
        free(cont);
        cont = NULL;
        if (!json_is_string(next) || json_string_value(next)[0] == '\0')
            break;
        if ((cont = strdup(json_string_value(next))) == NULL) {
            rc = GS_ENOMEM;
            goto out;
        }
        gs_kube_response_fini(&resp);
    }
    if (out->resource_version == NULL) {
        rc = GS_EPARSE;
        (void)snprintf(resp.message, sizeof resp.message, "list has no resourceVersion");
        goto out;
    }
    rc = GS_OK;
out:
    if (rc != GS_OK) {
        gs_kube_list_fini(out);
        if (resp_out != NULL) {
            *resp_out = resp;
            resp.body = NULL;
        }
    }
    gs_kube_response_fini(&resp);
    free(cont);
    free(url);
    return rc;
}
