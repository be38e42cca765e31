#!/usr/bin/env bash
# Pods that can never run (a gpu_spec no node has, a model name in another case, 16 GPUs on
# nodes of at most 8) are counted as failures: simulate and replay warn once per kind, with the
# count and a first example, and say nothing when every pod fits somewhere.
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
nodes=$src/tests/data/slice_nodes.csv
queues=$src/data/alibaba-gpu-v2023/queues.yaml
{
    head -30 "$src/tests/data/slice_pods.csv"
    echo 'x-h100-a,8000,16384,1,1000,H100,LS,Running,0,1000,0'
    echo 'x-h100-b,8000,16384,2,1000,H100|A800,LS,Running,0,1000,0'
    echo 'x-case,8000,16384,1,1000,v100m16,LS,Running,0,1000,0'
    echo 'x-sixteen,8000,16384,16,1000,,LS,Running,0,1000,0'
} >"$tmp/pods.csv"
for c in simulate replay; do
    if [ $c = simulate ]; then args=(simulate --policy fgd --seeds 7)
    else args=(replay --queues "$queues"); fi
    "$bin" "${args[@]}" --nodes "$nodes" --pods "$tmp/pods.csv" --no-plot --out "$tmp/$c" \
        >/dev/null 2>"$tmp/err" || { echo "FAIL: $c exited $?"; cat "$tmp/err"; fail=1; }
    for want in "2 pods ask for a GPU model no node has (first: x-h100-a, gpu_spec 'H100')" \
                "1 pod names a GPU model in another case than the nodes (first: gpu_spec 'v100m16'" \
                "1 pod asks for more GPUs, CPU or memory than any one node of their GPU model has (first: x-sixteen asks 16 GPUs"; do
        grep -qF "$want" "$tmp/err" || { echo "FAIL: $c: no warning '$want':"; cat "$tmp/err"; fail=1; }
    done
    [ "$(grep -c warning "$tmp/err")" = 3 ] || { echo "FAIL: $c: want 3 warnings:"; cat "$tmp/err"; fail=1; }
    "$bin" "${args[@]}" --nodes "$nodes" --pods "$src/tests/data/slice_pods.csv" --no-plot \
        --out "$tmp/$c-ok" >/dev/null 2>"$tmp/err"
    grep -q warning "$tmp/err" && { echo "FAIL: $c warns on the slice:"; cat "$tmp/err"; fail=1; }
done
[ $fail = 0 ] && echo "unfit: one warning per kind"
exit $fail
