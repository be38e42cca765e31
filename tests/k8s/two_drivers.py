#!/usr/bin/env python3
"""The same scheduling scenarios through both drivers of the core: `gpusched whatif` on a
cluster dump (tests/data/whatif/CASE.yaml, with CASE.timeline.yaml when there; the expected
output CASE.expected, or CASE.timeline.expected for a timeline whatif also runs without, is
worked by hand in the dump's header) and `gpusched scheduler` on a real
API server holding the same objects, changed by the same timeline.

Each case runs on a control plane of its worker (control-plane.sh up; no kubelet, no
kube-scheduler, no controller manager: the cases' reasons count every node, so cases never
share a plane at once; a worker cleans its plane between cases), written to over HTTPS as the
plane's admin:
  1. the dump's objects are created through the API, as a kubelet and the controllers would
     leave them: Node status (capacity, allocatable, Ready), a running pod's phase, Ready
     condition and startTime through the status subresource, a PodDisruptionBudget's status
     (with observedGeneration, as the disruption controller writes it, so the API server's
     Eviction honours it); pods in the order of their creationTimestamp, a new second for each
     new stamp (the API server stamps whole seconds; a queue is served oldest first);
  2. gpusched scheduler starts with the case's policy; this script plays the kubelet for pods
     being deleted (an evicted pod is removed at once);
  3. the timeline's steps are applied in order through the API, each once the previous
     checkpoint settled (below):
       create      the objects; an existing object (a Node's new inventory, a changed
                   PodDisruptionBudget) is replaced, its status written again;
       finish      the pod's status.phase set to Succeeded, as its kubelet would;
       delete      the pod deleted with grace period 0;
       cordon, uncordon   the Node's spec.unschedulable;
       deleteNode  the Node deleted (its pods stay, as without the pod GC: the scheduler
                   evicts them);
       gpuHealth   the GPU's health in the agent's inventory annotation (gpusched.io/gpus)
                   when the Node has one; else the Node's allocatable nvidia.com/gpu, one less
                   per unhealthy GPU, which the translation reads as the highest indices
                   being unhealthy (a set of unhealthy GPUs that is not the highest indices
                   cannot be said that way: the case fails, naming the step);
     a case whose objects hold durations (a PodGroup's gpusched.io/gang-grace-seconds or
     spec.scheduleTimeoutSeconds: gang_loss) runs on a clock TIME_SCALE as fast: its durations
     are scaled so in the objects, each step waits at least its `at` gap scaled so after the
     previous one, and at the end every two checkpoints must be as far apart in wall time, by
     PACE_MARGIN_S, on the same side of every scaled duration as their `at`s are of the
     case's duration (pace_kept()), else the case fails: the order of steps against grace
     periods and timeouts is the case's, whatever the machine's load;
  4. checkpoints: one after the dump and one after each step (steps with one `at` are one
     checkpoint). Each expected line belongs to the checkpoint whose `at` equals its t_s (an
     adopted bind to the dump's). At checkpoint k the cluster must hold what the lines up to
     k say, pod by pod, and hold it unchanged over SETTLE_CYCLES scheduler cycles
     (gpusched_cycle_duration_seconds_count on its /metrics) before the next step:
       bind      the pod on that node with those GPUs (index, milli, mem_mib, MIG profile and
                 start of gpusched.io/assigned-gpus); for an adopted pod the node only (its
                 GPUs are the core's charge, not an annotation the cluster holds);
       evict, delete   the pod gone from the API server;
       finish    the pod's phase Succeeded;
       pending   (the last checkpoint only, as whatif prints them only at the end) the pod
                 unbound with PodScheduled=False and the line's reason as its message;
       a pod created so far and named by no line yet: unbound and not being deleted (its
                 reason is not compared before the end, whatif prints none);
     any other pod is a failure, and no GPU (a whole GPU, a MIG instance) is given twice;
     the members of a gang that whatif binds in one cycle must be bound in one cycle of the
     scheduler (the cycle= of its "bound" log lines: gang.yaml's 8 at once); t_s and the
     cycle numbers themselves are not compared (wall time is not the simulated clock);
  5. with the scheduler stopped, `gpusched whatif --kubeconfig` reads the live cluster back:
     it must find nothing left to do (every pod bound is adopted at cycle 0, no evictions) and
     the same pending pods with the same reasons: the two drivers agree in both directions.

Usage: two_drivers.py GPUSCHED_BINARY SOURCE_DIR WORK_DIR JOBS CASE:POLICY...
(JOBS control planes, each running its share of the cases in turn.)
"""
import http.client
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import yaml

IMAGE = "registry.invalid/none:1"
TIMEOUT_S = 45  # per checkpoint
SETTLE_CYCLES = 3
TIME_SCALE = 0.2
PACE_MARGIN_S = 2.0
GRACE_ANN = "gpusched.io/gang-grace-seconds"
INV_ANN = "gpusched.io/gpus"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
GPU_RES = "nvidia.com/gpu"
# kind -> (API group path, resource, namespaced): the kinds the cases hold.
RESOURCES = {
    "Pod": ("/api/v1", "pods", True),
    "Node": ("/api/v1", "nodes", False),
    "PriorityClass": ("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    "Queue": ("/apis/scheduling.gpusched.io/v1alpha1", "queues", False),
    "PodGroup": ("/apis/scheduling.x-k8s.io/v1alpha1", "podgroups", True),
}


class CaseError(Exception):
    pass


class Plane:
    """One control plane (its kubeconfig) and what a case made on it."""

    def __init__(self, cp_sh, state):
        self.cp_sh, self.state = cp_sh, state
        r = subprocess.run(["bash", cp_sh, "up", "--state", state, "--scheduler=0",
                            "--controller-manager=0"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("control plane %s did not come up:\n%s" % (state, r.stderr))
        env = subprocess.run(["bash", cp_sh, "env", "--state", state], capture_output=True,
                             text=True, check=True).stdout
        self.env = dict(os.environ)
        for line in env.splitlines():
            m = re.match(r"export (\w+)=(.*)$", line)
            if m:
                self.env[m.group(1)] = m.group(2).replace("$PATH", os.environ["PATH"])
        self.kubeconfig = self.env["KUBECONFIG"]
        self.api = Api(self.env)

    def down(self):
        subprocess.run(["bash", self.cp_sh, "down", "--state", self.state],
                       capture_output=True)

    def kubectl(self, *args, stdin=None, check=True):
        r = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True,
                           env=self.env)
        if check and r.returncode != 0:
            raise CaseError("kubectl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout


class Api:
    """The API server over one kept-alive HTTPS connection, as the admin client certificate
    (kubectl would start a process a call: seconds a case on a loaded machine)."""

    def __init__(self, env):
        u = urllib.parse.urlparse(env["GPUSCHED_K8S_SERVER"])
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=env["GPUSCHED_K8S_CA"])
        self.ctx.load_cert_chain(env["GPUSCHED_K8S_CLIENT_CERT"], env["GPUSCHED_K8S_CLIENT_KEY"])
        self.conn = None

    def req(self, method, path, body=None, ctype="application/json", allow=()):
        """The answer's JSON; None for a status in allow (404, 409); CaseError otherwise."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=30,
                                                            context=self.ctx)
                self.conn.request(method, path, body=data, headers={
                    "Content-Type": ctype, "Accept": "application/json"})
                r = self.conn.getresponse()
                out = r.read()
                break
            except (http.client.HTTPException, OSError) as e:
                self.conn.close()
                self.conn = None
                if attempt:
                    raise CaseError("%s %s: %s" % (method, path, e))
        if r.status in allow:
            return None
        if r.status >= 300:
            raise CaseError("%s %s: HTTP %d: %s" % (method, path, r.status,
                                                    out.decode(errors="replace")[:400]))
        return json.loads(out) if out else None

    def path(self, kind, name=None, ns=None, sub=None):
        group, res, namespaced = RESOURCES[kind]
        p = group + ("/namespaces/%s" % ns if namespaced and ns else "") + "/" + res
        return p + ("/" + name if name else "") + ("/" + sub if sub else "")

    def merge(self, kind, name, ns, patch, sub=None):
        return self.req("PATCH", self.path(kind, name, ns, sub), patch,
                        "application/merge-patch+json")

    def delete_now(self, kind, name, ns=None):
        """Deleted with grace period 0 (a pod at once, as `kubectl delete --force`)."""
        self.req("DELETE", self.path(kind, name, ns), {"gracePeriodSeconds": 0}, allow=(404,))


def duration_s(v):
    """A timeline's `at` as whatif reads it: a number of seconds or 90s, 5m, 1h30m, 250ms."""
    if isinstance(v, (int, float)):
        return float(v)
    total, s = 0.0, str(v)
    for num, unit in re.findall(r"([0-9.]+)(ms|h|m|s|)", s):
        total += float(num) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "": 1}[unit]
    return total


def load_case(src, case):
    d = os.path.join(src, "tests", "data", "whatif")
    with open(os.path.join(d, case + ".yaml")) as f:
        dump = yaml.safe_load(f)
    timeline = []
    tl = os.path.join(d, case + ".timeline.yaml")
    if os.path.exists(tl):
        with open(tl) as f:
            timeline = yaml.safe_load(f) or []
    # A case whatif runs both without and with its timeline keeps the timeline's results in
    # CASE.timeline.expected (tests/integration/whatif.sh's EXPECT=): here the timeline is
    # played, so those are the results to hold (the dump's own pods, which have no line before
    # the first step, must stay unbound until it).
    exp = os.path.join(d, case + ".timeline.expected")
    if not (timeline and os.path.exists(exp)):
        exp = os.path.join(d, case + ".expected")
    with open(exp) as f:
        expected = [json.loads(line) for line in f if line.strip()]
    return dump["items"], timeline, expected


def checkpoints(timeline, expected):
    """[(at_s, [steps], [lines])]: the dump's checkpoint (at 0, no steps) and one per distinct
    `at` of the timeline, each with the expected lines whose t_s is its `at`."""
    cps = [(0.0, [], [])]
    for st in timeline:
        at = duration_s(st["at"])
        if at <= 0:
            raise CaseError("a step at %s: not after the dump's checkpoint" % st["at"])
        if at == cps[-1][0]:
            cps[-1][1].append(st)
        else:
            cps.append((at, [st], []))
    by_at = {at: lines for at, _, lines in cps}
    for ev in expected:
        t = 0.0 if ev.get("adopted") else ev["t_s"]
        if t not in by_at:
            raise CaseError("expected line at t_s %s matches no step: %s" % (t, json.dumps(ev)))
        by_at[t].append(ev)
    return cps


def scale_durations(obj):
    """A copy of obj with its durations scaled by TIME_SCALE, and [(case_s, wall_s)] of each."""
    obj = json.loads(json.dumps(obj))
    found = []
    md = obj.get("metadata") or {}
    ann = md.get("annotations") or {}
    if GRACE_ANN in ann:
        s = int(ann[GRACE_ANN])
        ann[GRACE_ANN] = str(max(1, round(s * TIME_SCALE)))
        found.append((s, int(ann[GRACE_ANN])))
    spec = obj.get("spec") or {}
    if obj.get("kind") == "PodGroup" and "scheduleTimeoutSeconds" in spec:
        s = spec["scheduleTimeoutSeconds"]
        spec["scheduleTimeoutSeconds"] = max(1, round(s * TIME_SCALE))
        found.append((s, spec["scheduleTimeoutSeconds"]))
    return obj, found


def pace_kept(ats, walls, durations):
    """Problems when the wall clock did not keep the case's order of events against its
    durations: for every two checkpoints j < i and every duration D (case seconds; its scaled
    wall seconds W), at_i - at_j and walls_i - walls_j must fall on the same side of D and W,
    the wall one by PACE_MARGIN_S at least (a cycle runs at least once a second)."""
    out = []
    for i in range(len(walls)):
        for j in range(i):
            for d, w in durations:
                case_after = ats[i] - ats[j] > d
                gap = walls[i] - walls[j]
                ok = gap >= w + PACE_MARGIN_S if case_after else gap <= w - PACE_MARGIN_S
                if not ok:
                    out.append("  checkpoints %d and %d: %.0f s apart in the case, %s its %d s; "
                               "%.1f s apart in wall time against the scaled %d s" %
                               (j, i, ats[i] - ats[j], "after" if case_after else "within", d,
                                gap, w))
    return ["the pace was not kept (TIME_SCALE %g):" % TIME_SCALE] + out if out else []


def pod_key(obj):
    md = obj["metadata"]
    return "%s/%s" % (md.get("namespace") or "default", md["name"])


def key(p):
    return "%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"])


class Case:
    """One case on one plane: applying its objects and steps, reading the cluster back."""

    def __init__(self, plane, binary, name, policy, logdir):
        self.pl, self.binary, self.name, self.policy = plane, binary, name, policy
        self.log_path = os.path.join(logdir, name + ".log")
        self.namespaces = set()
        self.created = set()  # "ns/name" of every pod created so far
        self.unhealthy = {}  # node -> GPU indices made unhealthy through allocatable
        self.last_pod_s = None  # the wall second of the last pod created
        self.gang_of = {}  # "ns/name" of a gang member -> "ns/podgroup"
        self.notes = []  # what gangs_at_once() and the pace found, for the report
        self.sched = None

    # ---- writing objects -----------------------------------------------------------------

    def ensure_namespace(self, ns):
        if ns in self.namespaces:
            return
        self.namespaces.add(ns)
        api = self.pl.api
        if ns != "default":
            api.req("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, allow=(409,))
        # No controller manager makes the `default` ServiceAccount here.
        api.req("POST", "/api/v1/namespaces/%s/serviceaccounts" % ns,
                {"metadata": {"name": "default"}}, allow=(409,))

    def patch_status(self, kind, name, ns, status):
        self.pl.api.merge(kind, name, ns, {"status": status}, "status")

    def get(self, obj):
        md = obj["metadata"]
        return self.pl.api.req("GET", self.pl.api.path(obj["kind"], md["name"],
                                                        md.get("namespace")), allow=(404,))

    def node_status(self, name, status, old):
        st = dict(status or {})
        alloc = st.get("allocatable") or st.get("capacity") or {}
        st.setdefault("capacity", alloc)
        st.setdefault("allocatable", alloc)
        for field in ("capacity", "allocatable"):  # a merge patch removes a key by null
            for k in (old or {}).get(field) or {}:
                st[field].setdefault(k, None)
        st["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                             "message": "two_drivers.py"}]
        self.patch_status("Node", name, None, st)
        self.unhealthy.pop(name, None)

    def put(self, obj):
        """Creates one object of the dump or of a step's create (a copy is written)."""
        obj = json.loads(json.dumps(obj))
        md = obj.setdefault("metadata", {})
        for k in ("uid", "resourceVersion", "creationTimestamp"):
            md.pop(k, None)
        kind = obj["kind"]
        status = obj.pop("status", None)
        if kind == "Pod":
            ns = md.setdefault("namespace", "default")
            self.ensure_namespace(ns)
            spec = obj["spec"]
            spec.setdefault("terminationGracePeriodSeconds", 0)
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                c.setdefault("image", IMAGE)
            now_s = int(time.time())
            if self.last_pod_s == now_s:  # a step's pod is younger than those before it
                next_second()
            self.pl.api.req("POST", self.pl.api.path("Pod", ns=ns), obj)
            self.last_pod_s = int(time.time())
            self.created.add(pod_key(obj))
            group = (md.get("labels") or {}).get(GANG_LABEL)
            if group:
                self.gang_of[pod_key(obj)] = "%s/%s" % (ns, group)
            if status and status.get("phase") == "Running":
                st = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                if status.get("startTime"):
                    st["startTime"] = status["startTime"]
                self.patch_status("Pod", md["name"], ns, st)
            return
        if "namespace" in md:
            self.ensure_namespace(md["namespace"])
        if kind not in RESOURCES:
            raise CaseError("kind %s: not one this script writes" % kind)
        old = self.get(obj)
        api = self.pl.api
        if old is None:
            api.req("POST", api.path(kind, ns=md.get("namespace")), obj)
        else:  # an update: the new labels, annotations and spec on the live object
            new = dict(old)
            new["metadata"] = dict(old["metadata"])
            for k in ("labels", "annotations"):
                new["metadata"].pop(k, None)
                if k in md:
                    new["metadata"][k] = md[k]
            for k, v in obj.items():
                if k not in ("metadata", "apiVersion", "kind"):
                    new[k] = v
            if kind == "Node" and "spec" not in obj:
                new.pop("spec", None)
            api.req("PUT", api.path(kind, md["name"], md.get("namespace")), new)
        if kind == "Node":
            self.node_status(md["name"], status, (old or {}).get("status"))
        elif kind == "PodDisruptionBudget" and status is not None:
            live = self.get(obj)
            st = dict(status)
            st["observedGeneration"] = live["metadata"].get("generation", 1)
            self.patch_status(kind, md["name"], md["namespace"], st)

    def apply_dump(self, items):
        # Pods in the order of their dump creationTimestamp (file order among equals, none
        # first), a new second for each new timestamp, so that the server's order is the dump's.
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
            self.put(obj)

    # ---- timeline actions ------------------------------------------------------------------

    def apply_step(self, st, where):
        for action, val in st.items():
            if action == "at":
                continue
            if action == "create":
                items = val if isinstance(val, list) else val.get("items", [])
                for obj in items:
                    self.put(scale_durations(obj)[0])
            elif action == "finish":
                for p in val:
                    ns, name = p.split("/", 1)
                    self.patch_status("Pod", name, ns, {
                        "phase": "Succeeded",
                        "conditions": [{"type": "Ready", "status": "False",
                                        "reason": "PodCompleted"}]})
            elif action == "delete":
                for p in val:
                    ns, name = p.split("/", 1)
                    self.pl.api.delete_now("Pod", name, ns)
            elif action in ("cordon", "uncordon"):
                for n in val:
                    self.pl.api.merge("Node", n, None, {
                        "spec": {"unschedulable": True if action == "cordon" else None}})
            elif action == "deleteNode":
                for n in val:
                    self.pl.api.req("DELETE", self.pl.api.path("Node", n))
            elif action == "gpuHealth":
                for h in val if isinstance(val, list) else [val]:
                    self.gpu_health(h["node"], int(h["gpu"]), bool(h["healthy"]), where)
            else:
                raise CaseError("%s: action %s: not known here" % (where, action))

    def gpu_health(self, node, gpu, healthy, where):
        n = self.pl.api.req("GET", self.pl.api.path("Node", node))
        ann = (n["metadata"].get("annotations") or {}).get(INV_ANN)
        if ann:  # the agent's inventory says which GPU
            inv = json.loads(ann)
            for g in inv["gpus"]:
                if g["index"] == gpu:
                    g["health"] = "Healthy" if healthy else "Unhealthy"
                    break
            else:
                raise CaseError("%s: gpuHealth: node %s has no GPU %d" % (where, node, gpu))
            self.pl.api.merge("Node", node, None, {
                "metadata": {"annotations": {INV_ANN: json.dumps(inv, separators=(",", ":"))}}})
            return
        cap = int(n["status"]["capacity"][GPU_RES])
        bad = self.unhealthy.setdefault(node, set())
        (bad.discard if healthy else bad.add)(gpu)
        if bad != set(range(cap - len(bad), cap)):
            raise CaseError("%s: gpuHealth: unhealthy GPUs %s of node %s (capacity %d) are not "
                            "the highest indices: allocatable cannot say so" %
                            (where, sorted(bad), node, cap))
        self.patch_status("Node", node, None, {"allocatable": {GPU_RES: str(cap - len(bad))}})

    # ---- reading the cluster ---------------------------------------------------------------

    def pods(self):
        return self.pl.api.req("GET", "/api/v1/pods")["items"]

    def play_kubelet(self, live):
        """Finishes pods being deleted (no kubelet here to confirm their end)."""
        for p in live:
            if p["metadata"].get("deletionTimestamp"):
                self.pl.api.delete_now("Pod", p["metadata"]["name"], p["metadata"]["namespace"])

    def cycles(self):
        """The scheduler's cycles so far, from its /metrics; None before it serves them."""
        try:
            with open(self.log_path) as f:
                m = re.findall(r"serving /healthz /readyz /metrics on .* \(port (\d+)\)", f.read())
            if not m:
                return None
            with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % m[-1], timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("gpusched_cycle_duration_seconds_count "):
                        return int(float(line.split()[1]))
        except OSError:
            return None
        return None

    def settle(self, want, final):
        """Waits until the cluster holds want and keeps it over SETTLE_CYCLES cycles; the
        problems left at the deadline (none when it settled)."""
        deadline = time.time() + TIMEOUT_S
        problems, since = ["not looked at yet"], None
        while time.time() < deadline:
            c = self.cycles()  # before the pods: the cycles counted all saw what came before
            live = self.pods()
            self.play_kubelet(live)
            problems = diff(want, live_state(live), final) + double_use(live)
            if problems:
                since = None
            else:
                if since is None:
                    since = c
                elif c is not None and c >= since + SETTLE_CYCLES:
                    return []
            time.sleep(0.3)
        return problems

    def gangs_at_once(self, lines):
        """The members of a gang that whatif binds in one cycle are bound in one cycle of the
        scheduler too (the cycle its log gives on each "bound" line)."""
        together = {}
        for ev in lines:
            if ev["event"] == "bind" and not ev.get("adopted") and ev["pod"] in self.gang_of:
                together.setdefault((self.gang_of[ev["pod"]], ev["cycle"]), []).append(ev["pod"])
        with open(self.log_path) as f:
            cycle_of = dict(re.findall(r"bound pod=(\S+) node=\S+ cycle=(\d+)", f.read()))
        out = []
        for (gang, _), members in sorted(together.items()):
            cycles = {p: cycle_of.get(p) for p in members}
            if len(set(cycles.values())) != 1 or None in cycles.values():
                out.append("  gang %s: members bound in scheduler cycles %s, not in one" %
                           (gang, cycles))
            else:
                self.notes.append("gang %s: %d members in cycle %s" %
                                  (gang, len(members), cycles[members[0]]))
        return out

    def start_scheduler(self):
        self.log = open(self.log_path, "w")
        self.sched = subprocess.Popen(
            [self.binary, "scheduler", "--kubeconfig", self.pl.kubeconfig, "--policy",
             self.policy, "--leader-elect=false", "--qps", "500", "--burst", "1000",
             "--metrics-addr", "127.0.0.1:0", "--max-runtime-s", "600"],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.pl.env)

    def stop_scheduler(self):
        if self.sched:
            self.sched.terminate()
            self.sched.wait(timeout=20)
            self.sched = None
            self.log.close()

    def log_tail(self):
        with open(self.log_path) as f:
            return ["--- scheduler log (last 30 lines)"] + f.read().splitlines()[-30:]

    def run(self, src):
        items, timeline, expected = load_case(src, self.name)
        cps = checkpoints(timeline, expected)
        durations = []
        dump = []
        for o in items:
            o, d = scale_durations(o)
            dump.append(o)
            durations += d
        for st in timeline:
            for o in st.get("create") or []:
                durations += scale_durations(o)[1]
        self.apply_dump(dump)
        self.start_scheduler()
        want, walls = {}, []
        try:
            applied_at = time.time()
            for k, (at, steps, lines) in enumerate(cps):
                final = k == len(cps) - 1
                where = "checkpoint %d (t_s %.1f)" % (k, at)
                if k > 0:
                    due = applied_at + (at - cps[k - 1][0]) * (TIME_SCALE if durations else 0)
                    time.sleep(max(0.0, due - time.time()))
                    applied_at = time.time()
                    for i, st in enumerate(steps):
                        self.apply_step(st, "%s step %d" % (where, i + 1))
                walls.append(applied_at)
                want = want_state(want, lines)
                full = dict(want)
                for p in self.created:  # created, named by no line yet: waiting
                    full.setdefault(p, ("waiting",))
                if not final:
                    full = {p: w if w[0] != "pending" else ("waiting",) for p, w in full.items()}
                problems = self.settle(full, final) or self.gangs_at_once(lines)
                if problems:
                    return ["scheduler: at %s the cluster does not hold what %s.expected says:" %
                            (where, self.name)] + problems + self.log_tail()
        finally:
            self.stop_scheduler()
        late = pace_kept([at for at, _, _ in cps], walls, durations)
        if durations:
            self.notes.append("steps at wall +%s s for case t_s %s (durations %s scaled to %s s)" %
                              (",".join("%.1f" % (w - walls[0]) for w in walls),
                               ",".join("%g" % at for at, _, _ in cps),
                               ",".join(str(d) for d, _ in durations),
                               ",".join(str(w) for _, w in durations)))
        return late or self.read_back(want)

    def read_back(self, want):
        """The other way round: whatif reads the live cluster and finds nothing to do."""
        r = subprocess.run([self.binary, "whatif", "--kubeconfig", self.pl.kubeconfig, "--json",
                            "--policy", self.policy], capture_output=True, text=True)
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
            return ["whatif --kubeconfig disagrees with %s.expected:" % self.name] + problems
        return []


def next_second():
    """Sleeps past the next whole second of the wall clock: the API server stamps
    creationTimestamp in whole seconds, and pods of one queue are served oldest first."""
    time.sleep(1.0 - time.time() % 1.0 + 0.05)


def gpu_of(g):
    """One GPU of a whatif line or of the assignment annotation: index, milli, and the memory
    and MIG instance a sharing pod took (None when absent or null)."""
    mig = g.get("mig")
    return (g["index"], g.get("milli", 1000), g.get("mem_mib"),
            (mig["profile"], mig["start"]) if mig else None)


def want_state(want, lines):
    """want (pod -> state) after whatif's lines of one checkpoint: ("bound", node, [gpu_of]) |
    ("gone",) | ("finished",) | ("pending", reason). An adopted pod's GPUs are the core's
    charge, not an annotation the cluster holds: only its node is compared (GPUs None)."""
    want = dict(want)
    for ev in lines:
        pod = ev["pod"]
        if ev["event"] == "bind":
            gpus = None if ev.get("adopted") else [gpu_of(g) for g in ev["gpus"]]
            want[pod] = ("bound", ev["node"], gpus)
        elif ev["event"] in ("evict", "delete"):
            want[pod] = ("gone",)
        elif ev["event"] == "finish":
            want[pod] = ("finished",)
        elif ev["event"] == "pending":
            want[pod] = ("pending", ev["reason"])
    return want


def live_state(live):
    got = {}
    for p in live:
        if p["metadata"].get("deletionTimestamp"):
            got[key(p)] = ("terminating",)
            continue
        if p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            got[key(p)] = ("finished",)
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


def diff(want, got, final):
    out = []
    for pod in sorted(set(want) | set(got)):
        w = want.get(pod, ("gone",))
        g = got.get(pod, ("gone",))
        if w[0] == "bound" and w[2] is None and g[0] == "bound":
            g = (g[0], g[1], None)
        if w == ("waiting",) and g[0] == "pending":
            continue
        if w != g:
            out.append("  %s: want %s, got %s" % (pod, w, g))
    return out


def double_use(live):
    """No whole GPU given beyond 1000 milli, no MIG instance (of a known start) twice, over
    the pods bound and not ended (by their assignment annotations)."""
    milli, mig, out = {}, {}, []
    for p in live:
        node = p["spec"].get("nodeName")
        a = (p["metadata"].get("annotations") or {}).get("gpusched.io/assigned-gpus")
        if not node or not a or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for g in json.loads(a)["gpus"]:
            gk = (node, g["index"])
            milli[gk] = milli.get(gk, 0) + g.get("milli", 1000)
            if g.get("mig") and g["mig"].get("start") is not None:  # read from capacity: no start
                mk = gk + (g["mig"]["profile"], g["mig"]["start"])
                if mk in mig:
                    out.append("  MIG instance %s given to %s and %s" % (mk, mig[mk], key(p)))
                mig[mk] = key(p)
    out += ["  GPU %s/%d: %d milli given out" % (k + (v,)) for k, v in milli.items() if v > 1000]
    return out


def clean(pl):
    """Deletes every object of the kinds the cases make (the system PriorityClasses kept)."""
    api = pl.api
    for kind in RESOURCES:
        for o in api.req("GET", api.path(kind))["items"]:
            md = o["metadata"]
            if not (kind == "PriorityClass" and md["name"].startswith("system-")):
                api.delete_now(kind, md["name"], md.get("namespace"))
    for _ in range(100):
        if not api.req("GET", "/api/v1/pods")["items"] and \
                not api.req("GET", "/api/v1/nodes")["items"]:
            return
        time.sleep(0.1)
    raise RuntimeError("the previous case's objects did not go away")


def worker(n, binary, src, work, queue, results, lock):
    cp_sh = os.path.join(src, "tests", "k8s", "control-plane.sh")
    try:
        pl = Plane(cp_sh, os.path.join(work, "cp%d" % n))
    except RuntimeError as e:
        with lock:
            results.append((None, None, ["worker %d: %s" % (n, e)], 0.0))
            print("FAIL: worker %d: %s" % (n, e), flush=True)
        return
    try:
        for crd in sorted(os.listdir(os.path.join(src, "deploy", "crds"))):
            pl.kubectl("apply", "-f", os.path.join(src, "deploy", "crds", crd))
        for crd in ("queues.scheduling.gpusched.io", "podgroups.scheduling.x-k8s.io"):
            pl.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd/" + crd)
        while True:
            with lock:
                if not queue:
                    return
                case, policy = queue.pop(0)
            t0 = time.time()
            c = Case(pl, binary, case, policy, work)
            try:
                problems = c.run(src)
            except (CaseError, RuntimeError, KeyError, ValueError) as e:
                c.stop_scheduler()
                problems = ["%s: %s" % (type(e).__name__, e)]
            with lock:
                results.append((case, policy, problems, time.time() - t0))
                status = "FAIL" if problems else "ok"
                print("%s: %s (--policy %s, plane %d): %.1f s%s" %
                      (status, case, policy, n, time.time() - t0,
                       "".join("; " + note for note in c.notes)), flush=True)
                if problems:
                    print("\n".join(problems), flush=True)
            clean(pl)
    finally:
        pl.down()


def main():
    binary, src, work, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    queue = [tuple(c.split(":")) for c in sys.argv[5:]]
    n_cases = len(queue)
    results, lock = [], threading.Lock()
    t0 = time.time()
    threads = [threading.Thread(target=worker, args=(n, binary, src, work, queue, results, lock))
               for n in range(min(jobs, n_cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [r for r in results if r[2]]
    done = sum(1 for r in results if r[0] is not None)
    print("%d of %d case(s) agree on both drivers, %d failed, %d not run; %.1f s on %d plane(s)" %
          (done - len(failed), n_cases, len(failed), n_cases - done, time.time() - t0,
           len(threads)))
    sys.exit(1 if failed or done != n_cases else 0)


if __name__ == "__main__":
    main()
