/*
 * The mutating admission webhook of `gpusched scheduler`: it makes pods that ask for a GPU
 * fraction the way KAI writes it (annotation `gpu-fraction: "0.5"` or `gpu-memory: "4096"`, and
 * no device resource) also ask for one `gpusched.io/gpu-slice`, the device-plugin resource the
 * node agent advertises on shared GPUs, so that kubelet calls the agent's Allocate for them and
 * the pods run unchanged.
 *
 * Two parts: gs_webhook_review() answers one AdmissionReview (admission.k8s.io/v1; JSON in,
 * JSON out, no I/O, for tests and the fuzz target), and gs_webhook_server_*() serves it over
 * HTTPS (libmicrohttpd with GnuTLS) at GS_WEBHOOK_PATH from libmicrohttpd's own thread.
 *
 * The AdmissionReview contract: https://kubernetes.io/docs/reference/access-authn-authz/
 * extensible-admission-controllers/#request and #response (a response names the request's uid;
 * a patch is base64 of an RFC 6902 JSON Patch with patchType "JSONPatch").
 */
#ifndef GPUSCHED_WEBHOOK_H
#define GPUSCHED_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The extended resource one fraction pod is given (the node agent advertises it). */
#define GS_WEBHOOK_SLICE_RESOURCE "gpusched.io/gpu-slice"
/** The path the webhook is served at. */
#define GS_WEBHOOK_PATH "/mutate-pods"
/** The largest request body read, bytes (the API server's objects are at most ~1.5 MiB, and a
 * review of a CREATE carries one object). A larger body is answered 413. */
#define GS_WEBHOOK_BODY_MAX 3145728u /* 3 MiB */

/** What gs_webhook_review() decided. */
enum gs_webhook_outcome {
    GS_WEBHOOK_PATCHED = 0,    /**< allowed, with a patch adding the slice */
    GS_WEBHOOK_UNCHANGED = 1,  /**< allowed, no patch (not ours, not a fraction, already asks) */
    GS_WEBHOOK_BAD_REVIEW = 2, /**< not an AdmissionReview v1 we can answer: HTTP 400 */
};

/** The answer to one review. Owned by the caller; release with gs_webhook_answer_fini(). */
struct gs_webhook_answer {
    enum gs_webhook_outcome outcome; /**< what was decided */
    unsigned http_status;            /**< 200 (an AdmissionReview) or 400 (a v1 Status) */
    char *body;                      /**< malloc'd JSON text, NUL-terminated */
    size_t body_len;                 /**< strlen(body) */
    char pod[320];    /**< "ns/name" (generateName + "*" before a name is given); "" if unknown */
    char detail[512]; /**< one line on why, for the log: the field and value that decided it */
};

/**
 * Answers one AdmissionReview. A Pod CREATE whose spec.schedulerName is scheduler_name, whose
 * annotations hold `gpu-fraction` or `gpu-memory`, and none of whose containers (nor init
 * containers) asks for `nvidia.com/gpu` or GS_WEBHOOK_SLICE_RESOURCE in limits or requests, is
 * allowed with a JSON Patch that adds `gpusched.io/gpu-slice: "1"` to the first container's
 * resources.limits and resources.requests (creating either map, or resources, where missing).
 * Every other review of a well-formed request is allowed with no patch; a fraction annotation
 * that is not a number in (0, 1] (gpu-fraction) or a positive count of MiB (gpu-memory) is
 * allowed unpatched with a response warning naming the annotation and its value, since the
 * scheduler then keeps the pod pending with that reason anyway.
 *
 * A body that is not JSON, not an object of apiVersion admission.k8s.io/v1 kind AdmissionReview,
 * without request.uid (a string of 1..128 bytes), or whose Pod object is not an object, is
 * answered 400 with a metav1 Status whose message names the field ("request.uid: missing").
 *
 * @param scheduler_name  the spec.schedulerName served (e.g. "gpusched"); borrowed.
 * @param body            the request body, len bytes, need not be NUL-terminated; borrowed.
 * @param out             receives the answer; zeroed first. On failure it holds nothing.
 * @return GS_OK (an answer of either status is in out); GS_EINVAL (NULL argument);
 *         GS_ENOMEM.
 * Thread-safe: no state of its own.
 */
int gs_webhook_review(const char *scheduler_name, const char *body, size_t len,
                      struct gs_webhook_answer *out);

/** Frees the answer's body and zeroes it. NULL is a no-op. */
void gs_webhook_answer_fini(struct gs_webhook_answer *a);

/** The HTTPS server. Opaque. */
struct gs_webhook_server;

/** How to serve. Strings are borrowed for the call to gs_webhook_server_start() only, except
 * scheduler_name and log_ud, which must stay valid until gs_webhook_server_free(). */
struct gs_webhook_server_opts {
    const char *addr;           /**< "HOST:PORT", numeric host ("0.0.0.0:9443", "[::]:9443");
                                     port 0 picks a free one */
    const char *cert_file;      /**< PEM certificate chain, the server's first */
    const char *key_file;       /**< PEM private key of that certificate */
    const char *scheduler_name; /**< as gs_webhook_review() */
    /** Called from the server's thread for each review answered and each refused request;
     * level is "info" or "warn". May be NULL. */
    void (*log)(void *ud, const char *level, const char *msg);
    void *log_ud; /**< passed to log */
};

/**
 * Reads the certificate and key (each at most 1 MiB), checks they are PEM and belong together
 * (GnuTLS), and serves on addr: POST GS_WEBHOOK_PATH with a JSON body answers as
 * gs_webhook_review() does; GET /healthz answers 200 "ok"; another method on the path 405, a
 * body over GS_WEBHOOK_BODY_MAX 413, any other path 404.
 * @param port_out  receives the port bound; may be NULL.
 * @param err       receives a one-line message naming the file or address on failure; may be
 *                  NULL; err_cap its size.
 * @return GS_OK; GS_EINVAL (bad address, NULL option); GS_EIO (a file cannot be read, or the
 *         address cannot be bound); GS_EPARSE (not a PEM certificate and matching key);
 *         GS_ENOMEM. Nothing is left running on failure.
 */
int gs_webhook_server_start(const struct gs_webhook_server_opts *opts,
                            struct gs_webhook_server **out, uint16_t *port_out, char *err,
                            size_t err_cap);

/** Stops serving (waiting for the server's thread: no review runs after it) and frees. NULL
 * is a no-op. */
void gs_webhook_server_free(struct gs_webhook_server *w);

#endif /* GPUSCHED_WEBHOOK_H */
