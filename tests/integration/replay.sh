#!/usr/bin/env bash
# gpusched replay on a slice of the real trace (48 nodes, 408 pods) with the bundled queues file:
# byte-identical result files run to run and against the golden copies, every result file and
# plot present, and usage errors exit 2 naming the option or the file and line.
# GS_UPDATE_GOLDEN=1 rewrites the golden files (commit them with the reason for the change).
set -uo pipefail
bin=$1 src=$2
golden=$src/tests/data/golden/replay
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
args=(replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv"
      --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --cluster-scale 0.25 --speedup 2000
      --sample-s 3600)
"$bin" "${args[@]}" --out "$tmp/a" >"$tmp/a.txt" || { echo "FAIL: replay exited $?"; cat "$tmp/a.txt"; exit 1; }
"$bin" "${args[@]}" --no-plot --out "$tmp/b" >/dev/null || { echo "FAIL: second replay"; exit 1; }
files=(queues.csv share.csv utilisation.csv waits.csv)
if [ "${GS_UPDATE_GOLDEN:-0}" = 1 ]; then
    mkdir -p "$golden"
    for f in "${files[@]}"; do cp "$tmp/a/$f" "$golden/$f"; done
    echo "golden files updated"
fi
for f in "${files[@]}"; do
    cmp "$tmp/a/$f" "$tmp/b/$f" || { echo "FAIL: $f differs between two runs"; fail=1; }
    cmp "$golden/$f" "$tmp/a/$f" || { echo "FAIL: $f differs from tests/data/golden/replay/$f"; fail=1; }
done
for f in share.png wait.png; do
    [ "$(head -c 4 "$tmp/a/$f" | od -An -tx1 | tr -d ' \n')" = 89504e47 ] || { echo "FAIL: $f is not a PNG"; fail=1; }
done
grep -q 'replayed 408 pods' "$tmp/a.txt" || { echo "FAIL: summary line"; cat "$tmp/a.txt"; fail=1; }
# Evictions are split by reason, and the parts add up to the total.
line=$(grep '^replayed' "$tmp/a.txt")
if [[ $line =~ ([0-9]+)\ evictions\ \(preemption\ ([0-9]+),\ reclaim\ ([0-9]+),\ gang\ ([0-9]+)\) ]]; then
    [ $((BASH_REMATCH[2] + BASH_REMATCH[3] + BASH_REMATCH[4])) = "${BASH_REMATCH[1]}" ] ||
        { echo "FAIL: evictions by reason do not add up: $line"; fail=1; }
else
    echo "FAIL: no evictions by reason in: $line"; fail=1
fi
grep -q 'JCT (job completion' "$tmp/a.txt" || { echo "FAIL: the footer does not define JCT"; fail=1; }
# --cluster-scale 0.25 keeps 12 of the 49 nodes, 53 of 233 GPUs: quotas and limits scale by
# 53/233, rounded down to a milli-GPU: research 500 -> 113.733 (113,733.9 milli), 800 -> 181.974.
"$bin" "${args[@]}" --no-plot --out "$tmp/s" >/dev/null 2>"$tmp/s.err"
grep -q 'keeps 12 of 49 nodes, 53 of 233 GPUs; queue quotas and limits scaled by 0.2275' "$tmp/s.err" &&
    grep -q 'research 500/800 -> 113.733/181.974' "$tmp/s.err" ||
    { echo "FAIL: scaled quotas not as worked out:"; cat "$tmp/s.err"; fail=1; }
# The queues file is checked: a broken one names its line.
printf 'apiVersion: gpusched.io/v1\nkind: QueueConfig\nqueues:\n  - name: a\n    parentQueue: nowhere\n' >"$tmp/bad.yaml"
"$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$src/tests/data/slice_pods.csv" \
    --queues "$tmp/bad.yaml" --out "$tmp/c" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc != 2 ] || ! grep -q 'bad.yaml:5' "$tmp/err" || [ -e "$tmp/c" ]; then
    echo "FAIL: bad queues file: rc $rc"; cat "$tmp/err"; fail=1
fi
# A pod list without time columns cannot be replayed.
"$bin" replay --nodes "$src/tests/data/slice_nodes.csv" \
    --pods "$src/data/alibaba-gpu-v2023/csv/openb_pod_list_multigpu20.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --out "$tmp/d" >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q 'time columns' "$tmp/err" || { echo "FAIL: no-times pod list"; cat "$tmp/err"; fail=1; }
# Nothing waited (three small pods on the whole slice): wait.png says so instead of an empty
# frame. A stand-in gnuplot keeps the scripts it is given; the real one draws the same script.
mkdir -p "$tmp/gp"
cat >"$tmp/gp/gnuplot" <<GP
#!/bin/sh
cat "\$1" >>"$tmp/scripts.gp"
GP
chmod +x "$tmp/gp/gnuplot"
head -4 "$src/tests/data/slice_pods.csv" >"$tmp/few.csv"
PATH=$tmp/gp:$PATH "$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$tmp/few.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --out "$tmp/e" >/dev/null 2>&1
grep -q "no pod waited 1 s or more" "$tmp/scripts.gp" 2>/dev/null ||
    { echo "FAIL: wait.png of a replay where nothing waited has no note"; fail=1; }
# What gnuplot warns about on a plot it draws ("empty y range" on a plot of zeros) is not passed
# on (a stand-in warns, then the real one draws), and a gnuplot that fails is named with its
# last line.
if real=$(command -v gnuplot); then
    printf '#!/bin/sh\necho "Warning: empty y range [0:0], adjusting to [-1:1]" >&2\nexec %s "$@"\n' \
        "$real" >"$tmp/gp/gnuplot"
    PATH=$tmp/gp:$PATH "$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$tmp/few.csv" \
        --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --out "$tmp/f" >/dev/null 2>"$tmp/err"
    [ $? = 0 ] && ! grep -q "empty y range" "$tmp/err" && [ -s "$tmp/f/wait.png" ] ||
        { echo "FAIL: gnuplot's warnings reach the user"; cat "$tmp/err"; fail=1; }
fi
cat >"$tmp/gp/gnuplot" <<'GP'
#!/bin/sh
echo 'Warning: something first' >&2
printf '"%s" line 3: undefined variable: nope\n\n' "$1" >&2
exit 1
GP
PATH=$tmp/gp:$PATH "$bin" replay --nodes "$src/tests/data/slice_nodes.csv" --pods "$tmp/few.csv" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --out "$tmp/g" >/dev/null 2>"$tmp/err"
grep -q 'gnuplot failed (".*" line 3: undefined variable: nope); no plot written' "$tmp/err" &&
    ! grep -q "something first" "$tmp/err" ||
    { echo "FAIL: a failing gnuplot is not named with its last line"; cat "$tmp/err"; fail=1; }
[ $fail = 0 ] && echo "replay: all checks passed"
exit $fail
