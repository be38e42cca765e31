#!/usr/bin/env bash
# Replays all 13 bundled pod lists with the six policies and seeds 42-51 (780 runs) and compares
# the seed means with the FGD paper's published results.
#   usage: tools/check-published.sh [GPUSCHED_BINARY] [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/gpusched}
out=${2:-$root/out/published}
trace=$root/data/alibaba-gpu-v2023
jobs=$(nproc 2>/dev/null || echo 2)
pods=$(ls "$trace"/csv/openb_pod_list_*.csv | paste -sd, -)
mkdir -p "$(dirname "$out")"
"$bin" simulate --nodes "$trace/csv/openb_node_list_gpu_node.csv" --pods "$pods" \
    --policy all --seeds 42-51 --tune 1.3 --jobs "$jobs" --no-plot --out "$out" >"$out.log" 2>&1 ||
    { cat "$out.log" >&2; exit 1; }
tail -n 1 "$out.log"
py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" "$root/tools/compare_published.py" "$out" "$trace/expected_results"
