#!/usr/bin/env bash
# gpusched scheduler against kube-scheduler and a no-op binder on one real control plane
# (bench/k8s_bench.py says what is measured). Not part of CI: `make bench-k8s`.
#   usage: bench/k8s.sh [BUILD_DIR] [k8s_bench.py options, e.g. --nodes 500 --pods 1000]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
state=$(mktemp -d /tmp/gs-bench-k8s.XXXXXX)
trap 'bash "$root/tests/k8s/control-plane.sh" down --state "$state" >/dev/null 2>&1 || true' EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
bash "$root/tests/k8s/control-plane.sh" up --state "$state" --scheduler=0 >&2
# shellcheck disable=SC1090
source <(bash "$root/tests/k8s/control-plane.sh" env --state "$state")
kubectl apply -f "$root/deploy/crds/" >/dev/null
python3 "$root/bench/k8s_bench.py" --state "$state" --gpusched "$build/gpusched" "$@"
