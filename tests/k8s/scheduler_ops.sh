#!/usr/bin/env bash
# The scheduler's operations on the real control plane:
#   1. --version prints "gpusched scheduler VERSION" and exits 0;
#   2. --dry-run decides and logs ("dry-run bind pod=NS/NAME node=N") and writes nothing: the pod
#      stays unbound, without a PodScheduled condition or an Event;
#   3. Queue status: queue q (gpu quota 2, limit 4) runs qa and qb (1 GPU each) and has qc
#      (3 GPUs: 2 + 3 > 4) pending: status allocated.gpu 2, running 2, pending 1, fairShare.gpu 4
#      (its demand of 5 capped by its limit, on a cluster with room), shown in the printer columns;
#   4. Events aggregated: a pod whose FailedScheduling reason changes again and again (each new
#      node changes "0/N nodes are available") has one FailedScheduling Event from gpusched,
#      whose series.count reaches the number of occurrences the log shows (written at most
#      every 10 s); its note stays the first reason (the API keeps a note immutable).
#
# Usage: scheduler_ops.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
run=$$
ns=gs-ops-$run
tmp=$(mktemp -d)
log=$tmp/gpusched.log
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

cleanup() {
    stop_sched
    [ -n "${dry_pid:-}" ] && kill "$dry_pid" 2>/dev/null || true
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl delete nodes -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    kubectl delete queues.scheduling.gpusched.io "q-$run" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

events_of() { # events_of POD REASON: "count" per gpusched Event (1 when it has no series)
    kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c '
import json, sys
pod, reason = sys.argv[1:3]
for e in json.load(sys.stdin)["items"]:
    if (e.get("regarding", {}).get("name") == pod and e.get("reason") == reason
            and e.get("reportingController") == "gpusched"):
        print((e.get("series") or {}).get("count", 1))' "$1" "$2"
}

# 1. --version.
v=$("$bin" scheduler --version)
[[ "$v" =~ ^gpusched\ scheduler\ [0-9]+\.[0-9]+\.[0-9]+ ]] || fail "--version printed '$v'"
echo "ok: --version: $v"

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
kubectl wait --for=condition=Established crd/queues.scheduling.gpusched.io --timeout=30s >/dev/null
setup_ns
mknode "o1-$run" 8

# 2. --dry-run, serving a scheduler name of its own.
"$bin" scheduler --kubeconfig "$KUBECONFIG" --scheduler-name "gs-dry-$run" --dry-run \
    --max-runtime-s 60 >"$tmp/dry.log" 2>&1 &
dry_pid=$!
kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dry1"},
 "spec": {"schedulerName": "gs-dry-$run", "nodeSelector": {"fault": "$run"},
          "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}],
          "containers": [{"name": "c", "image": "registry.invalid/none:1",
                          "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
JSON
for ((i = 0; i < 100; i++)); do grep -q "dry-run bind pod=$ns/dry1 node=o1-$run" "$tmp/dry.log" && break; sleep 0.2; done
grep -q "dry-run bind pod=$ns/dry1 node=o1-$run" "$tmp/dry.log" || { cat "$tmp/dry.log" >&2; fail "no dry-run bind line"; }
sleep 2
[ -z "$(jp dry1 '{.spec.nodeName}')" ] || fail "--dry-run bound dry1"
[ -z "$(jp dry1 '{.status.conditions}')" ] || fail "--dry-run wrote dry1's status: $(jp dry1 '{.status.conditions}')"
[ -z "$(events_of dry1 Scheduled)$(events_of dry1 FailedScheduling)" ] || fail "--dry-run wrote an Event about dry1"
kill "$dry_pid"
wait "$dry_pid" || fail "--dry-run exited $? on SIGTERM"
dry_pid=
echo "ok: --dry-run: $(grep -o "dry-run bind pod=$ns/dry1 node=[^ ]*" "$tmp/dry.log"); dry1 unbound, no status, no Event"

# 3. Queue status.
kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q-$run"},
 "spec": {"resources": {"gpu": {"quota": 2, "limit": 4}}}}
JSON
start_sched
ql=', "labels": {"gpusched.io/queue": "q-'$run'"}'
mkpod qa 1 "" "$ql"
mkpod qb 1 "" "$ql"
wait_bound 30 qa qb
mkpod qc 3 "" "$ql"
wait_reason qc "queue q-$run is at its limit of 4 GPUs"
want="2 2 2 1 4" # qa and qb: 1 GPU and 1 CPU each
got=""
for ((i = 0; i < 50; i++)); do
    got=$(kubectl get queues.scheduling.gpusched.io "q-$run" -o 'jsonpath={.status.allocated.gpu} {.status.allocated.cpu} {.status.running} {.status.pending} {.status.fairShare.gpu}')
    [ "$got" = "$want" ] && break
    sleep 0.2
done
[ "$got" = "$want" ] || fail "Queue status (allocated.gpu allocated.cpu running pending fairShare.gpu) '$got', want '$want'"
cols=$(kubectl get queues.scheduling.gpusched.io "q-$run" --no-headers | awk '{print $4, $5, $6, $7}')
[ "$cols" = "2 4 2 1" ] || fail "printer columns GPU-Allocated GPU-Fair-Share Running Pending: '$cols', want '2 4 2 1'"
echo "ok: Queue status: allocated.gpu 2, allocated.cpu 2, running 2, pending 1, fairShare.gpu 4; columns: $(kubectl get queues.scheduling.gpusched.io "q-$run" | head -1 | tr -s ' ')"

# 4. One FailedScheduling Event for stuck (9 GPUs: no node has them) while its reason changes.
mkpod stuck 9
wait_reason stuck 'Insufficient nvidia.com/gpu'
for k in 1 2 3; do
    mknode "o$((k + 1))-$run" 1
    sleep 0.5
done
sleep 1
# Each node changes the reason twice (created without capacity, then given it): the log's
# "pending" lines count the occurrences, at least 4.
want=$(grep -c "pending pod=$ns/stuck " "$log")
[ "$want" -ge 4 ] || fail "only $want FailedScheduling occurrences for stuck"
got=""
for ((i = 0; i < 75; i++)); do
    got=$(events_of stuck FailedScheduling | paste -sd' ')
    [ "$got" = "$want" ] && break
    sleep 0.2
done
[ "$got" = "$want" ] || fail "FailedScheduling Events about stuck (their series counts): '$got', want one Event of count $want"
first=$(grep -m1 "pending pod=$ns/stuck " "$log" | sed 's/.* reason="\(.*\)"$/\1/')
note=$(kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    if e.get("regarding", {}).get("name") == "stuck" and e.get("reason") == "FailedScheduling":
        print(e["note"])')
[ "$note" = "$first" ] || fail "the Event's note '$note' is not the first reason '$first'"
echo "ok: Events: stuck's $want FailedScheduling occurrences are one Event with series.count $got (its note, immutable, the first: $note)"
stop_sched
grep -q "series_patches=[1-9]" "$log" || fail "no series patch counted"
