/*
 * `gpusched simulate`: replays trace pod lists through the placement policies with the FGD
 * experiment method, in parallel threads, and writes the result files and a summary table.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpusched/err.h"
#include "gpusched/sched.h"
#include "gpusched/sim.h"
#include "cli/cmd.h"
#include "util/file.h"
#include "sim/report.h"

#define MAX_WORKLOADS 64
#define MAX_SEEDS 4096

static const char *const usage_simulate =
    "usage: gpusched simulate --nodes FILE --pods FILE[,FILE...] [options]\n"
    "\n"
    "Replays pod lists on a node list the way the FGD paper's experiments do (USENIX ATC'23):\n"
    "pods sorted by name and shuffled with the seed, the list inflated or deflated to TUNE x\n"
    "the cluster's GPU capacity, pods placed one at a time, never leaving, one attempt each.\n"
    "\n"
    "options:\n"
    "  --nodes FILE        node list (sn,cpu_milli,memory_mib,gpu,model; optional\n"
    "                      gpu_mem_mib, gpu_mode)\n"
    "  --pods FILE[,...]   pod list(s); repeat the option or separate with commas\n"
    "  --policy P[,P...]   random, dotprod, clustering, packing, bestfit, fgd (the paper's six;\n"
    "                      `all` is those, the default), fgdband, fgdfill (ours,\n"
    "                      docs/fgd-policies.md)\n"
    "  --seeds LIST        seeds as N, N-M, or a comma list of both (default 42-51)\n"
    "  --tune X            GPU request as a multiple of cluster GPU capacity (default 1.3)\n"
    "  --out DIR           output directory, created if needed (default out)\n"
    "  --jobs N            runs in parallel threads (default 1)\n"
    "  --no-plot           do not draw allocation.png and fragmentation.png (without gnuplot\n"
    "                      on PATH the CSV files are written and a warning says so); the\n"
    "                      plots are drawn by up to max(N, 2) (at most 16) gnuplot processes at "
    "once,\n"
    "                      while the CSV files are written\n"
    "  -h, --help          this text\n"
    "\n"
    "writes DIR/allocation.csv, DIR/fragmentation.csv, DIR/frag_ratio.csv (the columns of the\n"
    "published analysis_*_discrete.csv files), DIR/runs.csv, DIR/summary.csv and\n"
    "DIR/allocation.png and DIR/fragmentation.png (DIR/allocation-<workload>.png and\n"
    "DIR/fragmentation-<workload>.png for each of several pod lists), and\n"
    "last DIR/MANIFEST, the list of this set: files an earlier set listed and this one does not\n"
    "write are removed (stderr says what was replaced and removed), other files are named on\n"
    "stderr and left. An interrupted run (SIGINT,\n"
    "SIGTERM, SIGHUP) removes its staging folder; files follow the umask.\n"
    "The summary table gives, per policy, the mean over the seeds and, with several seeds,\n"
    "'\xc2\xb1' the sample standard deviation (n - 1) over them.\n"
    "When the node list has a gpu_mode column or the pod list a sharing column, the summary\n"
    "adds the GPU charged at the end per sharing mode (% of the mode's GPUs, pods placed).\n"
    "\n" GS_CLI_TRACE_FORMAT_HELP "\n"
    "exit status:\n"
    "  0  done (also when only the plot is missing)\n"
    "  1  internal error, or the results cannot be written (e.g. cannot write DIR)\n"
    "  2  bad usage or bad input (the message names the option, or file, line and field)\n";

/*
 * The plots are drawn off the critical path: each in a child process (which runs gnuplot and
 * waits for it), up to `jobs` at once, started before the CSV files are written, and all
 * waited for before the staging folder is committed. A child that fails sends its message
 * through a pipe; the first one is the warning printed.
 */
struct plotter {
    pid_t pid[2 * MAX_WORKLOADS];
    int fd[2 * MAX_WORKLOADS]; /* read end of the child's message pipe */
    int n, running, jobs;
    bool failed;
    char err[512];
};

/* Waits for child k, keeping the first failure's message. */
static void plot_reap(struct plotter *pt, int k)
{
    char msg[512];
    ssize_t got = 0, r;
    while ((size_t)got < sizeof(msg) - 1 &&
           ((r = read(pt->fd[k], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0 ||
            (r < 0 && errno == EINTR)))
        got += r > 0 ? r : 0;
    msg[got] = '\0';
    (void)close(pt->fd[k]);
    int status = 0;
    while (waitpid(pt->pid[k], &status, 0) < 0 && errno == EINTR) {
    }
    gs__stage_child_del(pt->pid[k]);
    pt->pid[k] = 0;
    pt->running--;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !pt->failed) {
        pt->failed = true;
        (void)snprintf(pt->err, sizeof(pt->err), "%s", got ? msg : "a plot process failed");
    }
}

/* Waits for the oldest running child. */
static void plot_reap_one(struct plotter *pt)
{
    for (int k = 0; k < pt->n; k++)
        if (pt->pid[k] > 0) {
            plot_reap(pt, k);
            return;
        }
}

/* Starts one plot in a child; without fork or pipe, draws it here. */
static void plot_start(struct plotter *pt, const char *path, const char *name,
                       const struct gs_report_run *runs, size_t n, enum gs_report_metric metric)
{
    if (pt->failed)
        return;
    while (pt->running >= pt->jobs)
        plot_reap_one(pt);
    int p[2];
    pid_t pid = -1;
    /* No interrupt between the fork and the naming of the child (the handler must see it). */
    sigset_t block, saved;
    (void)sigemptyset(&block);
    (void)sigaddset(&block, SIGINT);
    (void)sigaddset(&block, SIGTERM);
    (void)sigaddset(&block, SIGHUP);
    (void)sigprocmask(SIG_BLOCK, &block, &saved);
    if (pipe(p) == 0) {
        (void)fflush(NULL);
        pid = fork();
        if (pid < 0) {
            (void)close(p[0]);
            (void)close(p[1]);
        }
    }
    if (pid > 0)
        (void)gs__stage_child_add(pid); /* at most jobs (<= 2 x workloads) run at once */
    if (pid == 0)
        gs__stage_children_forget();
    (void)sigprocmask(SIG_SETMASK, &saved, NULL);
    if (pid == 0) {
        (void)close(p[0]);
        char err[512] = "";
        int rc = gs_report_plot_metric(path, name, runs, n, metric, "gnuplot", err, sizeof(err));
        if (rc != GS_OK && write(p[1], err, strlen(err)) < 0)
            rc = GS_EIO; /* the exit status still says it failed */
        _exit(rc == GS_OK ? 0 : 1);
    }
    if (pid < 0) {
        if (gs_report_plot_metric(path, name, runs, n, metric, "gnuplot", pt->err,
                                  sizeof(pt->err)) != GS_OK)
            pt->failed = true;
        return;
    }
    (void)close(p[1]);
    pt->pid[pt->n] = pid;
    pt->fd[pt->n++] = p[0];
    pt->running++;
}

static void plot_wait_all(struct plotter *pt)
{
    for (int k = 0; k < pt->n; k++)
        if (pt->pid[k] > 0)
            plot_reap(pt, k);
}

struct task {
    const struct gs_sim_input *in;
    struct gs_sim_run_config cfg;
    struct gs_sim_result res;
    double wall_s;
    int err;
};

/*
 * Per sharing mode, when the input names sharing: GPU charged at the end as % of the mode's
 * GPUs and the pods placed there, means over the seeds of each policy (docs/trace-format.md).
 */
static void print_modes(const struct gs_sim_input *in, const struct gs_report_agg *agg,
                        size_t n_agg, const char *name, const struct task *tasks, size_t n_tasks)
{
    static const char *const mode_names[GS_SIM_MODES] = {"fractions", "replicas", "mig", "whole"};
    const struct gs_sim_result *first = NULL;
    for (size_t j = 0; j < n_tasks && !first; j++)
        if (tasks[j].in == in)
            first = &tasks[j].res;
    if (!first || !first->mixed)
        return;
    printf("  GPU charged at the end, %% of the mode's GPUs (pods placed), mean over seeds:\n");
    printf("  %-11s", "policy");
    for (int m = 0; m < GS_SIM_MODES; m++) {
        char h[40];
        (void)snprintf(h, sizeof(h), "%s (%u GPUs)", mode_names[m], first->mode_gpus[m]);
        printf(" %22s", h);
    }
    printf("\n");
    for (size_t k = 0; k < n_agg; k++) {
        if (strcmp(agg[k].workload, name) != 0)
            continue;
        printf("  %-11s", gs_policy_name(agg[k].policy));
        for (int m = 0; m < GS_SIM_MODES; m++) {
            double used = 0, pods = 0;
            uint32_t runs = 0;
            for (size_t j = 0; j < n_tasks; j++) {
                if (tasks[j].in != in || tasks[j].cfg.policy != agg[k].policy)
                    continue;
                used += (double)tasks[j].res.mode_used_milli[m];
                pods += tasks[j].res.mode_pods[m];
                runs++;
            }
            char cell[40];
            if (first->mode_gpus[m] == 0 || runs == 0)
                (void)snprintf(cell, sizeof(cell), "-");
            else
                (void)snprintf(cell, sizeof(cell), "%.1f (%.1f)",
                               100.0 * used / runs / (first->mode_gpus[m] * 1000.0), pods / runs);
            printf(" %22s", cell);
        }
        printf("\n");
    }
}

struct pool {
    struct task *tasks;
    size_t n;
    size_t next;
    size_t done;
    pthread_mutex_t mu;
    double t0;
    int show_progress;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
    struct pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n)
            return NULL;
        struct task *t = &p->tasks[i];
        double t0 = now_s();
        t->err = gs_sim_run(t->in, &t->cfg, &t->res);
        t->wall_s = now_s() - t0;
        pthread_mutex_lock(&p->mu);
        p->done++;
        double el = now_s() - p->t0;
        if (p->show_progress && el > 1.0) {
            (void)fprintf(stderr, "\rsimulate: %zu/%zu runs, %.1f s elapsed (%s %s seed %llu)   ",
                          p->done, p->n, el, gs_sim_input_name(t->in),
                          gs_policy_name(t->cfg.policy), (unsigned long long)t->cfg.seed);
            if (p->done == p->n)
                (void)fputc('\n', stderr);
        }
        pthread_mutex_unlock(&p->mu);
    }
}

static int parse_u64(const char *s, unsigned long long *v)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    *v = strtoull(s, &end, 10);
    return (errno || *end) ? -1 : 0;
}

/* Parses "42-51", "42", "1,5,7-9" into seeds[]. Returns the count, or -1 with why (whycap
 * bytes) saying what is wrong. */
static int parse_seeds(const char *arg, uint64_t *seeds, int cap, char *why, size_t whycap)
{
    char *copy = strdup(arg);
    if (!copy) {
        (void)snprintf(why, whycap, "out of memory");
        return -1;
    }
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *dash = strchr(tok, '-');
        unsigned long long a, b;
        if (dash) {
            *dash = '\0';
            if (parse_u64(tok, &a) || parse_u64(dash + 1, &b)) {
                (void)snprintf(why, whycap, "'%s-%s' is not a range N-M of whole numbers", tok,
                               dash + 1);
                goto bad;
            }
            if (b < a) {
                (void)snprintf(why, whycap, "the range %llu-%llu goes down (write %llu-%llu)", a, b,
                               b, a);
                goto bad;
            }
        } else {
            if (parse_u64(tok, &a)) {
                (void)snprintf(why, whycap, "'%s' is not a whole number", tok);
                goto bad;
            }
            b = a;
        }
        for (unsigned long long s = a; s <= b; s++) {
            bool dup = false;
            for (int k = 0; k < n && !dup; k++)
                dup = seeds[k] == s;
            if (!dup) {
                if (n == cap) {
                    (void)snprintf(why, whycap, "more than %d seeds", cap);
                    goto bad;
                }
                seeds[n++] = s;
            }
            if (s == ULLONG_MAX)
                break;
        }
    }
    free(copy);
    if (n == 0)
        (void)snprintf(why, whycap, "no seed given");
    return n > 0 ? n : -1;
bad:
    free(copy);
    return -1;
}

/* Splits a comma list into the policy selection; returns 0 or -1 and names the bad entry. */
static int parse_policies(const char *arg, int *chosen, const char **bad)
{
    static char badbuf[64];
    char *copy = strdup(arg);
    if (!copy)
        return -1;
    int any = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcasecmp(tok, "all") == 0) {
            for (int p = 0; p < GS_POLICY_PAPER_COUNT; p++)
                chosen[p] = 1;
            any = 1;
            continue;
        }
        int p = gs__cli_policy_find(tok);
        if (p < 0) {
            (void)snprintf(badbuf, sizeof(badbuf), "%s", tok);
            *bad = badbuf;
            free(copy);
            return -1;
        }
        chosen[p] = 1;
        any = 1;
    }
    free(copy);
    if (!any)
        *bad = arg;
    return any ? 0 : -1;
}

static void seeds_text(const uint64_t *seeds, int n, char *buf, size_t cap)
{
    int contiguous = 1;
    for (int i = 1; i < n; i++)
        contiguous &= seeds[i] == seeds[i - 1] + 1;
    if (n == 1)
        (void)snprintf(buf, cap, "seed %llu", (unsigned long long)seeds[0]);
    else if (contiguous)
        (void)snprintf(buf, cap, "%d seeds (%llu-%llu)", n, (unsigned long long)seeds[0],
                       (unsigned long long)seeds[n - 1]);
    else
        (void)snprintf(buf, cap, "%d seeds", n);
}

int gs_cmd_simulate(int argc, char **argv)
{
    const char *nodes = NULL, *out_dir = "out";
    char *pods[MAX_WORKLOADS];
    int n_pods = 0, jobs = 1, plot = 1;
    int chosen[GS_POLICY_COUNT] = {0};
    int policy_given = 0;
    uint64_t seeds[MAX_SEEDS];
    char why[160]; /* what is wrong with --seeds */
    int n_seeds = parse_seeds("42-51", seeds, MAX_SEEDS, why, sizeof(why));
    double tune = 1.3;
    int rc = 2;
    struct gs_sim_input *inputs[MAX_WORKLOADS] = {0};
    struct task *tasks = NULL;
    struct gs_report_run *runs = NULL;
    struct gs_report_agg *agg = NULL;
    char *stage = NULL;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char name[32];
        int inline_v = gs__cli_split(a, name, sizeof(name), &v);
        if (inline_v)
            a = name;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 || strcmp(a, "--no-plot") == 0) {
            if (inline_v) {
                (void)fprintf(stderr, "gpusched simulate: %s takes no value\n", a);
                goto out;
            }
            if (strcmp(a, "--no-plot") == 0) {
                plot = 0;
                continue;
            }
            (void)fputs(usage_simulate, stdout);
            rc = 0;
            goto out;
        }
        const char *opts[] = {"--nodes", "--pods", "--policy", "--seeds",
                              "--tune",  "--out",  "--jobs"};
        int known = 0;
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++)
            known |= strcmp(a, opts[k]) == 0;
        if (!known) {
            (void)fprintf(stderr, "gpusched simulate: unknown option '%s' (see --help)\n", a);
            goto out;
        }
        if (gs__cli_value("simulate", a, inline_v, v, &i) != 0)
            goto out;
        if (strcmp(a, "--nodes") == 0) {
            nodes = v;
        } else if (strcmp(a, "--pods") == 0) {
            char *copy = strdup(v), *save = NULL;
            if (!copy) {
                rc = 1;
                goto out;
            }
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n_pods == MAX_WORKLOADS) {
                    (void)fprintf(stderr, "gpusched simulate: --pods: at most %d files\n",
                                  MAX_WORKLOADS);
                    free(copy);
                    goto out;
                }
                pods[n_pods] = strdup(tok);
                if (!pods[n_pods]) {
                    free(copy);
                    rc = 1;
                    goto out;
                }
                n_pods++;
            }
            free(copy);
        } else if (strcmp(a, "--policy") == 0) {
            const char *bad = NULL;
            memset(chosen, 0, sizeof(chosen));
            if (parse_policies(v, chosen, &bad) != 0) {
                (void)fprintf(stderr,
                              "gpusched simulate: --policy: unknown policy '%s' (random, dotprod, "
                              "clustering, packing, bestfit, fgd, fgdband, fgdfill, all)\n",
                              bad ? bad : v);
                goto out;
            }
            policy_given = 1;
        } else if (strcmp(a, "--seeds") == 0) {
            why[0] = '\0';
            n_seeds = parse_seeds(v, seeds, MAX_SEEDS, why, sizeof(why));
            if (n_seeds < 0) {
                (void)fprintf(stderr,
                              "gpusched simulate: --seeds '%s': %s; expected N, N-M or a comma "
                              "list of those (at most %d seeds)\n",
                              v, why, MAX_SEEDS);
                goto out;
            }
        } else if (strcmp(a, "--tune") == 0) {
            char *end;
            errno = 0;
            tune = strtod(v, &end);
            if (errno || *end || !(tune > 0) || tune > 100) {
                (void)fprintf(
                    stderr, "gpusched simulate: --tune: expected a number in (0, 100], got '%s'\n",
                    v);
                goto out;
            }
        } else if (strcmp(a, "--out") == 0) {
            out_dir = v;
        } else if (strcmp(a, "--jobs") == 0) {
            unsigned long long j;
            if (parse_u64(v, &j) || j < 1 || j > 256) {
                (void)fprintf(stderr, "gpusched simulate: --jobs: expected 1..256, got '%s'\n", v);
                goto out;
            }
            jobs = (int)j;
        }
    }
    if (!nodes || n_pods == 0) {
        (void)fprintf(stderr, "gpusched simulate: --nodes and --pods are required (see --help)\n");
        goto out;
    }
    if (!policy_given) /* the default is `all`: the paper's six */
        for (int p = 0; p < GS_POLICY_PAPER_COUNT; p++)
            chosen[p] = 1;
    if (gs__cli_out_dir("simulate", out_dir) != 0)
        goto out;

    /* Load every input before writing anything: bad input leaves no output behind. */
    for (int w = 0; w < n_pods; w++) {
        struct gs_diag d;
        memset(&d, 0, sizeof(d));
        int err = gs_sim_input_load(nodes, pods[w], NULL, &inputs[w], &d);
        if (err) {
            char msg[600];
            if (d.msg[0])
                gs_diag_format(&d, msg, sizeof(msg));
            else
                (void)snprintf(msg, sizeof(msg), "%s: %s", pods[w], gs_strerror(err));
            (void)fprintf(stderr, "gpusched simulate: %s\n", msg);
            rc = err == GS_ENOMEM ? 1 : 2;
            goto out;
        }
    }

    for (int w = 0; w < n_pods; w++)
        if (gs_sim_input_ignored_columns(inputs[w])[0])
            (void)fprintf(stderr,
                          "gpusched simulate: note: %s: ignoring columns that are not in the pod "
                          "list format: %s\n",
                          pods[w], gs_sim_input_ignored_columns(inputs[w]));
    /* Pods no node can ever run are counted as failures; say so before running them. */
    for (int w = 0; w < n_pods; w++) {
        struct gs_trace_unfit u;
        if (gs_sim_input_unfit(inputs[w], &u) != GS_OK) {
            (void)fprintf(stderr, "gpusched simulate: out of memory\n");
            rc = 1;
            goto out;
        }
        gs__cli_warn_unfit("simulate", pods[w], &u);
    }

    /* Workload names label CSV rows and plots: keep them unique and plain. */
    for (int w = 0; w < n_pods; w++) {
        const char *nm = gs_sim_input_name(inputs[w]);
        for (const char *c = nm; *c; c++) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')) {
                (void)fprintf(stderr,
                              "gpusched simulate: %s: the pod list's name '%s' may hold only "
                              "[A-Za-z0-9._-] (it names result rows)\n",
                              pods[w], nm);
                goto out;
            }
        }
        for (int v = 0; v < w; v++) {
            if (strcmp(nm, gs_sim_input_name(inputs[v])) == 0) {
                (void)fprintf(stderr, "gpusched simulate: %s and %s have the same name '%s'\n",
                              pods[v], pods[w], nm);
                goto out;
            }
        }
    }
    size_t n_policies = 0;
    for (int p = 0; p < GS_POLICY_COUNT; p++)
        n_policies += chosen[p] != 0;
    size_t n_tasks = (size_t)n_pods * n_policies * (size_t)n_seeds;
    tasks = calloc(n_tasks, sizeof(*tasks));
    runs = calloc(n_tasks, sizeof(*runs));
    agg = calloc(n_tasks, sizeof(*agg));
    if (!tasks || !runs || !agg) {
        (void)fprintf(stderr, "gpusched simulate: out of memory\n");
        rc = 1;
        goto out;
    }
    size_t t = 0;
    for (int w = 0; w < n_pods; w++)
        for (int p = 0; p < GS_POLICY_COUNT; p++)
            for (int s = 0; chosen[p] && s < n_seeds; s++)
                tasks[t++] = (struct task){inputs[w], {(uint32_t)p, seeds[s], tune}, {0}, 0, 0};

    struct pool pool = {
        tasks, n_tasks, 0, 0, PTHREAD_MUTEX_INITIALIZER, now_s(), isatty(STDERR_FILENO)};
    int n_threads = jobs < (int)n_tasks ? jobs : (int)n_tasks;
    pthread_t threads[256];
    int started = 0;
    for (int k = 1; k < n_threads; k++) {
        if (pthread_create(&threads[k], NULL, worker, &pool) != 0)
            break;
        started = k;
    }
    worker(&pool);
    for (int k = 1; k <= started; k++)
        pthread_join(threads[k], NULL);
    double wall_total = now_s() - pool.t0;

    for (size_t k = 0; k < n_tasks; k++) {
        if (tasks[k].err == GS_ELIMIT) {
            (void)fprintf(
                stderr,
                "gpusched simulate: %s: tuning to %g x the cluster's GPU capacity would need "
                "more than %u pods (too little GPU request per pod)\n",
                gs_sim_input_name(tasks[k].in), tune, GS_SIM_PODS_MAX);
            rc = 2;
            goto out;
        }
        if (tasks[k].err) {
            (void)fprintf(stderr, "gpusched simulate: run %s %s seed %llu failed: %s\n",
                          gs_sim_input_name(tasks[k].in), gs_policy_name(tasks[k].cfg.policy),
                          (unsigned long long)tasks[k].cfg.seed, gs_strerror(tasks[k].err));
            rc = 1;
            goto out;
        }
        runs[k] = (struct gs_report_run){gs_sim_input_name(tasks[k].in), &tasks[k].res};
    }

    rc = 1;
    if (gs__mkdir_p(out_dir) != 0) {
        (void)fprintf(stderr, "gpusched simulate: cannot write %s: %s\n", out_dir, strerror(errno));
        goto out;
    }
    /* Everything is written to a staging directory first and moved into place only when the
     * whole set is there: a failure part way leaves the previous results as they were. */
    stage = gs__stage_open(out_dir);
    if (!stage) {
        (void)fprintf(stderr, "gpusched simulate: cannot write %s: %s\n", out_dir, strerror(errno));
        goto out;
    }
    size_t plen = strlen(stage) + 300;
    char *path = malloc(plen);
    char err[512] = "";
    if (!path)
        goto out;
    static const struct {
        const char *stem;
        enum gs_report_metric metric;
    } plots[] = {{"allocation", GS_REPORT_ALLOC}, {"fragmentation", GS_REPORT_FRAG}};
    /* 2..16 plots at once (the signal handler names up to 32 children). */
    struct plotter pt = {.jobs = jobs > 16 ? 16 : jobs > 2 ? jobs : 2};
    for (int w = 0; plot && w < n_pods; w++) {
        const char *name = gs_sim_input_name(inputs[w]);
        for (size_t k = 0; k < sizeof(plots) / sizeof(plots[0]); k++) {
            if (n_pods == 1)
                (void)snprintf(path, plen, "%s/%s.png", stage, plots[k].stem);
            else
                (void)snprintf(path, plen, "%s/%s-%s.png", stage, plots[k].stem, name);
            plot_start(&pt, path, name, runs, n_tasks, plots[k].metric);
        }
    }
    struct {
        const char *file;
        int metric;
    } col_files[] = {{"allocation.csv", GS_REPORT_ALLOC},
                     {"fragmentation.csv", GS_REPORT_FRAG},
                     {"frag_ratio.csv", GS_REPORT_FRAG_RATIO}};
    for (size_t k = 0; k < 3; k++) {
        (void)snprintf(path, plen, "%s/%s", stage, col_files[k].file);
        if (gs_report_write_columns(path, runs, n_tasks, (enum gs_report_metric)col_files[k].metric,
                                    err, sizeof(err)) != GS_OK) {
            plot_wait_all(&pt);
            goto write_failed;
        }
    }
    (void)snprintf(path, plen, "%s/runs.csv", stage);
    if (gs_report_write_runs(path, runs, n_tasks, err, sizeof(err)) != GS_OK) {
        plot_wait_all(&pt);
        goto write_failed;
    }
    size_t n_agg = gs_report_aggregate(runs, n_tasks, agg);
    (void)snprintf(path, plen, "%s/summary.csv", stage);
    if (gs_report_write_summary(path, agg, n_agg, err, sizeof(err)) != GS_OK) {
        plot_wait_all(&pt);
        goto write_failed;
    }
    plot_wait_all(&pt);
    if (pt.failed)
        /* The CSV files are the results; the plots only draw them. */
        (void)fprintf(stderr,
                      "gpusched simulate: warning: %s; the CSV files are written, the "
                      "plots are missing (--no-plot skips them)\n",
                      pt.err);
    struct gs__stage_report rep;
    if (gs__stage_commit(stage, out_dir, err, sizeof(err), &rep) != 0) {
        free(stage);
        stage = NULL;
        goto write_failed;
    }
    free(stage);
    stage = NULL;
    gs__cli_stage_notes("simulate", out_dir, &rep);

    /* The summary table. */
    char stext[64];
    seeds_text(seeds, n_seeds, stext, sizeof(stext));
    for (int w = 0; w < n_pods; w++) {
        const char *name = gs_sim_input_name(inputs[w]);
        uint32_t npods = gs_sim_input_pod_count(inputs[w]);
        printf("%s: %u pod%s; tune %g; %s\n", name, npods, npods == 1 ? "" : "s", tune, stext);
        printf("  %-11s %26s %24s %12s %11s\n", "policy", "unallocated GPU % @100%",
               "fragmented GPU % @80%", "failed pods", "wall s/run");
        bool spread = false; /* a "mean ± std" was printed */
        for (size_t k = 0; k < n_agg; k++) {
            if (strcmp(agg[k].workload, name) != 0)
                continue;
            double wall = 0;
            for (size_t j = 0; j < n_tasks; j++)
                if (tasks[j].in == inputs[w] && tasks[j].cfg.policy == agg[k].policy)
                    wall += tasks[j].wall_s;
            char un[48], fr[48];
            /* Column 100 (80) is empty when arrivals never reach it (a tune under 1.0). */
            if (isnan(agg[k].unalloc_mean))
                (void)snprintf(un, sizeof(un), "%26s", "- (never reached)");
            else if (agg[k].seeds == 1) /* no spread to show with one seed */
                (void)snprintf(un, sizeof(un), "%17.2f%8s", agg[k].unalloc_mean, "");
            else {
                (void)snprintf(un, sizeof(un), "%17.2f \xc2\xb1 %5.2f", agg[k].unalloc_mean,
                               agg[k].unalloc_std);
                spread = true;
            }
            if (isnan(agg[k].frag_mean))
                (void)snprintf(fr, sizeof(fr), "%24s", "- (never reached)");
            else if (agg[k].seeds == 1)
                (void)snprintf(fr, sizeof(fr), "%15.2f%8s", agg[k].frag_mean, "");
            else {
                (void)snprintf(fr, sizeof(fr), "%15.2f \xc2\xb1 %5.2f", agg[k].frag_mean,
                               agg[k].frag_std);
                spread = true;
            }
            printf("  %-11s %s %s %12.1f %11.3f\n", gs_policy_name(agg[k].policy), un, fr,
                   agg[k].failed_mean, wall / agg[k].seeds);
        }
        /* The spread is gs_report_aggregate()'s: the sample standard deviation (n - 1) of the
         * seeds' values about their mean. */
        if (spread)
            printf("  mean \xc2\xb1 sample standard deviation (n - 1) over the %d seeds; failed "
                   "pods, wall s/run: means\n",
                   n_seeds);
        print_modes(inputs[w], agg, n_agg, name, tasks, n_tasks);
    }
    printf("%zu run%s in %.2f s with %d job%s; results in %s/\n", n_tasks, n_tasks == 1 ? "" : "s",
           wall_total, n_threads, n_threads == 1 ? "" : "s", out_dir);
    free(path);
    rc = 0;
    goto out;
write_failed:
    (void)fprintf(stderr, "gpusched simulate: cannot write results: %s\n", err);
    free(path);
    rc = 1;
out:
    gs__stage_discard(stage);
    free(stage);
    for (int w = 0; w < n_pods; w++) {
        free(pods[w]);
        gs_sim_input_free(inputs[w]);
    }
    free(tasks);
    free(runs);
    free(agg);
    return rc;
}
