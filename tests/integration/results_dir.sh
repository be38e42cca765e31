#!/usr/bin/env bash
# The output directory of simulate and replay: an interrupted run leaves no staging folder, a
# later run removes stale ones, a result set replaces the previous one as a whole (MANIFEST; files
# of the old set the new one does not write are removed, others are named), no gnuplot still
# gives the CSV files with one warning, and files follow the umask. gnuplot is a stand-in here.
set -uo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "FAIL: $*"; fail=1; }
nodes=$src/tests/data/slice_nodes.csv pods=$src/tests/data/slice_pods.csv
sim=(simulate --nodes "$nodes" --pods "$pods" --policy fgd --seeds 7)
rep=(replay --nodes "$nodes" --pods "$pods" --queues "$src/data/alibaba-gpu-v2023/queues.yaml"
     --cluster-scale 0.25 --speedup 2000 --sample-s 3600)

# Stand-ins: a gnuplot that writes a PNG header to the script's output, and a slow one.
mkdir -p "$tmp/fast" "$tmp/slow" "$tmp/none"
cat >"$tmp/fast/gnuplot" <<'GP'
#!/bin/sh
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$1")
printf '\211PNG\r\n\032\n' >"$out"
GP
cat >"$tmp/slow/gnuplot" <<GP
#!/bin/sh
echo \$\$ >"$tmp/slow.pid"
exec sleep 60
GP
chmod +x "$tmp/fast/gnuplot" "$tmp/slow/gnuplot"
stages() { find "$1" -maxdepth 1 -name '.gpusched-*' | wc -l; }

# 1. SIGINT and SIGTERM while gnuplot runs: no stage left, gnuplot stopped, the signal's status.
set -m
for sig in INT TERM; do
    for cmd in sim rep; do
        out=$tmp/sig-$cmd-$sig
        rm -f "$tmp/slow.pid"
        if [ $cmd = sim ]; then args=("${sim[@]}"); else args=("${rep[@]}"); fi
        PATH=$tmp/slow:$PATH "$bin" "${args[@]}" --out "$out" >/dev/null 2>&1 &
        pid=$!
        for _ in $(seq 100); do [ -s "$tmp/slow.pid" ] && break; sleep 0.1; done
        [ -s "$tmp/slow.pid" ] || say "$cmd: the slow gnuplot never started"
        [ "$(stages "$out")" = 1 ] || say "$cmd: no stage while gnuplot runs"
        kill -$sig $pid
        wait $pid 2>/dev/null; rc=$?
        want=$((128 + $(kill -l $sig)))
        [ $rc = $want ] || say "$cmd SIG$sig: exit $rc, want $want"
        [ "$(stages "$out")" = 0 ] || say "$cmd SIG$sig: a stage is left: $(ls -a "$out")"
        gp=$(cat "$tmp/slow.pid" 2>/dev/null)
        [ -n "$gp" ] && kill -0 "$gp" 2>/dev/null && { say "$cmd SIG$sig: gnuplot still runs"; kill "$gp"; }
    done
done
set +m

# 2. A stale stage of an interrupted run is removed by the next run.
out=$tmp/stale
mkdir -p "$out/.gpusched-AbC123"
echo partial >"$out/.gpusched-AbC123/allocation.csv.tmpXyZ"
"$bin" "${sim[@]}" --no-plot --out "$out" >/dev/null 2>&1 || say "run after a stale stage failed"
[ "$(stages "$out")" = 0 ] || say "a stale stage is left: $(ls -a "$out")"

# 3. The set as a whole: a run without the plot removes the previous run's plot; a file no
# manifest lists stays and is named.
out=$tmp/set
PATH=$tmp/fast:$PATH "$bin" "${sim[@]}" --out "$out" >/dev/null 2>&1 || say "plotted run failed"
[ -s "$out/allocation.png" ] || say "the stand-in's allocation.png is missing"
grep -qx allocation.png "$out/MANIFEST" || say "MANIFEST does not list allocation.png"
echo mine >"$out/notes.txt"
"$bin" "${sim[@]}" --no-plot --out "$out" >/dev/null 2>"$tmp/err" || say "second run failed"
[ -e "$out/allocation.png" ] && say "the previous run's allocation.png is left beside the new set"
[ -e "$out/notes.txt" ] || say "a file no manifest lists was removed"
grep -q "also holds files this run did not write: notes.txt" "$tmp/err" || say "notes.txt not named: $(cat "$tmp/err")"
# ... and says what it replaced: the five CSV files written again, the two plots removed.
grep -q "replaced the earlier result set (5 files written again); removed 2 of its files this run does not write: allocation.png, fragmentation.png" "$tmp/err" ||
    say "the replaced set is not told: $(cat "$tmp/err")"
want="allocation.csv frag_ratio.csv fragmentation.csv runs.csv summary.csv"
[ "$(grep -v '^#' "$out/MANIFEST" | tr '\n' ' ')" = "$want " ] || say "MANIFEST: $(cat "$out/MANIFEST")"

# 4. No gnuplot on PATH: the CSV files, one warning, exit 0 (simulate and replay).
out=$tmp/noplot
PATH=$tmp/none "$bin" "${sim[@]}" --out "$out/s" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 0 ] || say "simulate without gnuplot: exit $rc: $(cat "$tmp/err")"
for f in allocation.csv fragmentation.csv frag_ratio.csv runs.csv summary.csv; do
    [ -s "$out/s/$f" ] || say "simulate without gnuplot: $f missing"
done
[ "$(grep -c warning "$tmp/err")" = 1 ] || say "simulate without gnuplot: want one warning: $(cat "$tmp/err")"
PATH=$tmp/none "$bin" "${rep[@]}" --out "$out/r" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 0 ] || say "replay without gnuplot: exit $rc: $(cat "$tmp/err")"
for f in queues.csv share.csv utilisation.csv waits.csv; do
    [ -s "$out/r/$f" ] || say "replay without gnuplot: $f missing"
done
[ "$(grep -c warning "$tmp/err")" = 1 ] || say "replay without gnuplot: want one warning: $(cat "$tmp/err")"

# 5. Modes follow the umask: 022 gives 0644, 077 gives 0600.
for m in 022:644 077:600; do
    out=$tmp/mode-${m%%:*}
    (umask "${m%%:*}"; PATH=$tmp/fast:$PATH "$bin" "${sim[@]}" --out "$out/s" >/dev/null 2>&1
     PATH=$tmp/fast:$PATH "$bin" "${rep[@]}" --out "$out/r" >/dev/null 2>&1)
    for f in "$out"/s/* "$out"/r/*; do
        [ "$(stat -c %a "$f")" = "${m##*:}" ] || say "umask ${m%%:*}: $f is $(stat -c %a "$f")"
    done
done
[ $fail = 0 ] && echo "results_dir: all checks passed"
exit $fail
