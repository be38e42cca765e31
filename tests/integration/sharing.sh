#!/usr/bin/env bash
# gpusched replay on the mixed-sharing example of data/sharing-example (README, "GPU sharing
# modes"): two GPUs in each mode, ten pods that all arrive at t=0 and run one hour.
# Worked by hand from the charge rules (include/gpusched/charge.h), each pod's charge rounded
# down to milli-GPU as the engine books it:
#   mig (A100-40GB as 3g.20gb+2g.10gb+2g.10gb): m1, m3 one 3g each = 3/7 -> 428; m2, m4 two
#     2g each = 4/7 -> 571; 428+428+571+571 = 1998 milli for 1 h = 1.998 GPU-h; both cards
#     full (7 of 7 slices): peak 100 %.
#   fractions (A100-40GB, 40960 MiB): f1 20480 MiB = 500, f2 250 milli (takes 10240 MiB),
#     f3 40960 MiB = 1000 for the first hour; f4 asks 30000 MiB, more than either GPU has free
#     (40960-20480-10240 = 10240 and 0), so it waits 3600 s for them to leave (no memory is
#     over-granted) and then runs an hour at 30000/40960 -> 732: 2.482 GPU-h; peak 100 % (f3).
#   replicas (H100-80GB, replicas:4): t1 2 slots on two GPUs, 2 x 1/4 = 500: 0.5 GPU-h; peak
#     25 % (one slot of four on each).
#   whole (V100M16): w1 2 GPUs = 2000: 2.0 GPU-h; peak 100 %.
# The run lasts 2 h (f4's end), so alloc% is GPU-h over 2 GPUs x 2 h; the modes add up to the
# queue's GPU-hours, 6.980, which the engine books by itself.
set -uo pipefail
bin=$1 src=$2
d=$src/data/sharing-example
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$bin" replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" --queues "$d/queues.yaml" --no-plot \
    --out "$tmp/s" >"$tmp/s.txt" || { echo "FAIL: replay exited $?"; cat "$tmp/s.txt"; exit 1; }
cat >"$tmp/want" <<'CSV'
mode,gpus,pods_started,gpu_hours,alloc_pct,peak_gpu_fill_pct
fractions,2,4,2.482,62.050,100.0
replicas,2,1,0.500,12.500,25.0
mig,2,4,1.998,49.950,100.0
whole,2,1,2.000,50.000,100.0
all,8,10,6.980,,
CSV
cmp "$tmp/want" "$tmp/s/modes.csv" || { echo "FAIL: modes.csv"; cat "$tmp/s/modes.csv"; fail=1; }
grep -qx 'team,f4,3600.000' "$tmp/s/waits.csv" ||
    { echo "FAIL: f4 should wait for memory"; cat "$tmp/s/waits.csv"; fail=1; }
[ "$(grep -c ',0.000$' "$tmp/s/waits.csv")" = 9 ] || { echo "FAIL: nine pods start at once"; fail=1; }
# The modes add up to the whole: the queues' GPU-hours, which the engine books on its own.
q=$(awk -F, 'NR > 1 { s += $11 } END { printf "%.3f", s }' "$tmp/s/queues.csv")
m=$(awk -F, 'NR > 1 && $1 != "all" { s += $4 } END { printf "%.3f", s }' "$tmp/s/modes.csv")
[ "$q" = "$m" ] && [ "$q" = 6.980 ] || { echo "FAIL: queues $q GPU-h, modes $m"; fail=1; }
# No GPU of any mode is ever filled past its capacity.
awk -F, 'NR > 1 && $1 != "all" && $6 > 100 { bad = 1 } END { exit bad }' "$tmp/s/modes.csv" ||
    { echo "FAIL: a GPU over 100 %"; fail=1; }
grep -q '^  mig                   2       4      1.998    50.0     100.0$' "$tmp/s.txt" ||
    { echo "FAIL: mode table"; cat "$tmp/s.txt"; fail=1; }
# Without the sharing columns there is no mode report (golden.sh keeps such runs byte-identical).
cut -d, -f1-5 "$d/nodes.csv" | sed 's/A100-40GB/A100/; s/H100-80GB/H100/' >"$tmp/plain_nodes.csv"
cut -d, -f1-10 "$d/pods.csv" | grep -E '^(name|f2|w1),' | sed 's/A100-40GB/A100/' >"$tmp/plain_pods.csv"
"$bin" replay --nodes "$tmp/plain_nodes.csv" --pods "$tmp/plain_pods.csv" --queues "$d/queues.yaml" \
    --no-plot --out "$tmp/p" >"$tmp/p.txt" || { echo "FAIL: plain replay exited $?"; cat "$tmp/p.txt"; fail=1; }
[ -e "$tmp/p/modes.csv" ] && { echo "FAIL: modes.csv without sharing columns"; fail=1; }
grep -q 'GPU mode' "$tmp/p.txt" && { echo "FAIL: mode table without sharing columns"; fail=1; }
# A bad layout names the file, line and field.
sed 's/mig:3g.20gb+2g.10gb+2g.10gb/mig:4g.20gb+4g.20gb/' "$d/nodes.csv" >"$tmp/bad.csv"
"$bin" replay --nodes "$tmp/bad.csv" --pods "$d/pods.csv" --queues "$d/queues.yaml" --no-plot \
    --out "$tmp/b" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc != 2 ] || ! grep -q "bad.csv:3:7: field 'gpu_mode': A100-40GB cannot hold this layout" "$tmp/err"; then
    echo "FAIL: bad layout: rc $rc"; cat "$tmp/err"; fail=1
fi
# A MIG request that also asks milli-GPU is refused with its line and column.
sed 's/^m1,1000,4096,1,0,/m1,1000,4096,1,300,/' "$d/pods.csv" >"$tmp/badpod.csv"
"$bin" replay --nodes "$d/nodes.csv" --pods "$tmp/badpod.csv" --queues "$d/queues.yaml" --no-plot \
    --out "$tmp/b2" >/dev/null 2>"$tmp/err2"
rc=$?
if [ $rc != 2 ] || ! grep -q "badpod.csv:2:12: field 'mig_profile': not a valid request" "$tmp/err2"; then
    echo "FAIL: bad pod: rc $rc"; cat "$tmp/err2"; fail=1
fi
# A sharing rule of the queues file turns the plain whole-GPU pod w1 (2 GPUs) into 2 time-sliced
# slots (its gpu_spec emptied): only the H100s (replicas:4) take slots, 2 x 1/4 = 0.5 GPU-h in
# the hour the replay lasts (25 % of 2 GPUs), and the V100s stay idle.
cp "$d/queues.yaml" "$tmp/rule.yaml"
printf 'sharing:\n  - {kind: timeslice, pods: whole}\n' >>"$tmp/rule.yaml"
cut -d, -f1-10 "$d/pods.csv" | grep -E '^(name|f2|w1),' | sed 's/,V100M16,/,,/' >"$tmp/rule_pods.csv"
"$bin" replay --nodes "$d/nodes.csv" --pods "$tmp/rule_pods.csv" --queues "$tmp/rule.yaml" \
    --no-plot --out "$tmp/r" >"$tmp/r.txt" || { echo "FAIL: rule replay exited $?"; cat "$tmp/r.txt"; fail=1; }
grep -qx 'sharing rules: 0 pods turned into memory, 0 into MIG, 1 into time-sliced requests (seed 42)' \
    "$tmp/r.txt" || { echo "FAIL: sharing rule line"; cat "$tmp/r.txt"; fail=1; }
grep -qx 'replicas,2,1,0.500,25.000,25.0' "$tmp/r/modes.csv" &&
    grep -qx 'whole,2,0,0.000,0.000,0.0' "$tmp/r/modes.csv" ||
    { echo "FAIL: modes after the rule"; cat "$tmp/r/modes.csv"; fail=1; }
# simulate on the same example: --tune 0.9 asks 7200 milli against the pods' 6980 and no
# pod's charge fits in the 220 left, so each run places exactly these ten pods, never leaving.
# Whatever the order, the MIG pods fill both cards (1998 of 2000 milli: 99.9 %, 4 pods), w1
# holds both V100s (100 %) and t1 one slot of four on each H100 (25 %).
"$bin" simulate --nodes "$d/nodes.csv" --pods "$d/pods.csv" --policy fgd --seeds 42-44 \
    --tune 0.9 --no-plot --out "$tmp/sim" >"$tmp/sim.txt" ||
    { echo "FAIL: simulate exited $?"; cat "$tmp/sim.txt"; fail=1; }
grep -Eq '^  fgd +[0-9.]+ \([0-9.]+\) +25\.0 \(1\.0\) +99\.9 \(4\.0\) +100\.0 \(1\.0\)$' "$tmp/sim.txt" ||
    { echo "FAIL: simulate mode summary"; cat "$tmp/sim.txt"; fail=1; }
# The same replay with --accounting: the usage store charges the memory, MIG and time-sliced
# grants as the replay's table does, 6.98 GPU-hours in all (it refused MIG and memory grants
# before they were read from the placement).
"$bin" replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" --queues "$d/queues.yaml" --no-plot \
    --accounting "$tmp/acct.db" --out "$tmp/acct" >"$tmp/acct.txt" 2>&1 ||
    { echo "FAIL: replay --accounting exited $?"; cat "$tmp/acct.txt"; fail=1; }
"$bin" report usage --db "$tmp/acct.db" --from 1970-01-01 --to 2100-01-01 --by queue \
    >"$tmp/acct_report.txt" 2>&1 || { echo "FAIL: report usage"; cat "$tmp/acct_report.txt"; fail=1; }
grep -Eq '^team +6\.98 ' "$tmp/acct_report.txt" ||
    { echo "FAIL: the store does not charge 6.98 GPU-hours"; cat "$tmp/acct_report.txt"; fail=1; }
# Dynamic MIG on tests/data/dynmig (worked in tests/unit/test_replay_dynmig.c): one H100-80GB
# of seven 1g.10gb; the first 3g.40gb pod waits the re-partition (10 s by default, 25 s asked),
# the second 400 s + that for the first one's 3g; without the option neither starts.
dm=$src/tests/data/dynmig
for delay in default 25; do
    opt=--dynamic-mig want2=10.000 want4=410.000 secs=10.0
    [ $delay = default ] || { opt=--dynamic-mig=$delay want2=25.000 want4=425.000 secs=25.0; }
    "$bin" replay --nodes "$dm/nodes.csv" --pods "$dm/pods.csv" --queues "$dm/queues.yaml" \
        --no-plot --out "$tmp/dm$delay" $opt >"$tmp/dm$delay.txt" ||
        { echo "FAIL: replay $opt exited $?"; cat "$tmp/dm$delay.txt"; fail=1; }
    grep -qx "team,p2,$want2" "$tmp/dm$delay/waits.csv" &&
        grep -qx "team,p4,$want4" "$tmp/dm$delay/waits.csv" ||
        { echo "FAIL: waits with $opt"; cat "$tmp/dm$delay/waits.csv"; fail=1; }
    grep -qx "dynamic MIG: 1 re-partition, $secs s each before the pod starts" "$tmp/dm$delay.txt" ||
        { echo "FAIL: dynamic MIG line with $opt"; cat "$tmp/dm$delay.txt"; fail=1; }
done
"$bin" replay --nodes "$dm/nodes.csv" --pods "$dm/pods.csv" --queues "$dm/queues.yaml" \
    --no-plot --out "$tmp/dmoff" >"$tmp/dmoff.txt" || { echo "FAIL: replay exited $?"; fail=1; }
[ "$(tail -n +2 "$tmp/dmoff/waits.csv" | cut -d, -f2 | paste -sd,)" = p1,p3 ] &&
    ! grep -q 'dynamic MIG' "$tmp/dmoff.txt" || { echo "FAIL: without --dynamic-mig"; fail=1; }
"$bin" replay --nodes "$dm/nodes.csv" --pods "$dm/pods.csv" --queues "$dm/queues.yaml" \
    --no-plot --out "$tmp/dmbad" --dynamic-mig=-5 >/dev/null 2>"$tmp/dmerr"
rc=$?
if [ $rc != 2 ] || ! grep -qx "gpusched replay: --dynamic-mig: expected a delay in seconds in \[0, 86400\], got '-5'" "$tmp/dmerr"; then
    echo "FAIL: bad --dynamic-mig: rc $rc"; cat "$tmp/dmerr"; fail=1
fi
[ $fail = 0 ] && echo "replay sharing: all checks passed"
exit $fail
