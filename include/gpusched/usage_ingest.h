/*
 * Utilisation samples into the accounting store from a Prometheus server's HTTP API, or from
 * one scrape of a node agent's /metrics in the text exposition format (gs_usage_ingest_agent(),
 * at the end).
 *
 * The client reads `/api/v1/query_range` (https://prometheus.io/docs/prometheus/latest/querying/
 * api/#range-queries) for a PromQL query, by default `DCGM_FI_DEV_GPU_UTIL` as the node agent's
 * exporter and NVIDIA's dcgm-exporter publish it (labels gpu, UUID, Hostname, and namespace, pod,
 * container for the pods on that GPU), and gs_usage_ingest_matrix() maps each sample to the pod
 * that held that GPU at that time by the store's allocation intervals:
 *
 *   - the GPU: the series' UUID label against the interval's GPU UUID when both are known,
 *     else its node (label Hostname, else node) and device index (label gpu);
 *   - a series with namespace and pod labels counts for the interval of that pod on that GPU
 *     at that time; one without counts for the GPU's only holder, and is skipped (counted in
 *     skipped_shared) when several pods hold the GPU then;
 *   - on a GPU held by several pods, dcgm-exporter repeats the whole GPU's utilisation on every
 *     pod's series (dcgm-exporter issue #587), so a pod is written the GPU's value times its
 *     charged share over the sum of the charged shares of the pods holding the GPU then: two
 *     pods at 0.50 and 0.25 of a GPU at 60 % are written 40 % and 20 %, which add up to the 60 %
 *     the GPU did. A pod alone on a GPU is written the GPU's value whatever its share.
 *   - a series with a pod_uid label (the node agent's per-process values, issue 9: the sum of
 *     that pod's processes on the GPU) counts for the interval of the pod with that UID on that
 *     GPU at that time, as it is: it is the pod's own measurement, not the GPU's, so it is not
 *     split again. No interval of that UID then: skipped_other_pod.
 *   - MIG series (a GPU_I_ID label) are skipped (skipped_mig): their value is the instance's,
 *     not the GPU's.
 *
 * Samples are written with gs_usage_add_util(), whose key (pod, node, GPU, time) makes a
 * period ingested twice hold its samples once. Depends on libcurl and jansson; not thread-safe
 * per store (usage.h), re-entrant otherwise.
 */
#ifndef GPUSCHED_USAGE_INGEST_H
#define GPUSCHED_USAGE_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "gpusched/usage.h"

/** One series of a range query's matrix: its labels and its samples in time order. */
struct gs_prom_series {
    char **label_names;  /**< nlabels names, owned by the matrix */
    char **label_values; /**< nlabels values, owned by the matrix */
    uint32_t nlabels;
    int64_t *t_ms; /**< n sample times, Unix ms */
    double *value; /**< n sample values (NaN and infinities as Prometheus wrote them) */
    uint32_t n;
};

/** A range query's result (resultType "matrix"). Free with gs_prom_matrix_free(). */
struct gs_prom_matrix {
    struct gs_prom_series *series; /**< nseries series, owned */
    uint32_t nseries;
    uint64_t nsamples; /**< samples over all series */
};

/**
 * Parses the body of a `/api/v1/query_range` response.
 * @param body  len bytes of JSON; borrowed, need not be NUL-terminated.
 * @param out   receives the matrix (free with gs_prom_matrix_free()); NULL on failure.
 * @param msg   receives a sentence on failure (cap bytes) naming the field, e.g.
 *              "data.result[2].values[7][1]: expected a number as a string, got 12";
 *              for `"status":"error"` the server's errorType and error.
 * @return GS_OK; GS_EPARSE (not JSON, a field missing or of the wrong type, a resultType other
 *         than "matrix", more than 2^32-1 series or samples in one series); GS_EREJECTED
 *         (status "error": the server refused the query); GS_ENOMEM.
 */
int gs_prom_parse_range(const char *body, size_t len, struct gs_prom_matrix **out, char *msg,
                        size_t cap);

/** Frees a matrix. NULL is a no-op. */
void gs_prom_matrix_free(struct gs_prom_matrix *m);

/**
 * The value of a series' label, or NULL when it has none (an empty value counts as none, as in
 * PromQL). Borrowed from the matrix.
 */
const char *gs_prom_label(const struct gs_prom_series *s, const char *name);

/** One range query. Strings borrowed. */
struct gs_prom_range {
    const char *base_url; /**< the server, "http://host:9090" or with a path prefix; http(s) */
    const char *query;    /**< PromQL */
    int64_t start_ms;     /**< first evaluation time, Unix ms */
    int64_t end_ms;       /**< last evaluation time at most, Unix ms, >= start_ms */
    int64_t step_ms;      /**< resolution, ms, >= 1000 (Prometheus' own limit: the range holds
                               at most 11,000 steps) */
    long timeout_ms;      /**< whole request, ms; 0: 30,000 */
};

/**
 * Runs one range query with libcurl (GET, no proxy from the environment, redirects not
 * followed) and parses its result.
 * @param out  receives the matrix; NULL on failure.
 * @param msg  receives a sentence naming the URL on failure (cap bytes).
 * @return GS_OK; GS_EINVAL (a URL that is not http:// or https://, a bad range or step);
 *         GS_EIO (cannot resolve or connect, a body over 512 MiB); GS_ETIMEDOUT (no answer
 *         within timeout_ms); GS_EHTTP (an HTTP status other than 200 without a Prometheus
 *         error body); GS_EREJECTED (the server's error body: its errorType and error in
 *         msg); GS_EPARSE (a malformed body, the field named); GS_ENOMEM.
 */
int gs_prom_query_range(const struct gs_prom_range *q, struct gs_prom_matrix **out, char *msg,
                        size_t cap);

/** What an ingest did, in samples (one value of one series at one time). */
struct gs_usage_ingest_stats {
    uint64_t series;            /**< series read, summed over the queries */
    uint64_t samples;           /**< samples read inside the period */
    uint64_t written;           /**< samples written (gs_usage_add_util() calls) */
    uint64_t skipped_shared;    /**< without pod labels on a GPU several pods held then */
    uint64_t skipped_no_holder; /**< on a GPU no interval of the store held then */
    uint64_t skipped_other_pod; /**< with pod labels of a pod not holding that GPU then */
    uint64_t skipped_no_gpu;    /**< series without a UUID, or without node and gpu labels */
    uint64_t skipped_mig;       /**< MIG instance series (GPU_I_ID label) */
    uint64_t skipped_value;     /**< NaN, or outside 0..100 */
    uint64_t queries;           /**< range queries run */
};

/**
 * Writes the samples of a matrix that fall in [from_ms, to_ms) to the store, mapped to pods as
 * the file comment says, in the store's open batch (the caller commits). Counts into *stats
 * (added to, not reset).
 * @param s      a store opened for writing; borrowed.
 * @param m      the samples; borrowed.
 * @param msg    receives a sentence on failure (cap bytes).
 * @return GS_OK; GS_EIO or GS_ENOMEM from the store (what was written in the open batch is
 *         the caller's to commit or drop).
 */
int gs_usage_ingest_matrix(struct gs_usage_store *s, const struct gs_prom_matrix *m,
                           int64_t from_ms, int64_t to_ms, struct gs_usage_ingest_stats *stats,
                           char *msg, size_t cap);

/** Options of gs_usage_ingest_prometheus(). Strings borrowed. */
struct gs_usage_ingest_options {
    const char *base_url; /**< the Prometheus server */
    const char *query;    /**< NULL: "DCGM_FI_DEV_GPU_UTIL" */
    int64_t from_ms;      /**< period start, Unix ms; INT64_MIN: the first interval's start */
    int64_t to_ms;        /**< period end, exclusive; INT64_MAX: the last interval's end (an open
                               one: the last committed heartbeat) */
    int64_t step_ms;      /**< 0: 60,000 */
    long timeout_ms;      /**< per query; 0: 30,000 */
};

/**
 * Reads the utilisation of the period from Prometheus and writes it to the store: range queries
 * of at most 1,440 steps each (a day at 60 s), evaluated at from, from + step, ... below to; each
 * query's samples written and committed as one transaction (the heartbeat is not moved). A failure
 * keeps what earlier queries committed; ingesting the period again completes it.
 * @param s      a store opened for writing, no batch open; borrowed.
 * @param stats  receives the counts (reset first).
 * @param from_used, to_used  receive the period used (Unix ms); may be NULL.
 * @return GS_OK; GS_ENOENT (the store has no allocation interval, so no period and no pod to
 *         map to); GS_EINVAL (bad options: from >= to, step under 1 s); and the errors of
 *         gs_prom_query_range() and gs_usage_ingest_matrix(), msg naming the cause.
 */
int gs_usage_ingest_prometheus(struct gs_usage_store *s, const struct gs_usage_ingest_options *opt,
                               struct gs_usage_ingest_stats *stats, int64_t *from_used,
                               int64_t *to_used, char *msg, size_t cap);

/* ---- a scrape target's text, the node agent's /metrics ------------------------------------ */

/**
 * Parses the Prometheus text exposition format 0.0.4 (what a scrape target such as the node
 * agent's /metrics serves; src/usage/prom_text.c names the grammar) into a matrix of one sample
 * per series line. Comments (# HELP, # TYPE, others) and blank lines are skipped.
 * @param body    len bytes; borrowed, need not be NUL-terminated.
 * @param metric  keep only the samples of this metric name; NULL: all.
 * @param t_ms    the time of samples without a timestamp (the scrape's), Unix ms.
 * @param out     receives the matrix (free with gs_prom_matrix_free()); NULL on failure.
 * @param msg     receives a sentence naming the line on failure, e.g. "line 7:
 *                DCGM_FI_DEV_GPU_UTIL: expected a number as the value, got 'high'".
 * @return GS_OK; GS_EPARSE (a line that is not a comment, blank or a sample; a label given
 *         twice, more than 64 labels, a value over 4,095 bytes, an unknown escape, a NUL byte);
 *         GS_ENOMEM. Pure, re-entrant.
 */
int gs_prom_parse_text(const char *body, size_t len, const char *metric, int64_t t_ms,
                       struct gs_prom_matrix **out, char *msg, size_t cap);

/** Options of gs_usage_ingest_agent(). Strings borrowed. */
struct gs_usage_agent_options {
    const char *source; /**< an agent's /metrics URL (http:// or https://) or a file holding a
                             scrape of it */
    const char *metric; /**< NULL: "DCGM_FI_DEV_GPU_UTIL" */
    int64_t t_ms;       /**< time of samples without a timestamp; INT64_MIN: now for a URL,
                             the file's modification time for a file */
    long timeout_ms;    /**< a URL's request; 0: 30,000 */
};

/**
 * Reads one scrape of a node agent's /metrics (or of dcgm-exporter's, same names and labels)
 * and writes its utilisation samples to the store, mapped to pods and shared as
 * gs_usage_ingest_matrix() does: the agent's per-pod series carry the whole GPU's value
 * (exporter.h), so on a GPU several pods hold each is written its share of it. One transaction
 * (the heartbeat is not moved).
 * @param s      a store opened for writing, no batch open; borrowed.
 * @param stats  receives the counts (reset first).
 * @param t_used receives the scrape time used (Unix ms); may be NULL.
 * @return GS_OK; GS_EINVAL (read-only store, a batch open, a bad URL); GS_EIO (a file that
 *         cannot be read, the network); GS_ETIMEDOUT; GS_EHTTP; GS_EPARSE (the text, its line
 *         named after the source); GS_ENOMEM; the store's errors.
 */
int gs_usage_ingest_agent(struct gs_usage_store *s, const struct gs_usage_agent_options *opt,
                          struct gs_usage_ingest_stats *stats, int64_t *t_used, char *msg,
                          size_t cap);

#endif /* GPUSCHED_USAGE_INGEST_H */
