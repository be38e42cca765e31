#!/usr/bin/env bash
# Async binding with assume and forget, on the real control plane. A validating webhook for
# pods/binding (bind_webhook.py, delay mode) holds every Binding 5 s, and refuses s4's after
# that. Node a1 has 4 GPUs; s1..s4 (1 GPU each) are created together:
#   1. their four Bindings are in flight at once (the webhook received all four within 1 s:
#      a scheduler binding one at a time would send them 5 s apart);
#   2. while they are in flight the GPUs are assumed: `late` (1 GPU on a1), created then, gets
#      no GPU and waits: Insufficient nvidia.com/gpu;
#   3. s4's refusal releases its GPU at once: late binds to the GPU s4 had been given;
#   4. s1..s3 and late hold four different GPUs of a1; s4 is unbound.
#
# Usage: scheduler_async_bind.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin ab

setup_ns
mknode "a1-$run" 4
start_webhook delay 5 s4
start_sched

# The four pods in one request, so one cycle sees them all.
python3 - "$ns" "$run" <<'PY' | kubectl -n "$ns" apply -f - >/dev/null
import json, sys
ns, run = sys.argv[1:3]
items = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s%d" % i},
          "spec": {"schedulerName": "gs-" + run, "terminationGracePeriodSeconds": 0,
                   "nodeSelector": {"fault": run},
                   "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}],
                   "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
         for i in range(1, 5)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
for ((i = 0; i < 50; i++)); do [ "$(grep -c '^recv ' "$tmp/webhook.log")" -ge 4 ] && break; sleep 0.1; done
[ "$(grep -c '^recv ' "$tmp/webhook.log")" -ge 4 ] || fail "the webhook received $(grep -c '^recv ' "$tmp/webhook.log") Bindings in 5 s, want 4"
spread=$(awk '/^recv /{print $3}' "$tmp/webhook.log" | sort -n | awk 'NR==1{a=$1} {b=$1} END{printf "%.2f", b-a}')
python3 -c "import sys; sys.exit(0 if $spread < 1.0 else 1)" || fail "the four Bindings arrived over ${spread} s: not in flight together"
echo "ok: four Bindings in flight at once (arrived within ${spread} s; each held 5 s)"

mkpod late 1 "$(on_node "a1-$run")"
wait_reason late 'Insufficient nvidia.com/gpu' 5
[ -z "$(jp s1 '{.spec.nodeName}')$(jp s4 '{.spec.nodeName}')" ] || fail "a Binding was answered before the webhook's delay"
echo "ok: while they are in flight, late waits: $(jp late '{.status.conditions[?(@.type=="PodScheduled")].message}')"

wait_bound 20 s1 s2 s3 late
[ -z "$(jp s4 '{.spec.nodeName}')" ] || fail "s4 was bound"
grep -q "bind refused pod=$ns/s4 node=a1-$run: HTTP 403" "$log" || fail "s4's refusal is not in the log"
g=$(for p in s1 s2 s3 late; do gpus_of "$p"; done | sort | paste -sd,)
[ "$g" = "0,1,2,3" ] || fail "GPUs of s1 s2 s3 late: '$g', want 0,1,2,3 (each once)"
no_double_use
echo "ok: s4 refused after the delay; late took the GPU it gave back: s1-s3 and late hold GPUs $g"
stop_sched
