#!/usr/bin/env bash
# The simulate command line: help, usage errors (exit 2, message naming the option), the plot and
# that results are left complete (no temporary files).
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
nodes=$src/tests/data/slice_nodes.csv pods=$src/tests/data/slice_pods.csv

expect() { # expect RC PATTERN -- ARGS...
    local want=$1 pat=$2; shift 3
    local got
    "$bin" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; got=$?
    if [ "$got" != "$want" ] || ! grep -qE -- "$pat" "$tmp/stdout" "$tmp/stderr"; then
        echo "FAIL: gpusched $* -> rc $got (want $want), output:"; cat "$tmp/stdout" "$tmp/stderr"
        fail=1
    fi
}
expect 0 'usage: gpusched simulate' -- simulate --help
expect 0 '--jobs N' -- simulate --help
expect 0 'simulate' -- --help
expect 0 '^gpusched [0-9]' -- version
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 2 "unknown option '--bogus'" -- simulate --bogus
expect 2 '--nodes and --pods are required' -- simulate --nodes "$nodes"
expect 2 "unknown policy 'fastest'" -- simulate --nodes "$nodes" --pods "$pods" --policy fgd,fastest
expect 2 "--seeds: expected" -- simulate --nodes "$nodes" --pods "$pods" --seeds 9-3
expect 2 "--tune: expected" -- simulate --nodes "$nodes" --pods "$pods" --tune -1
expect 2 "--jobs: expected" -- simulate --nodes "$nodes" --pods "$pods" --jobs 0
expect 2 "--out needs a value" -- simulate --nodes "$nodes" --pods "$pods" --out
expect 2 "no-such.csv" -- simulate --nodes "$nodes" --pods "$tmp/no-such.csv"

# A successful run: the summary table, every result file, a real PNG, nothing temporary left.
expect 0 'fgd .*±' -- simulate --nodes "$nodes" --pods "$pods" --policy bestfit,fgd --seeds 7 \
    --out "$tmp/out"
for f in allocation.csv fragmentation.csv frag_ratio.csv runs.csv summary.csv allocation.png; do
    [ -s "$tmp/out/$f" ] || { echo "FAIL: $f missing"; fail=1; }
done
if [ "$(head -c 8 "$tmp/out/allocation.png" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
    echo "FAIL: allocation.png is not a PNG"; fail=1
fi
leftover=$(find "$tmp/out" -name '*.tmp*' -o -name '*.gp' -o -name '*.dat')
[ -z "$leftover" ] || { echo "FAIL: temporary files left: $leftover"; fail=1; }
# Two data rows (bestfit, fgd) plus the header in each column file.
[ "$(wc -l <"$tmp/out/allocation.csv")" = 3 ] || { echo "FAIL: allocation.csv rows"; fail=1; }
[ $fail = 0 ] && echo "cli: all checks passed"
exit $fail
