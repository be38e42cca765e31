#!/usr/bin/env bash
# `gpusched scheduler --accounting FILE` on a real API server (a control plane of this test's
# own: the scheduler is restarted in the middle):
#   1. four 1-GPU pods (fin, del, gone, done) bind on a 4-GPU node, in a namespace labelled
#      gpusched.io/team=vision;
#   2. the scheduler stops (SIGTERM); gone is deleted and done marked Succeeded (its container
#      finished at a time of the test's choosing) while none runs; it starts again on the same
#      file: fin and del were adopted and keep their one interval, gone's is closed at the last
#      commit before the stop with reason "recovered", done's at its container's finishedAt
#      with reason "finished";
#   3. fin is marked Succeeded (as a kubelet would), del is deleted, then vic takes all 4 GPUs
#      and high (a higher PriorityClass) preempts it;
#   on the way, /metrics' live gpusched_usage_charged_gpus{queue} and ..._gpu_seconds_total
#   against the pods bound and the test's clock;
#   4. the database has one interval per pod with end reasons finished (twice), deleted,
#      recovered, evicted-preemption (by high's uid) and open, times inside the test's own clock readings around
#      each step, and `gpusched report usage --format json` charges team vision the GPU-hours
#      worked out here from those timestamps (1 GPU x duration, 4 GPUs x duration).
#
# Usage: scheduler_accounting.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_begin acct
db=$tmp/usage.db

now_ms() { date +%s%3N; }
pclass() {
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "$1-$run"}, "value": $2}
JSON
}
# sql QUERY: one value (or row, |-separated) from the database, read-only.
sql() { python3 -c 'import sqlite3,sys
c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro",uri=True)
for r in c.execute(sys.argv[2]): print("|".join("" if v is None else str(v) for v in r))' "$db" "$1"; }
# wait_sql QUERY WANT [TIMEOUT_S]: until the query prints WANT.
wait_sql() {
    local i got=""
    for ((i = 0; i < ${3:-10} * 5; i++)); do
        got=$(sql "$1" 2>/dev/null || true)
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "'$1' gives '$got', want '$2'"
}
# wait_metric SERIES WANT [TIMEOUT_S]: until the scheduler's /metrics shows SERIES at WANT.
wait_metric() {
    local i got=""
    for ((i = 0; i < ${3:-10} * 5; i++)); do
        got=$(metric "$1" 2>/dev/null || true)
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "/metrics: $1 is '$got', want '$2'"
}
reason_of() { echo "SELECT coalesce(end_reason, 'open') FROM allocation WHERE name = '$1'"; }

setup_ns
kubectl label namespace "$ns" gpusched.io/team=vision >/dev/null
pclass low 10
pclass high 1000
mknode "a1-$run" 4
pc() { printf ', "priorityClassName": "%s-%s"' "$1" "$run"; }

# 1. Four pods bound.
start_sched --accounting "$db"
t_bind0=$(now_ms)
for p in fin del gone done; do mkpod "$p" 1 "$(pc low)"; done
wait_bound 30 fin del gone done
t_bind1=$(now_ms)
wait_sql "SELECT count(*) FROM allocation WHERE end_ms IS NULL" 4
echo "ok: fin, del, gone, done bound and open in the database"
# The live series on /metrics (published once a second): 4 GPUs charged now on queue default,
# and GPU-seconds above 0 and at most 4 GPUs x the time since the first bind.
wait_metric 'gpusched_usage_charged_gpus{queue="default"}' 4 10
sleep 2 # two more publications, each with time accrued since the binds
gs1=$(metric 'gpusched_usage_charged_gpu_seconds_total{queue="default"}')
t_gs1=$(now_ms)
python3 -c 'import sys; v, lim = float(sys.argv[1]), 4 * (int(sys.argv[3]) - int(sys.argv[2])) / 1000
sys.exit(0 if 0 < v <= lim + 1e-6 else 1)' "$gs1" "$t_bind0" "$t_gs1" ||
    fail "charged GPU-seconds $gs1 outside (0, 4 x $(( (t_gs1 - t_bind0) / 1000 )) s]"
echo "ok: /metrics charges queue default 4 GPUs now, $gs1 GPU-seconds so far"

# 2. A restart, with gone deleted and done finished while no scheduler runs. done's container
#    finished at the last whole second before the stop (the API server keeps seconds).
stop_sched
t_stop=$(now_ms)
grep -q "accounting: opened=4 closed=0" "$log" || fail "first run's accounting line"
kubectl -n "$ns" delete pod gone --grace-period=0 --force >/dev/null 2>&1
t_done=$((t_stop / 1000 * 1000))
done_at=$(date -u -d "@$((t_done / 1000))" +%Y-%m-%dT%H:%M:%SZ)
kubectl -n "$ns" patch pod done --subresource=status --type=merge -p '{"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": false, "restartCount": 0, "image": "registry.invalid/none:1", "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "'"$done_at"'"}}}]}}' >/dev/null
t_start2=$(now_ms)
start_sched --accounting "$db"
wait_sql "$(reason_of gone)" recovered 30
wait_sql "$(reason_of done)" finished 30
echo "ok: after the restart gone's interval is closed 'recovered', done's 'finished' at $done_at; fin and del stay open"

# 3. Finished, deleted, preempted.
t_fin0=$(now_ms)
kubectl -n "$ns" patch pod fin --subresource=status --type=merge -p '{"status": {"phase": "Succeeded"}}' >/dev/null
wait_sql "$(reason_of fin)" finished
t_fin1=$(now_ms)
t_del0=$(now_ms)
kubectl -n "$ns" delete pod del --grace-period=0 --force >/dev/null 2>&1
wait_sql "$(reason_of del)" deleted
t_del1=$(now_ms)
t_vic0=$(now_ms)
mkpod vic 4 "$(pc low)"
wait_bound 30 vic
t_vic1=$(now_ms)
t_pre0=$(now_ms)
mkpod high 1 "$(pc high)"
wait_sql "$(reason_of vic)" evicted-preemption 30
t_pre1=$(now_ms)
wait_bound 30 high
# Live: only high's 1 GPU is charged now; the counter (this process's, since its start) grew
# by at least vic's 4 GPUs over the time it was seen bound, and by at most 4 GPUs (never more
# held at once: fin and del ended before vic came) x the time since this run started.
wait_metric 'gpusched_usage_charged_gpus{queue="default"}' 1 10
gs2=$(metric 'gpusched_usage_charged_gpu_seconds_total{queue="default"}')
t_gs2=$(now_ms)
python3 -c 'import sys; v, a, b, s, e = float(sys.argv[1]), *map(int, sys.argv[2:])
sys.exit(0 if 4 * (b - a) / 1000 - 1e-6 <= v <= 4 * (e - s) / 1000 + 1e-6 else 1)' \
    "$gs2" "$t_vic1" "$t_pre0" "$t_start2" "$t_gs2" ||
    fail "charged GPU-seconds $gs2 outside [4 x $(( (t_pre0 - t_vic1) / 1000 )) s, 4 x $(( (t_gs2 - t_start2) / 1000 )) s]"
echo "ok: /metrics charges queue default 1 GPU after the preemption, $gs2 GPU-seconds in this run"
stop_sched
t_end=$(now_ms)
! grep -q "Sanitizer" "$log" || fail "a sanitizer report in the scheduler's log"
grep -q "accounting: opened=2 closed=3 kept=2 recovered=1 recovered_finished=1" "$log" ||
    fail "second run's accounting line: $(grep 'accounting: opened' "$log" | tail -n 1)"
echo "ok: fin finished, del deleted, vic preempted by high; second run kept 2, recovered 1, closed 1 at its finish time"

# A file that is not a database: the scheduler says so, naming it, and exits 2 (no crash).
printf 'not a database, just text\n%.0s' $(seq 1 200) >"$tmp/bad.db"
rc=0
"$bin" scheduler --kubeconfig "$KUBECONFIG" --scheduler-name "gs-$run" --leader-elect=false \
    --max-runtime-s 30 --accounting "$tmp/bad.db" >"$tmp/bad.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$tmp/bad.log" >&2; fail "a foreign --accounting file: exit $rc, want 2"; }
grep -q "error --accounting: $tmp/bad.db: " "$tmp/bad.log" ||
    { cat "$tmp/bad.log" >&2; fail "the message does not name the file"; }
echo "ok: a file that is not a database: exit 2, $(grep -o 'error --accounting: .*' "$tmp/bad.log" | sed "s|$tmp/||")"

# 4. The database and the report against the timestamps taken here.
"$bin" report usage --db "$db" --format json --out "$tmp/team.json" 2>"$tmp/report.err" ||
    { cat "$tmp/report.err" >&2; fail "report usage"; }
"$bin" report usage --db "$db" --by priorityclass --format json --out "$tmp/pc.json" 2>"$tmp/report.err" ||
    { cat "$tmp/report.err" >&2; fail "report usage --by priorityclass"; }
python3 - "$db" "$tmp/team.json" "$tmp/pc.json" "$ns" "$run" "$t_bind0" "$t_bind1" "$t_stop" \
    "$t_fin0" "$t_fin1" "$t_del0" "$t_del1" "$t_vic0" "$t_vic1" "$t_pre0" "$t_pre1" "$t_end" "$t_done" <<'PY' ||
import json, sqlite3, sys
db, team_json, pc_json, ns, run = sys.argv[1:6]
(bind0, bind1, stop, fin0, fin1, del0, del1, vic0, vic1, pre0, pre1, end, done_at) = map(
    int, sys.argv[6:19])
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
rows = {}
for name, n, start, e, why, by, team, pc, node, queue, uid in con.execute(
        "SELECT name, count(*), min(start_ms), max(end_ms), max(end_reason), max(evicted_by),"
        " max(team), max(priority_class), max(node), max(queue), max(pod_uid)"
        " FROM allocation GROUP BY name"):
    rows[name] = dict(n=n, start=start, end=e, why=why, by=by, team=team, pc=pc, node=node,
                      queue=queue, uid=uid)
hb = con.execute("SELECT t_ms FROM heartbeat").fetchone()[0]
fails = []
def check(ok, what):
    if not ok:
        fails.append(what)
check(sorted(rows) == ["del", "done", "fin", "gone", "high", "vic"], f"pods {sorted(rows)}")
for name, r in rows.items():
    check(r["n"] == 1, f"{name}: {r['n']} intervals, want 1 (the restart must not open another)")
    check(r["team"] == "vision", f"{name}: team {r['team']}, want vision (namespace label)")
    check(r["node"] == f"a1-{run}", f"{name}: node {r['node']}")
    check(r["queue"] == "default", f"{name}: queue {r['queue']}")
    check(len(r["uid"]) == 36, f"{name}: pod uid {r['uid']}")
want = {"fin": ("finished", fin0, fin1), "del": ("deleted", del0, del1),
        "gone": ("recovered", bind1, stop), "vic": ("evicted-preemption", pre0, pre1),
        # At its container's finishedAt, never before its start.
        "done": ("finished", max(done_at, rows.get("done", {}).get("start", 0)),
                 max(done_at, rows.get("done", {}).get("start", 0))),
        "high": (None, None, None)}
for name, (why, lo, hi) in want.items():
    r = rows.get(name, {})
    check(r.get("why") == why, f"{name}: end reason {r.get('why')}, want {why}")
    if lo is not None and r.get("end") is not None:
        check(lo - 5 <= r["end"] <= hi + 5, f"{name}: end {r['end']} outside [{lo}, {hi}]")
for name in ("fin", "del", "gone", "done"):
    s = rows[name]["start"]
    check(bind0 - 5 <= s <= bind1 + 5, f"{name}: start {s} outside [{bind0}, {bind1}]")
check(vic0 - 5 <= rows["vic"]["start"] <= vic1 + 5, "vic: start outside its window")
check(pre0 - 5 <= rows["high"]["start"] <= end + 5, "high: start outside its window")
# The preemptor by its uid, as the report matches evicted_by against pod_uid.
check(rows["vic"]["by"] == rows["high"]["uid"], f"vic: evicted by {rows['vic']['by']}")
check(rows["vic"]["pc"] == f"low-{run}" and rows["high"]["pc"] == f"high-{run}",
      "PriorityClass names")
gpus = {"fin": 1, "del": 1, "gone": 1, "done": 1, "vic": 4, "high": 1}
for name, n in gpus.items():
    g = con.execute("SELECT count(*), sum(gpu_milli), sum(charged) FROM allocation_gpu JOIN"
                    " allocation ON allocation_id = id WHERE name = ?", (name,)).fetchone()
    check(g == (n, 1000 * n, float(n)), f"{name}: GPU rows {g}, want {n} whole GPUs")
# GPU-hours by hand: whole GPUs x (end, or the last heartbeat for high, minus start).
exact = sum(gpus[k] * ((r["end"] if r["end"] is not None else hb) - r["start"]) / 3.6e6
            for k, r in rows.items())
# The same from the test's own clock readings only: each interval lies between its windows.
lo = (1 * (fin0 - bind1) + 1 * (del0 - bind1) + 1 * (bind1 - bind1) + 4 * (pre0 - vic1)
      + 1 * 0 + 1 * max(0, done_at - bind1)) / 3.6e6
hi = (1 * (fin1 - bind0) + 1 * (del1 - bind0) + 1 * (stop - bind0) + 4 * (pre1 - vic0)
      + 1 * (end - pre0) + 1 * max(0, done_at - bind0)) / 3.6e6
t = json.load(open(team_json))
got = {g["key"]: g["charged_gpu_hours"] for g in t["groups"]}
check(abs(got.get("vision", -1) - exact) < 1e-9, f"vision charged {got.get('vision')}, want {exact}")
check(lo - 1e-6 <= exact <= hi + 1e-6, f"{exact} GPU-h outside [{lo}, {hi}] from the test's clock")
check(abs(sum(got.values()) + t["idle_gpu_hours"] - t["capacity_gpu_hours"]) < 1e-6,
      "charged + idle != capacity")
check(t["capacity_gpu_hours"] > 0, "no capacity recorded")
# high (team vision) caused vic's eviction: counted in vision's row, no "-" row for it.
caused = {g["key"]: (g["preemptions_caused"], g["preemptions_suffered"]) for g in t["groups"]}
check(caused == {"vision": (1, 1)}, f"caused/suffered by team {caused}, want vision (1, 1)")
p = {g["key"]: g["charged_gpu_hours"] for g in json.load(open(pc_json))["groups"]}
want_low = sum(gpus[k] * (rows[k]["end"] - rows[k]["start"]) / 3.6e6
               for k in ("fin", "del", "gone", "done", "vic"))
check(abs(p.get(f"low-{run}", -1) - want_low) < 1e-9, f"low charged {p.get(f'low-{run}')}")
for f in fails:
    print("FAIL:", f, file=sys.stderr)
print(f"ok: 6 intervals, one per pod, reasons right; vision charged {exact:.6f} GPU-h "
      f"(from the test's clock: {lo:.6f}..{hi:.6f}); capacity {t['capacity_gpu_hours']:.6f}")
sys.exit(1 if fails else 0)
PY
    fail "the database or the report disagree with the test's timestamps"
