#!/usr/bin/env bash
# Determinism: a small slice of the real trace (48 nodes, 408 pods) through all six policies and
# three seeds gives byte-identical result files, with one job and with two; a tuned-down run
# (random pods removed) matches the files of the array-based removal it replaced.
# GS_UPDATE_GOLDEN=1 rewrites the golden files (commit them with the reason for the change).
set -euo pipefail
bin=$1 src=$2
golden=$src/tests/data/golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(simulate --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv"
      --policy all --seeds 42-44 --tune 1.3 --no-plot)
"$bin" "${args[@]}" --jobs 1 --out "$tmp/j1" >/dev/null
"$bin" "${args[@]}" --jobs 2 --out "$tmp/j2" >/dev/null
files=(allocation.csv fragmentation.csv frag_ratio.csv runs.csv summary.csv)
if [ "${GS_UPDATE_GOLDEN:-0}" = 1 ]; then
    mkdir -p "$golden"
    for f in "${files[@]}"; do cp "$tmp/j1/$f" "$golden/$f"; done
    echo "golden files updated"
fi
fail=0
for f in "${files[@]}"; do
    cmp "$tmp/j1/$f" "$tmp/j2/$f" || { echo "FAIL: $f differs between --jobs 1 and 2"; fail=1; }
    cmp "$golden/$f" "$tmp/j1/$f" || { echo "FAIL: $f differs from tests/data/golden/$f"; fail=1; }
done
# Tuning down (--tune 0.5 removes random pods): the files below were written by the array
# version of the removal (one memmove per pod) that the Fenwick-tree version replaced; the same
# random stream must remove the same pods.
"$bin" simulate --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv" \
    --policy all --seeds 42-44 --tune 0.5 --no-plot --jobs 1 --out "$tmp/shrink" >/dev/null
for f in runs.csv allocation.csv; do
    cmp "$src/tests/data/golden-shrink/$f" "$tmp/shrink/$f" ||
        { echo "FAIL: tuned-down $f differs from tests/data/golden-shrink/$f"; fail=1; }
done
[ $fail = 0 ] && echo "golden: ${#files[@]} files byte-identical, and 2 tuned-down files"
exit $fail
