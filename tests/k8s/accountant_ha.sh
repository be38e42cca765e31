#!/usr/bin/env bash
# `gpusched accountant` beside two scheduler replicas with leader election, none of them with
# --accounting, on a real API server (a control plane of this test's own):
#   1. replicas A and B elect a leader; the accountant writes the store; nodes a1 (4 GPUs) and
#      b1 (2 GPUs); p1 and p2 (1 GPU each) bind on b1, vic (4 GPUs, PriorityClass low) on a1;
#   2. high (1 GPU on a1, PriorityClass high) preempts vic: the leader marks vic
#      (gpusched.io/evicted) and evicts it; the accountant ends vic's interval
#      evicted-preemption with evicted_by high's uid, at the leader's decision time;
#   3. the accountant stops (SIGTERM); meanwhile p1 is marked Succeeded (its container finished
#      at a second of the test's choosing) and p3 (1 GPU) is bound by the leader; the accountant
#      starts again on the same file: p1's interval closes at its finishedAt ("finished"), p3's
#      opens at its bind as the API server shows it (PodScheduled's lastTransitionTime), high's
#      and p2's are kept (one interval each);
#   4. SIGKILL of the leader: the standby takes the Lease and binds p4; p2 is deleted;
#   5. the store holds exactly one interval per pod with the GPUs charged, reasons and times
#      inside the test's clock readings, no interval open but high, p3 and p4's, and `gpusched
#      report usage --format json` charges team vision the GPU-hours those times give; the
#      accountant's /metrics charges queue default 3 GPUs at the end (high, p3, p4), its
#      /readyz is 200, it never bound, evicted or took the Lease.
#
# Usage: accountant_ha.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_begin accth
db=$tmp/usage.db
log=$tmp/acct.log # fail() shows the accountant's log
declare -A pid
acct_pid=

private_test_extra_cleanup() {
    local r
    for r in "${!pid[@]}"; do kill -KILL "${pid[$r]}" 2>/dev/null || true; done
    [ -n "$acct_pid" ] && kill -KILL "$acct_pid" 2>/dev/null || true
    wait 2>/dev/null || true
}

now_ms() { date +%s%3N; }
pclass() {
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "$1-$run"}, "value": $2}
JSON
}
sql() { python3 -c 'import sqlite3,sys
c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro",uri=True)
for r in c.execute(sys.argv[2]): print("|".join("" if v is None else str(v) for v in r))' "$db" "$1"; }
wait_sql() { # wait_sql QUERY WANT [TIMEOUT_S]
    local i got=""
    for ((i = 0; i < ${3:-10} * 5; i++)); do
        got=$(sql "$1" 2>/dev/null || true)
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "'$1' gives '$got', want '$2'"
}
reason_of() { echo "SELECT coalesce(end_reason, 'open') FROM allocation WHERE name = '$1'"; }
pc() { printf ', "priorityClassName": "%s-%s"' "$1" "$run"; }

start_replica() { # start_replica NAME
    "$bin" scheduler --kubeconfig "$KUBECONFIG" --scheduler-name "gs-$run" --policy bestfit \
        --qps 500 --burst 1000 --max-runtime-s 280 --lease-namespace "$ns" \
        --lease-name "gpusched-$run" >>"$tmp/$1.log" 2>&1 &
    pid[$1]=$!
}
start_acct() {
    "$bin" accountant --kubeconfig "$KUBECONFIG" --scheduler-name "gs-$run" --qps 500 \
        --burst 1000 --max-runtime-s 280 --metrics-addr 127.0.0.1:0 --accounting "$db" \
        >>"$log" 2>&1 &
    acct_pid=$!
}
stop_acct() {
    kill -TERM "$acct_pid" 2>/dev/null || true
    wait "$acct_pid" 2>/dev/null || true
    acct_pid=
}
leader_of() { # the replicas whose log says they acquired the Lease
    local r
    for r in "$@"; do grep -q "leader: acquired" "$tmp/$r.log" 2>/dev/null && echo "$r"; done
    return 0
}

setup_ns
kubectl label namespace "$ns" gpusched.io/team=vision >/dev/null
pclass low 10
pclass high 1000
mknode "a1-$run" 4
mknode "b1-$run" 2

# 1. Two replicas, one leader; the accountant; three pods bound.
start_replica A
start_replica B
start_acct
for ((i = 0; i < 100; i++)); do
    [ -n "$(leader_of A B)" ] && break
    sleep 0.2
done
[ "$(leader_of A B | wc -l)" = 1 ] || fail "leaders: '$(leader_of A B | tr '\n' ' ')', want one"
lead=$(leader_of A B)
standby=$([ "$lead" = A ] && echo B || echo A)
echo "ok: replica $lead leads, $standby stands by, the accountant runs beside them"
t_bind0=$(now_ms)
mkpod p1 1 "$(pc low)$(on_node "b1-$run")"
mkpod p2 1 "$(pc low)$(on_node "b1-$run")"
mkpod vic 4 "$(pc low)$(on_node "a1-$run")"
wait_bound 30 p1 p2 vic
t_bind1=$(now_ms)
wait_sql "SELECT count(*) FROM allocation WHERE end_ms IS NULL" 3 15
echo "ok: p1, p2, vic bound by the leader and open in the accountant's store"

# 2. A preemption.
t_pre0=$(now_ms)
mkpod high 1 "$(pc high)$(on_node "a1-$run")"
wait_sql "$(reason_of vic)" evicted-preemption 30
t_pre1=$(now_ms)
wait_bound 30 high
t_high1=$(now_ms)
wait_sql "$(reason_of high)" open 15
echo "ok: vic's interval ended evicted-preemption; high bound and open"

# 3. The accountant restarts; p1 finishes and p3 binds while it is down.
stop_acct
t_stop=$(now_ms)
t_p1=$((t_stop / 1000 * 1000))
p1_at=$(date -u -d "@$((t_p1 / 1000))" +%Y-%m-%dT%H:%M:%SZ)
kubectl -n "$ns" patch pod p1 --subresource=status --type=merge -p '{"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "registry.invalid/none:1", "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "'"$p1_at"'"}}}]}}' >/dev/null
t_p3a=$(now_ms)
mkpod p3 1 "$(pc low)$(on_node "a1-$run")"
wait_bound 30 p3
t_p3b=$(now_ms)
p3_sched=$(jp p3 '{.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime}')
[ -n "$p3_sched" ] || fail "p3 has no PodScheduled lastTransitionTime"
start_acct
wait_sql "$(reason_of p1)" finished 30
wait_sql "$(reason_of p3)" open 30
echo "ok: after the accountant's restart p1 closed 'finished' at $p1_at; p3 (bound at $p3_sched while it was down) open"

# 4. SIGKILL of the leader: the standby takes over and binds p4; p2 is deleted.
kill -KILL "${pid[$lead]}"
wait "${pid[$lead]}" 2>/dev/null || true
unset "pid[$lead]"
t_kill=$(now_ms)
mkpod p4 1 "$(pc low)$(on_node "a1-$run")"
wait_bound 45 p4
t_p4b=$(now_ms)
grep -q "leader: acquired" "$tmp/$standby.log" || fail "the standby $standby never led"
grep -q "bound pod=$ns/p4" "$tmp/$standby.log" || fail "p4 was not bound by the new leader"
wait_sql "$(reason_of p4)" open 15
echo "ok: leader $lead killed; $standby took over and bound p4 in $(((t_p4b - t_kill) / 1000)) s; p4 open"
t_del0=$(now_ms)
kubectl -n "$ns" delete pod p2 --grace-period=0 --force >/dev/null 2>&1
wait_sql "$(reason_of p2)" deleted 15
t_del1=$(now_ms)

# The accountant's /metrics and /readyz: high, p3 and p4 charged now.
for ((i = 0; i < 50; i++)); do
    [ "$(metric 'gpusched_usage_charged_gpus{queue="default"}')" = 3 ] && break
    sleep 0.2
done
[ "$(metric 'gpusched_usage_charged_gpus{queue="default"}')" = 3 ] ||
    fail "accountant /metrics: charged GPUs '$(metric 'gpusched_usage_charged_gpus{queue="default"}')', want 3"
[ "$(metric gpusched_leader)" = 0 ] || fail "accountant /metrics: gpusched_leader is not 0"
port=$(sed -n 's/.*serving \/healthz \/readyz \/metrics on .* (port \([0-9]*\)).*/\1/p' "$log" | tail -n 1)
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] ||
    fail "accountant /readyz is not 200"
echo "ok: accountant /metrics charges queue default 3 GPUs, gpusched_leader 0, /readyz 200"
stop_acct
t_end=$(now_ms)
for r in "${!pid[@]}"; do kill -TERM "${pid[$r]}" 2>/dev/null || true; done
wait 2>/dev/null || true
pid=()
grep -q "accounting: opened=4 closed=1 kept=0 recovered=0 recovered_finished=0" "$log" ||
    fail "the accountant's first run: $(grep 'accounting: opened' "$log" | head -n 1)"
grep -q "accounting: opened=2 closed=1 kept=2 recovered=0 recovered_finished=1" "$log" ||
    fail "the accountant's second run: $(grep 'accounting: opened' "$log" | tail -n 1)"
! grep -qE "bound pod=|evicted pod=|leader:|Sanitizer" "$log" ||
    fail "the accountant bound, evicted, led or crashed"
! grep -q "accounting:" "$tmp/A.log" "$tmp/B.log" || fail "a scheduler replica recorded"
holder=$(kubectl -n "$ns" get lease "gpusched-$run" -o 'jsonpath={.spec.holderIdentity}')
grep -q "identity=$holder" "$tmp/$standby.log" || fail "Lease holder '$holder' is not $standby"
echo "ok: accountant runs: opened 4, closed 1; then kept 2, closed p1 at its finish, opened 2, closed 1"

# 5. The store and the report against the test's clock.
"$bin" report usage --db "$db" --format json --out "$tmp/team.json" 2>"$tmp/report.err" ||
    { cat "$tmp/report.err" >&2; fail "report usage"; }
python3 - "$db" "$tmp/team.json" "$run" "$t_bind0" "$t_bind1" "$t_pre0" "$t_pre1" "$t_high1" \
    "$t_p1" "$t_p3a" "$t_p3b" "$t_kill" "$t_p4b" "$t_del0" "$t_del1" "$t_end" <<'PY' ||
import json, sqlite3, sys
db, team_json, run = sys.argv[1:4]
(bind0, bind1, pre0, pre1, high1, p1_at, p3a, p3b, kill, p4b, del0, del1, end) = map(
    int, sys.argv[4:17])
sec = lambda ms: ms // 1000 * 1000  # the API server's times are whole seconds
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
rows = {}
for name, n, start, e, why, by, team, node, uid, charged in con.execute(
        "SELECT name, count(*), min(start_ms), max(end_ms), max(end_reason), max(evicted_by),"
        " max(team), max(node), max(pod_uid), sum(gpus_charged) FROM allocation GROUP BY name"):
    rows[name] = dict(n=n, start=start, end=e, why=why, by=by, team=team, node=node, uid=uid,
                      charged=charged)
hb = con.execute("SELECT t_ms FROM heartbeat").fetchone()[0]
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)
check(sorted(rows) == ["high", "p1", "p2", "p3", "p4", "vic"], f"pods {sorted(rows)}")
gpus = {"p1": 1, "p2": 1, "vic": 4, "high": 1, "p3": 1, "p4": 1}
nodes = {"p1": "b1", "p2": "b1", "vic": "a1", "high": "a1", "p3": "a1", "p4": "a1"}
for name, r in rows.items():
    check(r["n"] == 1, f"{name}: {r['n']} intervals, want 1")
    check(r["team"] == "vision", f"{name}: team {r['team']}")
    check(r["node"] == f"{nodes[name]}-{run}", f"{name}: node {r['node']}")
    check(r["charged"] == gpus[name], f"{name}: {r['charged']} GPUs charged, want {gpus[name]}")
    g = con.execute("SELECT count(*), sum(gpu_milli), count(DISTINCT gpu_index) FROM"
                    " allocation_gpu JOIN allocation ON allocation_id = id WHERE name = ?",
                    (name,)).fetchone()
    check(g == (gpus[name], 1000 * gpus[name], gpus[name]), f"{name}: GPU rows {g}")
# Starts: each bind as the API server shows it (whole seconds), inside the test's windows.
starts = {"p1": (bind0, bind1), "p2": (bind0, bind1), "vic": (bind0, bind1),
          "high": (pre0, high1), "p3": (p3a, p3b), "p4": (kill, p4b)}
for name, (lo, hi) in starts.items():
    s = rows[name]["start"]
    check(sec(lo) <= s <= hi, f"{name}: start {s} outside [{sec(lo)}, {hi}]")
want = {"p1": ("finished", p1_at, p1_at), "p2": ("deleted", del0, del1),
        "vic": ("evicted-preemption", pre0, pre1), "high": (None, None, None),
        "p3": (None, None, None), "p4": (None, None, None)}
for name, (why, lo, hi) in want.items():
    r = rows[name]
    check(r["why"] == why, f"{name}: end reason {r['why']}, want {why}")
    if lo is not None:
        check(r["end"] is not None and lo - 5 <= r["end"] <= hi + 5,
              f"{name}: end {r['end']} outside [{lo}, {hi}]")
check(rows["vic"]["by"] == rows["high"]["uid"],
      f"vic: evicted by {rows['vic']['by']}, want high's uid {rows['high']['uid']}")
open_ = sorted(n for n, r in rows.items() if r["end"] is None)
check(open_ == ["high", "p3", "p4"], f"open intervals {open_}")
exact = sum(gpus[k] * ((r["end"] if r["end"] is not None else hb) - r["start"]) / 3.6e6
            for k, r in rows.items())
# From the test's clock alone: every interval between its windows (open ones to the
# accountant's last heartbeat, at most the end).
lo = (1 * (p1_at - bind1) + 1 * (del0 - bind1) + 4 * (pre0 - bind1)
      + 1 * (end - 2000 - high1) + 1 * (end - 2000 - p3b) + 1 * (end - 2000 - p4b)) / 3.6e6
hi = (1 * (p1_at - sec(bind0)) + 1 * (del1 - sec(bind0)) + 4 * (pre1 - sec(bind0))
      + 1 * (end - sec(pre0)) + 1 * (end - sec(p3a)) + 1 * (end - sec(kill))) / 3.6e6
t = json.load(open(team_json))
got = {g["key"]: g["charged_gpu_hours"] for g in t["groups"]}
check(abs(got.get("vision", -1) - exact) < 1e-9, f"vision charged {got.get('vision')}, want {exact}")
check(lo - 1e-6 <= exact <= hi + 1e-6, f"{exact} GPU-h outside [{lo}, {hi}] from the test's clock")
check(abs(sum(got.values()) + t["idle_gpu_hours"] - t["capacity_gpu_hours"]) < 1e-6,
      "charged + idle != capacity")
caused = {g["key"]: (g["preemptions_caused"], g["preemptions_suffered"]) for g in t["groups"]}
check(caused == {"vision": (1, 1)}, f"caused/suffered {caused}, want vision (1, 1)")
for f in fails:
    print("FAIL:", f, file=sys.stderr)
print(f"ok: 6 intervals, one per pod; vic evicted-preemption by high's uid; vision charged "
      f"{exact:.6f} GPU-h (from the test's clock: {lo:.6f}..{hi:.6f}); capacity "
      f"{t['capacity_gpu_hours']:.6f}")
sys.exit(1 if fails else 0)
PY
    fail "the store or the report disagree with the test's timestamps"
