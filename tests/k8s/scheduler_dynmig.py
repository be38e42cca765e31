#!/usr/bin/env python3
"""Dynamic MIG end to end (issue 8) on the real API server of tests/k8s/control-plane.sh, with
`gpusched scheduler --dynamic-mig` and two `gpusched agent`s on fake GPUs (no kubelet: the
agents' device-plugin sockets wait for one, which changes nothing here).

Each Node has one fake H100 80GB (`NVIDIA H100 80GB HBM3`, the core's H100-80GB) laid out as
seven free 1g.10gb at starts 0..6. A pod asking `nvidia.com/mig-3g.40gb: 1` fits no instance
as the layouts are. Worked by hand from src/core/mig.c: 3g.40gb takes four memory slices and
starts at 0 or 4; at 4 it covers the 1g.10gb at 4, 5, 6 (three destroyed), at 0 those at 0..3
(four), so the plan is destroy 1g.10gb@4,5,6 and create 3g.40gb@4.

  1. Node A, agent with `mig: {dynamic: true}`: pod p1 gets the plan (gpusched.io/mig-plan on
     Node A, valid against docs/schemas/mig-plan.schema.json, and a MIGRepartition Event), the
     agent re-partitions the fake GPU and writes gpusched.io/mig-plan-status {state: done}, the
     inventory shows 1g.10gb@0..3 + 3g.40gb@4, and p1 is bound with that instance in
     gpusched.io/assigned-gpus (index 0, the GPU's UUID, mig 3g.40gb at start 4); the plan
     annotation is removed.
  2. Node B, agent without the switch: pod p2 gets a plan, the agent says once that it ignores
     it, the plan times out (--mig-plan-timeout-s 6), the annotation is removed and p2 stays
     pending with a PodScheduled message that says the re-partition timed out and why, and a
     MIGRepartitionFailed Event; Node B's inventory is unchanged.
  3. A plan written by hand on Node A that destroys p1's 3g.40gb: the agent refuses it
     (gpusched.io/mig-plan-status failed, naming p1's uid) and changes nothing.
  4. Node C without an agent (the test writes its inventory): pod p3 gets a plan, the test
     answers it failed, and p3 waits with the reason the "agent" reported.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WAIT_S = 30.0
TIMEOUT_S = 6  # --mig-plan-timeout-s


# The same helpers as the agent's end-to-end test (this directory is on sys.path when run).
from agent_e2e import get_json, kubectl, schema_check, wait_until  # noqa: E402


class Proc:
    """A gpusched process with its stderr lines collected."""

    def __init__(self, argv, name):
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()

    def text(self):
        with self.cv:
            return "\n".join(self.lines)

    def wait_line(self, pattern, timeout_s=WAIT_S):
        rx = re.compile(pattern)
        end = time.monotonic() + timeout_s
        with self.cv:
            while True:
                for line in self.lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s: no log line /%s/; log:\n%s" % (
                        self.name, pattern, "\n".join(self.lines)))
                self.cv.wait(min(left, 0.1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def fake_node(path, gpu_uuid, tag):
    with open(path, "w") as f:
        f.write('driver_version: "550.90.07"\ncuda_driver_version: "12.4"\ngpus:\n'
                "  - index: 0\n    uuid: %s\n    model: NVIDIA H100 80GB HBM3\n"
                "    memory_mib: 81559\n    mig:\n      enabled: true\n      instances:\n"
                % gpu_uuid)
        for st in range(7):
            f.write("        - {profile: 1g.10gb, uuid: MIG-%s-1g-%d, memory_mib: 9984, "
                    "start: %d}\n" % (tag, st, st))


def annotations(node):
    return get_json("node", node)["metadata"].get("annotations", {})


def inventory_layout(node):
    ann = annotations(node)
    if "gpusched.io/gpus" not in ann:
        return None
    inv = json.loads(ann["gpusched.io/gpus"])
    return sorted((m["profile"], m["start"]) for m in inv["gpus"][0].get("mig", []))


def event(ns, name, reason):
    """The note of the newest events.k8s.io Event of that reason about pod ns/name, or None."""
    evs = get_json("-n", ns, "events.events.k8s.io")["items"]
    got = [e for e in evs if e.get("reason") == reason and
           e.get("regarding", {}).get("name") == name]
    return got[-1].get("note") if got else None


def pod(ns, name):
    return get_json("-n", ns, "pod", name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    env = subprocess.run(["bash", os.path.join(HERE, "control-plane.sh"), "env"],
                         capture_output=True, text=True, check=True).stdout
    for m in re.finditer(r"^export (\w+)=(.*)$", env, re.M):
        os.environ[m.group(1)] = m.group(2)
    run = os.getpid()
    ns, sched_name = "gs-dynmig-%d" % run, "gpusched-dynmig-e2e"
    nodes = {"a": "dynmig-a-%d" % run, "b": "dynmig-b-%d" % run}
    uuids = {"a": "GPU-d0000000-0000-4000-8000-0000000000a0",
             "b": "GPU-d0000000-0000-4000-8000-0000000000b0"}
    procs = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gsdynmig-") as tmp:
        try:
            kubectl("create", "namespace", ns)
            agents = {}
            for k in ("a", "b"):
                fake = os.path.join(tmp, "node-%s.yaml" % k)
                fake_node(fake, uuids[k], k)
                cfg = os.path.join(tmp, "agent-%s.yaml" % k)
                with open(cfg, "w") as f:
                    f.write("version: v1\nflags:\n  migStrategy: mixed\n")
                    if k == "a":
                        f.write("mig:\n  dynamic: true\n")
                dp = os.path.join(tmp, "dp-" + k)
                os.mkdir(dp)
                kubectl("apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": nodes[k], "labels": {"gpusched.test/dynmig": "%d-%s"
                                                              % (run, k)}},
                    "spec": {"taints": [{"key": "gpusched.test/dynmig",
                                         "effect": "NoSchedule"}]}}))
                res = {"cpu": "32", "memory": "256Gi", "pods": "110",
                       "nvidia.com/mig-1g.10gb": "7"}
                kubectl("patch", "node", nodes[k], "--subresource=status", "--type=merge", "-p",
                        json.dumps({"status": {"capacity": res, "allocatable": res}}))
                agents[k] = Proc([args.gpusched, "agent", "--gpu-backend", "fake", "--fake-gpus",
                                  fake, "--config", cfg, "--kubelet-dir", dp,
                                  "--pod-resources-socket", "", "--metrics-addr", "",
                                  "--node-name", nodes[k], "--kubeconfig",
                                  os.environ["KUBECONFIG"]], "agent-" + k)
                procs.append(agents[k])
            seven = [("1g.10gb", st) for st in range(7)]
            for k in ("a", "b"):
                got = wait_until(lambda: inventory_layout(nodes[k]), "inventory of " + nodes[k])
                assert got == seven, got
            print("ok   both Nodes carry the agents' inventory: seven 1g.10gb at starts 0..6")
            wait_until(lambda: kubectl("-n", ns, "get", "serviceaccount", "default",
                                       check=False), "the default ServiceAccount")
            sched = Proc([args.gpusched, "scheduler", "--kubeconfig", os.environ["KUBECONFIG"],
                          "--scheduler-name", sched_name, "--policy", "bestfit",
                          "--dynamic-mig", "--mig-plan-timeout-s", str(TIMEOUT_S),
                          "--max-runtime-s", "240", "--lease-namespace", ns,
                          "--lease-name", "gpusched-dynmig-e2e"], "scheduler")
            procs.append(sched)

            def make_pod(name, k):
                kubectl("-n", ns, "apply", "-f", "-", stdin=json.dumps({
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"schedulerName": sched_name, "terminationGracePeriodSeconds": 0,
                             "nodeSelector": {"gpusched.test/dynmig": "%d-%s" % (run, k)},
                             "tolerations": [{"key": "gpusched.test/dynmig",
                                              "operator": "Exists"}],
                             "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                             "resources": {"limits": {
                                                 "nvidia.com/mig-3g.40gb": "1"}}}]}}))

            # 1. Node A: planned, carried out, bound.
            seen_plan = {}

            def plan_on_a():
                ann = annotations(nodes["a"])
                if "gpusched.io/mig-plan" in ann:
                    seen_plan["plan"] = json.loads(ann["gpusched.io/mig-plan"])
                st = ann.get("gpusched.io/mig-plan-status")
                return json.loads(st) if st else None

            t_p1 = time.monotonic()
            make_pod("p1", "a")
            status = wait_until(plan_on_a, "gpusched.io/mig-plan-status on Node A")
            m = sched.wait_line(r"planned MIG re-partition pod=%s/p1 node=%s gpu=0 plan=(\S+) "
                                r"destroy=\[1g\.10gb@4 1g\.10gb@5 1g\.10gb@6\] "
                                r"create=\[3g\.40gb@4\]" % (ns, nodes["a"]))
            plan_id = m.group(1)
            assert status == {"id": plan_id, "state": "done", "reason": ""}, status
            schema_check(args.source_dir, "mig-plan-status.schema.json", status)
            if "plan" in seen_plan:
                p = seen_plan["plan"]
                assert (p["id"], p["gpu"], p["uuid"], p["pod"]) == \
                    (plan_id, 0, uuids["a"], "%s/p1" % ns), p
                assert p["destroy"] == [{"profile": "1g.10gb", "start": s} for s in (4, 5, 6)], p
                assert p["create"] == [{"profile": "3g.40gb", "start": 4}], p
                assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", p["created"]), p
                schema_check(args.source_dir, "mig-plan.schema.json", p)
                print("ok   plan %s read on Node A while in flight" % plan_id)
            agents["a"].wait_line(r"dynamic MIG: plan %s for pod %s/p1 carried out on GPU 0 "
                                  r"\(3 destroyed, 1 created\)" % (re.escape(plan_id), ns))
            after = [("1g.10gb", st) for st in range(4)] + [("3g.40gb", 4)]
            wait_until(lambda: inventory_layout(nodes["a"]) == after,
                       "Node A's inventory with 3g.40gb at 4")

            def bound():
                o = pod(ns, "p1")
                return o if o["spec"].get("nodeName") else None
            p1 = wait_until(bound, "p1 bound")
            assert p1["spec"]["nodeName"] == nodes["a"], p1["spec"]
            gpus = json.loads(p1["metadata"]["annotations"]["gpusched.io/assigned-gpus"])["gpus"]
            assert gpus == [{"index": 0, "milli": 0, "uuid": uuids["a"],
                             "mig": {"profile": "3g.40gb", "start": 4}}], gpus
            schema_check(args.source_dir, "assigned-gpus.schema.json", {"gpus": gpus})
            wait_until(lambda: "gpusched.io/mig-plan" not in annotations(nodes["a"]),
                       "the plan removed from Node A")
            t_bound = time.monotonic() - t_p1
            note = wait_until(lambda: event(ns, "p1", "MIGRepartition"), "the MIGRepartition "
                              "Event of p1 (Events are flushed once a second)")
            assert note == ("Waiting for node %s to re-partition GPU 0 (plan %s): destroy "
                            "1g.10gb@4 1g.10gb@5 1g.10gb@6, create 3g.40gb@4"
                            % (nodes["a"], plan_id)), note
            print("ok   p1 bound on %s with 3g.40gb at start 4 of %s, %.1f s after it was made; "
                  "Event MIGRepartition" % (nodes["a"], uuids["a"], t_bound))

            # 2. Node B: the agent ignores plans; the plan times out, p2 waits with why.
            make_pod("p2", "b")
            m = sched.wait_line(r"planned MIG re-partition pod=%s/p2 node=%s gpu=0 plan=(\S+)"
                                % (ns, nodes["b"]))
            plan_b = m.group(1)
            agents["b"].wait_line(r"dynamic MIG: ignoring the MIG re-partition plan on node %s "
                                  r".*mig\.dynamic is off" % nodes["b"])
            t_plan = time.monotonic()
            nominated = wait_until(lambda: pod(ns, "p2")["status"].get("nominatedNodeName"),
                                   "p2 nominated while its plan is in flight", TIMEOUT_S)
            assert nominated == nodes["b"], nominated

            def reason():
                for c in pod(ns, "p2")["status"].get("conditions", []):
                    if c["type"] == "PodScheduled" and c["status"] == "False" and \
                            "timed out" in c.get("message", ""):
                        return c["message"]
                return None
            msg = wait_until(reason, "p2's PodScheduled message", TIMEOUT_S + WAIT_S)
            waited = time.monotonic() - t_plan
            want = ("MIG re-partition of GPU 0 on node %s timed out (plan %s): the node agent did "
                    "not carry it out within %d s (it does only with mig.dynamic on in its "
                    "config)" % (nodes["b"], plan_b, TIMEOUT_S))
            assert msg == want, (msg, want)
            assert waited >= TIMEOUT_S - 2, waited
            o = pod(ns, "p2")
            assert not o["spec"].get("nodeName"), o["spec"]
            assert not o["status"].get("nominatedNodeName"), o["status"]
            assert "gpusched.io/mig-plan" not in annotations(nodes["b"])
            assert inventory_layout(nodes["b"]) == seven
            sched.wait_line(r"pod=%s/p2 node=%s: MIG re-partition of GPU 0 on node %s timed out"
                            % (ns, nodes["b"], nodes["b"]))
            note = wait_until(lambda: event(ns, "p2", "MIGRepartitionFailed"),
                              "the MIGRepartitionFailed Event of p2")
            assert note == want, note
            said = len(re.findall("ignoring the MIG re-partition plan", agents["b"].text()))
            assert said == 1, said
            print("ok   p2 pending after %.1f s: \"%s\"" % (waited, msg))

            # 3. The agent refuses a plan whose instance a pod holds (p1's 3g.40gb at 4, named
            #    by its assignment), and changes nothing.
            p1_uid = pod(ns, "p1")["metadata"]["uid"]
            hand = {"id": "hand-%d" % run, "gpu": 0, "uuid": uuids["a"],
                    "destroy": [{"profile": "3g.40gb", "start": 4}],
                    "create": [{"profile": "1g.10gb", "start": 4}],
                    "pod": "%s/nobody" % ns, "created": "2026-01-01T00:00:00Z"}
            kubectl("annotate", "node", nodes["a"], "--overwrite",
                    "gpusched.io/mig-plan=" + json.dumps(hand))

            def refused():
                st = annotations(nodes["a"]).get("gpusched.io/mig-plan-status")
                st = json.loads(st) if st else None
                return st if st and st["id"] == hand["id"] else None
            st = wait_until(refused, "the agent's answer to the hand-written plan")
            assert st == {"id": hand["id"], "state": "failed", "reason":
                          "GPU 0: instance 3g.40gb at slice 4 (MIG-d0000000-0000-4000-8000-"
                          "0000000000a0-gi1) is in use by pod uid %s" % p1_uid}, st
            assert inventory_layout(nodes["a"]) == after
            kubectl("annotate", "node", nodes["a"], "gpusched.io/mig-plan-")
            print("ok   a plan destroying p1's instance refused by the agent: \"%s\""
                  % st["reason"])

            # 4. A failure reported for the scheduler's own plan: Node C has no agent; the test
            #    plays one (its inventory, then a failed status for the plan it finds).
            nodes["c"] = "dynmig-c-%d" % run
            inv_c = {"version": 1, "gpus": [{
                "index": 0, "uuid": "GPU-d0000000-0000-4000-8000-0000000000c0",
                "model": "NVIDIA H100 80GB HBM3", "mem_mib": 81559, "mode": "mig",
                "health": "Healthy",
                "mig": [{"profile": "1g.10gb", "start": st_} for st_ in range(7)]}]}
            kubectl("apply", "-f", "-", stdin=json.dumps({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": nodes["c"],
                             "labels": {"gpusched.test/dynmig": "%d-c" % run},
                             "annotations": {"gpusched.io/gpus": json.dumps(inv_c)}},
                "spec": {"taints": [{"key": "gpusched.test/dynmig", "effect": "NoSchedule"}]}}))
            res = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/mig-1g.10gb": "7"}
            kubectl("patch", "node", nodes["c"], "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"capacity": res, "allocatable": res}}))
            make_pod("p3", "c")

            def plan_on_c():
                t = annotations(nodes["c"]).get("gpusched.io/mig-plan")
                return json.loads(t) if t else None
            plan_c = wait_until(plan_on_c, "the plan on Node C")
            kubectl("annotate", "node", nodes["c"], "--overwrite",
                    "gpusched.io/mig-plan-status=" + json.dumps(
                        {"id": plan_c["id"], "state": "failed", "reason": "test: refused"}))

            def reason_c():
                for c in pod(ns, "p3")["status"].get("conditions", []):
                    if c["type"] == "PodScheduled" and "failed" in c.get("message", ""):
                        return c["message"]
                return None
            msg = wait_until(reason_c, "p3's PodScheduled message")
            assert msg == ("MIG re-partition of GPU 0 on node %s failed (plan %s): the node agent "
                           "reported: test: refused" % (nodes["c"], plan_c["id"])), msg
            wait_until(lambda: "gpusched.io/mig-plan" not in annotations(nodes["c"]),
                       "the plan removed from Node C")
            assert not pod(ns, "p3")["spec"].get("nodeName")
            print("ok   p3 pending after the failure its node reported: \"%s\"" % msg)
            print("PASS dynamic MIG end to end in %.1f s" % (time.monotonic() - t0))
        except AssertionError as e:
            print("FAIL %s" % e)
            for p in procs:
                print("---- %s log (last 60 lines)" % p.name)
                print("\n".join(p.text().splitlines()[-60:]))
            return 1
        finally:
            for p in procs:
                p.stop()
            kubectl("-n", ns, "delete", "pods", "--all", "--grace-period=0", "--force",
                    check=False)
            kubectl("delete", "namespace", ns, "--wait=false", check=False)
            for n in nodes.values():
                kubectl("delete", "node", n, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
