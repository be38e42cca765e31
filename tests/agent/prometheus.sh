#!/usr/bin/env bash
# A real Prometheus scrapes the agent's exporter.
#
#   prometheus.sh EXPORTER_SERVER SOURCE_DIR
#
# Starts exporter_server (fake GPUs from tests/data/fake/prom.yaml; GPU 0 shared by pods
# train-a and train-b, GPU 1 reports XID 79) and Debian's /usr/bin/prometheus on 127.0.0.1
# with a generated config that scrapes it every second and a temporary storage directory.
# Then it checks the raw scrape with promtool and queries Prometheus' HTTP API until the
# scripted values and pod labels are there: both pods on the shared GPU with their own values
# (40 % and 33 %, by the pod UIDs of the fake /proc's cgroups) adding up to the device's 73 %
# and 65536 MiB, no pod series for power, who holds the GPU in gpusched_gpu_pod_info, the
# unattributed GPU, health 0 and one XID 79 on GPU 1. Both processes are stopped on every exit
# path.
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
# The pods' processes as kubelet's systemd driver and containerd place them (cgroup v2).
uid_a=6a1f0e2d-1111-4c3b-8a9d-00000000000a
uid_b=6a1f0e2d-1111-4c3b-8a9d-00000000000b
cid=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
mkdir -p "$tmp/proc/5000101" "$tmp/proc/5000102"
echo "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${uid_a//-/_}.slice/cri-containerd-$cid.scope" \
    >"$tmp/proc/5000101/cgroup"
echo "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid_b//-/_}.slice" \
    >"$tmp/proc/5000102/cgroup"
"$server" "$src/tests/data/fake/prom.yaml" "$tmp/port" --seconds 40 --hostname prom-test-node \
    --proc-root "$tmp/proc" \
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
python3 - "$export_port" "$prom_port" "$promtool" "$gpu0" "$uid_a" "$uid_b" "$cid" <<'PY'
import json, subprocess, sys, time, urllib.parse, urllib.request

export_port, prom_port, promtool, gpu0, uid_a, uid_b, cid = sys.argv[1:8]

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
    device = query('DCGM_FI_DEV_GPU_UTIL{gpu="0",pod_uid=""}')
    if len(device) != 1 or device[0]["value"][1] != "73":
        return f"device utilisation {device}"
    # Each pod's own value (issue 9), by the UID of its cgroup; not the device's copied.
    for uid, ctr, util, mem in ((uid_a, cid, "40", "30000"), (uid_b, "", "33", "35536")):
        u = query('DCGM_FI_DEV_GPU_UTIL{pod_uid="%s"}' % uid)
        f = query('DCGM_FI_DEV_FB_USED{pod_uid="%s"}' % uid)
        if len(u) != 1 or len(f) != 1:
            return f"pod {uid}: {len(u)} utilisation and {len(f)} memory series"
        m = u[0]["metric"]
        want = {"gpu": "0", "UUID": gpu0, "device": "nvidia0", "modelName": "NVIDIA H200",
                "Hostname": "prom-test-node", "pod_uid": uid}
        for k, v in want.items():
            assert m.get(k) == v, (uid, k, m)
        assert m.get("container_id", "") == ctr, m
        assert u[0]["value"][1] == util and f[0]["value"][1] == mem, (uid, u, f)
    # They add up: 40 + 33 = 73 %, 30000 + 35536 = 65536 MiB, the device's values.
    su = query('sum(DCGM_FI_DEV_GPU_UTIL{gpu="0",pod_uid!=""})')
    sf = query('sum(DCGM_FI_DEV_FB_USED{gpu="0",pod_uid!=""})')
    df = query('DCGM_FI_DEV_FB_USED{gpu="0",pod_uid=""}')
    assert su[0]["value"][1] == "73" and sf[0]["value"][1] == "65536", (su, sf)
    assert df[0]["value"][1] == "65536", df
    shared = query('count(DCGM_FI_DEV_GPU_UTIL{gpu="0"})')
    assert shared and shared[0]["value"][1] == "3", shared  # two pods and the GPU itself
    # Power is the device's alone: one series, no pod's.
    power = query('DCGM_FI_DEV_POWER_USAGE{gpu="0"}')
    if len(power) != 1 or power[0]["value"][1] != "512.25" or "pod_uid" in power[0]["metric"]:
        return f"power {power}"
    # Who holds the GPU, by name, from PodResources.
    info = query('gpusched_gpu_pod_info{gpu="0"}')
    held = sorted((r["metric"]["pod"], r["metric"].get("replica")) for r in info)
    assert held == [("train-a", "0"), ("train-b", "1")], held
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
        print("prometheus.sh: Prometheus scraped both pods on GPU 0 (40 % + 33 % = the "
              "device's 73 %, 30000 + 35536 MiB = 65536), GPU 1 (21 %, XID 79, unhealthy)")
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
