#!/usr/bin/env bash
# PodScheduled=False for every pod of ours that waits, on a real API server, including the pods
# the core never tries: one behind its schedulingGates (reason SchedulingGated, as Kubernetes
# names it), one the translation refuses (pod affinity), one waiting behind an older pod of its
# flavor that cannot fit, a gang short of its minMember, beside the pods the core tried (a queue
# over its limit, one asking more GPUs than are free). One node of 2 GPUs; every pod is
# created before the scheduler starts, so each reason is final at the first cycle:
#   q1 (1 GPU, queue lim: limit 1 GPU) binds; q2 (1 GPU, queue lim) waits over the limit;
#   big (2 GPUs; q1 holds one) waits: Insufficient nvidia.com/gpu; after (1 GPU, younger, same
#   flavor) waits behind it, never tried (big would fit the empty node, so it holds its place:
#   a pod that fits no node at all holds up nothing, k8s_scheduler_cross_queue_preemption);
#   gated (1 GPU, a scheduling gate); podaff (pod affinity: refused);
#   g-0 (PodGroup pg, minMember 3, its only member; in queue gang of its own, not behind big).
# Each pending pod's condition message must equal the reason of its `pending` line from
# `gpusched whatif --kubeconfig` on the same cluster, and the API server's own count of
# PATCHes of pods/status (apiserver_request_total; nothing else patches pod status on this
# plane) must be one per waiting pod, and stay so over several cycles (once per change of
# reason, not once per cycle). Removing gated's gate changes its reason: one PATCH more.
# FailedScheduling Events (events.k8s.io/v1), as kube-scheduler posts one for every
# unschedulable attempt and none for a pod held by its gates: every Unschedulable pod, those
# the cycle decided (q2, big, g-0) and those only the walk over pending pods finds (after,
# podaff), has exactly one Event from gpusched (type Warning, action Scheduling, regarding the
# pod by uid, note = its PodScheduled message) and a series count of 1 (told once, not once
# from the cycle and again from the walk); gated has none until its gate goes, then one with
# its new message; q1, bound, has none. The series counts are read after the scheduler stopped, which
# writes every count it holds (kevents.h).
#
# Usage: scheduler_pending_status.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_begin pending

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
for i in $(seq 1 50); do
    kubectl get crd queues.scheduling.gpusched.io podgroups.scheduling.x-k8s.io >/dev/null 2>&1 && break
    sleep 0.2
done
setup_ns
mknode "n-$run" 2
kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue",
 "metadata": {"name": "lim-$run"}, "spec": {"resources": {"gpu": {"quota": 1, "limit": 1}}}}
JSON
kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue", "metadata": {"name": "gang-$run"}}
JSON
kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
 "metadata": {"name": "pg"}, "spec": {"minMember": 3}}
JSON
q=", \"labels\": {\"gpusched.io/queue\": \"lim-$run\"}"
mkpod q1 1 "" "$q"
sleep 1.1 # creation times a second apart: the queue's order is by age
mkpod q2 1 "" "$q"
mkpod big 2
sleep 1.1
mkpod after 1
mkpod gated 1 ', "schedulingGates": [{"name": "gpusched.test/hold"}]'
mkpod podaff 1 ', "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}'
mkpod g-0 1 "" ", \"labels\": {\"scheduling.x-k8s.io/pod-group\": \"pg\", \"gpusched.io/queue\": \"gang-$run\"}"
waiting="q2 big after gated podaff g-0"

patches() { # PATCHes of pods/status the API server has answered, any code
    kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="pods"/ &&
        /subresource="status"/ && /verb="PATCH"/ {n += $2} END {print n + 0}'
}
cond() { jp "$1" "{.status.conditions[?(@.type==\"PodScheduled\")].$2}"; }
# check_events POD=N...: each POD has N FailedScheduling Events from gpusched (N is 0 or 1),
# each checked field by field against the pod as the API server has it now; prints "POD=N ..."
# as found and fails naming every mismatch.
check_events() {
    kubectl -n "$ns" get events.v1.events.k8s.io -o json >"$tmp/events.json"
    kubectl -n "$ns" get pods -o json >"$tmp/pods.json"
    python3 - "$tmp/events.json" "$tmp/pods.json" "$ns" "$@" <<'PY'
import json, sys
events, pods = (json.load(open(f))["items"] for f in sys.argv[1:3])
ns, want = sys.argv[3], dict(w.split("=") for w in sys.argv[4:])
pod_of = {p["metadata"]["name"]: p for p in pods}
bad, found = [], []
for name, n in want.items():
    p = pod_of[name]
    mine = [e for e in events if e.get("reason") == "FailedScheduling"
            and e.get("reportingController") == "gpusched"
            and e.get("regarding", {}).get("name") == name]
    found.append("%s=%d" % (name, len(mine)))
    if len(mine) != int(n):
        bad.append("%s: %d FailedScheduling Events, want %s" % (name, len(mine), n))
        continue
    msg = [c.get("message") for c in p["status"].get("conditions", [])
           if c["type"] == "PodScheduled"]
    for e in mine:
        got = {"type": e.get("type"), "action": e.get("action"), "note": e.get("note"),
               "regarding": e.get("regarding"),
               "series.count": (e.get("series") or {}).get("count", 1)}
        exp = {"type": "Warning", "action": "Scheduling", "note": msg[0] if msg else None,
               "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
                             "uid": p["metadata"]["uid"]},
               "series.count": 1}
        for k in exp:
            if got[k] != exp[k]:
                bad.append("%s: Event %s: %s %r, want %r"
                           % (name, e["metadata"]["name"], k, got[k], exp[k]))
print(" ".join(found))
if bad:
    sys.exit("\n".join(bad))
PY
}
# wait_events POD=N...: waits until check_events passes (Events are sent without waiting,
# behind the status PATCHes), 15 s at most, then checks once more, failing the test if not.
wait_events() {
    local i
    for ((i = 0; i < 75; i++)); do
        check_events "$@" >/dev/null 2>&1 && break
        sleep 0.2
    done
    check_events "$@" || fail "FailedScheduling Events: want $*"
}

p0=$(patches)
start_sched
wait_bound 30 q1
for p in $waiting; do wait_reason "$p" '.' 30; done

# What whatif says of the same cluster, pod by pod.
"$bin" whatif --kubeconfig "$KUBECONFIG" --json --policy bestfit --scheduler-name "gs-$run" \
    >"$tmp/whatif.json" 2>"$tmp/whatif.err" || { cat "$tmp/whatif.err" >&2; fail "whatif --kubeconfig failed"; }
want_of() {
    python3 - "$tmp/whatif.json" "$ns/$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["event"] == "pending" and e["pod"] == sys.argv[2]:
        print(e["reason"])
PY
}
for p in $waiting; do
    want=$(want_of "$p")
    [ -n "$want" ] || fail "whatif has no pending line for $p"
    got=$(cond "$p" message)
    [ "$got" = "$want" ] || fail "$p: PodScheduled message '$got', whatif says '$want'"
    kind=Unschedulable
    [ "$p" = gated ] && kind=SchedulingGated
    [ "$(cond "$p" reason)" = "$kind" ] || fail "$p: PodScheduled reason '$(cond "$p" reason)', want $kind"
    [ "$(cond "$p" status)" = False ] || fail "$p: PodScheduled status '$(cond "$p" status)'"
    echo "ok: $p: $kind: $got"
done

# Once per change: one PATCH per waiting pod, none more while nothing changes.
n_wait=$(wc -w <<<"$waiting")
c1=$(($(patches) - p0))
[ "$c1" -eq "$n_wait" ] || fail "$c1 status PATCHes for $n_wait waiting pods"
sleep 4 # the scheduler cycles at least once a second
c2=$(($(patches) - p0))
[ "$c2" -eq "$c1" ] || fail "status PATCHes went from $c1 to $c2 while nothing changed"
echo "ok: $c1 status PATCHes for $n_wait waiting pods, still $c2 after 4 s"

# One FailedScheduling Event per Unschedulable pod, from the cycle or from the walk; none for
# the gated pod, nor for the bound one.
got=$(wait_events q1=0 q2=1 big=1 after=1 podaff=1 g-0=1 gated=0)
echo "ok: FailedScheduling Events: $got"

# A change of reason is written once: the gate goes, gated waits behind big as after does.
kubectl -n "$ns" patch pod gated --type=json -p '[{"op": "remove", "path": "/spec/schedulingGates"}]' >/dev/null
for ((i = 0; i < 100; i++)); do [ "$(cond gated reason)" = Unschedulable ] && break; sleep 0.2; done
[ "$(cond gated reason)" = Unschedulable ] || fail "gated: reason '$(cond gated reason)' after its gate went"
[ "$(cond gated message)" = "$(cond after message)" ] ||
    fail "gated: '$(cond gated message)', want after's '$(cond after message)'"
sleep 3
c3=$(($(patches) - p0))
[ "$c3" -eq $((c1 + 1)) ] || fail "status PATCHes went from $c1 to $c3 after one change of reason"
echo "ok: gated ungated: Unschedulable: $(cond gated message); $c3 status PATCHes in all"
got=$(wait_events gated=1)
echo "ok: gated ungated: one FailedScheduling Event: $got"
stop_sched
# Stopped: every series count gpusched held is written, and each is still 1.
got=$(check_events q1=0 q2=1 big=1 after=1 podaff=1 g-0=1 gated=1) ||
    fail "FailedScheduling Events after the scheduler stopped"
echo "ok: after stopping, one FailedScheduling Event of series count 1 each: $got"
echo "ok: every waiting pod has PodScheduled=False with whatif's reason, written once per change"
