#!/usr/bin/env bash
# Runs the simulator benchmarks on the bundled trace and prints the figures the README quotes:
#   1. one run of each policy on the default trace (seed 42, tune 1.3): median of 5, pods/s;
#      FGD on the trace replicated 8x and 16x (9,704 and 19,408 nodes): decisions/s;
#   2. the whole published sweep: 13 traces x 6 policies x 10 seeds, with all cores;
#   3. one run on a 1.4M-pod list that tuning must shrink (the Fenwick-tree removal).
#   4. usage accounting: intervals/s written, MiB per million intervals, a year's report.
#   (and after the engine: the MIG packing of nodes read from capacity, ms per node, and the
#   dynamic MIG planner, ns per plan.)
#   usage: bench/run.sh [BUILD_DIR]   (a Release build: make bench)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
trace=$root/data/alibaba-gpu-v2023/csv
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
echo "== one run per policy, default trace"
"$build/bench/bench_sim" "$trace/openb_node_list_gpu_node.csv" "$trace/openb_pod_list_default.csv" --repeat 5
echo "== FGD at scale: the default trace's nodes and pods replicated 8x and 16x (seed 42, tune 1.3)"
# Copies c of every node and pod, renamed -rC: 9,704 and 19,408 nodes, the pod list alike, so the
# cluster is as full as the original at each arrival fraction. Median of 3 runs each.
scale_dir=$(mktemp -d)
for k in 8 16; do
    awk -F, -v K="$k" 'NR == 1 {print; next} {l[++n] = $0}
        END {for (c = 0; c < K; c++) for (i = 1; i <= n; i++) {m = split(l[i], f, ",");
            s = f[1] "-r" c; for (j = 2; j <= m; j++) s = s "," f[j]; print s}}' \
        "$trace/openb_node_list_gpu_node.csv" >"$scale_dir/nodes_x$k.csv"
    awk -F, -v K="$k" 'NR == 1 {print; next} {l[++n] = $0}
        END {for (c = 0; c < K; c++) for (i = 1; i <= n; i++) {m = split(l[i], f, ",");
            s = f[1] "-r" c; for (j = 2; j <= m; j++) s = s "," f[j]; print s}}' \
        "$trace/openb_pod_list_default.csv" >"$scale_dir/pods_x$k.csv"
    nodes=$(($(wc -l <"$scale_dir/nodes_x$k.csv") - 1))
    "$build/bench/bench_sim" "$scale_dir/nodes_x$k.csv" "$scale_dir/pods_x$k.csv" --repeat 3 \
        --policy fgd | awk -v n="$nodes" '$1 == "fgd" \
        {printf "fgd scale: %d nodes, %d decisions, %.3f s median of 3, %.0f decisions/s\n", n, $4, $2, $5}'
done
rm -rf "$scale_dir"
echo "== multi-tenant engine: 10,000 nodes, 80,000 GPUs, 100,000 pending pods in 50 queues"
"$build/bench/bench_tenant"
echo "== MIG layouts rebuilt from a node's capacity (no agent inventory)"
"$build/bench/bench_capmig"
echo "== the scheduler's /metrics: queue and pool snapshot and one render, 5,000 nodes"
"$build/bench/bench_schedmetrics"
echo "== dynamic MIG: one re-partition plan per GPU (random layouts per model)"
"$build/bench/bench_migplan"
echo "== whole-GPU pick with NVLink topology: one 8-GPU node, every free set and size"
"$build/bench/bench_share" --picks
echo "== full sweep: 13 traces x 6 policies x 10 seeds"
pods=$(ls "$trace"/openb_pod_list_*.csv | paste -sd, -)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"$build/gpusched" simulate --nodes "$trace/openb_node_list_gpu_node.csv" --pods "$pods" \
    --policy all --seeds 42-51 --jobs "$(nproc)" --no-plot --out "$out" | tail -n 1
end=$(date +%s.%N)
total_pods=$(awk -F, 'NR>1 {s += $5} END {print s}' "$out/runs.csv")
awk -v s="$start" -v e="$end" -v p="$total_pods" \
    'BEGIN {printf "sweep: %.1f s wall, %d pod decisions, %.0f pods/s\n", e - s, p, p / (e - s)}'
echo "== simulate on a 1.4M-pod list tuned down to 1.0x the cluster (one run, random policy)"
# 172 copies of the default list with renamed pods; tuning down removes ~1.39M pods one at a time.
big=$out/big_pods.csv
awk -F, -v OFS=, 'NR == 1 {print; next} {line[++n] = $0}
    END {for (c = 0; c < 172; c++) for (i = 1; i <= n; i++) {split(line[i], f, ",");
        f[1] = f[1] "-c" c; s = f[1]; for (j = 2; j <= 11; j++) s = s "," f[j]; print s}}' \
    "$trace/openb_pod_list_default.csv" >"$big"
start=$(date +%s.%N)
"$build/gpusched" simulate --nodes "$trace/openb_node_list_gpu_node.csv" --pods "$big" \
    --policy random --seeds 42 --tune 1.0 --jobs 1 --no-plot --out "$out/big" >/dev/null
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="$(($(wc -l <"$big") - 1))" -v sz="$(stat -c %s "$big")" \
    'BEGIN {printf "big list: %d pods (%.0f MB), %.2f s wall\n", n, sz / 1e6, e - s}'
echo "== usage accounting: intervals written per second, database size, a year's report"
acct=$(mktemp -d)
"$build/bench/bench_usage" write 1000000 "$acct"
# The README's replay (a tenth of the cluster, arrivals 1,000 times faster, a sample a minute),
# recorded as the README records it.
"$build/gpusched" replay --nodes "$trace/openb_node_list_gpu_node.csv" \
    --pods "$trace/openb_pod_list_default.csv" --queues "$root/data/alibaba-gpu-v2023/queues.yaml" \
    --cluster-scale 0.1 --speedup 1000 --sample-s 60 --no-plot --out "$acct/replay" \
    --accounting "$acct/replay.db" --start-time 2026-12-01 | grep -E '^(replayed|accounting)'
"$build/bench/bench_usage" year "$acct/replay.db" "$acct"
"$build/bench/bench_usage" ingest 1000 "$acct"
rm -rf "$acct"
echo "== node agent (bench/agent.sh)"
bash "$root/bench/agent.sh" "$build"
