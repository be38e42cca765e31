#!/usr/bin/env bash
# `gpusched report ingest --agent` on one scrape of a node agent's /metrics, from a file and
# from a URL, then `report usage` on what it wrote.
#
#   usage_ingest_agent.sh GPUSCHED FIXTURE
#
# The store: FIXTURE (usage_ingest_fixture.c): on gpu-node-1 over [T0, T0 + 2 h), T0 =
# 2026-12-01T00:00:00Z, train-a holds GPU 0 whole, notebook-b GPU 1, share-c 500 and share-d
# 250 milli of GPU 2, late-e GPU 3 (no UUID in the store) from T0 + 1 h. The scrape, at
# T0 + 30 min, as the agent writes it (exporter.h: a pod series repeats its GPU's value):
#
#   GPU 0 itself 50 %; GPU 2 itself, and pods share-c and share-d, 60 %; GPU 3 itself 30 %;
#   and a DCGM_FI_DEV_FB_USED series (another metric: not read).
#
# Written, by hand: train-a 50 %; share-c 60 x 0.50 / 0.75 = 40 %, share-d 60 x 0.25 / 0.75 =
# 20 %: 3 samples; GPU 2's own series (two holders) skipped as shared, GPU 3 (nobody holds it
# at T0 + 30 min) as no holder. report usage then counts each pod's one sample over its 2 h:
# used train 0.50 x 1 GPU x 2 h = 1.00, share-c 0.40 x 2 h = 0.80, share-d 0.20 x 2 h = 0.40
# GPU-hours. A line the parser refuses exits 1 naming the source and the line.
set -euo pipefail

gpusched=$1
fixture=$2
tmp=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() {
    echo "usage_ingest_agent.sh: FAIL: $*" >&2
    exit 1
}

u='GPU-00000000-0000-0000-0000-0000000000a'
cat >"$tmp/scrape.prom" <<PROM
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="${u}0",device="nvidia0",modelName="NVIDIA H200",Hostname="gpu-node-1"} 50
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="${u}2",device="nvidia2",modelName="NVIDIA H200",Hostname="gpu-node-1"} 60
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="${u}2",device="nvidia2",modelName="NVIDIA H200",Hostname="gpu-node-1",container="c",namespace="ml",pod="share-c"} 60
DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="${u}2",device="nvidia2",modelName="NVIDIA H200",Hostname="gpu-node-1",container="c",namespace="ml",pod="share-d"} 60
DCGM_FI_DEV_GPU_UTIL{gpu="3",UUID="${u}3",device="nvidia3",modelName="NVIDIA H200",Hostname="gpu-node-1"} 30
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="${u}0",Hostname="gpu-node-1"} 40960
PROM

check_store() { # DB LABEL
    "$gpusched" report usage --db "$1" --format json --out "$tmp/usage.json" ||
        fail "$2: report usage"
    python3 - "$tmp/usage.json" "$2" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
used = {g["key"]: g["used_gpu_hours"] for g in r["groups"]}
want = {"train": 1.0, "share-c": 0.8, "share-d": 0.4}
bad = {k: used.get(k) for k, v in want.items() if used.get(k) is None or abs(used[k] - v) > 1e-9}
if bad or r["utilisation_samples"] != 3:
    print("usage_ingest_agent.sh: FAIL: %s: used %s, samples %s" % (sys.argv[2], used,
          r["utilisation_samples"]))
    sys.exit(1)
PY
}

# 1. From a file.
"$fixture" "$tmp/file.db" || fail "fixture"
"$gpusched" report ingest --db "$tmp/file.db" --agent "$tmp/scrape.prom" \
    --at 2026-12-01T00:30:00Z >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "ingest a file"; }
grep -qF "at 2026-12-01T00:30:00Z: 5 samples of 5 series; 3 samples written" "$tmp/out" ||
    { cat "$tmp/out" >&2; fail "the counts of a file"; }
grep -qF "1 samples on shared GPUs without pod labels skipped" "$tmp/out" || fail "shared line"
grep -qF "1 samples on GPUs no pod held then skipped" "$tmp/out" || fail "no-holder line"
check_store "$tmp/file.db" file
echo "ok: a scrape file: 3 samples written, used 1.00 / 0.80 / 0.40 GPU-hours"

# 2. From a URL: the same scrape served over HTTP on a free loopback port.
"$fixture" "$tmp/url.db" || fail "fixture"
python3 - "$tmp" <<'PY' &
import http.server, os, sys
d = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = open(os.path.join(d, "scrape.prom"), "rb").read()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body if self.path == "/metrics" else b"")
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(os.path.join(d, "port.tmp"), "w").write(str(s.server_port))
os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
s.serve_forever()
PY
server=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
"$gpusched" report ingest --db "$tmp/url.db" --agent "http://127.0.0.1:$port/metrics" \
    --at 2026-12-01T00:30:00Z >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "ingest a URL"; }
grep -qF "3 samples written" "$tmp/out" || { cat "$tmp/out" >&2; fail "the counts of a URL"; }
check_store "$tmp/url.db" url
rc=0
"$gpusched" report ingest --db "$tmp/url.db" --agent "http://127.0.0.1:$port/nothing" \
    >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -qF "/nothing: HTTP 404" "$tmp/err" || { cat "$tmp/err" >&2; fail "HTTP 404: exit $rc"; }
echo "ok: a scrape URL: the same 3 samples; a 404 exits 1 naming it"

# 3. A bad line, and bad usage.
printf 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1\nDCGM_FI_DEV_GPU_UTIL{gpu="0" 2\n' >"$tmp/bad.prom"
rc=0
"$gpusched" report ingest --db "$tmp/file.db" --agent "$tmp/bad.prom" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && grep -qF "$tmp/bad.prom: line 2: after label gpu: expected ',' or '}'" "$tmp/err" ||
    { cat "$tmp/err" >&2; fail "a bad line: exit $rc"; }
rc=0
"$gpusched" report ingest --db "$tmp/file.db" --agent x --prometheus http://p:9090 \
    >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -qF "one of --prometheus or --agent" "$tmp/err" || fail "both sources: exit $rc"
rc=0
"$gpusched" report ingest --db "$tmp/file.db" --prometheus http://p:9090 --at 2026-12-01 \
    >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] && grep -qF -- "--at and --metric go with --agent" "$tmp/err" || fail "--at alone: exit $rc"
echo "ok: a bad line names the file and line 2 (exit 1); bad option mixes exit 2"
