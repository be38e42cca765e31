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

Optional cold start (--cold-start 10000,50000): that many pods already bound (created with
spec.nodeName), then gpusched starts and one new pod is created: the time from start to its
bind.

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
    t_start = time.monotonic()
    if who == "gpusched":
        proc = subprocess.Popen([args.gpusched, "scheduler", "--kubeconfig", env["KUBECONFIG"],
                                 "--qps", str(args.qps), "--burst", str(args.burst),
                                 "--leader-elect=false"], stdout=log, stderr=subprocess.STDOUT)
    elif who == "kube-scheduler":
        cfg = kube_scheduler_config(tmp, env, args.qps, args.burst)
        proc = subprocess.Popen([os.path.join(env["GPUSCHED_K8S_BIN"], "kube-scheduler"),
                                 "--config", cfg, "--secure-port", "0", "-v", "0"],
                                stdout=log, stderr=subprocess.STDOUT)
    else:
        threading.Thread(target=noop_binder, args=(api, names, n_nodes, args.qps),
                         daemon=True).start()
    ok = w.done.wait(args.timeout_s)
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
