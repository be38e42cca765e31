#!/usr/bin/env bash
# Preemption as Kubernetes does it, on the real control plane (kube-controller-manager's
# disruption controller fills PodDisruptionBudget status):
#   1. a victim is marked DisruptionTarget (reason PreemptionByScheduler) before its Eviction: a
#      watch on it sees that condition in a version without deletionTimestamp, before the one
#      with it; the preemptor gets status.nominatedNodeName and stays unbound while the victim
#      terminates (grace 30 s, no kubelet to end it), and binds there once it is gone;
#   2. two nodes q1, q2 with one GPU each run v1 (priority 10) and v2 (priority 20); a PDB
#      (minAvailable 1) protects v1. The scheduler watches PodDisruptionBudgets, so it picks as
#      kube-scheduler does, fewest budget violations first: q2, though v1 is the lower victim.
#      No Eviction of v1 is tried (no "gives node q1 up" line), v1 is untouched, v2 is evicted;
#   3. a preemptor that only fits q1 waits with reason "blocked by PodDisruptionBudget ns/prot";
#   4. the 429 path, for a budget the scheduler's view does not have: nodes r1, r2 run v3
#      (priority 10, this namespace) and v4 (priority 20, a second namespace). PDB every has an
#      empty selector, which the Eviction API reads as every pod of its namespace but
#      kube-scheduler's preemption (and gpusched's) as none; so the engine picks r1 (lower
#      victim), the Eviction's dry run is answered 429, the preemptor gives r1 up untouched (v3
#      has no DisruptionTarget, is not terminating) and takes r2 from v4 instead.
#
# Usage: scheduler_preemption.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
run=$$
ns=gs-pre-$run
tmp=$(mktemp -d)
log=$tmp/gpusched.log
watch_pid=
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

cleanup() {
    stop_sched
    [ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null || true
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl -n "$ns-b" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns-b" --wait=false >/dev/null 2>&1 || true
    kubectl delete nodes -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    kubectl delete priorityclass "low-$run" "mid-$run" "high-$run" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

pclass() {
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "$1-$run"}, "value": $2}
JSON
}
# running POD: phase Running and Ready, as a kubelet would report it (the Eviction API ignores
# PodDisruptionBudgets for Pending pods).
running() {
    kubectl -n "$ns" patch pod "$1" --subresource=status --type=merge -p \
        '{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}' >/dev/null
}
cond() { jp "$1" "{.status.conditions[?(@.type==\"$2\")].$3}"; }

setup_ns
pclass low 10
pclass mid 20
pclass high 1000
mknode "p1-$run" 1
mknode "q1-$run" 1
mknode "q2-$run" 1
mknode "r1-$run" 1
mknode "r2-$run" 1
start_sched

# 1. DisruptionTarget before the Eviction; nominatedNodeName while the victim leaves.
mkpod low 1 "$(on_node "p1-$run"), \"priorityClassName\": \"low-$run\", \"terminationGracePeriodSeconds\": 30"
wait_node low "p1-$run"
running low
kubectl -n "$ns" get pod low -w -o json >"$tmp/low.watch" 2>/dev/null &
watch_pid=$!
sleep 1
mkpod high 1 "$(on_node "p1-$run"), \"priorityClassName\": \"high-$run\""
for ((i = 0; i < 100; i++)); do
    [ -n "$(jp low '{.metadata.deletionTimestamp}')" ] && [ "$(jp high '{.status.nominatedNodeName}')" = "p1-$run" ] && break
    sleep 0.2
done
[ -n "$(jp low '{.metadata.deletionTimestamp}')" ] || fail "low was not evicted"
[ "$(jp high '{.status.nominatedNodeName}')" = "p1-$run" ] || fail "high's nominatedNodeName is '$(jp high '{.status.nominatedNodeName}')', want p1-$run"
sleep 2
[ -z "$(jp high '{.spec.nodeName}')" ] || fail "high was bound while low still terminates"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=
python3 - "$tmp/low.watch" <<'PY' || fail "low's versions do not show DisruptionTarget before the eviction"
import json, sys
dec, text, i, versions = json.JSONDecoder(), open(sys.argv[1]).read(), 0, []
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    o, i = dec.raw_decode(text, i)
    versions.append(o)
first_dt = first_del = None
for n, v in enumerate(versions):
    dt = [c for c in v["status"].get("conditions", []) if c["type"] == "DisruptionTarget"]
    if dt and first_dt is None:
        first_dt = n
        assert dt[0]["reason"] == "PreemptionByScheduler", dt
        assert "deletionTimestamp" not in v["metadata"], "DisruptionTarget came with the deletion"
        print("ok: low's version %d: DisruptionTarget %s: %s" % (n, dt[0]["reason"], dt[0]["message"]))
    if "deletionTimestamp" in v["metadata"] and first_del is None:
        first_del = n
assert first_dt is not None and first_del is not None and first_dt < first_del, (first_dt, first_del)
print("ok: low's version %d: deletionTimestamp (the Eviction), after the condition" % first_del)
PY
echo "ok: high nominated to p1-$run and unbound while low terminates"
kubectl -n "$ns" delete pod low --grace-period=0 --force >/dev/null 2>&1
wait_node high "p1-$run" 15
grep -q "pod=$ns/high: its victims are gone; binding" "$log" || fail "no bind-after-victims line"
echo "ok: low gone (force-deleted as its kubelet would end it) -> high bound to p1-$run"

# 2. A PodDisruptionBudget the scheduler watches: the preemptor picks the unprotected node.
mkpod v1 1 "$(on_node "q1-$run"), \"priorityClassName\": \"low-$run\"" ', "labels": {"app": "prot"}'
mkpod v2 1 "$(on_node "q2-$run"), \"priorityClassName\": \"mid-$run\""
wait_node v1 "q1-$run"
wait_node v2 "q2-$run"
running v1
running v2
kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "prot"},
 "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "prot"}}}}
JSON
for ((i = 0; i < 100; i++)); do
    [ "$(kubectl -n "$ns" get pdb prot -o 'jsonpath={.status.expectedPods} {.status.currentHealthy} {.status.disruptionsAllowed}')" = "1 1 0" ] && break
    sleep 0.2
done
[ "$(kubectl -n "$ns" get pdb prot -o 'jsonpath={.status.expectedPods} {.status.currentHealthy} {.status.disruptionsAllowed}')" = "1 1 0" ] ||
    fail "PDB prot status: $(kubectl -n "$ns" get pdb prot -o 'jsonpath={.status}')"
echo "ok: PDB prot protects v1 (expectedPods 1, currentHealthy 1, disruptionsAllowed 0)"
sleep 1 # the scheduler's watch delivers the status too
mkpod pre 1 ", \"affinity\": {\"nodeAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": [{\"matchExpressions\": [{\"key\": \"gpusched.test/node\", \"operator\": \"In\", \"values\": [\"q1-$run\", \"q2-$run\"]}]}]}}}, \"priorityClassName\": \"high-$run\""
wait_node pre "q2-$run" 30
grep -q "pod=$ns/pre gives node" "$log" && fail "pre tried a node and gave it up: $(grep "pod=$ns/pre gives" "$log")"
[ -z "$(jp v1 '{.metadata.deletionTimestamp}')" ] || fail "v1 (protected) is terminating"
[ -z "$(cond v1 DisruptionTarget status)" ] || fail "v1 (protected) was marked DisruptionTarget"
[ "$(jp v1 '{.spec.nodeName}')" = "q1-$run" ] || fail "v1 is gone"
kubectl -n "$ns" get pod v2 >/dev/null 2>&1 && fail "v2 was not evicted"
echo "ok: pre took q2-$run from v2 at once: fewest PDB violations before lowest victim priority; q1 untouched"

# 3. Only q1 fits: blocked by the PDB.
mkpod pre2 1 "$(on_node "q1-$run"), \"priorityClassName\": \"high-$run\""
wait_reason pre2 "^blocked by PodDisruptionBudget $ns/prot \\(evicting $ns/v1 from node q1-$run was refused\\)$" 20
still=$(jp v1 '{.spec.nodeName}')
[ "$still" = "q1-$run" ] && [ -z "$(jp v1 '{.metadata.deletionTimestamp}')" ] || fail "v1 was disturbed"
echo "ok: pre2 waits: $(jp pre2 '{.status.conditions[?(@.type=="PodScheduled")].message}')"

# 4. A budget only the Eviction API applies (an empty selector): 429, and the next node.
kubectl create namespace "$ns-b" >/dev/null
mkpod v3 1 "$(on_node "r1-$run"), \"priorityClassName\": \"low-$run\""
ns=$ns-b mkpod v4 1 "$(on_node "r2-$run"), \"priorityClassName\": \"mid-$run\""
wait_node v3 "r1-$run"
ns=$ns-b wait_node v4 "r2-$run"
running v3
ns=$ns-b running v4
kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "every"},
 "spec": {"minAvailable": 100, "selector": {}}}
JSON
for ((i = 0; i < 100; i++)); do
    [ "$(kubectl -n "$ns" get pdb every -o 'jsonpath={.status.disruptionsAllowed}')" = "0" ] &&
        [ -n "$(kubectl -n "$ns" get pdb every -o 'jsonpath={.status.observedGeneration}')" ] && break
    sleep 0.2
done
[ "$(kubectl -n "$ns" get pdb every -o 'jsonpath={.status.disruptionsAllowed}')" = "0" ] ||
    fail "PDB every status: $(kubectl -n "$ns" get pdb every -o 'jsonpath={.status}')"
kubectl -n "$ns" delete pdb prot >/dev/null # v1 would have two budgets (an Eviction error, not 429)
mkpod pre3 1 ", \"affinity\": {\"nodeAffinity\": {\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": [{\"matchExpressions\": [{\"key\": \"gpusched.test/node\", \"operator\": \"In\", \"values\": [\"r1-$run\", \"r2-$run\"]}]}]}}}, \"priorityClassName\": \"high-$run\""
wait_node pre3 "r2-$run" 30
grep -q "pod=$ns/pre3 gives node r1-$run up: PodDisruptionBudget $ns/every" "$log" ||
    fail "pre3 did not try r1 first and give it up for the PDB"
[ -z "$(jp v3 '{.metadata.deletionTimestamp}')" ] || fail "v3 (protected) is terminating"
[ -z "$(cond v3 DisruptionTarget status)" ] || fail "v3 (protected) was marked DisruptionTarget"
[ "$(jp v3 '{.spec.nodeName}')" = "r1-$run" ] || fail "v3 is gone"
kubectl -n "$ns-b" get pod v4 >/dev/null 2>&1 && fail "v4 was not evicted"
echo "ok: pre3 tried r1-$run first, its Eviction of v3 answered 429 (dry run): r1 given up untouched; pre3 took r2-$run from v4"
no_double_use
stop_sched
