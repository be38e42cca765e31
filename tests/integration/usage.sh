#!/usr/bin/env bash
# Usage accounting end to end: gpusched replay --accounting on a slice of the real trace, then
# gpusched report usage as table, CSV, JSON and HTML. Checks, each against a value computed
# independently of the report's code:
#  - per queue, the report's charged GPU-hours equal the replay's own GPU-hours (queues.csv,
#    integrated by the replay from the engine's queue books);
#  - charged rows + idle = capacity to 1e-6, and capacity = GPUs x period from the raw tables;
#  - over a sub-period, every team's charge recomputed in Python from the raw allocation rows
#    (clipped to the period by hand) matches the report to 1e-6;
#  - the daily export sums to the report's charge; compact deletes intervals only with --delete;
#  - bad databases and options exit 2 with a message naming the file or option;
#  - one writer: a writer is refused while another process holds FILE-writer.lock, a reader is
#    not, and the lock goes with its holder;
#  - the HTML page in headless Chromium: its text against the JSON, and pixel probes of the
#    bars (usage_png.py); then, with utilisation samples written into a copy of the store, its
#    share bars, used bars and idle table against the JSON, and a probe of a share and a used
#    bar. Skipped with a message only when chromium is not installed.
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
db=$tmp/usage.db
"$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --cluster-scale 0.25 --speedup 2000 \
    --sample-s 3600 --no-plot --out "$tmp/r" --accounting "$db" --start-time 2026-12-01 \
    >"$tmp/replay.txt" 2>&1 || { echo "FAIL: replay exited $?"; cat "$tmp/replay.txt"; exit 1; }
grep -q '^accounting: 364 allocation intervals in' "$tmp/replay.txt" ||
    { echo "FAIL: accounting line"; cat "$tmp/replay.txt"; fail=1; }
for f in table csv json html; do
    "$bin" report usage --db "$db" --format $f --out "$tmp/team.$f" 2>"$tmp/err" ||
        { echo "FAIL: report --format $f"; cat "$tmp/err"; fail=1; }
done
"$bin" report usage --db "$db" --by queue --format json >"$tmp/queue.json" ||
    { echo "FAIL: report --by queue"; fail=1; }
grep -q 'note: no utilisation samples' "$tmp/team.table" || { echo "FAIL: no-samples note"; fail=1; }
grep -qxF "share%: charged / capacity GPU-hours over the whole period (replay's share%: only while the queue waited)" \
    "$tmp/team.table" || { echo "FAIL: share% footer"; cat "$tmp/team.table"; fail=1; }
grep -q '^usage 2026-12-01T00:00:00Z to ' "$tmp/team.table" || { echo "FAIL: table header"; cat "$tmp/team.table"; fail=1; }
# A period the store holds nothing of says so (its zeros are "not recorded", not "idle"); one
# inside says nothing of the kind. The JSON form carries the store's span either way.
"$bin" report usage --db "$db" --from 2030-01-01 --to 2030-02-01 >"$tmp/out" 2>&1 &&
    grep -q "^note: the store's records run from 2026-12-01T00:00:00Z to .*; none fall in this period$" "$tmp/out" ||
    { echo "FAIL: a period outside the records"; cat "$tmp/out"; fail=1; }
! grep -q "none fall in this period" "$tmp/team.table" || { echo "FAIL: outside-records note on a period inside"; fail=1; }
python3 - "$tmp/team.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
if d["records_from"] != "2026-12-01T00:00:00Z" or d["period_outside_records"] is not False or not d["records_to"] > d["records_from"]:
    print("FAIL: records span in the JSON report:", d["records_from"], d["records_to"], d["period_outside_records"])
    sys.exit(1)
PY
for by in namespace model node priorityclass; do
    "$bin" report usage --db "$db" --by $by --format csv >"$tmp/$by.csv" ||
        { echo "FAIL: --by $by"; fail=1; }
done
# Every interval names its PriorityClass (from the queues file's rules): no "-" row.
classes=$(tail -n +2 "$tmp/priorityclass.csv" | cut -d, -f1 | grep -v '^(' | sort | tr '\n' ' ')
[ "$classes" = "best-effort burstable latency-sensitive " ] ||
    { echo "FAIL: PriorityClass rows: '$classes'"; fail=1; }

python3 - "$db" "$tmp/r/queues.csv" "$tmp/queue.json" "$tmp/team.json" "$tmp/team.csv" <<'PY' || fail=1
import csv, json, sqlite3, sys
db, queues_csv, queue_json, team_json, team_csv = sys.argv[1:6]
fails = 0
# 1. Per queue: the report against the replay's own integration of the queue books.
rep = json.load(open(queue_json))
got = {g["key"]: g["charged_gpu_hours"] for g in rep["groups"]}
for row in csv.DictReader(open(queues_csv)):
    want = float(row["gpu_hours"])  # printed to 3 decimals
    if abs(got.get(row["queue"], 0.0) - want) > 6e-4:
        print(f"FAIL: queue {row['queue']}: report {got.get(row['queue'])} vs replay {want}")
        fails += 1
# 2. Totals: rows + idle = capacity, capacity = GPUs x period from the raw capacity table.
t = json.load(open(team_json))
rows = sum(g["charged_gpu_hours"] for g in t["groups"])
if abs(rows + t["idle_gpu_hours"] - t["capacity_gpu_hours"]) > 1e-6:
    print(f"FAIL: {rows} + {t['idle_gpu_hours']} != {t['capacity_gpu_hours']}")
    fails += 1
con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
gpus, lo, hi = con.execute("SELECT count(*), min(start_ms), max(end_ms) FROM capacity").fetchone()
hb = con.execute("SELECT t_ms FROM heartbeat").fetchone()[0]
if abs(gpus * (hi - lo) / 3.6e6 - t["capacity_gpu_hours"]) > 1e-6:
    print(f"FAIL: capacity {t['capacity_gpu_hours']} vs {gpus} GPUs x {(hi - lo) / 3.6e6} h")
    fails += 1
# 3. The CSV says the same as the JSON.
for r in csv.DictReader(open(team_csv)):
    if r["team"].startswith("("):
        continue
    j = [g for g in t["groups"] if g["key"] == r["team"]][0]
    if abs(float(r["charged_gpu_hours"]) - j["charged_gpu_hours"]) > 1e-6:
        print(f"FAIL: CSV and JSON differ for {r['team']}")
        fails += 1
# 4. A sub-period, recomputed from the raw rows: the inside part of every interval.
frm, to = lo + 10 * 86400000 + 1234567, lo + 40 * 86400000
want = {}
for team, g, s, e in con.execute("SELECT team, gpus_charged, start_ms, coalesce(end_ms, ?) "
                                 "FROM allocation", (hb,)):
    inside = max(0, min(e, to) - max(s, frm))
    want[team] = want.get(team, 0.0) + g * inside / 3.6e6
open(db + ".period", "w").write(f"{frm} {to}\n" + json.dumps(want))
sys.exit(1 if fails else 0)
PY
read -r frm to < <(head -1 "$db.period")
iso() { python3 -c "import datetime,sys; print(datetime.datetime.fromtimestamp(int(sys.argv[1])/1000, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]+'Z')" "$1"; }
"$bin" report usage --db "$db" --from "$(iso "$frm")" --to "$(iso "$to")" --format json >"$tmp/period.json" ||
    { echo "FAIL: report over a sub-period"; fail=1; }
python3 - "$tmp/period.json" "$db.period" <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1]))
want = json.loads(open(sys.argv[2]).read().split("\n", 1)[1])
got = {g["key"]: g["charged_gpu_hours"] for g in rep["groups"]}
bad = [k for k in set(want) | set(got) if abs(want.get(k, 0) - got.get(k, 0)) > 1e-6]
for k in bad:
    print(f"FAIL: period charge of {k}: report {got.get(k)} vs recomputed {want.get(k)}")
if abs(sum(got.values()) + rep["idle_gpu_hours"] - rep["capacity_gpu_hours"]) > 1e-6:
    print("FAIL: period totals do not add up to capacity")
    bad.append("total")
sys.exit(1 if bad else 0)
PY

# The Prometheus gauges: promtool accepts them, and they are the JSON's figures in seconds.
"$bin" report usage --db "$db" --by queue --format prometheus >"$tmp/queue.prom" ||
    { echo "FAIL: --format prometheus"; fail=1; }
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/queue.prom" || { echo "FAIL: promtool check metrics"; fail=1; }
else
    echo "note: promtool not installed; the exposition format is checked by the parse below only"
fi
python3 - "$tmp/queue.prom" "$tmp/queue.json" <<'PY' || fail=1
import json, re, sys
rep = json.load(open(sys.argv[2]))
got = {m.group(1): float(m.group(2)) for m in re.finditer(
    r'^gpusched_usage_charged_gpu_seconds\{queue="([^"]*)"\} (\S+)$', open(sys.argv[1]).read(), re.M)}
bad = [g["key"] for g in rep["groups"] if abs(got.get(g["key"], -1) - g["charged_gpu_hours"] * 3600) > 1e-2]
if bad or len(got) != len(rep["groups"]):
    print(f"FAIL: Prometheus gauges {got} against the JSON report: {bad}")
sys.exit(1 if bad or len(got) != len(rep["groups"]) else 0)
PY
# The chargeback export: a row per pod per day; its GPU-hours add up to the report's.
"$bin" report export --db "$db" --out "$tmp/export.csv" || { echo "FAIL: report export"; fail=1; }
python3 - "$tmp/export.csv" "$tmp/team.json" <<'PY' || fail=1
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rep = json.load(open(sys.argv[2]))
total = sum(float(r["charged_gpu_hours"]) for r in rows)
keys = {(r["day"], r["pod_uid"], r["node"]) for r in rows}
bad = 0
if abs(total - rep["charged_gpu_hours"]) > 1e-3:
    print(f"FAIL: export sums to {total}, the report charges {rep['charged_gpu_hours']}"); bad = 1
if len(keys) != len(rows):
    print("FAIL: the export repeats a pod and day"); bad = 1
if any(not 0 < float(r["held_hours"]) <= 24 + 1e-9 for r in rows):
    print("FAIL: a day row holds more than 24 hours"); bad = 1
sys.exit(bad)
PY
# Retention: without --delete nothing is deleted; with it the intervals ended before the
# cutoff go and the report over what is left still adds up.
cp "$db" "$tmp/compact.db"
"$bin" report compact --db "$tmp/compact.db" --older-than 30d >"$tmp/out" ||
    { echo "FAIL: compact"; fail=1; }
grep -q '0 allocation and 0 capacity intervals deleted (intervals are kept without --delete)' "$tmp/out" ||
    { echo "FAIL: compact without --delete"; cat "$tmp/out"; fail=1; }
"$bin" report compact --db "$tmp/compact.db" --older-than 30d --delete >"$tmp/out" ||
    { echo "FAIL: compact --delete"; fail=1; }
left=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM allocation').fetchone()[0])" "$tmp/compact.db")
deleted=$(sed -n 's/.*; \([0-9]*\) allocation and.*/\1/p' "$tmp/out")
[ "$((left + deleted))" = 364 ] && [ "$deleted" -gt 0 ] ||
    { echo "FAIL: compact --delete: $deleted deleted, $left left of 364"; cat "$tmp/out"; fail=1; }
"$bin" report compact --db "$tmp/compact.db" --older-than soon >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q -- '--older-than' "$tmp/err" || { echo "FAIL: compact --older-than soon"; fail=1; }

# One writer: while another process holds compact.db-writer.lock (flock, its pid inside), a
# writer (compact) is refused naming the lock and the pid; a reader (report usage) is not.
python3 - "$tmp/compact.db-writer.lock" "$tmp/held" <<'PY' &
import fcntl, os, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
f.write("%d\n" % os.getpid()); f.flush()
open(sys.argv[2], "w").write("%d" % os.getpid())
time.sleep(30)
PY
holder=$!
for _ in $(seq 100); do [ -s "$tmp/held" ] && break; sleep 0.1; done
"$bin" report compact --db "$tmp/compact.db" --older-than 30d >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -qF "another writer holds $tmp/compact.db-writer.lock (pid $holder)" "$tmp/err" ||
    { echo "FAIL: second writer not refused (exit $rc)"; cat "$tmp/err"; fail=1; }
"$bin" report usage --db "$tmp/compact.db" --format csv >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: reader blocked by the writer lock"; cat "$tmp/err"; fail=1; }
kill "$holder"; wait "$holder" 2>/dev/null
"$bin" report compact --db "$tmp/compact.db" --older-than 30d >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: writer lock not released at the holder's exit"; cat "$tmp/err"; fail=1; }
[ ! -e "$tmp/compact.db-writer.lock" ] || { echo "FAIL: lock file left after a clean close"; fail=1; }

# The same replay recorded twice (same --start-time, so the same pod uids): refused before
# anything is written, the store's report unchanged.
"$bin" report usage --db "$db" --format csv >"$tmp/before.csv"
"$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --cluster-scale 0.25 --speedup 2000 \
    --sample-s 3600 --no-plot --out "$tmp/r-again" --accounting "$db" --start-time 2026-12-01 \
    >/dev/null 2>"$tmp/err"
rc=$?
"$bin" report usage --db "$db" --format csv >"$tmp/after.csv"
[ $rc = 2 ] && grep -q "usage.db already holds a recording of a replay from 2026-12-01T00:00:00Z (364 intervals)" "$tmp/err" &&
    cmp -s "$tmp/before.csv" "$tmp/after.csv" && [ ! -e "$tmp/r-again" ] ||
    { echo "FAIL: a replay recorded twice: rc $rc"; cat "$tmp/err"; diff "$tmp/before.csv" "$tmp/after.csv"; fail=1; }

# Bad databases and options: exit 2, the message names the file or option, no crash.
head -c 10000 /dev/urandom >"$tmp/garbage.db"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('CREATE TABLE songs(t)'); c.commit()" "$tmp/foreign.db"
for f in garbage foreign missing; do
    "$bin" report usage --db "$tmp/$f.db" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc != 2 ] || ! grep -q "$tmp/$f.db" "$tmp/err"; then
        echo "FAIL: $f database: rc $rc"; cat "$tmp/err"; fail=1
    fi
done
grep -q "missing.db: no such file (a store is written by 'gpusched replay --accounting FILE'" "$tmp/err" ||
    { echo "FAIL: a missing database is not said so"; cat "$tmp/err"; fail=1; }
"$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --no-plot --out "$tmp/r2" \
    --accounting "$tmp/foreign.db" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q 'foreign.db: not a gpusched accounting database' "$tmp/err" ||
    { echo "FAIL: replay into a foreign database: rc $rc"; cat "$tmp/err"; fail=1; }
for args in "--by colour" "--format pdf" "--from yesterday" "--idle-util-pct 0" "--tz Mars" "--bogus"; do
    # shellcheck disable=SC2086
    "$bin" report usage --db "$db" $args >/dev/null 2>"$tmp/err"
    rc=$?
    opt=${args%% *}
    [ $rc = 2 ] && grep -q -- "$opt" "$tmp/err" || { echo "FAIL: '$args': rc $rc"; cat "$tmp/err"; fail=1; }
done
# --by profile: whole GPUs and fractions as rows, each recomputed from the raw grant rows (a
# pod is whole-gpu when every grant is 1000 milli, fraction when every one is below), and the
# same total charge as by team.
"$bin" report usage --db "$db" --by profile --format json >"$tmp/profile.json" ||
    { echo "FAIL: report --by profile"; fail=1; }
python3 - "$db" "$tmp/profile.json" "$tmp/team.json" <<'PY' || fail=1
import json, sqlite3, sys
db, prof, team = sys.argv[1:4]
p, t = json.load(open(prof)), json.load(open(team))
rows = {g["key"]: g["charged_gpu_hours"] for g in p["groups"]}
c = sqlite3.connect(db)
lo, hi = c.execute("SELECT min(start_ms), (SELECT t_ms FROM heartbeat) FROM allocation").fetchone()
want = {}
for aid, start, end, gpus in c.execute(
        "SELECT id, start_ms, coalesce(end_ms, ?), gpus_charged FROM allocation", (hi,)):
    kinds = {("whole-gpu" if m >= 1000 else "fraction") for (m,) in
             c.execute("SELECT gpu_milli FROM allocation_gpu WHERE allocation_id = ?", (aid,))}
    key = "+".join(sorted(kinds)) or "no-gpu"
    want[key] = want.get(key, 0.0) + gpus * (min(end, hi) - max(start, lo)) / 3.6e6
bad = [k for k in set(want) | set(rows) if abs(want.get(k, 0) - rows.get(k, 0)) > 1e-6]
if bad or set(rows) != {"whole-gpu", "fraction", "no-gpu"} or \
        abs(sum(rows.values()) - t["charged_gpu_hours"]) > 1e-6:
    print("FAIL: --by profile", rows, want, t["charged_gpu_hours"])
    sys.exit(1)
PY

# --tz by name: December is CET (+01:00) in Berlin and EST (-05:00) in New York; an unknown
# zone names the file it looked for.
"$bin" report usage --db "$db" --tz Europe/Berlin >"$tmp/out" 2>&1 &&
    grep -q '^usage 2026-12-01T01:00:00+01:00 to ' "$tmp/out" ||
    { echo "FAIL: --tz Europe/Berlin"; head -2 "$tmp/out"; fail=1; }
"$bin" report usage --db "$db" --tz America/New_York --format json >"$tmp/out" 2>&1 &&
    grep -q '"2026-11-30T19:00:00-05:00"' "$tmp/out" ||
    { echo "FAIL: --tz America/New_York"; head -c 300 "$tmp/out"; fail=1; }
"$bin" report usage --db "$db" --tz Mars/Olympus >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "unknown time zone 'Mars/Olympus' (no /usr/share/zoneinfo/Mars/Olympus" "$tmp/err" ||
    { echo "FAIL: --tz Mars/Olympus"; cat "$tmp/err"; fail=1; }
"$bin" report usage --db "$db" --from 2027-01-01 --to 2026-12-01 >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q 'empty period' "$tmp/err" || { echo "FAIL: reversed period"; cat "$tmp/err"; fail=1; }

# The HTML page in headless Chromium.
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
    echo "SKIP: the HTML check: chromium is not installed (scripts/install-deps.sh installs it)"
else
    grep -q -i -E '<script|https?://[^"]*\.(js|css|png|woff)' "$tmp/team.html" &&
        { echo "FAIL: the page is not self-contained"; fail=1; }
    flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
           --disable-component-update --no-first-run --force-device-scale-factor=1
           --hide-scrollbars --window-size=960,900 --user-data-dir="$tmp/chrome")
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/team.html" >"$tmp/dom.html" 2>"$tmp/chrome.err" ||
        { echo "FAIL: chromium --dump-dom"; tail -5 "$tmp/chrome.err"; fail=1; }
    timeout 120 "$chrome" "${flags[@]}" --screenshot="$tmp/shot.png" "file://$tmp/team.html" >/dev/null 2>>"$tmp/chrome.err" ||
        { echo "FAIL: chromium --screenshot"; tail -5 "$tmp/chrome.err"; fail=1; }
    # The page's text against the JSON: every team with its charged GPU-hours, and the totals.
    python3 - "$tmp/dom.html" "$tmp/team.json" <<'PY' || fail=1
import json, re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
rep = json.load(open(sys.argv[2]))
fails = 0
for g in rep["groups"]:
    cell = f"<tr><td>{g['key']}</td><td>{g['charged_gpu_hours']:.2f}</td>"
    if cell not in dom:
        print(f"FAIL: the page has no row {cell}")
        fails += 1
for label, key in (("(idle)", "idle_gpu_hours"), ("(capacity)", "capacity_gpu_hours")):
    if f"<tr><td>{label}</td><td>{rep[key]:.2f}</td></tr>" not in dom:
        print(f"FAIL: the page has no {label} row of {rep[key]:.2f}")
        fails += 1
if "no utilisation samples" not in dom:
    print("FAIL: the page does not say there are no utilisation samples")
    fails += 1
sys.exit(1 if fails else 0)
PY
    python3 "$src/tests/integration/usage_png.py" "$tmp/shot.png" "$tmp/dom.html" "$tmp/team.json" || fail=1

    # The same store with utilisation samples, written as the schema has them (one per interval
    # at its start, on each of its GPUs: 1 % for every third interval, 60 % for the others), so
    # that the page draws charged against used and lists idle allocations. Its DOM against its
    # JSON: every queue's share bars, every group's used bars, every idle allocation's row.
    cp "$db" "$tmp/util.db"
    sqlite3 "$tmp/util.db" "INSERT INTO util_sample(t_ms, pod_uid, node, gpu_index, util_pct)
        SELECT a.start_ms, a.pod_uid, a.node, g.gpu_index, CASE WHEN a.id % 3 = 0 THEN 1.0 ELSE 60.0 END
        FROM allocation a JOIN allocation_gpu g ON g.allocation_id = a.id" ||
        { echo "FAIL: writing utilisation samples"; fail=1; }
    for f in json html; do
        "$bin" report usage --db "$tmp/util.db" --by queue --format $f --out "$tmp/util.$f" 2>"$tmp/err" ||
            { echo "FAIL: report --format $f of the sampled store"; cat "$tmp/err"; fail=1; }
    done
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/util.html" >"$tmp/util.dom" 2>"$tmp/chrome.err" ||
        { echo "FAIL: chromium --dump-dom (sampled)"; tail -5 "$tmp/chrome.err"; fail=1; }
    timeout 120 "$chrome" "${flags[@]}" --screenshot="$tmp/util.png" "file://$tmp/util.html" >/dev/null 2>>"$tmp/chrome.err" ||
        { echo "FAIL: chromium --screenshot (sampled)"; tail -5 "$tmp/chrome.err"; fail=1; }
    python3 - "$tmp/util.dom" "$tmp/util.json" <<'PY' || fail=1
import json, re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
rep = json.load(open(sys.argv[2]))
fails = 0
def attrs(pattern):
    """The rects whose attributes match: {data-key or data-queue: {attribute: value}}."""
    out = {}
    for m in re.finditer(r"<rect ([^>]*)>", dom):
        a = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        if pattern in a:
            out[a.get("data-queue", a.get("data-key"))] = a
    return out
def near(a, b, eps=1e-3):
    return a is not None and abs(float(a) - b) <= eps
alloc, fair = attrs("data-alloc-pct"), attrs("data-fair-pct")
if not rep["queues"]:
    print("FAIL: the JSON report has no queues")
    fails += 1
for q in rep["queues"]:
    if not near(alloc.get(q["name"], {}).get("data-alloc-pct"), q["alloc_pct"]) or \
            not near(fair.get(q["name"], {}).get("data-fair-pct"), q["fair_pct"]):
        print(f"FAIL: share bars of {q['name']}: {alloc.get(q['name'])} {fair.get(q['name'])} vs {q}")
        fails += 1
if len(alloc) != len(rep["queues"]) or len(fair) != len(rep["queues"]):
    print(f"FAIL: {len(alloc)}/{len(fair)} share bars for {len(rep['queues'])} queues")
    fails += 1
charged, used = attrs("data-charged-gpu-hours"), attrs("data-used-gpu-hours")
sampled = [g for g in rep["groups"] if g["used_gpu_hours"] is not None]
if not sampled or len(used) != len(sampled) or len(charged) != len(sampled):
    print(f"FAIL: {len(used)} used bars for {len(sampled)} sampled groups")
    fails += 1
for g in sampled:
    if not near(used.get(g["key"], {}).get("data-used-gpu-hours"), g["used_gpu_hours"]) or \
            not near(charged.get(g["key"], {}).get("data-charged-gpu-hours"), g["charged_gpu_hours"]):
        print(f"FAIL: used bars of {g['key']}: {used.get(g['key'])} vs {g}")
        fails += 1
    cell = f"<td>{g['used_gpu_hours']:.2f}</td><td>{g['used_pct']:.1f}</td>"
    if f"<tr><td>{g['key']}</td><td>{g['charged_gpu_hours']:.2f}</td>{cell}" not in dom:
        print(f"FAIL: the table has no used/used% cells {cell} for {g['key']}")
        fails += 1
idle = rep["idle_allocations"]
if not idle:
    print("FAIL: no idle allocations in the sampled report (every third interval is at 1 %)")
    fails += 1
for i in idle:
    row = (f"<tr><td>{i['pod_uid']}</td><td>{i['name']}</td><td>{i['key']}</td>"
           f"<td>{i['held_hours']:.1f}</td><td>{i['charged_gpu_hours']:.2f}</td>"
           f"<td>{i['used_gpu_hours']:.2f}</td></tr>")
    if row not in dom:
        print(f"FAIL: the idle table has no row {row}")
        fails += 1
print(f"sampled page: {len(rep['queues'])} queues' share bars, {len(sampled)} groups' used bars, "
      f"{len(idle)} idle allocations, as in the JSON")
sys.exit(1 if fails else 0)
PY
    python3 "$src/tests/integration/usage_png.py" "$tmp/util.png" "$tmp/util.dom" "$tmp/util.json" || fail=1
fi
[ $fail = 0 ] && echo "usage accounting: all checks passed"
exit $fail
