#!/usr/bin/env bash
# A gang whose bind partly fails (issue 7: "the failed members retry on the GPUs held for them
# for 30 s, then the gang is released whole"). A validating webhook for pods/binding
# (bind_webhook.py, mode reject-for) refuses some members' Bindings. Two gangs of 3 (PodGroup
# minMember 3, one GPU per member), each on a 4-GPU node of its own:
#   a. a-2's Bindings are refused for 5 s: a-0 and a-1 bind; a-2 is sent again on the same node
#      (1 s, 2 s, 4 s apart) and binds there within the 30 s. While it retries, its GPU stays
#      held: `late` (2 GPUs, created after the first refusal) finds 4 - 3 = 1 GPU free and waits
#      (had a-2's GPU been released, 2 would be free and it would bind);
#   b. b-2's Bindings are always refused: b-0 and b-1 bind; b-2 is tried again until 30 s after
#      its first refusal (1+2+4+8+10+5 s: 6 more tries, 7 in all), then gang b is released
#      whole: b-0 and b-1 are evicted (reason gang; their nodeName cannot be undone) and b-2
#      gives its GPU back, with "gang ... released whole" as its reason.
# No GPU is handed out twice, and no pod is bound twice.
#
# Usage: scheduler_gang_partial.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin gp

tries() { grep -c "^$ns/$1 .* denied" "$tmp/webhook.log" || true; }

gang() { # gang NAME NODE: PodGroup NAME (minMember 3) and its members NAME-0..2 on NODE
    kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
 "metadata": {"name": "$1"}, "spec": {"minMember": 3}}
JSON
    local i
    for i in 0 1 2; do
        mkpod "$1-$i" 1 "$(on_node "$2")" ", \"labels\": {\"scheduling.x-k8s.io/pod-group\": \"$1\"}"
    done
}

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
setup_ns
mknode "ga-$run" 4
mknode "gb-$run" 4
start_webhook reject-for 5 a-2 inf b-2
start_sched
gang a "ga-$run"
gang b "gb-$run"

# a: the first refusal, then `late` while a-2 retries.
for ((i = 0; i < 100; i++)); do [ "$(tries a-2)" -ge 1 ] && break; sleep 0.1; done
[ "$(tries a-2)" -ge 1 ] || fail "a-2's Binding never reached the webhook"
t_first=$SECONDS
mkpod late 2 "$(on_node "ga-$run")"
wait_bound 10 a-0 a-1
wait_node a-2 "ga-$run" 30
t_a=$((SECONDS - t_first))
[ "$(tries a-2)" -ge 2 ] || fail "a-2 was refused $(tries a-2) time(s), want 2 or more (5 s of refusals)"
grep "^$ns/a-2 " "$tmp/webhook.log" | grep -v " ga-$run " && fail "a-2 was sent to another node"
grep -q "pod=$ns/a-2 gang $ns/a: bind refused 1 time(s); retrying on node ga-$run in 1000 ms" "$log" ||
    fail "no retry of a-2 on its node in the log"
wait_reason late 'Insufficient nvidia.com/gpu' 10
[ -z "$(jp late '{.spec.nodeName}')" ] || fail "late was bound: a-2's GPU was not held"
echo "ok: a-2 refused $(tries a-2) times, bound on ga-$run GPU $(gpus_of a-2) ${t_a} s after its first refusal; late waited (its GPU held)"

# b: released whole once 30 s passed since b-2's first refusal.
wait_bound 10 b-0 b-1
for ((i = 0; i < 250; i++)); do
    grep -q "gang $ns/b released whole" "$log" && break
    sleep 0.2
done
grep -q "gang $ns/b released whole" "$log" || fail "gang b was never released"
n=$(tries b-2)
[ "$n" -ge 6 ] && [ "$n" -le 8 ] || fail "b-2 was tried $n times in 30 s, want 7 (1, 2, 4, 8, 10, 5 s apart)"
for p in b-0 b-1; do
    # The evictions are sent after the release line, one by one (seconds apart under ASan).
    for ((i = 0; i < 100; i++)); do
        grep -q "evicted pod=$ns/$p reason=gang" "$log" && break
        sleep 0.2
    done
    grep -q "evicted pod=$ns/$p reason=gang" "$log" || fail "$p was not evicted with reason gang"
done
for ((i = 0; i < 50; i++)); do
    left=$(kubectl -n "$ns" get pods b-0 b-1 -o jsonpath='{range .items[?(!@.metadata.deletionTimestamp)]}{.metadata.name} {end}' 2>/dev/null || true)
    [ -z "$left" ] && break
    sleep 0.2
done
[ -z "$left" ] || fail "not deleted after their eviction: $left"
[ -z "$(jp b-2 '{.spec.nodeName}')" ] || fail "b-2 was bound"
wait_reason b-2 "gang $ns/b released whole|gang|PodGroup" 15
echo "ok: b-2 refused $n times; gang b released whole: b-0, b-1 evicted (reason gang), b-2 unbound"
no_double_use
stop_sched
