/*
 * gpusched whatif: a cluster dump (and optionally a timeline of changes) through the same
 * translation and core as the Kubernetes scheduler, offline. It prints what gpusched would bind,
 * evict and leave pending, with reasons: how a user tries a queue configuration on a copy of
 * their cluster, and how the scheduling semantics are tested without an API server.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cmd.h"
#include "gpusched/err.h"
#include "gpusched/kquantity.h"
#include "gpusched/kube.h"
#include "gpusched/kworld.h"
#include "gpusched/sched.h"
#include "k8s/yamljson.h"

#define FILE_MAX (512u << 20)

static const char *const usage =
    "usage: gpusched whatif (--cluster FILE | --kubeconfig FILE | --live) [--timeline FILE]\n"
    "                       [--json] [--max-cycles N] [--policy NAME] [--default-queue NAME]\n"
    "                       [--scheduler-name NAME] [--kai-preemptible-threshold[=N]]\n"
    "\n"
    "Runs a cluster dump through gpusched's scheduler offline and prints what it would bind,\n"
    "evict and leave pending, with reasons. The dump is what this command writes:\n"
    "  kubectl get nodes,pods,priorityclasses,queues.scheduling.gpusched.io,\\\n"
    "      podgroups.scheduling.x-k8s.io,poddisruptionbudgets -A -o yaml > cluster.yaml\n"
    "(a List; YAML or JSON). Pods with spec.nodeName run there; pods with\n"
    "spec.schedulerName: gpusched and no node are placed.\n"
    "\n"
    "  --cluster FILE       the dump\n"
    "  --kubeconfig FILE    read the same objects from a live API server instead (list only:\n"
    "                       nothing is written to the cluster)\n"
    "  --live               as --kubeconfig, with $KUBECONFIG, else in a pod its service\n"
    "                       account, else ~/.kube/config\n"
    "  --timeline FILE      a YAML list of steps, each with `at` (90s, 5m, 1h30m) and one of:\n"
    "                       create: [objects], finish: [ns/name], delete: [ns/name],\n"
    "                       cordon: [node], uncordon: [node], deleteNode: [node],\n"
    "                       gpuHealth: {node: N, gpu: INDEX, healthy: BOOL} (or a list);\n"
    "                       a create of a Node or Queue that exists updates it, of a Pod\n"
    "                       that exists is refused (deleted pods may be created again)\n"
    "  --json               one JSON object per line instead of a table\n"
    "  --max-cycles N       cycles after the dump and after each step before giving up\n"
    "                       (default 100)\n"
    "  --policy NAME        placement policy (default fgd)\n"
    "  --default-queue Q    queue of pods without a queue label (default: default)\n"
    "  --scheduler-name S   spec.schedulerName of gpusched's pods (default: gpusched)\n"
    "  --kai-preemptible-threshold[=N]\n"
    "                       KAI-Scheduler's rule: a PriorityClass without the label\n"
    "                       gpusched.io/preemptible is preemptible only when its value is\n"
    "                       below N (default 100); without this option every such class is\n"
    "                       preemptible. The label (\"false\": never a victim) wins\n"
    "\n"
    "Preemption and reclaim are on, backfill off, as in the scheduler.\n"
    "Exit: 0 settled; 2 bad usage or input (then only the message is printed, none of the\n"
    "report); 3 a scheduling did not settle within --max-cycles (the report up to there);\n"
    "1 internal error.\n";

struct run {
    bool json;
    int64_t base_ms; /* the dump's "now": its latest timestamp; t_s counts from it */
    int64_t t_ms;
    const char *where; /* the file whose objects the next cycle reads: named in messages */
    uint32_t cycle;
    uint32_t lines;
    FILE *out; /* the report, held until the run ends: bad input prints none of it */
    /* What the run knows of each object, by its key (object_key(): "ns/name" for a pod,
     * "node NAME" for a node): {"where": where it was created ("items[3]"), "ended": what
     * ended the pod or node and when ("finished at t_s 2.0")}, each member only once known. */
    json_t *objects;
};

/* The entry of `key` in r->objects, added empty when there is none; NULL out of memory. */
static json_t *object_entry(struct run *r, const char *key)
{
    json_t *e = json_object_get(r->objects, key);
    if (!e && r->objects && json_object_set_new(r->objects, key, json_object()) == 0)
        e = json_object_get(r->objects, key);
    return e;
}

/* Member `field` ("where", "ended") of the entry of `key`; NULL when not known. */
static const char *object_field(const struct run *r, const char *key, const char *field)
{
    return json_string_value(json_object_get(json_object_get(r->objects, key), field));
}

static void print_line(struct run *r, json_t *o)
{
    if (r->json) {
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s) {
            (void)fprintf(r->out, "%s\n", s);
            free(s);
        }
    } else {
        const char *ev = json_string_value(json_object_get(o, "event"));
        const char *pod = json_string_value(json_object_get(o, "pod"));
        const char *node = json_string_value(json_object_get(o, "node"));
        const char *why = json_string_value(json_object_get(o, "reason"));
        char gpus[400] = "";
        size_t len = 0;
        json_t *arr = json_object_get(o, "gpus");
        for (size_t i = 0; i < json_array_size(arr) && len + 48 < sizeof(gpus); i++) {
            json_t *g = json_array_get(arr, i);
            long long milli = json_integer_value(json_object_get(g, "milli"));
            json_t *mem = json_object_get(g, "mem_mib");
            json_t *mig = json_object_get(g, "mig");
            int w = snprintf(gpus + len, sizeof(gpus) - len, "%s%lld", i ? "," : "",
                             json_integer_value(json_object_get(g, "index")));
            if (w > 0)
                len += (size_t)w;
            /* index(300m) a compute share, index(300m+20000MiB) with memory, index(3g.71gb@4)
             * a MIG instance (index(3g.71gb) on a node read from capacity, start unknown),
             * index(slot) a time-sliced slot; a bare index is a whole GPU. */
            if (json_is_object(mig) && !json_is_integer(json_object_get(mig, "start")))
                w = snprintf(gpus + len, sizeof(gpus) - len, "(%s)", /* start unknown */
                             json_string_value(json_object_get(mig, "profile")));
            else if (json_is_object(mig))
                w = snprintf(gpus + len, sizeof(gpus) - len, "(%s@%lld)",
                             json_string_value(json_object_get(mig, "profile")),
                             json_integer_value(json_object_get(mig, "start")));
            else if (json_is_integer(mem) && milli > 0)
                w = snprintf(gpus + len, sizeof(gpus) - len, "(%lldm+%lldMiB)", milli,
                             json_integer_value(mem));
            else if (json_is_integer(mem))
                w = snprintf(gpus + len, sizeof(gpus) - len, "(%lldMiB)", json_integer_value(mem));
            else if (milli == 0)
                w = snprintf(gpus + len, sizeof(gpus) - len, "(slot)");
            else if (milli < 1000)
                w = snprintf(gpus + len, sizeof(gpus) - len, "(%lldm)", milli);
            else
                w = 0;
            if (w > 0)
                len += (size_t)w;
        }
        if (r->lines++ == 0)
            (void)fprintf(r->out, "%8s %5s  %-7s %-40s %-20s %-12s %s\n", "t_s", "cycle", "event",
                          "pod", "node", "gpus", "reason");
        const char *by = json_string_value(json_object_get(o, "by"));
        /* Preemption and reclaim: why a victim could go, and whom a preemptor evicted. */
        const char *expl = json_string_value(json_object_get(o, "why"));
        char reason[2400];
        (void)snprintf(reason, sizeof(reason), "%s%s%s%s%s%s", why ? why : "", by ? " by " : "",
                       by ? by : "", json_is_true(json_object_get(o, "adopted")) ? "adopted" : "",
                       expl && (why || by) ? ": " : "", expl ? expl : "");
        /* Columns padded to width, but no line ends in spaces (an empty reason). */
        char line[3072];
        int n = snprintf(line, sizeof(line), "%8.1f %5lld  %-7s %-40s %-20s %-12s %s",
                         json_number_value(json_object_get(o, "t_s")),
                         json_integer_value(json_object_get(o, "cycle")), ev ? ev : "",
                         pod ? pod : "", node ? node : "-", gpus[0] ? gpus : "-", reason);
        size_t end = n < 0 ? 0 : (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
        while (end > 0 && line[end - 1] == ' ')
            end--;
        line[end] = '\0';
        (void)fprintf(r->out, "%s\n", line);
    }
    json_decref(o);
}

/* Remembers what ended a pod ("ns/name") or a node ("node NAME") and when, for the message of
 * a later timeline action on it. */
static void note_ended(struct run *r, const char *key, const char *how)
{
    char v[160];
    (void)snprintf(v, sizeof(v), "%s at t_s %.1f", how, (double)r->t_ms / 1000.0);
    json_t *e = object_entry(r, key);
    if (e)
        (void)json_object_set_new(e, "ended", json_string(v));
}

static void on_event(void *ctx, const struct gs_kevent *ev)
{
    struct run *r = ctx;
    static const char *const names[] = {"bind", "evict", "finish", "delete", "pending"};
    if (ev->kind == GS_KEV_PENDING)
        return; /* the final pending lines say why */
    char pod[512];
    (void)snprintf(pod, sizeof(pod), "%s/%s", ev->ns, ev->name);
    json_t *o = json_object();
    if (!o)
        return;
    bool adopted = ev->kind == GS_KEV_BIND && ev->adopted;
    json_object_set_new(o, "t_s", json_real(adopted ? 0.0 : (double)r->t_ms / 1000.0));
    json_object_set_new(o, "cycle", json_integer(adopted ? 0 : r->cycle));
    json_object_set_new(o, "event", json_string(names[ev->kind]));
    json_object_set_new(o, "pod", json_string(pod));
    if (ev->kind == GS_KEV_BIND || ev->kind == GS_KEV_EVICT)
        json_object_set_new(o, "node", ev->node ? json_string(ev->node) : json_null());
    if (ev->kind == GS_KEV_BIND) {
        json_t *gpus = json_array();
        for (uint32_t g = 0; g < ev->n_gpus; g++) {
            const struct gs_kgpu *kg = &ev->gpus[g];
            json_array_append_new(
                gpus,
                json_pack(
                    "{s:I,s:o,s:I,s:o,s:o}", "index", (json_int_t)kg->index, "uuid",
                    kg->uuid ? json_string(kg->uuid) : json_null(), "milli", (json_int_t)kg->milli,
                    "mem_mib", kg->mem_mib > 0 ? json_integer(kg->mem_mib) : json_null(), "mig",
                    kg->mig_profile
                        ? json_pack("{s:s,s:o}", "profile", kg->mig_profile, "start",
                                    kg->mig_start >= 0 ? json_integer(kg->mig_start) : json_null())
                        : json_null()));
        }
        json_object_set_new(o, "gpus", gpus);
        if (adopted)
            json_object_set_new(o, "adopted", json_true());
        if (ev->detail) /* a preemptor: whom it evicted (docs/queues.md) */
            json_object_set_new(o, "why", json_string(ev->detail));
    }
    if (ev->kind == GS_KEV_EVICT) {
        json_object_set_new(o, "reason", json_string(ev->reason));
        json_object_set_new(o, "by", ev->by ? json_string(ev->by) : json_null());
        if (ev->detail) /* preemption and reclaim: why this pod could be taken */
            json_object_set_new(o, "why", json_string(ev->detail));
        char how[96];
        (void)snprintf(how, sizeof(how), "evicted (%s)", ev->reason ? ev->reason : "?");
        note_ended(r, pod, how);
    } else if (ev->kind == GS_KEV_FINISH) {
        note_ended(r, pod, "finished");
    } else if (ev->kind == GS_KEV_DELETE) {
        note_ended(r, pod, "deleted");
    }
    print_line(r, o);
}

/* A bad node inventory and the like: said, and the run goes on (read from capacity). */
static void on_warning(void *ctx, const char *msg)
{
    (void)ctx;
    (void)fprintf(stderr, "gpusched whatif: warning: %s\n", msg);
}

static void on_pending(void *ctx, const char *ns, const char *name, const char *uid,
                       const char *reason)
{
    (void)uid;
    struct run *r = ctx;
    char pod[512];
    (void)snprintf(pod, sizeof(pod), "%s/%s", ns, name);
    json_t *o = json_pack("{s:f,s:I,s:s,s:s,s:s}", "t_s", (double)r->t_ms / 1000.0, "cycle",
                          (json_int_t)r->cycle, "event", "pending", "pod", pod, "reason", reason);
    if (o)
        print_line(r, o);
}

static int load(const char *path, json_t **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        (void)fprintf(stderr, "gpusched whatif: %s: cannot open: %s\n", path, strerror(errno));
        return 2;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) {
            (void)fclose(f);
            (void)fprintf(stderr, "gpusched whatif: out of memory\n");
            return 1;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            if (cap >= FILE_MAX) {
                free(buf);
                (void)fclose(f);
                (void)fprintf(stderr, "gpusched whatif: %s: larger than %u MiB\n", path,
                              FILE_MAX >> 20);
                return 2;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    bool bad = ferror(f);
    (void)fclose(f);
    if (bad) {
        free(buf);
        (void)fprintf(stderr, "gpusched whatif: %s: cannot read\n", path);
        return 2;
    }
    buf[len] = '\0';
    char err[512];
    int rc = gs_yaml_to_json(path, buf, len, out, err, sizeof(err));
    free(buf);
    if (rc) {
        (void)fprintf(stderr, "gpusched whatif: %s\n", err);
        return 2;
    }
    return 0;
}

/* What the scheduler watches, listed in an order that needs no forward reference. Queue and
 * PodGroup CRDs may be missing from a cluster: then there are none. */
static const struct {
    const char *path;
    bool required;
} live_lists[] = {
    {"/api/v1/nodes", true},
    {"/apis/scheduling.k8s.io/v1/priorityclasses", true},
    {"/apis/scheduling.gpusched.io/v1alpha1/queues", false},
    {"/apis/scheduling.run.ai/v2/queues", false}, /* KAI's */
    {"/apis/scheduling.x-k8s.io/v1alpha1/podgroups", false},
    {"/apis/scheduling.volcano.sh/v1beta1/podgroups", false}, /* Volcano's */
    {"/apis/policy/v1/poddisruptionbudgets", false},
    {"/api/v1/pods", true},
};

/* Lists the objects of a live cluster into a List document. kubeconfig NULL: the default
 * search. 0; 2 (the configuration cannot be read); 1 (the server failed a list). */
static int load_live(const char *kubeconfig, json_t **out)
{
    struct gs_kube_config cfg;
    int rc = gs__cli_kube_config("whatif", kubeconfig, &cfg);
    if (rc)
        return rc;
    struct gs_kube_client *c = NULL;
    struct gs_kube_client_opts opts = {.qps = -1};
    rc = gs_kube_client_new(&cfg, &opts, &c);
    gs_kube_config_fini(&cfg);
    if (rc) {
        (void)fprintf(stderr, "gpusched whatif: cannot make an API client: %s\n", gs_strerror(rc));
        return 1;
    }
    json_t *items = json_array();
    *out = json_pack("{s:s,s:s,s:o}", "apiVersion", "v1", "kind", "List", "items", items);
    rc = *out ? 0 : 1;
    for (size_t k = 0; !rc && k < sizeof(live_lists) / sizeof(live_lists[0]); k++) {
        struct gs_kube_list l = {0};
        struct gs_kube_response resp = {0};
        int e = gs_kube_list(c, live_lists[k].path, NULL, 500, &l, &resp);
        if (e == GS_OK) {
            if (json_array_extend(items, l.items) != 0)
                rc = 1;
        } else if (live_lists[k].required || resp.http_status != 404) {
            (void)fprintf(stderr, "gpusched whatif: list %s: %s (HTTP %ld%s%s)\n",
                          live_lists[k].path, gs_strerror(e), resp.http_status,
                          resp.message[0] ? ": " : "", resp.message);
            rc = 1;
        }
        gs_kube_list_fini(&l);
        gs_kube_response_fini(&resp);
    }
    gs_kube_client_free(c);
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

/* The latest creationTimestamp or startTime of the dump's objects: the moment it was taken, as
 * far as it tells, so that its running pods started in the past. */
static int64_t dump_time_ms(const json_t *items)
{
    int64_t latest = 0;
    for (size_t i = 0; i < json_array_size(items); i++) {
        const json_t *o = json_array_get(items, i);
        const char *ts[2] = {
            json_string_value(json_object_get(json_object_get(o, "metadata"), "creationTimestamp")),
            json_string_value(json_object_get(json_object_get(o, "status"), "startTime"))};
        for (int k = 0; k < 2; k++) {
            int64_t t;
            if (ts[k] && gs_ktime_ms(ts[k], &t) == 0 && t > latest)
                latest = t;
        }
    }
    return latest;
}

/* The objects of a dump: a List's items, an array, or one object. */
static json_t *items_of(json_t *doc)
{
    if (json_is_array(doc))
        return doc;
    json_t *items = json_object_get(doc, "items");
    if (json_is_array(items))
        return items;
    return NULL;
}

/* "90s", "5m", "1h30m", "1.5s" or a plain number of seconds, into milliseconds. */
static int duration_ms(const json_t *v, int64_t *out)
{
    if (json_is_number(v)) {
        double s = json_number_value(v);
        if (s < 0)
            return -1;
        *out = (int64_t)(s * 1000.0 + 0.5);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s)
        return -1;
    double total = 0;
    while (*s) {
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        if (end == s || errno || x < 0)
            return -1;
        double unit = 1;
        if (*end == 'h')
            unit = 3600;
        else if (*end == 'm' && end[1] == 's')
            unit = 0.001, end++;
        else if (*end == 'm')
            unit = 60;
        else if (*end == 's')
            unit = 1;
        else if (*end != '\0')
            return -1;
        total += x * unit;
        s = *end ? end + 1 : end;
    }
    *out = (int64_t)(total * 1000.0 + 0.5);
    return 0;
}

/* Cycles until a cycle changes nothing; 0 settled, 3 not within max, 1 internal. */
static int settle(struct gs_kworld *w, struct run *r, uint32_t max_cycles)
{
    for (uint32_t i = 0; i < max_cycles; i++) {
        r->cycle++;
        uint32_t changes = 0;
        char err[512] = "";
        int rc = gs_kworld_cycle(w, r->base_ms + r->t_ms, &changes, err, sizeof(err));
        if (rc == GS_EINVAL) {
            (void)fprintf(stderr, "gpusched whatif: %s: %s\n", r->where, err);
            return 2;
        }
        if (rc) {
            (void)fprintf(stderr, "gpusched whatif: %s\n", gs_strerror(rc));
            return 1;
        }
        if (changes == 0)
            return 0;
    }
    (void)fprintf(stderr,
                  "gpusched whatif: the scheduler did not settle within %u cycle%s at t=%.1fs: "
                  "cycle %u still bound or evicted pods (raise --max-cycles if this case needs "
                  "more; one that never settles is a bug to report)\n",
                  max_cycles, max_cycles == 1 ? "" : "s", (double)r->t_ms / 1000.0, r->cycle);
    return 3;
}

static int split_pod(const char *s, char *ns, size_t cap, const char **name)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || slash == s || !slash[1] || (size_t)(slash - s) >= cap)
        return -1;
    memcpy(ns, s, (size_t)(slash - s));
    ns[slash - s] = '\0';
    *name = slash + 1;
    return 0;
}

/* Whether a name action's entry is well formed: "namespace/name" for pods, a node name else. */
static bool name_ok(const char *what, const json_t *v)
{
    const char *s = json_string_value(v);
    char ns[256];
    const char *name;
    bool pod = strcmp(what, "finish") == 0 || strcmp(what, "delete") == 0;
    return s && s[0] && (!pod || split_pod(s, ns, sizeof(ns), &name) == 0);
}

static bool health_ok(const json_t *h)
{
    json_t *gpu = json_object_get(h, "gpu");
    return json_string_value(json_object_get(h, "node")) && json_is_integer(gpu) &&
           json_integer_value(gpu) >= 0 && json_is_boolean(json_object_get(h, "healthy"));
}

/*
 * Checks the timeline's shape before anything runs, so that a bad step is said before any
 * output and with the file's name: a list of mappings, each with `at` (a duration, never going
 * back) and exactly one known action whose value has the action's shape. What depends on the
 * cluster's state (does that pod exist, is it running) is checked as the step runs.
 * @return 0, or 2 with the message on stderr.
 */
static int check_timeline(const json_t *steps, const char *path)
{
    static const char *const names[] = {"finish", "delete", "cordon", "uncordon", "deleteNode"};
    if (!json_is_array(steps)) {
        (void)fprintf(stderr, "gpusched whatif: %s: the timeline must be a YAML list of steps\n",
                      path);
        return 2;
    }
    int64_t last = 0;
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *st = json_array_get(steps, i);
        int64_t at = 0;
        char what[160] = "";
        if (!json_is_object(st) || duration_ms(json_object_get(st, "at"), &at) != 0)
            (void)snprintf(what, sizeof what, "`at` must be a duration such as 90s, 5m or 1h30m");
        else if (at < last)
            (void)snprintf(what, sizeof what, "`at` goes back in time");
        else if (json_object_size(st) != 2)
            (void)snprintf(what, sizeof what, "needs exactly one action beside `at`");
        if (!what[0])
            last = at;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)st, key, val)
        {
            if (what[0] || strcmp(key, "at") == 0)
                continue;
            bool is_name = false;
            for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
                is_name = is_name || strcmp(key, names[k]) == 0;
            if (strcmp(key, "create") == 0) {
                if (!json_is_array(val) && !items_of(val))
                    (void)snprintf(what, sizeof what,
                                   "create must be a list of objects (or a List)");
            } else if (is_name) {
                if (!json_is_array(val))
                    (void)snprintf(what, sizeof what, "%s must be a list", key);
                for (size_t k = 0; !what[0] && k < json_array_size(val); k++)
                    if (!name_ok(key, json_array_get(val, k)))
                        (void)snprintf(what, sizeof what, "%s[%zu] must be %s", key, k,
                                       strcmp(key, "finish") == 0 || strcmp(key, "delete") == 0
                                           ? "namespace/name"
                                           : "a node name");
            } else if (strcmp(key, "gpuHealth") == 0) {
                bool ok = json_is_array(val) ? json_array_size(val) > 0 : health_ok(val);
                for (size_t k = 0; ok && json_is_array(val) && k < json_array_size(val); k++)
                    ok = health_ok(json_array_get(val, k));
                if (!ok)
                    (void)snprintf(what, sizeof what,
                                   "gpuHealth needs node, gpu (an index) and healthy (true or "
                                   "false), or a list of those");
            } else {
                (void)snprintf(what, sizeof what,
                               "unknown action %.40s (create, finish, delete, cordon, uncordon, "
                               "deleteNode, gpuHealth)",
                               key);
            }
        }
        if (what[0]) {
            (void)fprintf(stderr, "gpusched whatif: %s: step %zu: %s\n", path, i + 1, what);
            return 2;
        }
    }
    return 0;
}

/* The key under which a run remembers an object: "Kind ns/name" (cluster-scoped: "Kind name"),
 * then " (API group)" when it has one; a Pod is "ns/name" and a Node "node NAME", the keys of
 * the ones note_ended() uses. 0; -1 without kind or name. */
static int object_key(const json_t *o, char *key, size_t cap)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    const json_t *md = json_object_get(o, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    if (!kind || !name)
        return -1;
    if (strcmp(kind, "Pod") == 0)
        (void)snprintf(key, cap, "%s/%s", ns && ns[0] ? ns : "default", name);
    else if (strcmp(kind, "Node") == 0)
        (void)snprintf(key, cap, "node %s", name);
    else if (ns && ns[0])
        (void)snprintf(key, cap, "%s %s/%s", kind, ns, name);
    else
        (void)snprintf(key, cap, "%s %s", kind, name);
    /* Two API groups may each have a kind of that name (gpusched's and KAI's Queue): the
     * translation says what a second one of one name does. */
    const char *api = json_string_value(json_object_get(o, "apiVersion"));
    const char *slash =
        api && strcmp(kind, "Pod") != 0 && strcmp(kind, "Node") != 0 ? strchr(api, '/') : NULL;
    size_t len = strlen(key);
    if (slash && len < cap)
        (void)snprintf(key + len, cap - len, " (%.*s)", (int)(slash - api), api);
    return 0;
}

/* Refuses a second object of one name, as the API server does (AlreadyExists): in the dump any
 * kind; in a timeline's create a Pod that exists and has not ended. Other kinds go to
 * gs_kworld_apply() as they come: a Node's is an update (its new inventory), a Queue's too (its
 * new quota or limit); what other kinds do is the translation's to say. where names the object
 * ("items[3]"). 0; 2 after the message. */
static int check_new(struct run *r, const char *path, const json_t *o, const char *where, bool dump)
{
    char key[700];
    if (!r->objects || object_key(o, key, sizeof(key)) != 0)
        return 0; /* gs_kworld_apply says what is missing */
    const char *kind = json_string_value(json_object_get(o, "kind"));
    bool counted = dump || strcmp(kind, "Pod") == 0;
    const char *first = object_field(r, key, "where");
    if (counted && first && !object_field(r, key, "ended")) {
        (void)fprintf(
            stderr, "gpusched whatif: %s: %s: %s %s already exists (%s)\n", path, where, kind,
            strchr(key, ' ') && strcmp(kind, "Pod") != 0 ? strchr(key, ' ') + 1 : key, first);
        return 2;
    }
    json_t *e = object_entry(r, key);
    if (e) {
        (void)json_object_set_new(e, "where", json_string(where));
        (void)json_object_del(e, "ended");
    }
    return 0;
}

/* Applies a name action (its shape checked by check_timeline). Deleting a pod that finished
 * is allowed, as in Kubernetes (it removes a Succeeded pod, which holds nothing); any other
 * action on a pod or node that is gone says what ended it. */
static int step_names(struct gs_kworld *w, struct run *r, const char *path, const char *what,
                      json_t *list, int64_t now_ms, size_t step)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *s = json_string_value(json_array_get(list, i));
        char ns[256] = "";
        const char *name = "";
        char key[600];
        int rc = GS_OK;
        bool pod = strcmp(what, "finish") == 0 || strcmp(what, "delete") == 0;
        if (pod) {
            (void)split_pod(s, ns, sizeof(ns), &name);
            (void)snprintf(key, sizeof(key), "%s/%s", ns, name);
        } else {
            (void)snprintf(key, sizeof(key), "node %s", s);
        }
        const char *ended = object_field(r, key, "ended");
        if (ended && strcmp(what, "delete") == 0 && strncmp(ended, "finished", 8) == 0) {
            note_ended(r, key, "deleted");
            continue;
        }
        if (strcmp(what, "finish") == 0)
            rc = gs_kworld_finish_pod(w, ns, name, now_ms);
        else if (strcmp(what, "delete") == 0)
            rc = gs_kworld_delete_pod(w, ns, name, now_ms);
        else if (strcmp(what, "cordon") == 0 || strcmp(what, "uncordon") == 0)
            rc = gs_kworld_cordon(w, s, what[0] == 'c');
        else
            rc = gs_kworld_delete_node(w, s, now_ms);
        if ((rc == GS_ENOENT || rc == GS_EINVAL) && ended) {
            (void)fprintf(stderr, "gpusched whatif: %s: step %zu: %s %s: %s was already %s\n", path,
                          step + 1, what, s, pod ? "the pod" : "the node", ended);
            return 2;
        }
        if (rc == GS_ENOENT || rc == GS_EINVAL) {
            (void)fprintf(stderr, "gpusched whatif: %s: step %zu: %s %s: %s\n", path, step + 1,
                          what, s,
                          rc == GS_EINVAL ? "not running"
                          : pod           ? "no such pod"
                                          : "no such node");
            return 2;
        }
        if (rc)
            return 1;
        if (strcmp(what, "deleteNode") == 0)
            note_ended(r, key, "deleted");
    }
    return 0;
}

/* Applies gpuHealth (its shape checked by check_timeline). */
static int step_health(struct gs_kworld *w, const char *path, json_t *v, size_t step)
{
    json_t *one = json_is_array(v) ? NULL : v;
    size_t n = one ? 1 : json_array_size(v);
    for (size_t i = 0; i < n; i++) {
        json_t *h = one ? one : json_array_get(v, i);
        const char *node = json_string_value(json_object_get(h, "node"));
        json_int_t gpu = json_integer_value(json_object_get(h, "gpu"));
        int rc = gs_kworld_gpu_health(w, node, (uint32_t)gpu,
                                      json_is_true(json_object_get(h, "healthy")));
        if (rc) {
            (void)fprintf(
                stderr, "gpusched whatif: %s: step %zu: gpuHealth: node %s GPU %lld: %s\n", path,
                step + 1, node, (long long)gpu, rc == GS_ENOENT ? "no such node" : "no such GPU");
            return 2;
        }
    }
    return 0;
}

/* Runs the steps of a timeline that check_timeline() accepted. */
static int run_timeline(struct gs_kworld *w, struct run *r, json_t *steps, const char *path,
                        uint32_t max_cycles)
{
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *st = json_array_get(steps, i);
        int64_t at = 0;
        (void)duration_ms(json_object_get(st, "at"), &at);
        r->t_ms = at;
        const char *key;
        json_t *val;
        int rc = 0;
        json_object_foreach(st, key, val)
        {
            if (strcmp(key, "at") == 0)
                continue;
            if (strcmp(key, "create") == 0) {
                json_t *items = json_is_array(val) ? val : items_of(val);
                for (size_t k = 0; k < json_array_size(items) && !rc; k++) {
                    json_t *o = json_array_get(items, k);
                    /* Without creationTimestamp, its creation time is the step's. */
                    char err[512] = "", where[96];
                    (void)snprintf(where, sizeof(where), "step %zu: create[%zu]", i + 1, k);
                    if ((rc = check_new(r, path, o, where, false)) != 0)
                        break;
                    int arc = gs_kworld_apply(w, GS_KADDED, o, r->base_ms + at, err, sizeof(err));
                    if (arc == GS_EINVAL) {
                        (void)fprintf(stderr, "gpusched whatif: %s: step %zu: create[%zu]: %s\n",
                                      path, i + 1, k, err);
                        rc = 2;
                    } else if (arc) {
                        rc = 1;
                    }
                }
            } else if (strcmp(key, "gpuHealth") == 0) {
                rc = step_health(w, path, val, i);
            } else {
                rc = step_names(w, r, path, key, val, r->base_ms + at, i);
            }
        }
        if (rc || (rc = settle(w, r, max_cycles)) != 0)
            return rc;
    }
    return 0;
}

int gs_cmd_whatif(int argc, char **argv)
{
    const char *cluster = NULL, *timeline = NULL, *policy = "fgd", *dq = NULL, *sn = NULL;
    const char *kubeconfig = NULL;
    bool live = false;
    unsigned long max_cycles = 100;
    bool kai_preemptible = false;
    int32_t kai_threshold = 0;
    struct run r = {0};
    char *report = NULL; /* r.out's buffer */
    size_t report_len = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        char opt[64];
        int k;
        int inline_v = gs__cli_split(a, opt, sizeof(opt), &val);
        if (inline_v)
            a = opt;
        bool takes = strcmp(a, "--cluster") == 0 || strcmp(a, "--timeline") == 0 ||
                     strcmp(a, "--kubeconfig") == 0 || strcmp(a, "--max-cycles") == 0 ||
                     strcmp(a, "--policy") == 0 || strcmp(a, "--default-queue") == 0 ||
                     strcmp(a, "--scheduler-name") == 0;
        if (takes && gs__cli_value("whatif", a, inline_v, val, &i) != 0)
            return 2;
        if (!takes && !inline_v)
            val = NULL; /* the next argument is not this option's */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            (void)fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            r.json = true;
        } else if (strcmp(a, "--cluster") == 0) {
            cluster = val;
        } else if (strcmp(a, "--kubeconfig") == 0) {
            kubeconfig = val;
            live = true;
        } else if (strcmp(a, "--live") == 0) {
            live = true;
        } else if (strcmp(a, "--timeline") == 0) {
            timeline = val;
        } else if (strcmp(a, "--policy") == 0) {
            policy = val;
        } else if (strcmp(a, "--default-queue") == 0) {
            dq = val;
        } else if (strcmp(a, "--scheduler-name") == 0) {
            sn = val;
        } else if (strcmp(a, "--max-cycles") == 0 && val) {
            char *end;
            errno = 0;
            max_cycles = strtoul(val, &end, 10);
            if (*end || errno || max_cycles == 0 || max_cycles > 1000000 || val[0] == '-') {
                (void)fprintf(stderr, "gpusched whatif: --max-cycles must be 1..1000000\n");
                return 2;
            }
        } else if ((k = gs__cli_kai_threshold("whatif", argv[i], &kai_threshold)) != 0) {
            if (k != 1)
                return k;
            kai_preemptible = true;
        } else {
            (void)fprintf(stderr, "gpusched whatif: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (!cluster == !live) {
        (void)fprintf(stderr,
                      "gpusched whatif: give one of --cluster FILE, --kubeconfig FILE or "
                      "--live\n%s",
                      usage);
        return 2;
    }
    if (gs__cli_policy_arg("whatif", &policy) != 0)
        return 2;
    json_t *doc = NULL, *tl = NULL;
    int rc = live ? load_live(kubeconfig, &doc) : load(cluster, &doc);
    if (rc)
        return rc;
    if (live)
        cluster = kubeconfig ? kubeconfig : "the cluster";
    json_t *items = items_of(doc);
    if (!items) {
        (void)fprintf(stderr,
                      "gpusched whatif: %s: not a List of objects (kind: List, items: [...])\n",
                      cluster);
        json_decref(doc);
        return 2;
    }
    if (timeline && ((rc = load(timeline, &tl)) != 0 || (rc = check_timeline(tl, timeline)) != 0)) {
        json_decref(doc);
        json_decref(tl);
        return rc;
    }
    struct gs_kworld_config cfg; /* as the scheduler's: preemption and reclaim, no backfill */
    gs__cli_kworld_config(&cfg, sn, dq, policy, kai_preemptible, kai_threshold);
    cfg.on_event = on_event;
    cfg.on_warning = on_warning;
    cfg.ctx = &r;
    struct gs_kworld *w = NULL;
    if (gs_kworld_new(&cfg, &w) != GS_OK) {
        (void)fprintf(stderr, "gpusched whatif: out of memory\n");
        rc = 1;
        goto out;
    }
    r.base_ms = dump_time_ms(items);
    if (live) { /* a live cluster's "now" is now */
        struct timespec ts;
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        r.base_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    r.objects = json_object();
    r.out = open_memstream(&report, &report_len);
    if (!r.objects || !r.out) {
        (void)fprintf(stderr, "gpusched whatif: out of memory\n");
        rc = 1;
        goto out;
    }
    for (size_t i = 0; i < json_array_size(items) && !rc; i++) {
        char err[512] = "", where[48];
        (void)snprintf(where, sizeof(where), "items[%zu]", i);
        if ((rc = check_new(&r, cluster, json_array_get(items, i), where, true)) != 0)
            break;
        int arc =
            gs_kworld_apply(w, GS_KADDED, json_array_get(items, i), r.base_ms, err, sizeof(err));
        if (arc == GS_EINVAL) {
            (void)fprintf(stderr, "gpusched whatif: %s: items[%zu]: %s\n", cluster, i, err);
            rc = 2;
        } else if (arc) {
            rc = 1;
        }
    }
    r.where = cluster;
    if (!rc)
        rc = settle(w, &r, (uint32_t)max_cycles);
    r.where = timeline;
    if (!rc && tl)
        rc = run_timeline(w, &r, tl, timeline, (uint32_t)max_cycles);
    if (rc == 0 || rc == 3)
        gs_kworld_each_pending(w, on_pending, &r);
    if (rc == 0 && !r.json && r.lines == 0) {
        /* A table with no line would look like a failure: say what was read. */
        size_t nodes = 0, pods = 0;
        const char *key;
        json_t *val;
        json_object_foreach(r.objects, key, val)
        {
            if (!json_object_get(val, "where"))
                continue; /* ended, never created here */
            if (strncmp(key, "node ", 5) == 0)
                nodes++;
            else if (!strchr(key, ' '))
                pods++;
        }
        (void)fprintf(r.out,
                      "nothing to bind, evict or leave pending: %zu node(s) and %zu pod(s) read, "
                      "none of the pods for scheduler %s\n",
                      nodes, pods, sn ? sn : "gpusched");
    }
out:
    /* The report goes out whole, or, after bad input (exit 2), not at all: a consumer never
     * reads half a run as if it were one. A run that did not settle (3) shows how far it got. */
    if (r.out) {
        bool bad = fclose(r.out) != 0;
        if (bad && rc != 2)
            rc = 1;
        if (rc != 2 && report_len > 0 && fwrite(report, 1, report_len, stdout) != report_len)
            rc = rc ? rc : 1;
        free(report);
    }
    gs_kworld_free(w);
    json_decref(r.objects);
    json_decref(doc);
    json_decref(tl);
    if (fflush(stdout) != 0 && rc == 0)
        rc = 1;
    return rc;
}
