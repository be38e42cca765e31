#!/usr/bin/env bash
# A one-node cluster fed the default pod list: one pod is several percent of the capacity, so
# arrivals jump over columns of the arrived-workload axis. The headline columns (unallocated GPU %
# at 100%, fragmented GPU % at 80%) must still be filled, with the state after the pod that
# crossed them, and never read "never reached" once the arrivals passed them.
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
printf 'sn,cpu_milli,memory_mib,gpu,model\nnode-a,96000,786432,8,V100M16\n' >"$tmp/one.csv"
"$bin" simulate --nodes "$tmp/one.csv" \
    --pods "$src/data/alibaba-gpu-v2023/csv/openb_pod_list_default.csv" --policy fgd,bestfit \
    --seeds 42-43 --no-plot --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr" || {
    echo "FAIL: simulate on one node failed:"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
if grep -q 'never reached' "$tmp/stdout"; then
    echo "FAIL: a headline column reads 'never reached' though arrivals passed 100%:"
    cat "$tmp/stdout"; fail=1
fi
# runs.csv: arrived above capacity (8,000 milli) and both headline cells filled.
awk -F, 'NR > 1 && ($7 <= 8000 || $9 == "" || $10 == "") { bad = 1; print "FAIL: runs.csv row: " $0 }
         END { exit bad }' "$tmp/out/runs.csv" || fail=1
# Every column from 0% to 100% (arrivals passed them all) holds a number in allocation.csv; the
# first pod's arrival jumps past column 0 too.
awk -F, 'NR > 1 { for (k = 6; k <= 6 + 100; k++) if ($k == "") { bad = 1; print "FAIL: allocation.csv column " k - 6 " empty in " $2 " seed " $4 } }
         END { exit bad }' "$tmp/out/allocation.csv" || fail=1
[ $fail = 0 ] && echo "small_cluster: headline columns filled on one node"
exit $fail
