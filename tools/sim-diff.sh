#!/usr/bin/env bash
# Runs `gpusched simulate` with two binaries on the same traces and seeds and fails unless every
# result file is byte-identical: the check that a speed change to the core places every pod as
# before (issue 12). Plots are not drawn (--no-plot); MANIFEST and the CSV files are compared.
#   usage: tools/sim-diff.sh OLD_GPUSCHED NEW_GPUSCHED [--full] [--jobs N] [--policy P[,P...]]
#     default: 4 of the 13 openb traces (default, gpushare40, multigpu20, cpu050), seeds 42-44;
#     --full:  the published sweep, all 13 traces x seeds 42-51 (780 runs of the paper's six);
#     --policy: the policies (default `all`, the paper's six; e.g. all,fgdband for ours too).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
trace=$root/data/alibaba-gpu-v2023/csv
usage() {
    echo "usage: tools/sim-diff.sh OLD_GPUSCHED NEW_GPUSCHED [--full] [--jobs N] [--policy P]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
old=$1 new=$2
shift 2
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "sim-diff: $b: not an executable" >&2; exit 2; }
done
full=0 jobs=1 policy=all
while [ $# -gt 0 ]; do
    case $1 in
    --full) full=1; shift ;;
    --jobs) [ $# -ge 2 ] || usage; jobs=$2; shift 2 ;;
    --policy) [ $# -ge 2 ] || usage; policy=$2; shift 2 ;;
    *) usage ;;
    esac
done
if [ "$full" = 1 ]; then
    pods=$(ls "$trace"/openb_pod_list_*.csv | paste -sd, -)
    seeds=42-51
else
    pods=$(printf "$trace/openb_pod_list_%s.csv," default gpushare40 multigpu20 cpu050)
    pods=${pods%,}
    seeds=42-44
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for side in old new; do
    bin=$old
    [ "$side" = new ] && bin=$new
    start=$(date +%s.%N)
    "$bin" simulate --nodes "$trace/openb_node_list_gpu_node.csv" --pods "$pods" \
        --policy "$policy" --seeds "$seeds" --jobs "$jobs" --no-plot --out "$out/$side" >/dev/null
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" -v w="$side" 'BEGIN {printf "%s: %.1f s\n", w, e - s}'
done
if diff -r "$out/old" "$out/new" >"$out/diff.txt"; then
    echo "identical: $(ls "$out/new" | wc -l) files, $(($(wc -l <"$out/new/runs.csv") - 1)) runs"
else
    head -n 40 "$out/diff.txt"
    echo "sim-diff: results differ" >&2
    exit 1
fi
