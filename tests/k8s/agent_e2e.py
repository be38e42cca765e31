#!/usr/bin/python3
"""The node agent and the scheduler end to end, with real parts: the API server of
tests/k8s/control-plane.sh, `gpusched agent` on fake GPUs, the grpcio kubelet stand-in of the
agent tests (tests/agent/test_devplugin.py: Registration with dial-back and ListAndWatch), and
`gpusched scheduler`. Run with /usr/bin/python3 (Debian's python3-grpcio).

The fake node has 4 GPUs, GPU 0 on NUMA node 0 and GPUs 1-3 on node 1, no NVLink, so the
agent's own choice for two GPUs is GPU-1,GPU-2 (two on one NUMA node, the lowest such pair)
while the scheduler, whose node model has no NUMA nodes, takes the first free ones (0,1): a
test that passes because both happen to agree is impossible here. (NVLink would not do: agent
and scheduler now choose whole GPUs by the same topology function, gs_topo_pick().)

  1. The agent, with deploy/agent-rbac.yaml's service account token, annotates its Node (created after the agent started) with gpusched.io/gpus:
     four GPUs with their UUIDs, Healthy. A pod bound to the Node by the test, whose process
     (a fake /proc) runs on GPU 0, gets its name, namespace and container (matched by the
     container ID of its status) on its DCGM series; deleted, its series keep the UID only.
  2. Pods a (nvidia.com/gpu: 2) and b (1) exist before the scheduler starts; it binds a to
     GPUs 0,1 and b to GPU 2, with their UUIDs in gpusched.io/assigned-gpus (read from the
     annotation: the Node's status carries no UUIDs).
  3. The stand-in admits a as kubelet does: GetPreferredAllocation over the healthy devices
     not in use, then Allocate of the answer. The container gets exactly GPU-0,GPU-1 (the
     scheduler's UUIDs, not the agent's NUMA pair); the agent marks the pod
     gpusched.io/allocated-gpus=2 (b gets 1 in step 4).
  4. GPU 2 reports XID 79 at t = XID_AT_MS of the agent's clock: the agent marks it Unhealthy,
     the Node annotation follows (one more PATCH, no others), the stand-in's list shows it.
     Admitting b: kubelet offers only GPU-3, the agent proposes it and logs why (GPU 2
     Unhealthy), kubelet allocates GPU-3 and the agent logs the mismatch; /metrics counts one
     allocation as assigned, one mismatch, one preferred fallback.
  5. A second agent on tests/agent/data/mig-node.yaml (migStrategy mixed: GPU 0 whole, GPU 1
     seven 1g.18gb instances at starts 0..6) and its own Node. Pods c (one instance) and d (two)
     are bound by the scheduler to instances by start; the agent's own choice of two (starts 0
     and 1) must differ from d's, and admitting d gives exactly d's two MIG devices of one card;
     c's kubelet allocates another instance than proposed, and the mismatch is logged by GPU
     and start. Pod e, bound by the test with a memory share (300 milli, 20,000 MiB on GPU 0,
     as the scheduler writes it: this Node advertises no fractions GPU, so the scheduler puts
     none here), gets CUDA_DEVICE_MEMORY_LIMIT_0=20000m and CUDA_DEVICE_SM_LIMIT=30.
  6. A third agent with sharing.fractions on (two GPUs, 10 slices each) and its own Node: the
     inventory says mode fractions for both, the socket gpusched.io/gpu-slice lists 20 slices.
     Pod f (gpusched.io/gpu-slice: 1, as the webhook leaves a fraction pod) is bound by the
     test with 250 milli on GPU 1. GetPreferredAllocation answers a slice of GPU 1; this
     kubelet allocates a slice of GPU 0 instead, and the container gets GPU 1
     (NVIDIA_VISIBLE_DEVICES = GPU 1's UUID, CUDA_DEVICE_SM_LIMIT=25), the mismatch logged and
     f marked allocated-gpus=1. A second slice Allocate, with no pod left to claim it, gets the
     GPU of the slice handed and a warning.
  7. A fourth agent on tests/agent/data/mig-repartition.yaml (migStrategy mixed, rediscovering
     every second), its Node made first: GPU 1 is whole, put in MIG mode (1g@0, 1g@1, 3g@4),
     re-partitioned (2g@0, 1g@2, 3g@4) and whole again while it runs, and the Node annotation
     goes through exactly these four states (mode, MIG instances by profile, start and UUID,
     resources), each valid against docs/schemas/, in four PATCHes.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
XID_AT_MS = 15000   # when GPU 2 fails, on the agent's clock (after the binds of step 2)
WAIT_S = 30.0

# A process of pod "named" on GPU 0, in a fake /proc (above Linux's PID_MAX_LIMIT: no real one).
NAMED_PID = 5000001
NAMED_CID = "5e" * 32
UUIDS = ["GPU-e2e0a9e1-0000-4000-8000-00000000000%d" % i for i in range(4)]


def fake_node(path, n=4, xid=True, procs=False):
    """The fake node of the first n UUIDS; GPU 2 fails at XID_AT_MS when xid. With 4 GPUs,
    GPU 0 is on NUMA node 0 and the others on node 1 (see above); otherwise all on node 0.
    With procs, GPU 0 runs at 50 % with 4000 MiB used and process NAMED_PID uses 30 % and
    1500 MiB of it."""
    with open(path, "w") as f:
        f.write('driver_version: "550.90.07"\ncuda_driver_version: "12.4"\ngpus:\n')
        for i, u in enumerate(UUIDS[:n]):
            numa = 1 if n == 4 and i > 0 else 0
            extra = ""
            if procs and i == 0:
                extra = (", sample: {utilization_pct: 50, fb_used_mib: 4000}, processes: "
                         "[{pid: %d, mem_mib: 1500, sm_util_pct: 30}]" % NAMED_PID)
            f.write("  - {index: %d, uuid: %s, model: NVIDIA H200, memory_mib: 143771, "
                    "numa_node: %d, nvlink_peers: []%s}\n" % (i, u, numa, extra))
        if xid:
            f.write("script:\n  - {t_ms: %d, gpu: 2, xid: 79}\n" % XID_AT_MS)


def kubectl(*args, stdin=None, check=True):
    p = subprocess.run(["kubectl"] + list(args), input=stdin, capture_output=True, text=True,
                       timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("kubectl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout


def get_json(*args):
    return json.loads(kubectl("get", "-o", "json", *args))


def wait_until(pred, what, timeout_s=WAIT_S):
    end = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def schema_check(src, name, doc):
    """Validates doc against docs/schemas/NAME (Debian's python3-jsonschema); says so when the
    validator is missing rather than passing silently."""
    try:
        import jsonschema
    except ImportError:
        print("note: no python3-jsonschema: %s not checked against docs/schemas/%s" % (
            json.dumps(doc)[:40], name))
        return
    with open(os.path.join(src, "docs", "schemas", name)) as f:
        jsonschema.validate(doc, json.load(f))


def inventory(node):
    ann = get_json("node", node)["metadata"].get("annotations", {})
    return json.loads(ann["gpusched.io/gpus"]) if "gpusched.io/gpus" in ann else None


def assignment(ns, pod):
    p = get_json("-n", ns, "pod", pod)
    if not p["spec"].get("nodeName"):
        return None
    return json.loads(p["metadata"]["annotations"]["gpusched.io/assigned-gpus"])["gpus"]


def allocated(ns, pod):
    """The agent's gpusched.io/allocated-gpus on the pod, or None."""
    ann = get_json("-n", ns, "pod", pod)["metadata"].get("annotations", {})
    return ann.get("gpusched.io/allocated-gpus")


def offered(kubelet, in_use, resource="nvidia.com/gpu"):
    """The healthy devices of the latest ListAndWatch list of a resource not held by others."""
    w = kubelet.watch(resource)
    w.wait()
    with w.cv:
        last = w.msgs[-1][1]
    return [d.ID for d in last.devices if d.health == "Healthy" and d.ID not in in_use]


def admit(kubelet, plugin, pb, in_use, count, resource="nvidia.com/gpu", allocate=None):
    """What kubelet's devicemanager does for one container: the healthy devices of the latest
    ListAndWatch list not held by others, GetPreferredAllocation, then Allocate of the answer
    (or of `allocate`, when the test plays a kubelet that decides otherwise)."""
    avail = offered(kubelet, in_use, resource)
    pref = plugin.preferred((avail, [], count))[0]
    assert len(pref) == count and set(pref) <= set(avail), (pref, avail)
    resp = plugin.allocate(allocate if allocate is not None else pref)
    return avail, pref, dict(resp.container_responses[0].envs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    try:
        import grpc  # noqa: F401 - what the stand-in needs
        import google.protobuf  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        print("skipped: %s (Debian's python3-grpcio, python3-protobuf, python3-yaml)" % e)
        sys.exit(77)
    if not os.access("/usr/bin/protoc", os.X_OK):
        print("skipped: no /usr/bin/protoc")
        sys.exit(77)
    sys.path.insert(0, os.path.join(args.source_dir, "tests", "agent"))
    import test_devplugin as tdp  # noqa: E402 - the stand-in lives with the agent's tests

    env = subprocess.run(["bash", os.path.join(HERE, "control-plane.sh"), "env"],
                         capture_output=True, text=True, check=True).stdout
    for m in re.finditer(r"^export (\w+)=(.*)$", env, re.M):
        os.environ[m.group(1)] = m.group(2)
    run = os.getpid()
    ns, node, sched_name = "gs-agent-%d" % run, "agent-%d" % run, "gpusched-agent-e2e"
    t_all = time.monotonic()
    agent = sched = kubelet = plugin = None
    agent2 = kubelet2 = whole2 = mig2 = None
    agent3 = kubelet3 = slice3 = None
    agent4 = kubelet4 = None
    node2 = node3 = node4 = None
    sched_log = None
    with tempfile.TemporaryDirectory(prefix="gsagente2e-") as tmp:
        try:
            pb, _ = tdp.load_protos(os.path.join(args.source_dir, "proto"), tmp)
            fake = os.path.join(tmp, "node.yaml")
            fake_node(fake, procs=True)
            proc = os.path.join(tmp, "proc")
            os.makedirs(os.path.join(proc, str(NAMED_PID)))
            dpdir = os.path.join(tmp, "dp")
            os.mkdir(dpdir)
            kubelet = tdp.Kubelet(pb, dpdir)
            # The agent runs as its DaemonSet would: deploy/agent-rbac.yaml's ServiceAccount,
            # so a missing permission fails here.
            kubectl("apply", "-f", os.path.join(args.source_dir, "deploy", "agent-rbac.yaml"))
            token = kubectl("-n", "gpusched-system", "create", "token", "gpusched-agent",
                            "--duration=10m").strip()
            agent_kc = os.path.join(tmp, "agent.kubeconfig")
            with open(agent_kc, "w") as f:
                json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "agent",
                           "clusters": [{"name": "plane", "cluster": {
                               "server": os.environ["GPUSCHED_K8S_SERVER"],
                               "certificate-authority": os.environ["GPUSCHED_K8S_CA"]}}],
                           "users": [{"name": "agent", "user": {"token": token}}],
                           "contexts": [{"name": "agent", "context": {
                               "cluster": "plane", "user": "agent"}}]}, f)
            agent = tdp.Agent(args.gpusched, [
                "--gpu-backend", "fake", "--fake-gpus", fake, "--kubelet-dir", dpdir,
                "--pod-resources-socket", "", "--metrics-addr", "127.0.0.1:0",
                "--proc-root", proc, "--node-name", node, "--kubeconfig", agent_kc], "agent")
            kubelet.watch("nvidia.com/gpu")
            plugin = tdp.Plugin(pb, os.path.join(dpdir, "gpusched-nvidia.com-gpu.sock"))
            port = agent.metrics_port()

            # 1. The Node, as a kubelet would register it (after the agent started), with a
            #    taint that keeps other tests' pods off it.
            kubectl("create", "namespace", ns)
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "labels": {"gpusched.test/agent-run": str(run)}},
                "spec": {"taints": [{"key": "gpusched.test/agent", "effect": "NoSchedule"}]}}))
            res = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"}
            kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": res, "allocatable": res}}))
            inv = wait_until(lambda: inventory(node), "the agent's annotation on the Node")
            assert [(g["index"], g["uuid"], g["health"], g["mode"]) for g in inv["gpus"]] == \
                [(i, u, "Healthy", "whole") for i, u in enumerate(UUIDS)], inv
            schema_check(args.source_dir, "node-gpus.schema.json", inv)
            print("ok   node annotated: 4 GPUs Healthy, UUIDs %s..%s" % (UUIDS[0], UUIDS[3]))
            # Without a pod to claim it, the agent's own choice is the NUMA pair 1,2.
            own = plugin.preferred((UUIDS, [], 2))[0]
            assert own == [UUIDS[1], UUIDS[2]], own
            wait_until(lambda: kubectl("-n", ns, "get", "serviceaccount", "default",
                                       check=False), "the default ServiceAccount")

            # 1b. Pod names on the per-pod values (issue 9): the cgroup tells the UID and the
            #     container ID, the agent's watch of the pods on its Node the names. Pod
            #     "named" is bound to the Node by the test (no kubelet runs it), its status
            #     names its container's ID as a runtime would, and NAMED_PID's cgroup puts the
            #     process in that container.
            kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "named"},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "worker",
                                         "image": "registry.invalid/none:1"}]}}))
            uid = get_json("-n", ns, "pod", "named")["metadata"]["uid"]
            kubectl("-n", ns, "patch", "pod", "named", "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"containerStatuses": [{
                        "name": "worker", "containerID": "containerd://" + NAMED_CID,
                        "image": "registry.invalid/none:1", "imageID": "", "ready": False,
                        "restartCount": 0, "state": {"waiting": {}}}]}}))
            with open(os.path.join(proc, str(NAMED_PID), "cgroup"), "w") as f:
                f.write("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s"
                        ".slice/cri-containerd-%s.scope\n" % (uid.replace("-", "_"), NAMED_CID))

            def pod_series(want_named):
                t = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                           timeout=10).read().decode()
                got = {}
                for fam in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"):
                    for labels, v in tdp.series(t, fam):
                        if labels.get("pod_uid") == uid:
                            got[fam] = (labels, v)
                named = all("pod" in l for l, _ in got.values())
                return got if len(got) == 2 and named == want_named else None
            got = wait_until(lambda: pod_series(True), "pod names on the per-pod series")
            for fam, value in (("DCGM_FI_DEV_GPU_UTIL", "30"), ("DCGM_FI_DEV_FB_USED", "1500")):
                labels, v = got[fam]
                assert v == value, (fam, v)
                assert (labels["pod"], labels["namespace"], labels["container"],
                        labels["container_id"], labels["gpu"]) == \
                    ("named", ns, "worker", NAMED_CID, "0"), labels
            # Deleted: the watch removes it, and the values are named by the cgroup alone again.
            kubectl("-n", ns, "delete", "pod", "named", "--grace-period=0", "--force")
            got = wait_until(lambda: pod_series(False), "the deleted pod's names gone")
            assert got["DCGM_FI_DEV_GPU_UTIL"][1] == "30", got
            os.remove(os.path.join(proc, str(NAMED_PID), "cgroup"))
            print("ok   per-pod values named pod/namespace/container from the watch (30 %, "
                  "1500 MiB); UID only once the pod is deleted")

            # 2. Two pods, then the scheduler.
            for name, gpus in (("a", 2), ("b", 1)):
                kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"schedulerName": sched_name, "terminationGracePeriodSeconds": 0,
                             "nodeSelector": {"gpusched.test/agent-run": str(run)},
                             "tolerations": [{"key": "gpusched.test/agent",
                                              "operator": "Exists"}],
                             "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                             "resources": {"limits": {
                                                 "nvidia.com/gpu": str(gpus)}}}]}}))
                time.sleep(1.1)  # creationTimestamp has 1 s resolution: a is older than b
            sched_log = open(os.path.join(tmp, "scheduler.log"), "w")
            sched = subprocess.Popen(
                [args.gpusched, "scheduler", "--kubeconfig", os.environ["KUBECONFIG"],
                 "--scheduler-name", sched_name, "--policy", "bestfit", "--qps", "500",
                 "--burst", "1000", "--max-runtime-s", "300", "--lease-namespace", ns,
                 "--lease-name", "gpusched-agent-e2e"], stdout=sched_log, stderr=sched_log)
            got_a = wait_until(lambda: assignment(ns, "a"), "a bound")
            got_b = wait_until(lambda: assignment(ns, "b"), "b bound")
            assert [(g["index"], g.get("uuid")) for g in got_a] == \
                [(0, UUIDS[0]), (1, UUIDS[1])], got_a
            assert [(g["index"], g.get("uuid")) for g in got_b] == [(2, UUIDS[2])], got_b
            schema_check(args.source_dir, "assigned-gpus.schema.json", {"gpus": got_a})
            t_bound = time.monotonic() - agent.t_popen
            assert t_bound * 1000 < XID_AT_MS - 2000, \
                "binds took until %.1f s of the agent's clock, too close to the XID" % t_bound
            print("ok   bound with UUIDs: a -> GPUs 0,1, b -> GPU 2 (%.1f s after the agent "
                  "started)" % t_bound)

            # 3. Admitting a: exactly the scheduler's GPUs, not the agent's NUMA pair 1,2.
            avail, pref, envs = admit(kubelet, plugin, pb, set(), 2)
            assert avail == UUIDS, avail
            assert pref == [UUIDS[0], UUIDS[1]], pref
            assert envs["NVIDIA_VISIBLE_DEVICES"] == "%s,%s" % (UUIDS[0], UUIDS[1]), envs
            agent.wait_line(r"GetPreferredAllocation for pod %s/a: the scheduler's GPUs 0,1 "
                            % ns)
            agent.wait_line(r"Allocate for pod %s/a: %s,%s, the GPUs 0,1 the scheduler "
                            r"assigned" % (ns, UUIDS[0], UUIDS[1]))
            wait_until(lambda: allocated(ns, "a") == "2", "gpusched.io/allocated-gpus 2 on a")
            print("ok   a admitted: NVIDIA_VISIBLE_DEVICES=%s; a marked allocated-gpus=2"
                  % envs["NVIDIA_VISIBLE_DEVICES"])

            # 4. GPU 2 fails before b is admitted.
            agent.wait_line(r"health: GPU 2: XID 79: Healthy -> Unhealthy",
                            timeout_s=XID_AT_MS / 1000 + WAIT_S)
            watch = kubelet.watch("nvidia.com/gpu")
            watch.wait(lambda m: any(d.ID == UUIDS[2] and d.health == "Unhealthy"
                                     for d in m.devices))
            inv = wait_until(lambda: (lambda i: i if i["gpus"][2]["health"] == "Unhealthy"
                                      else None)(inventory(node)), "GPU 2 Unhealthy on the Node")
            assert [g["health"] for g in inv["gpus"]] == \
                ["Healthy", "Healthy", "Unhealthy", "Healthy"], inv
            avail, pref, envs = admit(kubelet, plugin, pb, {UUIDS[0], UUIDS[1]}, 1)
            assert avail == [UUIDS[3]], avail
            assert pref == [UUIDS[3]] and envs["NVIDIA_VISIBLE_DEVICES"] == UUIDS[3], (pref, envs)
            agent.wait_line(r"GetPreferredAllocation for pod %s/b: not the scheduler's GPUs 2: "
                            r"assigned GPU 2 \(%s\) is Unhealthy; proposing %s"
                            % (ns, UUIDS[2], UUIDS[3]))
            agent.wait_line(r"Allocate for pod %s/b: mismatch: kubelet allocated GPUs 3, the "
                            r"scheduler assigned 2; following kubelet \(%s\)" % (ns, UUIDS[3]))
            wait_until(lambda: allocated(ns, "b") == "1", "gpusched.io/allocated-gpus 1 on b")
            print("ok   b admitted on GPU 3 after GPU 2 failed; the agent said why")

            def metric(text, name):
                m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
                return int(m.group(1)) if m else None

            def metrics_settled():
                t = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                           timeout=10).read().decode()
                host = 'Hostname="%s"' % node
                got = (metric(t, 'gpusched_assignment_allocations_total{%s,outcome="as_assigned"}'
                              % host),
                       metric(t, 'gpusched_assignment_allocations_total{%s,outcome="mismatch"}'
                              % host),
                       metric(t, "gpusched_assignment_preferred_fallbacks_total{%s}" % host))
                return got if got == (1, 1, 1) else None
            wait_until(metrics_settled, "/metrics: 1 as assigned, 1 mismatch, 1 fallback")
            assert "forbidden" not in agent.text().lower(), agent.text()
            patches = len(re.findall(r"annotation gpusched\.io/gpus written", agent.text()))
            assert patches == 2, "%d PATCHes of the Node, want 2 (start, GPU 2)" % patches
            print("ok   metrics: as_assigned 1, mismatch 1, fallbacks 1; Node PATCHed twice")

            # 5. MIG instances and a memory share, on a second Node with its own agent.
            mig_run = "%d-mig" % run
            node2 = node + "-mig"
            mig_gpus, migs = tdp.mig_node(args.source_dir)
            mig_ids = [u for u, _ in migs]
            by_start = {st: u for u, st in migs}
            dp2 = os.path.join(tmp, "dp2")
            os.mkdir(dp2)
            cfg2 = os.path.join(tmp, "mig-config.yaml")
            with open(cfg2, "w") as f:
                f.write("version: v1\nflags:\n  migStrategy: mixed\n")
            kubelet2 = tdp.Kubelet(pb, dp2)
            agent2 = tdp.Agent(args.gpusched, [
                "--gpu-backend", "fake", "--fake-gpus",
                os.path.join(args.source_dir, "tests", "agent", "data", "mig-node.yaml"),
                "--config", cfg2, "--kubelet-dir", dp2, "--pod-resources-socket", "",
                "--metrics-addr", "", "--node-name", node2, "--kubeconfig", agent_kc], "agent-mig")
            for r_ in ("nvidia.com/gpu", "nvidia.com/mig-1g.18gb"):
                kubelet2.watch(r_)
            whole2 = tdp.Plugin(pb, os.path.join(dp2, "gpusched-nvidia.com-gpu.sock"))
            mig2 = tdp.Plugin(pb, os.path.join(dp2, "gpusched-nvidia.com-mig-1g.18gb.sock"))
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node2, "labels": {"gpusched.test/agent-run": mig_run}},
                "spec": {"taints": [{"key": "gpusched.test/agent", "effect": "NoSchedule"}]}}))
            res2 = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "1",
                    "nvidia.com/mig-1g.18gb": "7"}
            kubectl("patch", "node", node2, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": res2, "allocatable": res2}}))
            inv2 = wait_until(lambda: inventory(node2), "the MIG agent's annotation")
            assert [(g["index"], g["uuid"], g["mode"]) for g in inv2["gpus"]] == \
                [(0, mig_gpus[0], "whole"), (1, mig_gpus[1], "mig")], inv2
            assert [(m["profile"], m["start"], m["uuid"]) for m in inv2["gpus"][1]["mig"]] == \
                [("1g.18gb", st, u) for u, st in migs], inv2
            schema_check(args.source_dir, "node-gpus.schema.json", inv2)
            # The agent's own choice of two, with no pod to claim them: the first two starts.
            own = mig2.preferred((mig_ids, [], 2))[0]
            assert own == mig_ids[:2], own
            for name, count in (("c", 1), ("d", 2)):
                kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"schedulerName": sched_name, "terminationGracePeriodSeconds": 0,
                             "nodeSelector": {"gpusched.test/agent-run": mig_run},
                             "tolerations": [{"key": "gpusched.test/agent",
                                              "operator": "Exists"}],
                             "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                             "resources": {"limits": {
                                                 "nvidia.com/mig-1g.18gb": str(count)}}}]}}))
                time.sleep(1.1)  # c is older than d
            got_c = wait_until(lambda: assignment(ns, "c"), "c bound")
            got_d = wait_until(lambda: assignment(ns, "d"), "d bound")
            schema_check(args.source_dir, "assigned-gpus.schema.json", {"gpus": got_d})
            for got in (got_c, got_d):
                assert all(g["index"] == 1 and g["mig"]["profile"] == "1g.18gb" and
                           g.get("uuid") == mig_gpus[1] for g in got), got
            starts_c = [g["mig"]["start"] for g in got_c]
            starts_d = [g["mig"]["start"] for g in got_d]
            assert len(starts_c) == 1 and len(starts_d) == 2 and \
                len(set(starts_c + starts_d)) == 3, (got_c, got_d)
            want_d = [by_start[st] for st in starts_d]
            # Following the assignment must make a difference: the scheduler's two are not the
            # agent's own two (else this step would pass with the assignment ignored).
            assert set(want_d) != set(own), (starts_d, own)
            print("ok   bound: c -> 1g.18gb at start %d, d -> starts %s of GPU 1"
                  % (starts_c[0], starts_d))

            time.sleep(1.0)  # the agent's pod watch delivers c and d in milliseconds
            # d (two instances on one card) first: kubelet offers all seven; the agent answers
            # the scheduler's two, and the container gets exactly those MIG devices, no limits.
            units_d = ",".join("1:1g.18gb@%d" % st for st in starts_d)
            avail, pref, envs = admit(kubelet2, mig2, pb, set(), 2, "nvidia.com/mig-1g.18gb")
            assert avail == mig_ids, avail
            assert pref == want_d, (pref, want_d)
            assert envs == {"NVIDIA_VISIBLE_DEVICES": ",".join(want_d)}, envs
            agent2.wait_line(r"GetPreferredAllocation for pod %s/d: the scheduler's GPUs %s "
                             % (ns, units_d))
            agent2.wait_line(r"Allocate for pod %s/d: %s, the GPUs %s the scheduler assigned"
                             % (ns, ",".join(want_d), units_d))
            wait_until(lambda: allocated(ns, "d") == "2", "gpusched.io/allocated-gpus 2 on d")
            # c: the agent proposes c's instance; this kubelet decides otherwise (it may) and
            # allocates another free one: followed, and the mismatch logged by start.
            want_c = by_start[starts_c[0]]
            rest = offered(kubelet2, set(want_d), "nvidia.com/mig-1g.18gb")
            other = [u for u in rest if u != want_c][0]
            start_other = [st for u, st in migs if u == other][0]
            _, pref, envs = admit(kubelet2, mig2, pb, set(want_d), 1, "nvidia.com/mig-1g.18gb",
                                  allocate=[other])
            assert pref == [want_c], (pref, want_c)
            assert envs == {"NVIDIA_VISIBLE_DEVICES": other}, envs
            agent2.wait_line(r"Allocate for pod %s/c: mismatch: kubelet allocated MIG instances "
                             r"1:1g\.18gb@%d, the scheduler assigned 1:1g\.18gb@%d; following "
                             r"kubelet \(%s\)" % (ns, start_other, starts_c[0], other))
            wait_until(lambda: allocated(ns, "c") == "1", "gpusched.io/allocated-gpus 1 on c")
            print("ok   d admitted on its two instances (%s); c's mismatch logged by start"
                  % units_d)

            # A memory share: the agent advertises no fractions GPU yet, so no scheduler places
            # one on its Node; the test binds pod e as the scheduler binds (the Binding carries
            # the assignment, checked against its schema) and admits it on GPU 0.
            kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e"},
                "spec": {"schedulerName": "gpusched-agent-e2e-by-hand",
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}))
            share = {"gpus": [{"index": 0, "milli": 300, "mem_mib": 20000, "uuid": mig_gpus[0]}]}
            schema_check(args.source_dir, "assigned-gpus.schema.json", share)
            kubectl("create", "--raw", "/api/v1/namespaces/%s/pods/e/binding" % ns, "-f", "-",
                    stdin=json.dumps({
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": "e", "annotations": {
                            "gpusched.io/assigned-gpus": json.dumps(share)}},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node2}}))
            wait_until(lambda: assignment(ns, "e"), "e bound")
            time.sleep(1.0)  # the agent's pod watch delivers e in milliseconds; slack for load
            _, pref, envs = admit(kubelet2, whole2, pb, set(), 1)
            assert pref == [mig_gpus[0]], pref
            # 20,000 MiB with HAMi's "m" suffix for visible device 0; 300 milli = 30 % of SMs.
            assert envs == {"NVIDIA_VISIBLE_DEVICES": mig_gpus[0],
                            "CUDA_DEVICE_MEMORY_LIMIT_0": "20000m",
                            "CUDA_DEVICE_SM_LIMIT": "30"}, envs
            agent2.wait_line(r"Allocate for pod %s/e: %s, the GPUs 0 the scheduler assigned"
                             % (ns, mig_gpus[0]))
            print("ok   e admitted with CUDA_DEVICE_MEMORY_LIMIT_0=20000m CUDA_DEVICE_SM_LIMIT=30")
            assert "forbidden" not in agent2.text().lower(), agent2.text()

            # 6. Fractions: a third agent advertises both GPUs as gpusched.io/gpu-slice.
            slice_res = "gpusched.io/gpu-slice"
            node3 = node + "-frac"
            frac_run = "%d-frac" % run
            fake3 = os.path.join(tmp, "frac-node.yaml")
            fake_node(fake3, n=2, xid=False)
            cfg3 = os.path.join(tmp, "frac-config.yaml")
            with open(cfg3, "w") as f:
                f.write("version: v1\nsharing:\n  fractions:\n    slicesPerGpu: 10\n")
            dp3 = os.path.join(tmp, "dp3")
            os.mkdir(dp3)
            kubelet3 = tdp.Kubelet(pb, dp3)
            agent3 = tdp.Agent(args.gpusched, [
                "--gpu-backend", "fake", "--fake-gpus", fake3, "--config", cfg3,
                "--kubelet-dir", dp3, "--pod-resources-socket", "", "--metrics-addr", "",
                "--node-name", node3, "--kubeconfig", agent_kc], "agent-frac")
            kubelet3.watch(slice_res)
            slice3 = tdp.Plugin(pb, os.path.join(dp3, "gpusched-gpusched.io-gpu-slice.sock"))
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node3, "labels": {"gpusched.test/agent-run": frac_run}},
                "spec": {"taints": [{"key": "gpusched.test/agent", "effect": "NoSchedule"}]}}))
            res3 = {"cpu": "32", "memory": "256Gi", "pods": "110", slice_res: "20"}
            kubectl("patch", "node", node3, "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": res3, "allocatable": res3}}))
            inv3 = wait_until(lambda: inventory(node3), "the fractions agent's annotation")
            assert [(g["index"], g["uuid"], g["mode"], g["resources"]) for g in inv3["gpus"]] == \
                [(i, UUIDS[i], "fractions", [slice_res]) for i in range(2)], inv3
            schema_check(args.source_dir, "node-gpus.schema.json", inv3)
            # 2 GPUs x 10 slices, GPU by GPU.
            slices = offered(kubelet3, set(), slice_res)
            assert slices == ["%s::slice-%d" % (UUIDS[i // 10], i % 10) for i in range(20)], \
                slices
            print("ok   fractions node: both GPUs mode fractions, 20 slices")

            # Pod f as the webhook leaves a KAI fraction pod, bound as the scheduler binds a
            # quarter of GPU 1 on a fractions node.
            kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "f", "annotations": {"gpu-fraction": "0.25"}},
                "spec": {"schedulerName": "gpusched-agent-e2e-by-hand",
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                         "resources": {"limits": {slice_res: "1"},
                                                       "requests": {slice_res: "1"}}}]}}))
            quarter = {"gpus": [{"index": 1, "milli": 250, "uuid": UUIDS[1]}]}
            schema_check(args.source_dir, "assigned-gpus.schema.json", quarter)
            kubectl("create", "--raw", "/api/v1/namespaces/%s/pods/f/binding" % ns, "-f", "-",
                    stdin=json.dumps({
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": "f", "annotations": {
                            "gpusched.io/assigned-gpus": json.dumps(quarter)}},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node3}}))
            wait_until(lambda: assignment(ns, "f"), "f bound")
            time.sleep(1.0)  # the agent's pod watch delivers f in milliseconds; slack for load
            # The agent proposes a slice of GPU 1; this kubelet allocates one of GPU 0.
            handed = "%s::slice-0" % UUIDS[0]
            avail, pref, envs = admit(kubelet3, slice3, pb, set(), 1, slice_res,
                                      allocate=[handed])
            assert pref == ["%s::slice-0" % UUIDS[1]], pref
            # The assigned GPU, not the slice's; 250 milli / 10 = 25 % of the SMs.
            assert envs == {"NVIDIA_VISIBLE_DEVICES": UUIDS[1], "CUDA_DEVICE_SM_LIMIT": "25"}, envs
            agent3.wait_line(r"GetPreferredAllocation for pod %s/f: the scheduler's GPUs 1 "
                             % ns)
            agent3.wait_line(r"Allocate for pod %s/f: mismatch: kubelet allocated GPUs 0, the "
                             r"scheduler assigned 1; giving the assigned GPUs 1 \(kubelet's "
                             r"%s\)" % (ns, re.escape(handed)))
            wait_until(lambda: allocated(ns, "f") == "1", "gpusched.io/allocated-gpus 1 on f")
            print("ok   f admitted on a slice of GPU 0: the container got GPU 1 (%s)" % UUIDS[1])
            # f is handed out: a slice nobody's assignment asks for keeps the slice's GPU.
            other = "%s::slice-1" % UUIDS[0]
            envs = dict(slice3.allocate([other]).container_responses[0].envs)
            assert envs == {"NVIDIA_VISIBLE_DEVICES": UUIDS[0]}, envs
            agent3.wait_line(r"Allocate of %s: warning: no pending pod bound here has an "
                             r"assignment for 1 gpusched\.io/gpu-slice; giving the GPUs of these "
                             r"slices" % re.escape(other))
            print("ok   a slice without an assignment keeps its GPU, with a warning")
            assert "forbidden" not in agent3.text().lower(), agent3.text()

            # 7. MIG re-partitioned under a running agent: the annotation follows.
            node4 = node + "-rep"
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node4, "labels": {"gpusched.test/agent-run": "%d-rep" % run}},
                "spec": {"taints": [{"key": "gpusched.test/agent", "effect": "NoSchedule"}]}}))
            rep_gpus, rep_steps = tdp.rep_node(args.source_dir)
            (_, mig_a), (_, mig_b), _ = rep_steps
            dp4 = os.path.join(tmp, "dp4")
            os.mkdir(dp4)
            kubelet4 = tdp.Kubelet(pb, dp4)
            agent4 = tdp.Agent(args.gpusched, [
                "--gpu-backend", "fake", "--fake-gpus",
                os.path.join(args.source_dir, "tests", "agent", "data", "mig-repartition.yaml"),
                "--config", cfg2, "--kubelet-dir", dp4, "--pod-resources-socket", "",
                "--metrics-addr", "", "--node-name", node4, "--kubeconfig", agent_kc,
                "--rediscover-s", "1"], "agent-rep")

            def gpu1_state():
                inv = inventory(node4)
                if inv is None:
                    return None
                g = inv["gpus"][1]
                return (g["uuid"], g["mode"],
                        tuple((m["profile"], m["start"], m["uuid"]) for m in g["mig"]),
                        tuple(g["resources"]), inv)
            # The states by hand from the file: (mode, instances, resources of GPU 1).
            want = [("whole", (), ("nvidia.com/gpu",)),
                    ("mig", (("1g.18gb", 0, mig_a[0]), ("1g.18gb", 1, mig_a[1]),
                             ("3g.71gb", 4, mig_a[2])),
                     ("nvidia.com/mig-1g.18gb", "nvidia.com/mig-3g.71gb")),
                    ("mig", (("2g.35gb", 0, mig_b[0]), ("1g.18gb", 2, mig_b[1]),
                             ("3g.71gb", 4, mig_b[2])),
                     ("nvidia.com/mig-1g.18gb", "nvidia.com/mig-2g.35gb",
                      "nvidia.com/mig-3g.71gb")),
                    ("whole", (), ("nvidia.com/gpu",))]
            seen = []
            end = time.monotonic() + WAIT_S
            while len(seen) < len(want) and time.monotonic() < end:
                st = gpu1_state()
                if st is not None and (not seen or st[:4] != seen[-1][:4]):
                    seen.append(st)
                    schema_check(args.source_dir, "node-gpus.schema.json", st[4])
                time.sleep(0.1)
            got = [(st[1], st[2], st[3]) for st in seen]
            assert got == want, "GPU 1 in the annotation went %s, want %s" % (got, want)
            assert all(st[0] == rep_gpus[1] for st in seen), seen
            agent4.wait_line(r"annotation gpusched\.io/gpus written")
            patches = len(re.findall(r"annotation gpusched\.io/gpus written", agent4.text()))
            assert patches == 4, "%d PATCHes of the Node, want 4 (start, 3 layouts)" % patches
            print("ok   MIG re-partitioned twice and disabled: the annotation followed, "
                  "4 PATCHes")
            assert "forbidden" not in agent4.text().lower(), agent4.text()
        except BaseException:
            if agent is not None:
                print("--- agent log (last 40 lines)\n" + "\n".join(agent.text().splitlines()[-40:]))
            if agent2 is not None:
                print("--- MIG agent log (last 40 lines)\n" +
                      "\n".join(agent2.text().splitlines()[-40:]))
            if agent3 is not None:
                print("--- fractions agent log (last 40 lines)\n" +
                      "\n".join(agent3.text().splitlines()[-40:]))
            if agent4 is not None:
                print("--- re-partition agent log (last 40 lines)\n" +
                      "\n".join(agent4.text().splitlines()[-40:]))
            if sched_log is not None:
                sched_log.flush()
                print("--- scheduler log (last 40 lines)\n" + "\n".join(
                    open(os.path.join(tmp, "scheduler.log")).read().splitlines()[-40:]))
            raise
        finally:
            if sched is not None:
                sched.terminate()
                rc = sched.wait(timeout=30)
                sched_log.close()
                text = open(os.path.join(tmp, "scheduler.log")).read()
                if rc != 0 or "Sanitizer" in text or "runtime error" in text:
                    print("scheduler exit %s; log:\n%s" % (rc, text))
                    raise AssertionError("scheduler did not stop cleanly")
            for p_ in (plugin, whole2, mig2, slice3):
                if p_ is not None:
                    p_.close()
            if kubelet4 is not None:
                kubelet4.stop()
            if agent4 is not None:
                agent4.stop()
            if kubelet3 is not None:
                kubelet3.stop()
            if agent3 is not None:
                agent3.stop()
            if kubelet2 is not None:
                kubelet2.stop()
            if agent2 is not None:
                agent2.stop()
            if kubelet is not None:
                kubelet.stop()
            if agent is not None:
                agent.stop()  # exit 0, no sanitizer report
            kubectl("-n", ns, "delete", "pods", "--all", "--grace-period=0", "--force",
                    check=False)
            kubectl("delete", "namespace", ns, "--wait=false", check=False)
            kubectl("delete", "node", node, check=False)
            for n_ in (node2, node3, node4):
                if n_ is not None:
                    kubectl("delete", "node", n_, check=False)
    print("ok   agent e2e in %.1f s" % (time.monotonic() - t_all))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
