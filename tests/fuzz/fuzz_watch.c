/*
 * libFuzzer target for the watch-stream framing parser (src/k8s/watch.c). The first input byte
 * picks how the rest is cut into feeds (piece sizes from a small xorshift seeded by it), so one
 * input checks that framing does not depend on where the network splits the stream. Besides
 * the sanitizers' checks it asserts the parser's contract: the same events come out of the
 * whole input fed at once and fed in pieces (up to the first error, which is the same code);
 * every event has a known type and an object; a failure leaves a message and stays sticky;
 * the bound on one event (a small one here, 4 KiB, so it is reached) is never passed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpusched/err.h"
#include "gpusched/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENT 4096

static void check(int ok)
{
    if (!ok)
        abort();
}

/* A digest of the events seen, so two runs can be compared cheaply. */
struct digest {
    uint64_t h;
    uint64_t n;
};

static int on_event(void *ud, const struct gs_kube_watch_event *ev)
{
    struct digest *d = ud;
    check(ev->type <= GS_KUBE_EVENT_ERROR);
    check(json_is_object(ev->object));
    check(ev->reason != NULL && ev->message != NULL);
    char *text = json_dumps(ev->object, JSON_COMPACT | JSON_SORT_KEYS);
    if (text != NULL) {
        for (const char *p = text; *p != '\0'; p++)
            d->h = (d->h ^ (uint8_t)*p) * 1099511628211u;
        check(strlen(text) <= MAX_EVENT * 6 + 16); /* escapes may grow it, never unbounded */
        free(text);
    }
    d->h = (d->h ^ (uint64_t)ev->type) * 1099511628211u;
    d->n++;
    return GS_OK;
}

static int run(const uint8_t *data, size_t size, uint8_t seed, struct digest *d)
{
    struct gs_kube_watch_parser *p = NULL;
    if (gs_kube_watch_parser_new(MAX_EVENT, &p) != GS_OK)
        return GS_ENOMEM;
    uint32_t x = seed | 1u;
    size_t off = 0;
    int rc = GS_OK;
    while (off < size && rc == GS_OK) {
        size_t piece = size - off;
        if (seed != 0) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            piece = 1 + x % 97;
            if (piece > size - off)
                piece = size - off;
        }
        rc = gs_kube_watch_parser_feed(p, data + off, piece, on_event, d);
        off += piece;
    }
    if (rc == GS_OK)
        rc = gs_kube_watch_parser_finish(p);
    if (rc != GS_OK) {
        check(gs_kube_watch_parser_error(p)[0] != '\0');
        /* Sticky: more data gives the same code. */
        check(gs_kube_watch_parser_feed(p, "{}", 2, on_event, d) == rc);
    }
    gs_kube_watch_parser_free(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t seed = data[0];
    data++;
    size--;
    struct digest whole = {14695981039346656037u, 0}, pieces = {14695981039346656037u, 0};
    int a = run(data, size, 0, &whole);
    int b = run(data, size, seed == 0 ? 1 : seed, &pieces);
    if (a == GS_ENOMEM || b == GS_ENOMEM)
        return 0;
    check(a == b);
    check(whole.n == pieces.n && whole.h == pieces.h);
    check(a == GS_OK || a == GS_EPARSE || a == GS_ELIMIT);
    return 0;
}
