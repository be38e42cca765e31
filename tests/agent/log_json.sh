#!/usr/bin/env bash
# `gpusched agent --log-format json` on the fake backend (deploy/fake-gpus.yaml, eight GPUs,
# two in MIG mode): every stderr line is a JSON object with ts, level, component agent and msg
# (check_json_log.py); the "serving 8 devices" line is there, and the two MIG-mode warnings
# that fake-gpus.yaml provokes (GPUs 6 and 7 with migStrategy none) say level warn.
# --log-format xml exits 2 naming the value.
#
# Usage: log_json.sh GPUSCHED_BINARY SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$bin" agent --gpu-backend "fake:$src/deploy/fake-gpus.yaml" --kubelet-dir "$tmp" \
    --pod-resources-socket "" --metrics-addr "" --log-format json 2>"$tmp/log" &
pid=$!
for ((i = 0; i < 300; i++)); do
    grep -q 'GPU 7 is in MIG mode' "$tmp/log" && break
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid" || { echo "FAIL: the agent exited $? on SIGTERM" >&2; cat "$tmp/log" >&2; exit 1; }
pid=
python3 "$src/tests/integration/check_json_log.py" "$tmp/log" agent \
    'msg=nvidia\.com/gpu: serving 8 devices' ||
    { cat "$tmp/log" >&2; exit 1; }
warns=$(python3 -c 'import json,sys
print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["level"] == "warn" and "is in MIG mode" in json.loads(l)["msg"]))' "$tmp/log")
[ "$warns" -eq 2 ] || { echo "FAIL: $warns MIG-mode warnings at level warn, want 2 (GPUs 6, 7)" >&2; exit 1; }
echo "ok: the two MIG-mode warnings are level warn"
rc=0
"$bin" agent --gpu-backend "fake:$src/deploy/fake-gpus.yaml" --log-format xml 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "^gpusched agent: --log-format must be text or json, not 'xml'$" "$tmp/err" ||
    { echo "FAIL: --log-format xml: exit $rc: $(cat "$tmp/err")" >&2; exit 1; }
echo "ok: --log-format xml exits 2"
