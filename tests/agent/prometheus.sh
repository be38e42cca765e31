#!/usr/bin/env bash
# A real Prometheus scrapes the agent's exporter.
#
#   prometheus.sh EXPORTER_SERVER SOURCE_DIR
#
# Starts exporter_server (fake GPUs from tests/data/fake/prom.yaml; GPU 0 shared by pods
# train-a and train-b, GPU 1 reports XID 79) and Debian's /usr/bin/prometheus on 127.0.0.1
# with a generated config that scrapes it every second and a temporary storage directory.
# Then it checks the raw scrape with promtool and queries Prometheus' HTTP API until the
# scripted values and pod labels are there: both pods on the shared GPU, the unattributed
# GPU, health 0 and one XID 79 on GPU 1. Both processes are stopped on every exit path.
# Exits 77 (skipped) when prometheus is not installed; takes about 5 s.
set -euo pipefail

server=$1
src=$2
# shellcheck source=../lib/prometheus.sh
. "$src/tests/lib/prometheus.sh"
prom_require prometheus.sh

tmp=$(mktemp -d)
trap stop_started EXIT

gpu0=GPU-11111111-2222-3333-4444-000000000000
"$server" "$src/tests/data/fake/prom.yaml" "$tmp/port" --seconds 40 --hostname prom-test-node \
    --attr "$gpu0::0=ml/train-a/main" --attr "$gpu0::1=ml/train-b/main" \
    2>"$tmp/server.log" &
started $!
for _ in $(seq 50); do
    [ -s "$tmp/port" ] && break
    sleep 0.1
done
if [ ! -s "$tmp/port" ]; then
    echo "prometheus.sh: exporter_server did not start" >&2
    cat "$tmp/server.log" >&2
    exit 1
fi
export_port=$(cat "$tmp/port")

cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpusched
    static_configs:
      - targets: ["127.0.0.1:$export_port"]
EOF
prom_start "$tmp/prometheus.yml" "$tmp/data" "$tmp/prom.log"

set +e
python3 - "$export_port" "$prom_port" "$promtool" "$gpu0" <<'PY'
import json, subprocess, sys, time, urllib.parse, urllib.request

export_port, prom_port, promtool, gpu0 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

def get(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()

# 1. The raw scrape: content type, and promtool parses it. Its lint warns about the names
#    and labels dcgm-exporter uses (camelCase modelName, a counter ending in _TOTAL); we keep
#    them on purpose, for compatibility. Anything else is a failure.
status, ctype, body = get(f"http://127.0.0.1:{export_port}/metrics")
assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8", (status, ctype)
lint = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
problems = [l for l in (lint.stdout + lint.stderr).splitlines()
            if l and "should be written in 'snake_case' not 'camelCase'" not in l
            and not l.startswith('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter metrics should have "_total" suffix')]
assert lint.returncode in (0, 3) and not problems, (lint.returncode, problems)
print("prometheus.sh: promtool accepts the scrape (only the expected dcgm naming lints)")

# 2. Prometheus' view, polled until the first scrapes are in.
def query(q):
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    _, _, text = get(url)
    doc = json.loads(text)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]

def check():
    up = query('up{job="gpusched"}')
    if not up or up[0]["value"][1] != "1":
        return "target not up yet"
    a = query('DCGM_FI_DEV_GPU_UTIL{pod="train-a"}')
    b = query('DCGM_FI_DEV_GPU_UTIL{pod="train-b"}')
    if len(a) != 1 or len(b) != 1:
        return f"pod series: train-a {len(a)}, train-b {len(b)}"
    for r, pod in ((a[0], "train-a"), (b[0], "train-b")):
        m = r["metric"]
        want = {"gpu": "0", "UUID": gpu0, "device": "nvidia0", "modelName": "NVIDIA H200",
                "Hostname": "prom-test-node", "namespace": "ml", "container": "main", "pod": pod}
        for k, v in want.items():
            assert m.get(k) == v, (pod, k, m)
        if r["value"][1] != "73":
            return f"{pod}: utilisation {r['value'][1]}, want 73"
    shared = query('count(DCGM_FI_DEV_GPU_UTIL{gpu="0"})')
    assert shared and shared[0]["value"][1] == "3", shared  # two pods and the GPU itself
    device = query('DCGM_FI_DEV_GPU_UTIL{gpu="0",pod=""}')
    assert len(device) == 1 and device[0]["value"][1] == "73", device
    power = query('DCGM_FI_DEV_POWER_USAGE{pod="train-b"}')
    if not power or power[0]["value"][1] != "512.25":
        return f"power {power}"
    g1 = query('DCGM_FI_DEV_GPU_UTIL{gpu="1"}')
    if len(g1) != 1 or g1[0]["value"][1] != "21" or "pod" in g1[0]["metric"]:
        return f"gpu 1: {g1}"
    health = query('gpusched_gpu_health{gpu="1"}')
    xid = query('gpusched_gpu_xid_total{gpu="1",xid="79"}')
    last = query('DCGM_FI_DEV_XID_ERRORS{gpu="1"}')
    if not health or health[0]["value"][1] != "0" or not xid or xid[0]["value"][1] != "1" \
            or not last or last[0]["value"][1] != "79":
        return f"gpu 1 health {health}, xid {xid}, last {last}"
    h0 = query('gpusched_gpu_health{gpu="0"}')
    assert h0 and h0[0]["value"][1] == "1", h0
    return None

deadline = time.time() + 15
why = "not started"
while time.time() < deadline:
    try:
        why = check()
    except (OSError, ValueError) as e:  # Prometheus still starting
        why = f"{type(e).__name__}: {e}"
    if why is None:
        print("prometheus.sh: Prometheus scraped both pods on GPU 0 (73 %), GPU 1 (21 %, "
              "XID 79, unhealthy)")
        sys.exit(0)
    time.sleep(0.5)
print(f"prometheus.sh: gave up: {why}", file=sys.stderr)
sys.exit(1)
PY
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "--- exporter_server log" >&2
    cat "$tmp/server.log" >&2
    echo "--- prometheus log" >&2
    cat "$tmp/prom.log" >&2
fi
exit $rc
