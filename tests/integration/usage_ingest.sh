#!/usr/bin/env bash
# `gpusched report ingest` against a real Prometheus, then `report usage` on what it wrote.
#
#   usage_ingest.sh GPUSCHED FIXTURE SOURCE_DIR
#
# The store: FIXTURE (usage_ingest_fixture.c) writes five pods on four GPUs of gpu-node-1 over
# [T0, T0 + 2 h), T0 = 2026-12-01T00:00:00Z (see its comment). The series:
# tests/data/usage/gpu_util.om, OpenMetrics, one sample a minute at T0 + k min, k = 0..120, of
# DCGM_FI_DEV_GPU_UTIL with dcgm-exporter's labels:
#
#   GPU 0  pod train-a 50 %, the GPU itself 50 %, pod ghost (not in the store) 10 %
#   GPU 1  the GPU itself 2 %, a MIG instance (GPU_I_ID 1) 90 %
#   GPU 2  pod share-c 60 %, pod share-d 60 % (the GPU's value repeated, dcgm-exporter #587),
#          the GPU itself 60 %
#   GPU 3  the GPU itself 30 % (UUID label; the store has no UUID for it: node and index map it)
#
# promtool backfills it into a temporary TSDB and Debian's /usr/bin/prometheus serves it on a
# free 127.0.0.1 port. Prometheus is stopped on every exit path. Exits 77 (skipped) when
# prometheus or promtool is not installed; takes about 5 s.
set -euo pipefail

gpusched=$1
fixture=$2
src=$3
# shellcheck source=../lib/prometheus.sh
. "$src/tests/lib/prometheus.sh"
prom_require usage_ingest.sh promtool

tmp=$(mktemp -d)
trap stop_started EXIT

fail() {
    echo "usage_ingest.sh: FAIL: $*" >&2
    [ -f "$tmp/prom.log" ] && { echo "--- prometheus log" >&2; tail -20 "$tmp/prom.log" >&2; }
    exit 1
}

"$promtool" tsdb create-blocks-from openmetrics "$src/tests/data/usage/gpu_util.om" \
    "$tmp/tsdb" >"$tmp/promtool.log" 2>&1 || { cat "$tmp/promtool.log" >&2; fail "backfill"; }
printf 'global:\n  scrape_interval: 1m\n' >"$tmp/prometheus.yml"
prom_start "$tmp/prometheus.yml" "$tmp/tsdb" "$tmp/prom.log" --storage.tsdb.retention.time=100y
port=$prom_port
url=$prom_url
prom_wait_ready

db="$tmp/acct.db"
"$fixture" "$db" || fail "fixture"

# 1. Ingest the store's allocation span, [T0, T0 + 2 h): 120 evaluations (T0 .. T0 + 119 min)
#    of each of the 9 series = 1080 samples. Written, by hand:
#      train-a   120 (its pod series) + 120 (GPU 0's own series, its only holder; the same
#                keys, so stored once)                                            = 240
#      notebook-b 120 (GPU 1's series, its only holder)                           = 120
#      share-c   120 at 60 x 0.50 / (0.50 + 0.25) = 40 %                          = 120
#      share-d   120 at 60 x 0.25 / 0.75 = 20 %                                   = 120
#      late-e     60 (GPU 3 from T0 + 1 h)                                        =  60
#                                                                           written 660
#    Skipped: GPU 2's own series, two holders: 120 shared; ghost: 120 of a pod not holding
#    GPU 0; GPU 3 before T0 + 1 h: 60 with no holder; the MIG series: 120.  660 + 420 = 1080.
"$gpusched" report ingest --db "$db" --prometheus "$url" >"$tmp/ingest.out" 2>"$tmp/ingest.err" ||
    { cat "$tmp/ingest.err" >&2; fail "ingest exited $?"; }
cat "$tmp/ingest.out"
expect_line() {
    grep -qxF "$1" "$2" || { cat "$2" >&2; fail "no line '$1' in $(basename "$2")"; }
}
out="$tmp/ingest.out"
expect_line "2026-12-01T00:00:00Z to 2026-12-01T02:00:00Z: 1080 samples of 9 series in 1 query; 660 samples written" "$out"
expect_line "120 samples on shared GPUs without pod labels skipped" "$out"
expect_line "120 samples of pods not holding that GPU then skipped" "$out"
expect_line "60 samples on GPUs no pod held then skipped" "$out"
expect_line "120 samples of MIG instances (GPU_I_ID) skipped" "$out"
[ "$(wc -l <"$out")" -eq 5 ] || fail "other lines in the ingest output"

# 2. The report. Used GPU-hours = mean util x GPUs x hours held (capped at charged):
#      train     0.50 x 1 x 2 h = 1.00 of 2.00 charged
#      notebook  0.02 x 1 x 2 h = 0.04 of 2.00: under 5 % of charged (0.10), held 2 h >= 1 h:
#                the one idle allocation
#      share-c   0.40 x 1 x 2 h = 0.80 of 0.50 x 2 h = 1.00
#      share-d   0.20 x 1 x 2 h = 0.40 of 0.25 x 2 h = 0.50
#                (share-c + share-d = 1.20 = GPU 2's 60 % over 2 h: the split adds up)
#      late      0.30 x 1 x 1 h = 0.30 of 1.00 (0.30 >= 0.05: not idle)
#    Samples stored: 120 + 120 + 120 + 120 + 60 = 540.
check_report() { # check_report [SAMPLES]: 540 unless given
    "$gpusched" report usage --db "$db" --format json >"$tmp/report.json" ||
        fail "report usage exited $?"
    python3 - "$tmp/report.json" "${1:-540}" <<'PY' || fail "report: see above"
import json, sys
r = json.load(open(sys.argv[1]))
samples = int(sys.argv[2])
want = {"train": (2.00, 1.00), "notebook": (2.00, 0.04), "share-c": (1.00, 0.80),
        "share-d": (0.50, 0.40), "late": (1.00, 0.30)}
got = {g["key"]: (g["charged_gpu_hours"], g["used_gpu_hours"]) for g in r["groups"]}
assert set(got) == set(want), got
for k, (c, u) in want.items():
    assert abs(got[k][0] - c) < 1e-9 and abs(got[k][1] - u) < 1e-9, (k, got[k], (c, u))
assert r["utilisation_samples"] == samples, (r["utilisation_samples"], samples)
# The ratio, 100 x used / charged: 1.00/2.00, 0.04/2.00, 0.80/1.00, 0.40/0.50, 0.30/1.00.
want_pct = {"train": 50.0, "notebook": 2.0, "share-c": 80.0, "share-d": 80.0, "late": 30.0}
for g in r["groups"]:
    assert abs(g["used_pct"] - want_pct[g["key"]]) < 1e-9, (g["key"], g["used_pct"])
idle = [(i["name"], round(i["used_gpu_hours"], 9)) for i in r["idle_allocations"]]
assert idle == [("notebook-b", 0.04)], idle
print(f"usage_ingest.sh: used 1.00/0.04/0.80/0.40/0.30 GPU-h (50/2/80/80/30 %), notebook-b idle, {samples} samples")
PY
}
check_report

# 3. Idempotent: the same period again writes the same keys; the report is unchanged.
"$gpusched" report ingest --db "$db" --prometheus "$url" >"$tmp/ingest2.out" 2>&1 ||
    fail "second ingest"
cmp -s "$tmp/ingest.out" "$tmp/ingest2.out" || fail "second ingest said something else"
check_report

# 4. A part of the period, by --from/--to and a coarser step: [T0 + 90 min, T0 + 2 h) at 10 min
#    gives evaluations at +90, +100, +110: 3 per series, 27 read.
"$gpusched" report ingest --db "$db" --prometheus "$url" --from 2026-12-01T01:30:00Z \
    --to 2026-12-01T02:00:00Z --step-s 600 >"$tmp/part.out" 2>&1 || fail "part ingest"
expect_line "2026-12-01T01:30:00Z to 2026-12-01T02:00:00Z: 27 samples of 9 series in 1 query; 18 samples written" "$tmp/part.out"

# 5. Failures, each with a clear message and exit status 1 (server) or 2 (usage, database).
expect_fail() { # expect_fail STATUS PATTERN ARGS...
    local want=$1 pat=$2 rc=0
    shift 2
    "$gpusched" report ingest "$@" >"$tmp/f.out" 2>"$tmp/f.err" || rc=$?
    [ "$rc" -eq "$want" ] || { cat "$tmp/f.err" >&2; fail "$* exited $rc, want $want"; }
    grep -q -- "$pat" "$tmp/f.err" || { cat "$tmp/f.err" >&2; fail "$*: no '$pat'"; }
}
expect_fail 2 "not a Prometheus URL" --db "$db" --prometheus "ftp://127.0.0.1:$port"
expect_fail 2 "required" --db "$db"
expect_fail 2 "step-s" --db "$db" --prometheus "$url" --step-s 0
expect_fail 1 "bad_data" --db "$db" --prometheus "$url" --query 'sum('
expect_fail 1 "HTTP 404" --db "$db" --prometheus "$url/no-such-prefix"
closed=$(free_port)
expect_fail 1 "127.0.0.1:$closed" --db "$db" --prometheus "http://127.0.0.1:$closed"
expect_fail 2 "missing.db: no such file" --db "$tmp/missing.db" --prometheus "$url"
# A peer that accepts the connection and never answers: the timeout, not a hang.
quiet=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); open(sys.argv[2], "w").close()
time.sleep(60)' "$quiet" "$tmp/quiet.ready" &
started $!
for _ in $(seq 100); do
    [ -e "$tmp/quiet.ready" ] && break
    sleep 0.05
done
expect_fail 1 "no answer within 500 ms" --db "$db" --prometheus "http://127.0.0.1:$quiet" \
    --timeout-s 0.5
# An empty store: nothing to map to.
"$fixture" "$tmp/e.db" && sqlite3 "$tmp/e.db" "DELETE FROM allocation_gpu; DELETE FROM allocation" ||
    fail "empty store"
expect_fail 2 "no allocation interval" --db "$tmp/e.db" --prometheus "$url"
# A store of schema 1 (before the sample key): report usage reads it as it is (read-only,
# nothing migrated); ingest opens it for writing, and migrates it.
"$fixture" "$tmp/v1.db" && sqlite3 "$tmp/v1.db" "DROP INDEX util_sample_key; PRAGMA user_version = 1" ||
    fail "v1 store"
"$gpusched" report usage --db "$tmp/v1.db" >/dev/null 2>"$tmp/v1.err" || fail "v1 report: $(cat "$tmp/v1.err")"
[ "$(sqlite3 "$tmp/v1.db" "PRAGMA user_version")" = 1 ] || fail "v1 store migrated by a report"
"$gpusched" report ingest --db "$tmp/v1.db" --prometheus "$url" >"$tmp/v1.out" 2>&1 ||
    { cat "$tmp/v1.out" >&2; fail "v1 ingest"; }
expect_line "2026-12-01T00:00:00Z to 2026-12-01T02:00:00Z: 1080 samples of 9 series in 1 query; 660 samples written" "$tmp/v1.out"
[ "$(sqlite3 "$tmp/v1.db" "PRAGMA user_version")" = 2 ] || fail "v1 store not migrated"
# Nothing was written by the failures: the report is still the one of step 2.
check_report

# 6. More steps than one query holds (1,440): every 4 s over the 2 h is 1,800 evaluations, a
#    query of 1,440 and one of 360; 9 series per query, 18 read. 9 x 1,800 = 16,200 samples,
#    written 2 x 1,800 + 1,800 + 1,800 + 1,800 + 900 = 9,900. The minute marks are on the 4 s
#    grid, so stored: 1,800 each for train-a, notebook-b, share-c, share-d and 900 for late-e
#    = 8,100. The values are constant, so used GPU-hours stay the same.
"$gpusched" report ingest --db "$db" --prometheus "$url" --step-s 4 >"$tmp/fine.out" 2>&1 ||
    fail "fine ingest"
expect_line "2026-12-01T00:00:00Z to 2026-12-01T02:00:00Z: 16200 samples of 18 series in 2 queries; 9900 samples written" "$tmp/fine.out"
check_report 8100
echo "usage_ingest.sh: ok"
