#!/usr/bin/env bash
# Priority preemption across queues on a real API server, and what it tells: one node n of 4
# GPUs (a plane of this test's own, so fair shares count that node alone); Queue qa guaranteed 2
# GPUs, qb 1 GPU; PriorityClasses low (10) and high (1000).
#   1. qb borrows the whole node: b1..b4 (1 GPU, low) bind one after another (b4 newest).
#   2. huge (16 GPUs, qa, high) fits no node even when empty: it waits with a reason that says
#      so, and holds up nothing behind it: a1 (1 GPU, qa, high), created after it, is placed.
#   3. a1: qa holds 0 + 1 <= 2 (within its quota), qb keeps 4 - 1 = 3 >= 1: a1 preempts qb's
#      newest pod above its quota, b4, through the Eviction API. b4's Preempted Event says who
#      and why ("Preempted by ns/a1: priority 1000 > 10; queue qa is within its quota of 2
#      GPUs, queue qb ran above its quota of 1 GPU (it holds 3 GPUs after the eviction)"), a1's
#      Nominated Event whom it evicts; a1 binds on n once b4 is gone.
#   4. a2 likewise takes b3 (qa 2 <= 2, qb keeps 2 >= 1).
#   5. a3 would take qa to 3 GPUs, above its quota: no preemption across queues; reclaim (on)
#      needs qb to stay at or above its fair share (4 GPUs: quotas 2 and 1, the 1 left split 1:1,
#      2.5 and 1.5) and qb at 2 would drop to 1: a3 waits "0/1 nodes are available: 1
#      Insufficient nvidia.com/gpu."; b1 and b2, within what qb may keep, are untouched.
# The same decisions as `gpusched whatif` makes on tests/data/whatif/cross_queue.yaml.
#
# Usage: scheduler_cross_queue.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_begin xq

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
for i in $(seq 1 50); do
    kubectl get crd queues.scheduling.gpusched.io >/dev/null 2>&1 && break
    sleep 0.2
done
setup_ns
for q in "qa 2" "qb 1"; do
    set -- $q
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue",
 "metadata": {"name": "$1-$run"}, "spec": {"resources": {"gpu": {"quota": $2, "limit": -1, "overQuotaWeight": 1}}}}
JSON
done
for c in "low 10" "high 1000"; do
    set -- $c
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "$1-$run"}, "value": $2}
JSON
done
mknode "n-$run" 4
start_sched

inq() { printf ', "labels": {"gpusched.io/queue": "%s-%s"}' "$1" "$run"; }
prio() { printf ', "priorityClassName": "%s-%s"' "$1" "$run"; }
cond() { jp "$1" "{.status.conditions[?(@.type==\"PodScheduled\")].$2}"; }
# gone POD: waits until the evicted pod is gone, deleting it as its kubelet would end it.
gone() {
    local i
    for ((i = 0; i < 150; i++)); do
        kubectl -n "$ns" get pod "$1" >/dev/null 2>&1 || return 0
        [ -n "$(jp "$1" '{.metadata.deletionTimestamp}')" ] && break
        sleep 0.2
    done
    grep -q "evicted pod=$ns/$1 reason=preemption" "$log" || fail "$1 was not evicted"
    kubectl -n "$ns" delete pod "$1" --grace-period=0 --force >/dev/null 2>&1 || true
}
# note POD REASON: the notes of gpusched's Events of REASON about POD, one a line.
note() {
    kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c '
import json, sys
pod, reason = sys.argv[1:3]
for e in json.load(sys.stdin)["items"]:
    if (e.get("regarding", {}).get("name") == pod and e.get("reason") == reason
            and e.get("reportingController") == "gpusched"):
        print(e.get("note", ""))' "$1" "$2"
}
wait_note() { # wait_note POD REASON EXACT-NOTE
    local i got=""
    for ((i = 0; i < 75; i++)); do
        got=$(note "$1" "$2")
        grep -qxF -- "$3" <<<"$got" && return 0
        sleep 0.2
    done
    fail "$1: no $2 Event with note '$3' (notes: '$got')"
}

# 1. qb borrows the node.
for b in b1 b2 b3 b4; do
    mkpod "$b" 1 "$(prio low)" "$(inq qb)"
    wait_node "$b" "n-$run"
done
echo "ok: qb (quota 1 GPU) runs b1..b4 on all 4 GPUs of n-$run"

# 2. + 3. huge fits no node and holds up nothing; a1 preempts b4.
mkpod huge 16 "$(prio high)" "$(inq qa)"
sleep 1.1 # a1 is younger: a queue is served oldest first
mkpod a1 1 "$(prio high)" "$(inq qa)"
want_huge="0/1 nodes are available: 1 Insufficient nvidia.com/gpu. It fits no node even when empty: the most GPUs on a node that passes its filters is 4, it asks 16."
wait_reason huge "^$(sed 's/[].[()*+?{}|^$\\]/\\&/g' <<<"$want_huge")\$" 30
gone b4
wait_node a1 "n-$run" 30
for b in b1 b2 b3; do [ "$(jp "$b" '{.spec.nodeName}')" = "n-$run" ] || fail "$b is gone"; done
echo "ok: huge waits: $(cond huge message)"
echo "ok: a1 (qa within its quota) preempted b4 (qb above its quota, newest) and bound to n-$run"
wait_note b4 Preempted "Preempted by $ns/a1: priority 1000 > 10; queue qa-$run is within its quota of 2 GPUs, queue qb-$run ran above its quota of 1 GPU (it holds 3 GPUs after the eviction)"
echo "ok: b4's Preempted Event: $(note b4 Preempted)"
wait_note a1 Nominated "Nominated to node n-$run: preempted $ns/b4 (priority 10, queue qb-$run above its quota of 1 GPU)"
echo "ok: a1's Nominated Event: $(note a1 Nominated)"

# 4. a2 takes b3.
mkpod a2 1 "$(prio high)" "$(inq qa)"
gone b3
wait_node a2 "n-$run" 30
echo "ok: a2 preempted b3 and bound to n-$run"

# 5. a3 would take qa above its quota: it waits, b1 and b2 stay.
mkpod a3 1 "$(prio high)" "$(inq qa)"
wait_reason a3 '^0/1 nodes are available: 1 Insufficient nvidia\.com/gpu\.$' 30
sleep 3 # several cycles: nothing more is evicted
for b in b1 b2; do
    [ "$(jp "$b" '{.spec.nodeName}')" = "n-$run" ] && [ -z "$(jp "$b" '{.metadata.deletionTimestamp}')" ] ||
        fail "$b (within what qb keeps) was disturbed"
done
n_evict=$(grep -c "evicted pod=$ns/" "$log" || true)
[ "$n_evict" = 2 ] || fail "$n_evict evictions, want 2 (b4, b3)"
echo "ok: a3 waits ($(cond a3 message)); b1, b2 untouched; 2 evictions in all"
no_double_use
stop_sched
