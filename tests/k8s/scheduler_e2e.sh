#!/usr/bin/env bash
# gpusched scheduler end to end on the real control plane (tests/k8s/control-plane.sh): Node
# objects with GPU capacity, pods created through the API, and the bindings and annotations
# that result, each expected outcome worked out beside it:
#   1. whole GPUs: the GPU choice lands in gpusched.io/assigned-gpus with the binding;
#   2. a milli fraction (KAI's gpu-fraction annotation) shares a GPU with another;
#   3. a nodeSelector; 4. a taint without and with a toleration;
#   5. a queue over its limit waits, with the reason in PodScheduled=False;
#   6. a pod bound by kube-scheduler holds its GPU (never handed out twice);
#   7. priority preemption through the Eviction API;
#   8. a restart adopts the assignments: the next pod gets a GPU nobody holds;
# and the events.k8s.io/v1 Events told of 1 (Scheduled), 4 (FailedScheduling) and 7 (Preempted);
# and /healthz, /readyz and /metrics (scraped with curl after 7) count what the log says, its
# queue series agree with the Queue's status, its pool series (pool = this run's node label,
# --pool-label) hold the GPUs worked out below, and `promtool check metrics` (when installed)
# finds nothing wrong with the text.
#
# Usage: scheduler_e2e.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)

run=$$
ns=gs-e2e-$run
tmp=$(mktemp -d)
sched_pid=
log=$tmp/gpusched.log

fail() {
    echo "FAIL: $*" >&2
    echo "--- gpusched log (last 40 lines)" >&2
    tail -n 40 "$log" >&2 || true
    exit 1
}

stop_sched() {
    if [ -n "$sched_pid" ]; then
        kill -TERM "$sched_pid" 2>/dev/null || true
        wait "$sched_pid" 2>/dev/null || true
        sched_pid=
    fi
}

cleanup() {
    stop_sched
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl delete nodes -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    kubectl delete queues.scheduling.gpusched.io -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    kubectl delete priorityclass "e2e-low-$run" "e2e-high-$run" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

start_sched() {
    "$bin" scheduler --kubeconfig "$KUBECONFIG" --policy bestfit --qps 500 --burst 1000 \
        --max-runtime-s 600 --lease-namespace "$ns" --lease-name "gpusched-$run" \
        --metrics-addr 127.0.0.1:0 --pool-label gpusched.test/run >>"$log" 2>&1 &
    sched_pid=$!
}

# mknode NAME GPUS LABELS-JSON TAINTS-JSON: a Node with its capacity set through the status
# subresource, as a kubelet would.
mknode() {
    local name=$1 gpus=$2 labels=$3 taints=$4
    kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$name", "labels": $labels},
 "spec": {"taints": $taints}}
EOF
    kubectl label node "$name" "gpusched.test/run=$run" --overwrite >/dev/null
    local res="{\"cpu\":\"32\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"$gpus\"}"
    kubectl patch node "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":$res,\"allocatable\":$res,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"test\"}]}}" >/dev/null
}

# mkpod NAME SPEC-EXTRA-JSON METADATA-EXTRA-JSON GPUS [SCHEDULER]
mkpod() {
    local name=$1 extra=$2 meta=$3 gpus=$4 sched=${5:-gpusched}
    local lim=""
    [ "$gpus" != 0 ] && lim="\"limits\": {\"nvidia.com/gpu\": \"$gpus\"},"
    kubectl -n "$ns" apply -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "$name" $meta},
 "spec": {"schedulerName": "$sched", "terminationGracePeriodSeconds": 0 $extra,
          "containers": [{"name": "c", "image": "registry.invalid/none:1",
                          "resources": {$lim "requests": {"cpu": "1"}}}]}}
EOF
}

# jp POD JSONPATH
jp() { kubectl -n "$ns" get pod "$1" -o "jsonpath=$2" 2>/dev/null || true; }

wait_node() { # wait_node POD WANT-NODE [TIMEOUT_S]
    local pod=$1 want=$2 t=${3:-30} got="" i
    for ((i = 0; i < t * 5; i++)); do
        got=$(jp "$pod" '{.spec.nodeName}')
        [ -n "$got" ] && break
        sleep 0.2
    done
    [ "$got" = "$want" ] || fail "$pod: bound to '$got', want '$want'"
}

gpus_of() { # the GPU indices of the assignment, "0,1"
    jp "$1" '{.metadata.annotations.gpusched\.io/assigned-gpus}' |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(",".join(str(g["index"])+("" if g["milli"]==1000 else ":%d"%g["milli"]) for g in d["gpus"]))'
}

wait_reason() { # wait_reason POD REGEX [TIMEOUT_S]: PodScheduled=False with a matching message
    local pod=$1 want=$2 t=${3:-30} msg="" i
    for ((i = 0; i < t * 5; i++)); do
        msg=$(jp "$pod" '{.status.conditions[?(@.type=="PodScheduled")].message}')
        [[ "$msg" =~ $want ]] && return 0
        sleep 0.2
    done
    fail "$pod: PodScheduled message '$msg' does not match '$want'"
}

# event_check POD REASON TYPE NOTE-REGEX: an Event from gpusched about POD with that reason and
# type whose note matches, within 10 s.
event_check() {
    local pod=$1 reason=$2 type=$3 want=$4 notes="" i
    for ((i = 0; i < 50; i++)); do
        notes=$(kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c '
import json, sys
pod, reason, typ = sys.argv[1:4]
for e in json.load(sys.stdin)["items"]:
    if (e.get("regarding", {}).get("name") == pod and e.get("reason") == reason
            and e.get("type") == typ and e.get("reportingController") == "gpusched"
            and e.get("reportingInstance")):
        print(e.get("note", ""))' "$pod" "$reason" "$type")
        while IFS= read -r n; do [[ "$n" =~ $want ]] && return 0; done <<<"$notes"
        sleep 0.2
    done
    fail "$pod: no $type $reason Event with a note matching '$want' (notes: '$notes')"
}

still_pending() { # still_pending POD SECONDS
    sleep "$2"
    [ -z "$(jp "$1" '{.spec.nodeName}')" ] || fail "$1 was bound to $(jp "$1" '{.spec.nodeName}'), want pending"
}

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
kubectl wait --for=condition=Established crd/queues.scheduling.gpusched.io --timeout=30s >/dev/null
kubectl create namespace "$ns" >/dev/null
for i in $(seq 1 50); do
    kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && break
    sleep 0.2
done

# Nodes: a and b have 8 GPUs; b is in pool b; c has 8 GPUs and a NoSchedule taint. A fourth,
# d with 1 GPU, comes later for kube-scheduler and preemption (best fit would pick it first).
mknode "a-$run" 8 '{"nvidia.com/gpu.product": "A100-SXM4-80GB"}' '[]'
mknode "b-$run" 8 '{"nvidia.com/gpu.product": "A100-SXM4-80GB", "pool": "b"}' '[]'
mknode "c-$run" 8 '{"pool": "c"}' '[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]'
kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue",
 "metadata": {"name": "small-$run", "labels": {"gpusched.test/run": "$run"}},
 "spec": {"resources": {"gpu": {"quota": 1, "limit": 2}}}}
EOF
kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "e2e-low-$run"}, "value": 10}
EOF
kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "e2e-high-$run"}, "value": 1000}
EOF

start_sched

# 1. Whole GPUs. Best fit between a and b (tie: a, the node listed first), GPUs 0 and 1.
mkpod whole '' '' 2
wait_node whole "a-$run"
[ "$(gpus_of whole)" = "0,1" ] || fail "whole: assigned GPUs '$(gpus_of whole)', want 0,1"
echo "ok: whole GPUs: whole -> a-$run GPUs 0,1"
event_check whole Scheduled Normal "^Successfully assigned $ns/whole to a-$run \(GPUs 0,1\)\$"
echo "ok: event: Scheduled \"Successfully assigned $ns/whole to a-$run (GPUs 0,1)\""

# 2. Fractions: two half GPUs share one GPU (best fit packs the second onto the first's GPU).
mkpod half1 '' ', "annotations": {"gpu-fraction": "0.5"}' 0
wait_node half1 "a-$run"
mkpod half2 '' ', "annotations": {"gpu-fraction": "0.5"}' 0
wait_node half2 "a-$run"
[ "$(gpus_of half1)" = "2:500" ] || fail "half1: '$(gpus_of half1)', want 2:500"
[ "$(gpus_of half2)" = "2:500" ] || fail "half2: '$(gpus_of half2)', want 2:500 (same GPU)"
echo "ok: milli fractions: half1 and half2 share GPU 2 of a-$run"

# 3. A nodeSelector.
mkpod sel ', "nodeSelector": {"pool": "b"}' '' 1
wait_node sel "b-$run"
echo "ok: nodeSelector pool=b -> b-$run"

# 4. A taint: without a toleration the pod waits (c is the only pool=c node), with one it lands.
mkpod untol ', "nodeSelector": {"pool": "c"}' '' 1
wait_reason untol '0/[0-9]+ nodes are available: .*1 node\(s\) had untolerated taint \{dedicated: infer\}'
mkpod tol ', "nodeSelector": {"pool": "c"}, "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}]' '' 1
wait_node tol "c-$run"
still_pending untol 1
echo "ok: taint: untol waits with the taint named, tol -> c-$run"
event_check untol FailedScheduling Warning '^0/[0-9]+ nodes are available: .*1 node\(s\) had untolerated taint \{dedicated: infer\}'
echo "ok: event: FailedScheduling (Warning) on untol names the taint"

# 5. A queue with limit 2 GPUs: q1 (2) fits, q2 (1) waits on the limit.
mkpod q1 '' ", \"labels\": {\"gpusched.io/queue\": \"small-$run\"}" 2
wait_node q1 "a-$run"
mkpod q2 '' ", \"labels\": {\"gpusched.io/queue\": \"small-$run\"}" 1
wait_reason q2 "queue small-$run is at its limit of 2 GPUs"
echo "ok: queue limit: q2 waits: $(jp q2 '{.status.conditions[?(@.type=="PodScheduled")].message}')"

# 6. A node d with 1 GPU joins (the watch brings it); kube-scheduler binds a 1-GPU pod to it;
#    ours asking d must wait.
mknode "d-$run" 1 '{"pool": "d"}' '[]'
mkpod theirs ', "nodeSelector": {"pool": "d"}' '' 1 default-scheduler
wait_node theirs "d-$run"
mkpod ours-d ', "nodeSelector": {"pool": "d"}' '' 1
wait_reason ours-d '0/[0-9]+ nodes are available: .*Insufficient nvidia.com/gpu'
echo "ok: kube-scheduler's pod holds d's GPU; ours-d waits"

# 7. Preemption: free d (delete theirs and ours-d), run a low pod there, then a high one.
# ours-d goes first: deleting theirs first would free d's GPU while ours-d still waits, and
# gpusched would bind ours-d as it is being deleted (a 404 from the Binding, a race of this test).
kubectl -n "$ns" delete pod ours-d --grace-period=0 --force --wait >/dev/null 2>&1
for i in $(seq 1 50); do
    kubectl -n "$ns" get pod ours-d >/dev/null 2>&1 || break
    sleep 0.2
done
kubectl -n "$ns" delete pod theirs --grace-period=0 --force >/dev/null 2>&1
mkpod low ", \"nodeSelector\": {\"pool\": \"d\"}, \"priorityClassName\": \"e2e-low-$run\"" '' 1
wait_node low "d-$run"
mkpod high ", \"nodeSelector\": {\"pool\": \"d\"}, \"priorityClassName\": \"e2e-high-$run\"" '' 1
# The eviction either deletes low at once (grace 0) or marks it terminating; no kubelet
# finalises it, so do what it would.
for i in $(seq 1 150); do
    kubectl -n "$ns" get pod low >/dev/null 2>&1 || break
    [ -n "$(jp low '{.metadata.deletionTimestamp}')" ] && break
    sleep 0.2
done
grep -q "evicted pod=$ns/low reason=preemption" "$log" || fail "low was not evicted"
kubectl -n "$ns" delete pod low --grace-period=0 --force >/dev/null 2>&1 || true
wait_node high "d-$run"
echo "ok: preemption: low evicted through the Eviction API, high -> d-$run"
event_check low Preempted Normal "^Preempted by $ns/high: priority 1000 > 10 in queue [^ ]+\$"
echo "ok: event: Preempted \"Preempted by $ns/high: priority 1000 > 10 in queue ...\" on low"
event_check high Nominated Normal "^Nominated to node d-$run: preempted $ns/low \\(priority 10, same queue\\)\$"
echo "ok: event: Nominated \"Nominated to node d-$run: preempted $ns/low (priority 10, same queue)\" on high"

# Metrics of this first process: what its log says it did.
port=$(sed -n 's/.*serving \/healthz \/readyz \/metrics on .* (port \([0-9]*\)).*/\1/p' "$log" | tail -n 1)
[ -n "$port" ] || fail "no metrics port in the log"
for u in healthz readyz; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/$u")
    [ "$code" = 200 ] || fail "/$u answered $code, want 200"
done
m=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
metric() { awk -v k="$1" '$1 == k {print $2}' <<<"$m"; }
nb=$(grep -c 'bound pod=' "$log")
[ "$(metric gpusched_binds_total)" = "$nb" ] || fail "gpusched_binds_total $(metric gpusched_binds_total), log says $nb"
[ "$(metric 'gpusched_scheduling_attempts_total{result="scheduled"}')" = "$nb" ] || fail "attempts scheduled != $nb"
[ "$(metric gpusched_bind_failures_total)" = 0 ] || fail "bind failures $(metric gpusched_bind_failures_total)"
[ "$(metric 'gpusched_scheduling_attempts_total{result="unschedulable"}')" -ge 3 ] || fail "fewer than 3 unschedulable attempts (untol, q2, ours-d)"
[ "$(metric 'gpusched_evictions_total{reason="preemption"}')" = 1 ] || fail "preemption evictions $(metric 'gpusched_evictions_total{reason="preemption"}'), want 1"
[ "$(metric gpusched_leader)" = 1 ] || fail "gpusched_leader $(metric gpusched_leader), want 1"
[ "$(metric gpusched_pending_pods)" -ge 2 ] || fail "gpusched_pending_pods $(metric gpusched_pending_pods), want >= 2 (untol, q2)"
[ "$(metric gpusched_cycle_duration_seconds_count)" -gt 0 ] || fail "no cycle in the histogram"
[ "$(metric 'gpusched_cycle_duration_seconds_bucket{le="+Inf"}')" = "$(metric gpusched_cycle_duration_seconds_count)" ] || fail "+Inf bucket != count"
echo "ok: metrics: binds_total=$nb evictions{preemption}=1 pending_pods=$(metric gpusched_pending_pods) cycles=$(metric gpusched_cycle_duration_seconds_count) sum=$(metric gpusched_cycle_duration_seconds_sum)s leader=1; healthz, readyz 200"
# Every bound pod was decided by a cycle, so each is observed once in both latency histograms.
att=gpusched_scheduling_attempt_duration_seconds
[ "$(metric "${att}_count{result=\"scheduled\"}")" = "$nb" ] || fail "${att}_count{scheduled} $(metric "${att}_count{result=\"scheduled\"}"), want $nb"
[ "$(metric "${att}_bucket{result=\"scheduled\",le=\"+Inf\"}")" = "$nb" ] || fail "${att} +Inf bucket != $nb"
# The fine decision histogram holds the same observations, every result together.
dec=gpusched_scheduling_decision_duration_seconds
att_all=$(($(metric "${att}_count{result=\"scheduled\"}") + $(metric "${att}_count{result=\"unschedulable\"}") + $(metric "${att}_count{result=\"error\"}")))
[ "$(metric "${dec}_count")" = "$att_all" ] || fail "${dec}_count $(metric "${dec}_count"), want $att_all (every result of ${att})"
[ "$(metric "${dec}_bucket{le=\"+Inf\"}")" = "$att_all" ] || fail "${dec} +Inf bucket != $att_all"
[ "$(metric gpusched_pod_scheduling_duration_seconds_count)" = "$nb" ] || fail "pod_scheduling_duration count $(metric gpusched_pod_scheduling_duration_seconds_count), want $nb"
# Queue small: q1's 2 GPUs, as the Queue's status says (written within a second of a change).
qa="gpusched_queue_allocated{queue=\"small-$run\",resource=\"gpu\"}"
[ "$(metric "$qa")" = 2 ] || fail "$qa $(metric "$qa"), want 2 (q1)"
st=
for i in $(seq 1 50); do
    st=$(kubectl get queues.scheduling.gpusched.io "small-$run" -o jsonpath='{.status.allocated.gpu}')
    [ -n "$st" ] && awk -v a="$st" -v b="$(metric "$qa")" 'BEGIN {exit !(a + 0 == b + 0)}' && break
    sleep 0.2
done
awk -v a="$st" 'BEGIN {exit !(a + 0 == 2)}' || fail "Queue small-$run status.allocated.gpu '$st', want 2 as /metrics says"
[ "$(metric "gpusched_queue_pending_pods{queue=\"small-$run\"}")" = 1 ] || fail "queue small pending $(metric "gpusched_queue_pending_pods{queue=\"small-$run\"}"), want 1 (q2)"
[ "$(metric "gpusched_queue_limit{queue=\"small-$run\",resource=\"gpu\"}")" = 2 ] || fail "queue small gpu limit, want 2"
# Pool $run (all four nodes, 25 GPUs): a holds 5 (whole 2, half1+half2 one, q1 2), b 1 (sel),
# c 1 (tol), d 1 (high); so 8 allocated, 17 free. The snapshot is taken once a second: scrape
# again until high's placement and low's release are both in it.
pool() { metric "gpusched_gpus{pool=\"$run\",state=\"$1\"}"; }
for i in $(seq 1 50); do
    [ "$(pool allocated)" = 8 ] && [ "$(pool free)" = 17 ] && break
    sleep 0.2
    m=$(curl -sf "http://127.0.0.1:$port/metrics") || fail "/metrics did not answer"
done
[ "$(pool allocated)" = 8 ] || fail "pool $run allocated $(pool allocated), want 8"
[ "$(pool free)" = 17 ] || fail "pool $run free $(pool free), want 17"
[ "$(pool unhealthy)" = 0 ] || fail "pool $run unhealthy $(pool unhealthy), want 0"
frag=$(metric "gpusched_gpu_fragmentation{pool=\"$run\"}")
[ -n "$frag" ] || fail "no gpusched_gpu_fragmentation for pool $run"
echo "ok: metrics: ${att}_count{scheduled}=$nb sum=$(metric "${att}_sum{result=\"scheduled\"}")s; queue small-$run allocated gpu 2 = status; pool $run 8 allocated 17 free, fragmentation $frag GPUs"
if command -v promtool >/dev/null; then
    promtool check metrics <<<"$m" >&2 || fail "promtool check metrics found problems (above)"
    echo "ok: promtool check metrics: clean"
else
    echo "skip: promtool not installed"
fi

# 8. Restart: the new process adopts every assignment; a's GPUs 0-4 are held (whole 0,1;
#    halves on 2; q1 3,4), so a 3-GPU pod on a gets 5,6,7.
stop_sched
start_sched
mkpod after ', "nodeSelector": {"nvidia.com/gpu.product": "A100-SXM4-80GB"}, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}]}}}' '' 3
wait_node after "a-$run"
[ "$(gpus_of after)" = "5,6,7" ] || fail "after restart: '$(gpus_of after)', want 5,6,7"
echo "ok: restart adopts the assignments: after -> a-$run GPUs 5,6,7"

stop_sched
binds=$(grep -c 'bound pod=' "$log")
refused=$(grep -c "bind refused" "$log" || true)
grep "bind refused" "$log" >&2 || true
echo "ok: $binds binds, $refused refused"
