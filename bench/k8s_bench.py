#!/usr/bin/env python3
"""Scheduler throughput on a real control plane: gpusched, kube-scheduler and a no-op binder.

The shape of kube-scheduler's own performance test for extended resources: N nodes with 8
`nvidia.com/gpu` each, P pods of one GPU each. Each round creates the P pods first (no scheduler
serves their schedulerName yet), then starts one scheduler and measures, from a watch on the
pods, when each pod gets its node:

  - gpusched scheduler (its default policy, fgd), leader election off;
  - kube-scheduler (the same release as the API server) with its default plugins;
  - a no-op binder: round-robin over the nodes, no decisions, one Binding per pod, from this
    script's threads: the ceiling the API server and this machine allow.

All three use the same client rate limit (--qps/--burst, default 5,000 as kube-scheduler's
performance tests set it). The pods of a round are deleted before the next round, so every
round starts from the same empty cluster. API calls per bound pod come from the API server's
apiserver_request_total counters (every verb but WATCH) over the round's scheduling window.
gpusched's round also serves /metrics (--metrics-addr 127.0.0.1:0), scraped when it starts and
again before it stops: the difference of gpusched_scheduling_decision_duration_seconds (every
decision; buckets 4 us x 2^k, finer than kube-scheduler's 1 ms x 2^k, which sees all of them
in its first) gives the p50 and p99 of its per-decision latency, interpolated within the
buckets as Prometheus' histogram_quantile() does.

Optional cold start (--cold-start 10000,50000): that many pods already bound (created with
spec.nodeName), then gpusched starts and one new pod is created: the time from start to its
bind.

The openb round (--openb-nodes CSV --openb-pods CSV) replaces the above: the trace's 1,213
nodes as Node objects and its pods, shuffled with --seed and drawn with replacement until
their GPU request reaches the capacity, created one by one while the scheduler runs;
gpusched (fgd) gets the milli fractions as KAI's gpu-fraction annotation, kube-scheduler the
same pods rounded up to whole GPUs (what its users get). Reported once nothing changes for 10
s: pods bound and pending, unallocated GPU % (GPUs nobody holds, for kube-scheduler a whole
GPU per fraction) and the GPU requests of the bound pods as % of capacity.

Usage: k8s_bench.py --state DIR --gpusched BIN [--nodes 5000] [--pods 10000]
   (DIR: a plane started with `tests/k8s/control-plane.sh up --state DIR --scheduler=0`)
Prints one line per measurement and a final JSON object.
"""
import argparse
import http.client
import json
import os
import queue
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

NS = "gs-bench"


def read_env(state):
    env = {}
    with open(os.path.join(state, "env")) as f:
        for line in f:
            m = re.match(r"export (\w+)=(.*)$", line.strip())
            if m:
                env[m.group(1)] = m.group(2)
    return env


class Api:
    """A small client: one keep-alive HTTPS connection per thread, admin certificate."""

    def __init__(self, env):
        u = urllib.parse.urlparse(env["GPUSCHED_K8S_SERVER"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=env["GPUSCHED_K8S_CA"])
        self.ctx.load_cert_chain(env["GPUSCHED_K8S_CLIENT_CERT"], env["GPUSCHED_K8S_CLIENT_KEY"])
        self.local = threading.local()

    def conn(self, fresh=False):
        c = getattr(self.local, "c", None)
        if c is None or fresh:
            c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=120)
            self.local.c = c
        return c

    def req(self, method, path, body=None, ctype="application/json"):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        for attempt in range(5):
            c = self.conn(fresh=attempt > 0)
            try:
                hdrs = {"Accept": "application/json"}
                if data is not None:
                    hdrs["Content-Type"] = ctype
                c.request(method, path, body=data, headers=hdrs)
                r = c.getresponse()
                out = r.read()
                if r.status == 429 or r.status >= 500:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                return r.status, out
            except (http.client.HTTPException, OSError):
                time.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"{method} {path}: no answer after 5 tries")

    def stream(self, path):
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=600)
        c.request("GET", path, headers={"Accept": "application/json"})
        return c, c.getresponse()


def parallel(api, items, fn, threads=16):
    """Runs fn(api, item) over items in `threads` threads; returns the number of failures."""
    q = queue.Queue()
    for it in items:
        q.put(it)
    fails = [0]
    lock = threading.Lock()

    def work():
        while True:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            if not fn(api, it):
                with lock:
                    fails[0] += 1

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return fails[0]


def node_name(i):
    return f"bench-node-{i:05d}"


def make_nodes(api, n):
    res = {"cpu": "64", "memory": "512Gi", "pods": "1000", "nvidia.com/gpu": "8"}
    status = {"status": {"capacity": res, "allocatable": res,
                         "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "message": "bench"}]}}

    def one(api, i):
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name(i),
                             "labels": {"gpusched.bench": "1", "kubernetes.io/hostname": node_name(i),
                                        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                        "nvidia.com/gpu.memory": "81920"}}}
        s, _ = api.req("POST", "/api/v1/nodes", body)
        if s not in (201, 409):
            return False
        s, _ = api.req("PATCH", f"/api/v1/nodes/{node_name(i)}/status", status,
                       "application/merge-patch+json")
        return s == 200

    return parallel(api, range(n), one)


def pod_body(name, sched, node=None):
    spec = {"schedulerName": sched, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.invalid/none:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"},
                                          "requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def make_pods(api, names, sched, nodes_of=None):
    def one(api, i):
        node = nodes_of(i) if nodes_of else None
        s, _ = api.req("POST", f"/api/v1/namespaces/{NS}/pods", pod_body(names[i], sched, node))
        return s == 201

    return parallel(api, range(len(names)), one)


def delete_pods(api):
    api.req("DELETE", f"/api/v1/namespaces/{NS}/pods?gracePeriodSeconds=0")
    while True:
        s, out = api.req("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
        if s == 200 and not json.loads(out)["items"]:
            return
        time.sleep(0.5)


def list_rv(api):
    s, out = api.req("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
    return json.loads(out)["metadata"]["resourceVersion"]


class BindWatch(threading.Thread):
    """Watches the namespace's pods from a resourceVersion; records when each gets a node."""

    def __init__(self, api, rv, want):
        super().__init__(daemon=True)
        self.api, self.rv, self.want = api, rv, want
        self.bound = {}
        self.done = threading.Event()
        self.error = None
        self.reconnects = 0

    def relist(self):
        """After a 410: the bound pods from a list (their bind time is the list's)."""
        s, out = self.api.req("GET", f"/api/v1/namespaces/{NS}/pods")
        lst = json.loads(out)
        now = time.monotonic()
        for p in lst["items"]:
            if p["spec"].get("nodeName") and p["metadata"]["name"] not in self.bound:
                self.bound[p["metadata"]["name"]] = now
        self.rv = lst["metadata"]["resourceVersion"]

    def run(self):
        try:
            # The server may close a watch (a slow reader under load): go on from the last
            # resourceVersion seen, as an informer does.
            for _ in range(100):
                c, r = self.api.stream(f"/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion="
                                       f"{self.rv}&allowWatchBookmarks=true")
                while len(self.bound) < self.want:
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev.get("object", {})
                    if ev.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            self.relist()
                        break
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if ev.get("type") in ("ADDED", "MODIFIED") and obj.get("spec", {}).get("nodeName"):
                        name = obj["metadata"]["name"]
                        if name not in self.bound:
                            self.bound[name] = time.monotonic()
                c.close()
                if len(self.bound) >= self.want:
                    break
                self.reconnects += 1
        except Exception as e:  # noqa: BLE001 -- reported by the round
            self.error = e
        self.done.set()


def apiserver_calls(api):
    """Sum of apiserver_request_total over every verb but WATCH (and CONNECT)."""
    s, out = api.req("GET", "/metrics")
    total = 0.0
    for line in out.decode().splitlines():
        if line.startswith("apiserver_request_total{"):
            m = re.search(r'verb="([A-Z]+)"', line)
            if m and m.group(1) not in ("WATCH", "CONNECT"):
                total += float(line.rsplit(" ", 1)[1])
    return total


# The decision-time histogram with buckets from 4 us (the same observations as
# gpusched_scheduling_attempt_duration_seconds, whose first bucket is kube-scheduler's 1 ms).
ATTEMPT = "gpusched_scheduling_decision_duration_seconds"


def scrape_attempts(port):
    """gpusched's decision-time histogram, every label set summed: ({le: cumulative}, sum, count)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"gpusched /metrics answered {r.status}")
    buckets, total, count = {}, 0.0, 0
    for line in text.splitlines():
        if line.startswith(ATTEMPT + "_bucket{"):
            le = re.search(r'le="([^"]+)"', line).group(1)
            le = float("inf") if le == "+Inf" else float(le)
            buckets[le] = buckets.get(le, 0) + int(line.rsplit(" ", 1)[1])
        elif line.startswith((ATTEMPT + "_sum{", ATTEMPT + "_sum ")):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith((ATTEMPT + "_count{", ATTEMPT + "_count ")):
            count += int(line.rsplit(" ", 1)[1])
    return buckets, total, count


def histogram_quantile(q, buckets):
    """Prometheus' histogram_quantile over {le: cumulative count}: linear within the bucket
    holding rank q x total, from its lower bound (0 for the first); in +Inf: the last finite
    bound. None when empty."""
    les = sorted(buckets)
    total = buckets[les[-1]] if les else 0
    if total == 0:
        return None
    rank, prev_le, prev_c = q * total, 0.0, 0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 1)
        prev_le, prev_c = le, c
    return prev_le


def metrics_port(log_path, proc, timeout_s=30):
    """The port gpusched logs it serves /metrics on."""
    t = time.monotonic()
    while time.monotonic() - t < timeout_s and proc.poll() is None:
        with open(log_path) as f:
            m = re.search(r"serving /healthz /readyz /metrics on .* \(port (\d+)\)", f.read())
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    raise RuntimeError(f"gpusched logged no metrics port in {log_path}")


def noop_binder(api, names, n_nodes, qps):
    """Binds pods round-robin, no decisions; paced to `qps` binds per second at most."""
    interval = 1.0 / qps
    t0 = time.monotonic()

    def one(api, i):
        due = t0 + i * interval
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": names[i]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name(i % n_nodes)}}
        s, _ = api.req("POST", f"/api/v1/namespaces/{NS}/pods/{names[i]}/binding", body)
        return s == 201

    return parallel(api, range(len(names)), one, threads=32)


def kube_scheduler_config(tmp, env, qps, burst):
    path = os.path.join(tmp, "kube-scheduler.yaml")
    with open(path, "w") as f:
        f.write("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                f"clientConnection:\n  kubeconfig: {env['KUBECONFIG']}\n  qps: {qps}\n"
                f"  burst: {burst}\nleaderElection:\n  leaderElect: false\n")
    return path


def run_round(api, args, env, tmp, who, n_nodes):
    names = [f"{who}-{i:06d}" for i in range(args.pods)]
    sched = {"gpusched": "gpusched", "kube-scheduler": "default-scheduler", "noop": "noop"}[who]
    t = time.monotonic()
    fails = make_pods(api, names, sched)
    create_s = time.monotonic() - t
    if fails:
        raise RuntimeError(f"{who}: {fails} pods not created")
    rv = list_rv(api)
    w = BindWatch(api, rv, args.pods)
    w.start()
    calls0 = apiserver_calls(api)
    log = open(os.path.join(tmp, f"{who}.log"), "w")
    proc = None
    port, before = None, None
    t_start = time.monotonic()
    if who == "gpusched":
        proc = subprocess.Popen([args.gpusched, "scheduler", "--kubeconfig", env["KUBECONFIG"],
                                 "--qps", str(args.qps), "--burst", str(args.burst),
                                 "--leader-elect=false", "--metrics-addr", "127.0.0.1:0"],
                                stdout=log, stderr=subprocess.STDOUT)
        log.flush()
        port = metrics_port(log.name, proc)
        before = scrape_attempts(port)
    elif who == "kube-scheduler":
        cfg = kube_scheduler_config(tmp, env, args.qps, args.burst)
        proc = subprocess.Popen([os.path.join(env["GPUSCHED_K8S_BIN"], "kube-scheduler"),
                                 "--config", cfg, "--secure-port", "0", "-v", "0"],
                                stdout=log, stderr=subprocess.STDOUT)
    else:
        threading.Thread(target=noop_binder, args=(api, names, n_nodes, args.qps),
                         daemon=True).start()
    ok = w.done.wait(args.timeout_s)
    after = None
    if port:
        # The watch can see a Binding before gpusched has read the answer to it (and counted the
        # attempt): scrape until every bound pod is counted, for 10 s at most.
        t_scrape = time.monotonic()
        while True:
            after = scrape_attempts(port)
            if after[2] - before[2] >= len(w.bound) or time.monotonic() - t_scrape > 10:
                break
            time.sleep(0.1)
    if proc:
        # SIGTERM: gpusched finishes its cycle (the Events of its last binds) and exits.
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    else:
        time.sleep(1)
    calls1 = apiserver_calls(api)
    log.close()
    if not ok or w.error:
        raise RuntimeError(f"{who}: {len(w.bound)} of {args.pods} bound ({w.error or 'timeout'}); "
                           f"log {log.name}")
    times = sorted(w.bound.values())
    first, last = times[0], times[-1]
    # Calls by the measuring side in the window: 1 metrics scrape and the watch's reconnects.
    calls = calls1 - calls0 - 1 - w.reconnects
    res = {"who": who, "pods": args.pods, "create_s": round(create_s, 2),
           "start_to_first_bind_s": round(first - t_start, 3),
           "start_to_last_bind_s": round(last - t_start, 3),
           "pods_per_s": round((len(times) - 1) / (last - first), 1) if last > first else None,
           "api_calls_per_pod": round(calls / args.pods, 2), "watch_reconnects": w.reconnects}
    print(f"{who}: {args.pods} pods bound; first after {res['start_to_first_bind_s']} s, "
          f"all after {res['start_to_last_bind_s']} s; {res['pods_per_s']} pods/s between first "
          f"and last; {res['api_calls_per_pod']} API calls per pod", flush=True)
    if after:
        d = {le: c - before[0].get(le, 0) for le, c in after[0].items()}
        n = after[2] - before[2]
        p50, p99 = histogram_quantile(0.5, d), histogram_quantile(0.99, d)
        res["decisions"] = n
        res["decision_p50_ms"] = round(p50 * 1e3, 3) if p50 is not None else None
        res["decision_p99_ms"] = round(p99 * 1e3, 3) if p99 is not None else None
        res["decision_mean_ms"] = round((after[1] - before[1]) / n * 1e3, 3) if n else None
        first = min(d) if d else None
        # All in the first bucket (0, 4 us]: the quantiles are q x 4 us by interpolation, not a
        # measurement; the mean (sum over count) is the figure then.
        res["decisions_all_under_first_bound"] = bool(n) and d.get(first, 0) == n
        print(f"{who}: per-decision latency ({ATTEMPT}, {n} decisions, interpolated in "
              f"buckets 4 us x 2^k): p50 {res['decision_p50_ms']} ms, p99 {res['decision_p99_ms']} ms, mean "
              f"{res['decision_mean_ms']} ms"
              + (f" (all within the first bucket, {first * 1e3:g} ms: p50/p99 are interpolated "
                 f"there, the mean is the measure)" if res["decisions_all_under_first_bound"]
                 else ""), flush=True)
    t = time.monotonic()
    delete_pods(api)
    res["delete_s"] = round(time.monotonic() - t, 2)
    return res


def cold_start(api, args, env, tmp, n_existing, n_nodes):
    names = [f"old-{i:06d}" for i in range(n_existing)]
    t = time.monotonic()
    # Bound pods: 1 GPU each, spread over the nodes (at most 8 per node).
    if n_existing > n_nodes * 8:
        raise RuntimeError(f"cold start: {n_existing} pods do not fit {n_nodes} nodes x 8 GPUs")
    fails = make_pods(api, names, "default-scheduler", nodes_of=lambda i: node_name(i % n_nodes))
    if fails:
        raise RuntimeError(f"cold start: {fails} pods not created")
    create_s = time.monotonic() - t
    rv = list_rv(api)
    w = BindWatch(api, rv, 1)
    w.start()
    log = open(os.path.join(tmp, f"cold-{n_existing}.log"), "w")
    t_start = time.monotonic()
    proc = subprocess.Popen([args.gpusched, "scheduler", "--kubeconfig", env["KUBECONFIG"],
                             "--qps", str(args.qps), "--burst", str(args.burst),
                             "--leader-elect=false"], stdout=log, stderr=subprocess.STDOUT)
    s, _ = api.req("POST", f"/api/v1/namespaces/{NS}/pods", pod_body("cold-new", "gpusched"))
    ok = w.done.wait(args.timeout_s)
    t_bind = time.monotonic()
    proc.terminate()
    proc.wait(20)
    log.close()
    if not ok or w.error or s != 201:
        raise RuntimeError(f"cold start {n_existing}: no bind ({w.error or 'timeout'}); log {log.name}")
    res = {"existing_pods": n_existing, "start_to_first_bind_s": round(t_bind - t_start, 3),
           "create_s": round(create_s, 1)}
    print(f"cold start: {n_existing} pods already bound; gpusched start to first bind "
          f"{res['start_to_first_bind_s']} s", flush=True)
    delete_pods(api)
    return res


def openb_round(api, args, env, tmp, who, nodes, pods):
    """The openb trace as real objects: pods created one by one, in one shuffled order, with the
    scheduler running, until their GPU request reaches the cluster's capacity; then the
    allocation once nothing changes. gpusched gets the trace's milli fractions (annotation
    gpu-fraction); kube-scheduler gets them rounded up to whole GPUs, what its users get."""
    cap_milli = sum(int(n["gpu"]) for n in nodes) * 1000
    sched = "gpusched" if who == "gpusched" else "default-scheduler"
    log = open(os.path.join(tmp, f"openb-{who}.log"), "w")
    if who == "gpusched":
        proc = subprocess.Popen([args.gpusched, "scheduler", "--kubeconfig", env["KUBECONFIG"],
                                 "--qps", str(args.qps), "--burst", str(args.burst),
                                 "--leader-elect=false", "--policy", "fgd"],
                                stdout=log, stderr=subprocess.STDOUT)
    else:
        cfg = kube_scheduler_config(tmp, env, args.qps, args.burst)
        proc = subprocess.Popen([os.path.join(env["GPUSCHED_K8S_BIN"], "kube-scheduler"),
                                 "--config", cfg, "--secure-port", "0", "-v", "0"],
                                stdout=log, stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    created = 0
    for i, p in enumerate(pods):
        ng, milli = int(p["num_gpu"]), int(p["gpu_milli"])
        res = {"requests": {"cpu": f"{p['cpu_milli']}m", "memory": f"{p['memory_mib']}Mi"}}
        meta = {"name": f"ob-{who[:4]}-{i:05d}"}
        if ng > 0 and (milli >= 1000 or who != "gpusched"):
            res["limits"] = {"nvidia.com/gpu": str(ng)}
        elif ng > 0:
            meta["annotations"] = {"gpu-fraction": f"{milli / 1000:.3f}"}
        spec = {"schedulerName": sched, "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.invalid/none:1", "resources": res}]}
        if p.get("gpu_spec"):
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{
                    "key": "nvidia.com/gpu.product", "operator": "In",
                    "values": p["gpu_spec"].split("|")}]}]}}}
        st, _ = api.req("POST", f"/api/v1/namespaces/{NS}/pods",
                        {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        created += st == 201
    create_s = time.monotonic() - t0
    # Settled: the number of bound pods has not changed for 10 s.
    last, since = -1, time.monotonic()
    while time.monotonic() - since < 10:
        time.sleep(2)
        s_, out = api.req("GET", f"/api/v1/namespaces/{NS}/pods")
        items = json.loads(out)["items"]
        bound = sum(1 for it in items if it["spec"].get("nodeName"))
        if bound != last:
            last, since = bound, time.monotonic()
    settle_s = time.monotonic() - t0
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    held = useful = 0
    for it in items:
        if not it["spec"].get("nodeName"):
            continue
        p = pods[int(it["metadata"]["name"].rsplit("-", 1)[1])]
        ng, milli = int(p["num_gpu"]), int(p["gpu_milli"])
        useful += ng * milli
        held += ng * (1000 if who != "gpusched" else milli)
    res = {"who": who, "pods": created, "bound": last, "pending": created - last,
           "create_s": round(create_s, 1), "settled_after_s": round(settle_s, 1),
           "unallocated_gpu_pct": round(100.0 * (cap_milli - held) / cap_milli, 2),
           "requested_gpu_pct_of_bound": round(100.0 * useful / cap_milli, 2)}
    print(f"openb {who}: {created} pods arrived (GPU request {100.0 * sum(int(p['num_gpu']) * int(p['gpu_milli']) for p in pods) / cap_milli:.1f}% "
          f"of capacity), {last} bound, {created - last} pending; unallocated GPU "
          f"{res['unallocated_gpu_pct']}%; GPU requests of bound pods "
          f"{res['requested_gpu_pct_of_bound']}% of capacity; settled {res['settled_after_s']} s",
          flush=True)
    delete_pods(api)
    return res


def openb_load(args):
    import csv
    import random
    nodes = list(csv.DictReader(open(args.openb_nodes)))
    trace = list(csv.DictReader(open(args.openb_pods)))
    trace.sort(key=lambda p: p["name"])
    rng = random.Random(args.seed)
    order = trace[:]
    rng.shuffle(order)
    cap = sum(int(n["gpu"]) for n in nodes) * 1000
    pods, total = [], 0
    # The pods in a shuffled order, then drawn with replacement, until the GPU request reaches
    # the capacity (as simulate's tuning does at --tune 1.0).
    while total < cap:
        p = order[len(pods)] if len(pods) < len(order) else rng.choice(trace)
        if total + int(p["num_gpu"]) * int(p["gpu_milli"]) > cap:
            break
        pods.append(p)
        total += int(p["num_gpu"]) * int(p["gpu_milli"])
    return nodes, pods


def openb_nodes_create(api, nodes):
    def one(api, n):
        name = n["sn"].lower()
        labels = {"gpusched.bench": "openb", "kubernetes.io/hostname": name}
        res = {"cpu": f"{n['cpu_milli']}m", "memory": f"{n['memory_mib']}Mi", "pods": "1000"}
        if int(n["gpu"]) > 0:
            labels["nvidia.com/gpu.product"] = n["model"]
            res["nvidia.com/gpu"] = n["gpu"]
        s, _ = api.req("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                 "metadata": {"name": name, "labels": labels}})
        if s not in (201, 409):
            return False
        s, _ = api.req("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
            "capacity": res, "allocatable": res, "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]}},
            "application/merge-patch+json")
        return s == 200
    return parallel(api, nodes, one)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state", required=True)
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--qps", type=int, default=5000)
    ap.add_argument("--burst", type=int, default=5000)
    ap.add_argument("--rounds", default="noop,gpusched,kube-scheduler")
    ap.add_argument("--cold-start", default="", help="comma list of existing-pod counts")
    ap.add_argument("--timeout-s", type=float, default=900)
    ap.add_argument("--openb-nodes", help="openb node list CSV: run the trace round instead")
    ap.add_argument("--openb-pods", help="openb pod list CSV")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    if args.openb_nodes:
        return main_openb(args)
    env = read_env(args.state)
    api = Api(env)
    tmp = tempfile.mkdtemp(prefix="gs-k8s-bench-")
    t = time.monotonic()
    api.req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NS}})
    fails = make_nodes(api, args.nodes)
    if fails:
        sys.exit(f"{fails} nodes not created")
    print(f"nodes: {args.nodes} x 8 GPUs created in {time.monotonic() - t:.1f} s", flush=True)
    # Pods need the namespace's default ServiceAccount when the controller-manager is off.
    api.req("POST", f"/api/v1/namespaces/{NS}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    out = {"nodes": args.nodes, "gpus_per_node": 8, "qps": args.qps, "burst": args.burst,
           "rounds": [], "cold_start": [], "logs": tmp}
    for who in [r for r in args.rounds.split(",") if r]:
        out["rounds"].append(run_round(api, args, env, tmp, who, args.nodes))
    for n in [int(x) for x in args.cold_start.split(",") if x]:
        out["cold_start"].append(cold_start(api, args, env, tmp, n, args.nodes))
    by = {r["who"]: r for r in out["rounds"]}
    if "gpusched" in by and "kube-scheduler" in by and by["kube-scheduler"]["pods_per_s"]:
        out["gpusched_vs_kube_scheduler"] = round(by["gpusched"]["pods_per_s"] /
                                                  by["kube-scheduler"]["pods_per_s"], 2)
    if "gpusched" in by and "noop" in by and by["noop"]["pods_per_s"]:
        out["gpusched_vs_noop"] = round(by["gpusched"]["pods_per_s"] / by["noop"]["pods_per_s"], 2)
    print(json.dumps(out))


def main_openb(args):
    env = read_env(args.state)
    api = Api(env)
    tmp = tempfile.mkdtemp(prefix="gs-k8s-bench-")
    api.req("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": NS}})
    api.req("POST", f"/api/v1/namespaces/{NS}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
    nodes, pods = openb_load(args)
    t = time.monotonic()
    if openb_nodes_create(api, nodes):
        sys.exit("openb: nodes not created")
    print(f"openb: {len(nodes)} nodes, {sum(int(n['gpu']) for n in nodes)} GPUs created in "
          f"{time.monotonic() - t:.1f} s; {len(pods)} pods per round (seed {args.seed})", flush=True)
    out = {"openb": [openb_round(api, args, env, tmp, who, nodes, pods)
                     for who in [r for r in args.rounds.split(",") if r != "noop"]], "logs": tmp}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
