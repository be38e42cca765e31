#!/usr/bin/env bash
# Fault: a bind that always fails. A validating webhook for pods/binding (bind_webhook.py, reject
# mode) refuses every Binding of the pod `bad`; node f1 has one GPU.
#   1. bad (older, so first in its queue) is placed on f1's GPU 0 and refused; it gives the GPU
#      back at once and backs off: `good`, created after it, binds to f1 GPU 0;
#   2. bad says why (PodScheduled=False reason SchedulerError and a FailedScheduling Event with
#      the webhook's message);
#   3. once good is deleted, bad is placed again and refused again, further apart each time
#      (backoff 1 s doubling to 10 s, each refusal followed by the next step), never retried
#      without a backoff;
#   4. between its tries it holds nothing: good2, created then, binds to f1 GPU 0.
# bad is never bound and no GPU is handed out twice.
#
# Usage: scheduler_fault_rejected.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin fj

tries() { grep -c "^$ns/bad f1-$run .* denied" "$tmp/webhook.log" || true; }

setup_ns
mknode "f1-$run" 1
start_webhook reject bad
start_sched

# 1. bad first; good after its first refusal.
mkpod bad 1
for ((i = 0; i < 100; i++)); do [ "$(tries)" -ge 1 ] && break; sleep 0.1; done
[ "$(tries)" -ge 1 ] || fail "bad's Binding never reached the webhook"
mkpod good 1
wait_node good "f1-$run" 10
[ "$(gpus_of good)" = 0 ] || fail "good got '$(gpus_of good)', want GPU 0"
echo "ok: bad refused; good -> f1-$run GPU 0 behind it"

# 2. bad's reason, as the scheduler wrote it while bad backed off (a later cycle that finds no
#    room replaces it by Unschedulable; the Event stays).
notes=""
for ((i = 0; i < 50; i++)); do
    notes=$(kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    if e.get("regarding", {}).get("name") == "bad" and e.get("reason") == "FailedScheduling":
        print(e.get("note", ""))')
    grep -q "rejected by the test webhook" <<<"$notes" && break
    sleep 0.2
done
msg=$(grep -m1 "rejected by the test webhook" <<<"$notes" || true)
[[ "$msg" =~ ^binding\ to\ node\ f1-$run\ failed:\ HTTP\ 403.*rejected\ by\ the\ test\ webhook.*retrying\ in\ [0-9]+\ ms$ ]] ||
    fail "no FailedScheduling Event on bad with the webhook's refusal (notes: '$notes')"
grep -q "status of pod=$ns/bad not written" "$log" && fail "bad's SchedulerError status was not written"
echo "ok: bad: FailedScheduling: $msg"

# 3. The GPU free again: bad is retried, with a backoff that doubles from 1 s to its 10 s cap.
#    Checked by what the scheduler did, not by a wall-clock window (a loaded machine stretches
#    every wait): two more refused tries within 60 s, each refusal followed by the next backoff
#    of the sequence, and never more tries than refusals logged (no retry without a backoff).
kubectl -n "$ns" delete pod good --grace-period=0 --force >/dev/null 2>&1
t0=$(tries)
for ((i = 0; i < 600; i++)); do [ "$(tries)" -ge $((t0 + 2)) ] && break; sleep 0.1; done
n=$(($(tries) - t0))
[ "$n" -ge 2 ] || fail "bad was tried $n times in 60 s with the GPU free, want 2 or more"
sleep 1 # the scheduler logs its backoff after the webhook's answer
gaps=$(grep "backs off" "$log" | grep "pod=$ns/bad" | sed 's/.*backs off \([0-9]*\) ms.*/\1/' | paste -sd' ')
want="" b=1000
for ((k = 0; k < $(wc -w <<<"$gaps"); k++)); do
    want="$want${want:+ }$b"
    b=$((b * 2 > 10000 ? 10000 : b * 2))
done
[ "$gaps" = "$want" ] || fail "bad's backoffs (ms) are '$gaps', want '$want' (doubling from 1 s to 10 s)"
total=$(tries) # read after the backoffs: one more refusal may be in flight, not more
[ "$total" -le $(($(wc -w <<<"$gaps") + 1)) ] || fail "bad was tried $total times but backed off only $(wc -w <<<"$gaps") times"
echo "ok: bad tried $n more times with the GPU free; its backoffs (ms): $gaps"

# 4. Between tries it holds nothing.
mkpod good2 1
wait_node good2 "f1-$run" 15
[ "$(gpus_of good2)" = 0 ] || fail "good2 got '$(gpus_of good2)', want GPU 0"
[ -z "$(jp bad '{.spec.nodeName}')" ] || fail "bad was bound"
no_double_use
echo "ok: good2 -> f1-$run GPU 0 while bad backs off; bad never bound"
stop_sched
