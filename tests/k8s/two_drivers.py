#!/usr/bin/env python3
"""The same scheduling scenarios through both drivers of the core: `gpusched whatif` on a
cluster dump (tests/data/whatif/CASE.yaml, its expected output CASE.expected, worked by hand in
the dump's header) and `gpusched scheduler` on a real API server holding the same objects.

For each case, on a control plane of the caller's (KUBECONFIG; no kubelet, no kube-scheduler):
  1. the dump's objects are created through the API (Node status and a running pod's phase
     through the status subresource, as a kubelet would write them);
  2. gpusched scheduler runs with the case's policy until the cluster holds what CASE.expected
     says: every pod it binds on the node and GPUs the file names, every pod it evicts gone
     (this script plays the kubelet and finishes evicted pods), every pending pod with
     PodScheduled=False and the file's reason as its message;
  3. with the scheduler stopped, `gpusched whatif --kubeconfig` reads the live cluster back: it
     must find nothing left to do (every pod bound is adopted at cycle 0, no evictions) and the
     same pending pods with the same reasons: the two drivers agree in both directions.
Then everything the case made is deleted, for the next.

Usage: two_drivers.py GPUSCHED_BINARY SOURCE_DIR CASE:POLICY...
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

IMAGE = "registry.invalid/none:1"
TIMEOUT_S = 45


def kubectl(*args, stdin=None, check=True):
    r = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("kubectl %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


def create(obj):
    kubectl("create", "-f", "-", stdin=json.dumps(obj))


def patch_status(kind, name, ns, status):
    args = ["patch", kind, name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status})]
    if ns:
        args[1:1] = ["-n", ns]
    kubectl(*args)


def load_case(src, case):
    d = os.path.join(src, "tests", "data", "whatif")
    with open(os.path.join(d, case + ".yaml")) as f:
        dump = yaml.safe_load(f)
    with open(os.path.join(d, case + ".expected")) as f:
        expected = [json.loads(line) for line in f if line.strip()]
    return dump["items"], expected


def ensure_namespace(ns, made):
    if ns in made:
        return
    made.add(ns)
    if ns != "default":
        kubectl("create", "namespace", ns, check=False)
    # No controller manager makes the `default` ServiceAccount here.
    kubectl("-n", ns, "create", "serviceaccount", "default", check=False)


def next_second():
    """Sleeps past the next whole second of the wall clock: the API server stamps
    creationTimestamp in whole seconds, and pods of one queue are served oldest first."""
    time.sleep(1.0 - time.time() % 1.0 + 0.05)


def apply_dump(items):
    namespaces = set()
    # Pods in the order of their dump creationTimestamp (file order among equals, none first),
    # a new second for each new timestamp, so that the server's order is the dump's.
    others = [o for o in items if o["kind"] != "Pod"]
    pod_list = [o for o in items if o["kind"] == "Pod"]
    stamp = lambda o: o.get("metadata", {}).get("creationTimestamp") or ""
    pod_list.sort(key=stamp)  # stable: file order among equal stamps
    last = None
    for obj in others + pod_list:
        if obj["kind"] == "Pod":
            if last is not None and stamp(obj) != last:
                next_second()
            last = stamp(obj)
        obj = json.loads(json.dumps(obj))  # a copy
        md = obj.setdefault("metadata", {})
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            md.pop(k, None)
        kind = obj["kind"]
        status = obj.pop("status", None)
        if kind == "Pod":
            ns = md.setdefault("namespace", "default")
            ensure_namespace(ns, namespaces)
            spec = obj["spec"]
            spec.setdefault("terminationGracePeriodSeconds", 0)
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                c.setdefault("image", IMAGE)
            create(obj)
            if status and status.get("phase") == "Running":
                patch_status("pod", md["name"], ns, {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}]})
        elif kind == "Node":
            create(obj)
            st = dict(status or {})
            alloc = st.get("allocatable") or st.get("capacity") or {}
            st.setdefault("capacity", alloc)
            st.setdefault("allocatable", alloc)
            st["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                 "message": "two_drivers.py"}]
            patch_status("node", md["name"], None, st)
        else:
            if "namespace" in md:
                ensure_namespace(md["namespace"], namespaces)
            create(obj)


def pods():
    return json.loads(kubectl("get", "pods", "-A", "-o", "json"))["items"]


def key(p):
    return "%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])


def play_kubelet(live):
    """Finishes pods being deleted (no kubelet here to confirm their end)."""
    for p in live:
        if p["metadata"].get("deletionTimestamp"):
            kubectl("-n", p["metadata"]["namespace"], "delete", "pod", p["metadata"]["name"],
                    "--grace-period=0", "--force", check=False)


def gpu_of(g):
    """One GPU of a whatif line or of the assignment annotation: index, milli, and the memory
    and MIG instance a sharing pod took (None when absent or null)."""
    mig = g.get("mig")
    return (g["index"], g.get("milli", 1000), g.get("mem_mib"),
            (mig["profile"], mig["start"]) if mig else None)


def want_state(expected):
    """From whatif's lines: pod -> ("bound", node, [gpu_of]) | ("gone",) |
    ("pending", reason), for every pod the file names. An adopted pod's GPUs are the core's
    charge, not an annotation the cluster holds: only its node is compared (GPUs None)."""
    want = {}
    for ev in expected:
        pod = ev["pod"]
        if ev["event"] == "bind":
            gpus = None if ev.get("adopted") else [gpu_of(g) for g in ev["gpus"]]
            want[pod] = ("bound", ev["node"], gpus)
        elif ev["event"] in ("evict", "delete", "finish"):
            want[pod] = ("gone",)
        elif ev["event"] == "pending":
            want[pod] = ("pending", ev["reason"])
    return want


def live_state(live):
    got = {}
    for p in live:
        if p["metadata"].get("deletionTimestamp"):
            got[key(p)] = ("terminating",)
            continue
        node = p["spec"].get("nodeName")
        if node:
            a = (p["metadata"].get("annotations") or {}).get("gpusched.io/assigned-gpus")
            gpus = [gpu_of(g) for g in json.loads(a)["gpus"]] if a else []
            got[key(p)] = ("bound", node, gpus)
            continue
        msg = None
        for c in p.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                msg = c.get("message")
        got[key(p)] = ("pending", msg)
    return got


def diff(want, got):
    out = []
    for pod in sorted(set(want) | set(got)):
        w = want.get(pod, ("gone",))
        g = got.get(pod, ("gone",))
        if w[0] == "bound" and w[2] is None and g[0] == "bound":
            g = (g[0], g[1], None)
        if w != g:
            out.append("  %s: want %s, got %s" % (pod, w, g))
    return out


def clean():
    kubectl("delete", "pods", "--all", "-A", "--grace-period=0", "--force", check=False)
    kubectl("delete", "nodes", "--all", check=False)
    kubectl("delete", "queues.scheduling.gpusched.io", "--all", check=False)
    kubectl("delete", "podgroups.scheduling.x-k8s.io", "--all", "-A", check=False)
    for pc in kubectl("get", "priorityclasses", "-o", "name").split():
        if not pc.startswith("priorityclass.scheduling.k8s.io/system-"):
            kubectl("delete", pc, check=False)
    for _ in range(100):
        if not pods() and not json.loads(kubectl("get", "nodes", "-o", "json"))["items"]:
            return
        time.sleep(0.1)
    raise RuntimeError("the previous case's objects did not go away")


def run_case(binary, src, case, policy, tmp):
    items, expected = load_case(src, case)
    want = want_state(expected)
    apply_dump(items)
    log_path = os.path.join(tmp, case + ".log")
    with open(log_path, "w") as log:
        sched = subprocess.Popen(
            [binary, "scheduler", "--kubeconfig", os.environ["KUBECONFIG"], "--policy", policy,
             "--leader-elect=false", "--qps", "500", "--burst", "1000",
             "--metrics-addr", "127.0.0.1:0", "--max-runtime-s", str(TIMEOUT_S + 30)],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + TIMEOUT_S
        problems = ["not looked at yet"]
        while time.time() < deadline:
            live = pods()
            play_kubelet(live)
            problems = diff(want, live_state(live))
            if not problems:
                break
            time.sleep(0.5)
    finally:
        sched.terminate()
        sched.wait(timeout=20)
    if problems:
        with open(log_path) as f:
            tail = f.read().splitlines()[-30:]
        return ["scheduler: the cluster does not hold what %s.expected says:" % case] + \
            problems + ["--- scheduler log (last 30 lines)"] + tail
    # The other way round: whatif reads the live cluster and finds nothing to do.
    r = subprocess.run([binary, "whatif", "--kubeconfig", os.environ["KUBECONFIG"], "--json",
                        "--policy", policy], capture_output=True, text=True)
    if r.returncode != 0:
        return ["whatif --kubeconfig: rc %d: %s" % (r.returncode, r.stderr.strip())]
    back = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    problems = []
    for ev in back:
        if ev["event"] == "bind" and not (ev.get("adopted") and ev["cycle"] == 0):
            problems.append("  whatif would still bind %s: %s" % (ev["pod"], json.dumps(ev)))
        elif ev["event"] not in ("bind", "pending"):
            problems.append("  whatif would still %s %s" % (ev["event"], ev["pod"]))
    pend_back = {ev["pod"]: ev["reason"] for ev in back if ev["event"] == "pending"}
    pend_want = {p: w[1] for p, w in want.items() if w[0] == "pending"}
    if pend_back != pend_want:
        problems.append("  pending from the live cluster %s, from the dump %s" %
                        (pend_back, pend_want))
    bound_back = {ev["pod"]: ev["node"] for ev in back if ev["event"] == "bind"}
    bound_want = {p: w[1] for p, w in want.items() if w[0] == "bound"}
    if bound_back != bound_want:
        problems.append("  bound in the live cluster %s, in the dump %s" %
                        (bound_back, bound_want))
    if problems:
        return ["whatif --kubeconfig disagrees with %s.expected:" % case] + problems
    return []


def main():
    binary, src = sys.argv[1], sys.argv[2]
    cases = [c.split(":") for c in sys.argv[3:]]
    for crd in sorted(os.listdir(os.path.join(src, "deploy", "crds"))):
        kubectl("apply", "-f", os.path.join(src, "deploy", "crds", crd))
    for crd in ("queues.scheduling.gpusched.io", "podgroups.scheduling.x-k8s.io"):
        kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/" + crd)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case, policy in cases:
            t0 = time.time()
            problems = run_case(binary, src, case, policy, tmp)
            if problems:
                failed += 1
                print("FAIL: %s (--policy %s)" % (case, policy))
                print("\n".join(problems))
            else:
                print("ok: %s (--policy %s): the API server and whatif agree (%.1f s)" %
                      (case, policy, time.time() - t0))
            clean()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
