#!/usr/bin/env bash
# The exit drain (--shutdown-timeout-s): a validating webhook registered for Event creates in
# this test's namespace (bind_webhook.py, delay mode) holds each one 8 s before allowing it, so
# the scheduler's Events are still unanswered when it is told to stop. Node d1 has one GPU and
# every pod is there before the scheduler starts: ok (1 GPU, oldest) binds (a Scheduled Event),
# big (1 GPU: it fits the node once empty, so it keeps its place) waits Insufficient
# (FailedScheduling from the cycle), after (1 GPU, youngest) waits behind big (FailedScheduling
# from the walk over pending pods).
#   1. --shutdown-timeout-s 1, SIGTERM once the webhook holds all three Events: the scheduler
#      exits within 1 s of drain and a little (under the webhook's 8 s) and logs
#      "events dropped at exit (unanswered after the 1 s drain): Scheduled=1
#      FailedScheduling=2 Preempted=0", events=0 created, events_dropped=3;
#   2. --shutdown-timeout-s 30, restarted: ok is adopted (no Event), big and after are told
#      again (2 FailedScheduling); SIGTERM once the webhook holds both: the drain waits for their
#      answers, no longer (it exits in under 30 s), and logs Scheduled=0 FailedScheduling=0
#      Preempted=0, events=2 created, events_dropped=0.
#   3. --shutdown-timeout-s takes a whole number of seconds from 0 to 3600, else exits 2.
#
# Usage: scheduler_shutdown_drain.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin drain

held() { grep -c "^recv $ns/" "$tmp/webhook.log" || true; } # Event creates the webhook got
dropped_line() { grep "events dropped at exit" "$log" | tail -n 1 | sed 's/.*events dropped/events dropped/'; }
stopping() { grep "stopping: " "$log" | tail -n 1; }
now_ms() { date +%s%3N; }

setup_ns
mknode "d1-$run" 1
mkpod ok 1
sleep 1.1 # creation times a second apart: the queue's order is by age
mkpod big 1
sleep 1.1
mkpod after 1
# Both event groups: gpusched writes events.k8s.io/v1; the core group is the same objects.
webhook_rules='[{"operations": ["CREATE"], "apiGroups": ["events.k8s.io", ""],
                 "apiVersions": ["v1"], "resources": ["events"], "scope": "Namespaced"}]'
start_webhook delay 8

# 1. A drain of 1 s leaves the three Events unanswered, counted by reason.
start_sched --shutdown-timeout-s 1
wait_bound 30 ok
wait_reason big 'Insufficient nvidia.com/gpu'
wait_reason after 'waiting in its queue'
for ((i = 0; i < 100; i++)); do [ "$(held)" -ge 3 ] && break; sleep 0.1; done
[ "$(held)" -eq 3 ] || fail "the webhook holds $(held) Event creates, want 3 (ok, big, after)"
t0=$(now_ms)
stop_sched
took=$(($(now_ms) - t0))
[ "$took" -lt 5000 ] || fail "stopping with --shutdown-timeout-s 1 took $took ms"
want="events dropped at exit (unanswered after the 1 s drain): Scheduled=1 FailedScheduling=2 Preempted=0"
[ "$(dropped_line)" = "$want" ] || fail "log says '$(dropped_line)', want '$want'"
[[ "$(stopping)" =~ \ events=0\ .*\ events_dropped=3$ ]] || fail "stopping line: $(stopping)"
echo "ok: --shutdown-timeout-s 1: stopped in $took ms; $(dropped_line)"

# 2. A drain of 30 s waits for the answers (the webhook's 8 s), not for the whole 30 s.
start_sched --shutdown-timeout-s 30
for ((i = 0; i < 150; i++)); do [ "$(held)" -ge 5 ] && break; sleep 0.1; done
[ "$(held)" -eq 5 ] || fail "the webhook holds $(held) Event creates in all, want 5 (2 more: big, after)"
names=$(grep "^recv $ns/" "$tmp/webhook.log" | tail -n 2 | sed 's|^recv [^/]*/\([^.]*\)\..*|\1|' | sort | paste -sd' ')
[ "$names" = "after big" ] || fail "the restarted scheduler's Events are about '$names', want after and big"
t0=$(now_ms)
stop_sched
took=$(($(now_ms) - t0))
[ "$took" -lt 30000 ] || fail "stopping with --shutdown-timeout-s 30 took $took ms: the drain did not end with the answers"
want="events dropped at exit (unanswered after the 30 s drain): Scheduled=0 FailedScheduling=0 Preempted=0"
[ "$(dropped_line)" = "$want" ] || fail "log says '$(dropped_line)', want '$want'"
[[ "$(stopping)" =~ \ events=2\ .*\ events_dropped=0$ ]] || fail "stopping line: $(stopping)"
echo "ok: --shutdown-timeout-s 30: stopped in $took ms, once the held Events were answered; $(dropped_line)"

# 3. Bad values.
for v in -1 3601 1.5 x ""; do
    rc=0
    "$bin" scheduler --kubeconfig "$KUBECONFIG" --shutdown-timeout-s "$v" >/dev/null 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 2 ] || fail "--shutdown-timeout-s '$v' exited $rc, want 2"
    grep -q "^gpusched scheduler: --shutdown-timeout-s must be a whole number of seconds from 0 to 3600, not '$v'$" "$tmp/err" ||
        fail "--shutdown-timeout-s '$v': $(cat "$tmp/err")"
done
echo "ok: --shutdown-timeout-s refuses -1, 3601, 1.5, x and '' (exit 2)"
