#!/usr/bin/env bash
# Node agent benchmarks: Allocate latency through grpcio (10,000 calls), /metrics scrape time
# with 8 GPUs and 32 pods, and the agent's CPU use at one scrape a second over 30 s.
#   usage: bench/agent.sh [BUILD_DIR]   (a Release build: make bench)
# Needs Debian's python3-grpcio and python3-yaml (/usr/bin/python3) and /usr/bin/protoc.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
py=/usr/bin/python3
if ! $py -c 'import grpc, yaml' 2>/dev/null || [ ! -x /usr/bin/protoc ]; then
    echo "agent benchmarks: skipped (need python3-grpcio, python3-yaml, protobuf-compiler)"
    exit 0
fi
echo "== agent: Allocate latency (grpcio client, 10,000 calls)"
$py "$root/bench/agent_allocate.py" --gpusched "$build/gpusched" --source-dir "$root" --calls 10000 || true
echo "== agent: /metrics scrape time (8 GPUs, 32 pods) and CPU at 1 scrape/s over 30 s"
$py "$root/bench/agent_metrics.py" --gpusched "$build/gpusched" --source-dir "$root" --seconds 30 || true
