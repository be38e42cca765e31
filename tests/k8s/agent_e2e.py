#!/usr/bin/python3
"""The node agent and the scheduler end to end, with real parts: the API server of
tests/k8s/control-plane.sh, `gpusched agent` on fake GPUs, the grpcio kubelet stand-in of the
agent tests (tests/agent/test_devplugin.py: Registration with dial-back and ListAndWatch), and
`gpusched scheduler`. Run with /usr/bin/python3 (Debian's python3-grpcio).

The fake node has 4 GPUs; only 2 and 3 are joined by NVLink, so the agent's own choice for two
GPUs is GPU-2,GPU-3 while the scheduler (bestfit, which does not look at NVLink) takes the
first free ones: a test that passes because both happen to agree is impossible here.

  1. The agent, with deploy/agent-rbac.yaml's service account token, annotates its Node (created after the agent started) with gpusched.io/gpus:
     four GPUs with their UUIDs, Healthy.
  2. Pods a (nvidia.com/gpu: 2) and b (1) exist before the scheduler starts; it binds a to
     GPUs 0,1 and b to GPU 2, with their UUIDs in gpusched.io/assigned-gpus (read from the
     annotation: the Node's status carries no UUIDs).
  3. The stand-in admits a as kubelet does: GetPreferredAllocation over the healthy devices
     not in use, then Allocate of the answer. The container gets exactly GPU-0,GPU-1 (the
     scheduler's UUIDs, not the agent's NVLink pair); the agent marks the pod
     gpusched.io/allocated-gpus=2 (b gets 1 in step 4).
  4. GPU 2 reports XID 79 at t = XID_AT_MS of the agent's clock: the agent marks it Unhealthy,
     the Node annotation follows (one more PATCH, no others), the stand-in's list shows it.
     Admitting b: kubelet offers only GPU-3, the agent proposes it and logs why (GPU 2
     Unhealthy), kubelet allocates GPU-3 and the agent logs the mismatch; /metrics counts one
     allocation as assigned, one mismatch, one preferred fallback.
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

UUIDS = ["GPU-e2e0a9e1-0000-4000-8000-00000000000%d" % i for i in range(4)]


def fake_node(path):
    with open(path, "w") as f:
        f.write('driver_version: "550.90.07"\ncuda_driver_version: "12.4"\ngpus:\n')
        for i, u in enumerate(UUIDS):
            peers = {2: "[3]", 3: "[2]"}.get(i, "[]")
            f.write("  - {index: %d, uuid: %s, model: NVIDIA H200, memory_mib: 143771, "
                    "numa_node: 0, nvlink_peers: %s}\n" % (i, u, peers))
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


def admit(kubelet, plugin, pb, in_use, count):
    """What kubelet's devicemanager does for one container: the healthy devices of the latest
    ListAndWatch list not held by others, GetPreferredAllocation, then Allocate of the answer."""
    w = kubelet.watch("nvidia.com/gpu")
    w.wait()
    with w.cv:
        last = w.msgs[-1][1]
    avail = [d.ID for d in last.devices if d.health == "Healthy" and d.ID not in in_use]
    pref = plugin.preferred((avail, [], count))[0]
    assert len(pref) == count and set(pref) <= set(avail), (pref, avail)
    resp = plugin.allocate(pref)
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
    sched_log = None
    with tempfile.TemporaryDirectory(prefix="gsagente2e-") as tmp:
        try:
            pb, _ = tdp.load_protos(os.path.join(args.source_dir, "proto"), tmp)
            fake = os.path.join(tmp, "node.yaml")
            fake_node(fake)
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
                "--node-name", node, "--kubeconfig", agent_kc], "agent")
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
            # Without a pod to claim it, the agent's own choice is the NVLink pair.
            own = plugin.preferred((UUIDS, [], 2))[0]
            assert own == [UUIDS[2], UUIDS[3]], own
            wait_until(lambda: kubectl("-n", ns, "get", "serviceaccount", "default",
                                       check=False), "the default ServiceAccount")

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

            # 3. Admitting a: exactly the scheduler's GPUs, not the agent's NVLink pair 2,3.
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
        except BaseException:
            if agent is not None:
                print("--- agent log (last 40 lines)\n" + "\n".join(agent.text().splitlines()[-40:]))
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
            if plugin is not None:
                plugin.close()
            if kubelet is not None:
                kubelet.stop()
            if agent is not None:
                agent.stop()  # exit 0, no sanitizer report
            kubectl("-n", ns, "delete", "pods", "--all", "--grace-period=0", "--force",
                    check=False)
            kubectl("delete", "namespace", ns, "--wait=false", check=False)
            kubectl("delete", "node", node, check=False)
    print("ok   agent e2e in %.1f s" % (time.monotonic() - t_all))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
