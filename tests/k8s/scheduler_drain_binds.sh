#!/usr/bin/env bash
# SIGTERM with Bindings in flight: a validating webhook for pods/binding in this test's namespace
# (bind_webhook.py, delay mode) holds every Binding 6 s before allowing it, so the pods the
# scheduler has decided are not bound yet when it is told to stop. Node b1 has 4 GPUs.
#   1. --shutdown-timeout-s 30: b1..b4 (1 GPU each, created in one request, so one cycle decides
#      them all) are decided and their four Bindings are with the webhook; SIGTERM then. The
#      drain waits for the answers: the process exits 0 in under 30 s (the webhook's 6 s less
#      what has passed), all four pods are bound, each with its gpusched.io/assigned-gpus
#      annotation and its own GPU of b1 (four GPUs, four pods: 0,1,2,3 each once), the log has
#      four "bound pod=" lines and "stopping: ... binds=4", and no request is left in flight.
#   2. --shutdown-timeout-s 1: c1..c3 on node b2 (3 GPUs) decided, their Bindings held (6 s);
#      SIGTERM: the process exits 0 within 1 s of drain and a little (under the webhook's 6 s),
#      and logs that 3 requests are still in flight. Once the webhook has answered, every one
#      of c1..c3 is either bound with its annotation or unbound without one: a Binding carries
#      nodeName and the annotation together, so no pod is half-bound. A restarted scheduler
#      then binds those left unbound, and no GPU is handed out twice.
#
# Usage: scheduler_drain_binds.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin bd

held() { grep -c "^recv $ns/$1" "$tmp/webhook.log" || true; } # Binding reviews received
answered() { grep -c "^$ns/$1[0-9]* .* allowed$" "$tmp/webhook.log" || true; }
now_ms() { date +%s%3N; }

# mkpods PREFIX N NODE: N pods of 1 GPU on NODE, in one request.
mkpods() {
    python3 - "$ns" "$run" "$1" "$2" "$3" <<'PY' | kubectl -n "$ns" apply -f - >/dev/null
import json, sys
ns, run, prefix, n, node = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
items = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "%s%d" % (prefix, i)},
          "spec": {"schedulerName": "gs-" + run, "terminationGracePeriodSeconds": 0,
                   "nodeSelector": {"fault": run}, "affinity": aff,
                   "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}],
                   "containers": [{"name": "c", "image": "registry.invalid/none:1",
                                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
         for i in range(1, n + 1)]
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
}

# stop_and_time: SIGTERM the scheduler; sets took (ms) and rc (its exit status).
stop_and_time() {
    local t0
    t0=$(now_ms)
    kill -TERM "$sched_pid"
    rc=0
    wait "$sched_pid" || rc=$?
    took=$(($(now_ms) - t0))
    sched_pid=
}

# bound_or_not POD: "bound" (nodeName and annotation), "unbound" (neither) or "half".
bound_or_not() {
    local node ann
    node=$(jp "$1" '{.spec.nodeName}')
    ann=$(jp "$1" '{.metadata.annotations.gpusched\.io/assigned-gpus}')
    if [ -n "$node" ] && [ -n "$ann" ]; then echo bound; elif [ -z "$node$ann" ]; then echo unbound; else echo half; fi
}

setup_ns
mknode "b1-$run" 4
mknode "b2-$run" 3
start_webhook delay 6

# 1. A drain long enough: every decided pod is bound before the process exits.
start_sched --shutdown-timeout-s 30
mkpods b 4 "b1-$run"
for ((i = 0; i < 150; i++)); do [ "$(held b)" -ge 4 ] && break; sleep 0.1; done
[ "$(held b)" -eq 4 ] || fail "the webhook holds $(held b) Bindings of b1..b4, want 4"
[ "$(answered b)" -eq 0 ] || fail "a Binding was answered before SIGTERM"
stop_and_time
[ "$rc" -eq 0 ] || fail "the scheduler exited $rc after SIGTERM, want 0"
[ "$took" -lt 30000 ] || fail "stopping with --shutdown-timeout-s 30 took $took ms"
for p in b1 b2 b3 b4; do
    [ "$(bound_or_not "$p")" = bound ] || fail "$p is $(bound_or_not "$p") after the drain, want bound"
done
g=$(for p in b1 b2 b3 b4; do gpus_of "$p"; done | sort | paste -sd,)
[ "$g" = "0,1,2,3" ] || fail "GPUs of b1..b4: '$g', want 0,1,2,3 (each once)"
[ "$(grep -c "bound pod=$ns/b" "$log")" -eq 4 ] || fail "$(grep -c "bound pod=$ns/b" "$log") bound lines, want 4"
grep -q "stopping: .* binds=4 bind_failures=0 " "$log" || fail "stopping line: $(grep 'stopping: ' "$log")"
grep -q "still in flight at exit" "$log" && fail "requests left in flight: $(grep 'still in flight' "$log")"
echo "ok: --shutdown-timeout-s 30: SIGTERM with 4 Bindings held; exit 0 after $took ms; b1..b4 bound with GPUs $g"

# 2. A drain too short: exit 0 at once; no pod half-bound; a restart binds the rest.
: >"$log"
start_sched --shutdown-timeout-s 1
mkpods c 3 "b2-$run"
for ((i = 0; i < 150; i++)); do [ "$(held c)" -ge 3 ] && break; sleep 0.1; done
[ "$(held c)" -eq 3 ] || fail "the webhook holds $(held c) Bindings of c1..c3, want 3"
stop_and_time
[ "$rc" -eq 0 ] || fail "the scheduler exited $rc after SIGTERM, want 0"
[ "$took" -lt 5000 ] || fail "stopping with --shutdown-timeout-s 1 took $took ms"
grep -q "3 request(s) (Bindings, Events) still in flight at exit" "$log" ||
    fail "no 'still in flight' line for the 3 Bindings: $(grep 'in flight' "$log" || true)"
# The webhook answers each 6 s after it came; the API server then stores it or, its client
# gone, drops it. Either way each pod is whole.
for ((i = 0; i < 150; i++)); do [ "$(answered c)" -ge 3 ] && break; sleep 0.1; done
sleep 1
states=$(for p in c1 c2 c3; do echo "$p=$(bound_or_not "$p")"; done | paste -sd' ')
[[ "$states" != *half* ]] || fail "a pod is half-bound: $states"
echo "ok: --shutdown-timeout-s 1: exit 0 after $took ms with 3 Bindings in flight; afterwards $states"
stop_webhook
start_sched --shutdown-timeout-s 30
wait_bound 60 c1 c2 c3
for p in c1 c2 c3; do [ "$(bound_or_not "$p")" = bound ] || fail "$p: $(bound_or_not "$p")"; done
no_double_use
stop_sched
echo "ok: restarted, c1..c3 are bound, each GPU once"
