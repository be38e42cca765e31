#!/usr/bin/env bash
# gpusched replay forms gangs from the queues file's podGroups rule, on the hand-sized trace of
# tests/data/gangs (one 4-GPU node; p0 1 GPU for 1000 s from t=0; a1, a2 2 GPUs for 100 s from
# t=10 and t=20; a3 2 GPUs for 50 s from t=100). {a1, a2} is a gang, so it waits for p0's end
# and starts whole at 1000 s while a3 backfills at once: the waits, in pod order, are 0, 990,
# 980, 0 s (worked out in tests/unit/test_replay.c). Without the rule they are 0, 0, 90, 110.
set -uo pipefail
bin=$1 src=$2
d=$src/tests/data/gangs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" --queues "$d/queues.yaml" --no-plot \
    --out "$tmp/g" >"$tmp/g.txt" || { echo "FAIL: replay exited $?"; cat "$tmp/g.txt"; exit 1; }
grep -qx 'gangs: 1 formed by the podGroups rules, 1 started whole, 0 timed out' "$tmp/g.txt" ||
    { echo "FAIL: gang summary line"; cat "$tmp/g.txt"; fail=1; }
printf 'queue,pod,wait_s\nteam,p0,0.000\nteam,a1,990.000\nteam,a2,980.000\nteam,a3,0.000\n' >"$tmp/want"
cmp "$tmp/want" "$tmp/g/waits.csv" || { echo "FAIL: waits with the gang"; cat "$tmp/g/waits.csv"; fail=1; }
# The same trace without the rule: no gang line, members start alone.
sed '/^podGroups:/,$d' "$d/queues.yaml" >"$tmp/plain.yaml"
"$bin" replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" --queues "$tmp/plain.yaml" --no-plot \
    --out "$tmp/p" >"$tmp/p.txt" || { echo "FAIL: plain replay exited $?"; exit 1; }
grep -q '^gangs:' "$tmp/p.txt" && { echo "FAIL: a gang line without podGroups"; fail=1; }
printf 'queue,pod,wait_s\nteam,p0,0.000\nteam,a1,0.000\nteam,a2,90.000\nteam,a3,110.000\n' >"$tmp/want"
cmp "$tmp/want" "$tmp/p/waits.csv" || { echo "FAIL: waits without gangs"; cat "$tmp/p/waits.csv"; fail=1; }
# A bad rule names its line and field.
cp "$d/queues.yaml" "$tmp/bad.yaml" && sed -i 's/minMember: 2 /minMember: 1 /' "$tmp/bad.yaml"
"$bin" replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" --queues "$tmp/bad.yaml" --no-plot \
    --out "$tmp/b" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc != 2 ] || ! grep -q "bad.yaml:15:16: field 'minMember': '1' is out of range (2 to 1000)" "$tmp/err"; then
    echo "FAIL: bad rule: rc $rc"; cat "$tmp/err"; fail=1
fi
[ $fail = 0 ] && echo "replay gangs: all checks passed"
exit $fail
