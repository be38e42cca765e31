#!/usr/bin/env bash
# Fault: a Binding answered 409 Conflict because another binder bound the pod first. The pod
# `race` fits c1 (1 GPU, the best fit) and c2 (2 GPUs). A validating webhook for pods/binding
# (bind_webhook.py, race mode) holds gpusched's Binding of race, binds race to c2 itself first
# through the API server, then lets gpusched's through, which the API server answers 409:
#   1. race stays where the other binder put it (c2), without gpusched's GPU annotation;
#   2. gpusched logs the refusal, reads race again and does not try to bind it again (one
#      Binding of race from gpusched reached the webhook);
#   3. what gpusched held for race on c1 was released at once: the next pod gets c1's GPU 0;
#   4. race counts on c2 (adopted with GPUs unknown: the lowest free one, GPU 0), so of two more
#      1-GPU pods one gets c2's GPU 1 and the other waits: Insufficient nvidia.com/gpu.
#
# Usage: scheduler_fault_conflict.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin fc

setup_ns
mknode "c1-$run" 1
mknode "c2-$run" 2
start_webhook race race "c2-$run"
start_sched

mkpod race 1
wait_node race "c2-$run"
for ((i = 0; i < 50; i++)); do
    grep -q "bind refused pod=$ns/race node=c1-$run: HTTP 409" "$log" && break
    sleep 0.2
done
grep -q "bind refused pod=$ns/race node=c1-$run: HTTP 409" "$log" || fail "no 409 for race's bind to c1"
[ -z "$(gpus_of race)" ] || fail "race has gpusched's assignment '$(gpus_of race)' though another binder bound it"
[ "$(jp race '{.metadata.annotations.gpusched\.test/bound-by}')" = webhook ] || fail "race was not bound by the other binder"
echo "ok: race bound to c2-$run by the other binder; gpusched's bind to c1-$run answered 409"

mkpod next1 1 "$(on_node "c1-$run")"
wait_node next1 "c1-$run"
[ "$(gpus_of next1)" = 0 ] || fail "next1 got GPUs '$(gpus_of next1)' on c1, want 0"
echo "ok: what race held on c1 was released at once: next1 -> c1-$run GPU 0"

mkpod next2 1 "$(on_node "c2-$run")"
wait_node next2 "c2-$run"
[ "$(gpus_of next2)" = 1 ] || fail "next2 got GPUs '$(gpus_of next2)' on c2, want 1 (race counts on GPU 0)"
mkpod next3 1 "$(on_node "c2-$run")"
wait_reason next3 'Insufficient nvidia.com/gpu'
echo "ok: race counts on c2: next2 -> c2-$run GPU 1, next3 waits (Insufficient nvidia.com/gpu)"

sleep 2
tries=$(grep -c "^$ns/race c1-$run " "$tmp/webhook.log" || true)
[ "$tries" = 1 ] || fail "gpusched sent $tries Bindings of race, want 1"
no_double_use
echo "ok: one Binding of race from gpusched; no GPU handed out twice"
stop_sched
