#!/usr/bin/env bash
# Queues and PodGroups changed while the scheduler runs, on a control plane of this test's own
# (it installs KAI's and Volcano's CRDs, which the shared plane's other tests must not see). On
# one node of 12 GPUs, every pod asking for 1 GPU:
#   1. gpusched's Queue q (limit 1 GPU) runs a0, a1 waits "queue q is at its limit of 1 GPU";
#      KAI's Queue k (scheduling.run.ai/v2, limit 1) runs k0 and k1 waits the same way; Volcano's
#      PodGroup vg (minMember 2) binds v0 and v1 together; Volcano's vh (minMember 3) has two
#      members, which wait "2 of 3 members exist";
#   2. patches while it runs: q's limit 1 -> 2 binds a1, k's binds k1, vh's minMember 3 -> 2
#      binds x0 and x1 (8 GPUs in use);
#   3. q deleted: a0 and a1 keep running (not evicted), a new pod a2 waits "queue q does not
#      exist";
#   4. two Queue kinds of one name: gpusched's Queue d (limit 1) came first, KAI's d (limit 4)
#      is refused with a warning in the log, so d0 runs and d1 waits at d's limit of 1 GPU.
#
# Usage: scheduler_queue_updates.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
private_test_begin qu

# gpusched's CRDs, and KAI's Queue and Volcano's PodGroup as far as gpusched reads them.
kubectl apply -f "$SRC/deploy/crds/" >/dev/null
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: queues.scheduling.run.ai}
spec:
  group: scheduling.run.ai
  scope: Cluster
  names: {kind: Queue, listKind: QueueList, plural: queues, singular: queue}
  versions:
  - name: v2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: podgroups.scheduling.volcano.sh}
spec:
  group: scheduling.volcano.sh
  scope: Namespaced
  names: {kind: PodGroup, listKind: PodGroupList, plural: podgroups, singular: podgroup}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
YAML
for crd in queues.scheduling.gpusched.io podgroups.scheduling.x-k8s.io queues.scheduling.run.ai \
    podgroups.scheduling.volcano.sh; do
    kubectl wait --for=condition=Established "crd/$crd" --timeout=30s >/dev/null
done
setup_ns
mknode "u1-$run" 12

gsqueue() { # gsqueue NAME GPU-LIMIT: gpusched's Queue
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue", "metadata": {"name": "$1"},
 "spec": {"resources": {"gpu": {"quota": 0, "limit": $2}, "cpu": {"quota": -1, "limit": -1},
                        "memory": {"quota": -1, "limit": -1}}}}
JSON
}
kaiqueue() { # kaiqueue NAME GPU-LIMIT: KAI's Queue (gpu in GPUs, as gpusched reads it)
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "$1"},
 "spec": {"resources": {"gpu": {"quota": 0, "limit": $2, "overQuotaWeight": 1},
                        "cpu": {"quota": -1, "limit": -1}, "memory": {"quota": -1, "limit": -1}}}}
JSON
}
vcgroup() { # vcgroup NAME MIN: Volcano's PodGroup
    kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "$1"},
 "spec": {"minMember": $2}}
JSON
}
inq() { printf ', "labels": {"%s": "%s"}' "$1" "$2"; } # inq LABEL QUEUE: metadata extra
ingang() { printf ', "annotations": {"scheduling.k8s.io/group-name": "%s"}' "$1"; }

# 1. Before the scheduler starts: what it lists.
gsqueue "q-$run" 1
kaiqueue "k-$run" 1
vcgroup vg 2
vcgroup vh 3
mkpod a0 1 "" "$(inq gpusched.io/queue "q-$run")"
mkpod k0 1 "" "$(inq kai.scheduler/queue "k-$run")"
start_sched
wait_bound 30 a0 k0
mkpod a1 1 "" "$(inq gpusched.io/queue "q-$run")"
mkpod k1 1 "" "$(inq kai.scheduler/queue "k-$run")"
for p in v0 v1; do mkpod "$p" 1 "" "$(ingang vg)"; done
for p in x0 x1; do mkpod "$p" 1 "" "$(ingang vh)"; done
wait_reason a1 "^queue q-$run is at its limit of 1 GPU$"
wait_reason k1 "^queue k-$run is at its limit of 1 GPU$"
wait_bound 30 v0 v1
wait_reason x0 "2 of 3 members exist"
[ -z "$(jp x1 '{.spec.nodeName}')" ] || fail "x1 bound below its gang's minimum"
echo "ok: q and KAI's k (limit 1) run a0, k0; a1, k1 wait at the limit; Volcano's vg bound v0 v1; vh (min 3) waits with 2 members"

# 2. Edits while it runs.
kubectl patch queues.scheduling.gpusched.io "q-$run" --type=merge \
    -p '{"spec": {"resources": {"gpu": {"limit": 2}}}}' >/dev/null
kubectl patch queues.scheduling.run.ai "k-$run" --type=merge \
    -p '{"spec": {"resources": {"gpu": {"limit": 2}}}}' >/dev/null
kubectl -n "$ns" patch podgroups.scheduling.volcano.sh vh --type=merge \
    -p '{"spec": {"minMember": 2}}' >/dev/null
wait_bound 30 a1 k1 x0 x1
echo "ok: q's and k's limits 1 -> 2 bound a1 and k1; vh's minMember 3 -> 2 bound x0 and x1"

# 3. q deleted: its running pods stay, a new one waits.
kubectl delete queues.scheduling.gpusched.io "q-$run" >/dev/null
mkpod a2 1 "" "$(inq gpusched.io/queue "q-$run")"
wait_reason a2 "^queue q-$run does not exist$"
for p in a0 a1; do
    [ "$(jp "$p" '{.spec.nodeName}')" = "u1-$run" ] || fail "$p is gone from its node"
    [ -z "$(jp "$p" '{.metadata.deletionTimestamp}')" ] || fail "$p was evicted when q went"
done
! grep -q "evicted pod=$ns/a[01] " "$log" || fail "a0 or a1 evicted"
echo "ok: q deleted: a0, a1 keep running; a2 waits \"queue q-$run does not exist\""

# 4. Two Queue kinds of one name.
gsqueue "d-$run" 1
sleep 1 # gpusched's Queue is seen first
kaiqueue "d-$run" 4
mkpod d0 1 "" "$(inq gpusched.io/queue "d-$run")"
mkpod d1 1 "" "$(inq gpusched.io/queue "d-$run")"
wait_bound 30 d0
wait_reason d1 "^queue d-$run is at its limit of 1 GPU$"
grep -q "Queue d-$run of scheduling.run.ai is ignored: the Queue d-$run of scheduling.gpusched.io made that queue" "$log" ||
    fail "no warning for KAI's Queue d-$run"
echo "ok: KAI's Queue d-$run refused with a warning; gpusched's (limit 1) holds: d0 runs, d1 waits"
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited"
no_double_use
stop_sched
