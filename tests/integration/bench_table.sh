#!/usr/bin/env bash
# bench/readme_table.py: the README's speed table written from a recorded bench/run.sh output
# (tests/data/bench/run_output.txt, figures worked out by hand below); a skipped benchmark
# shows as not measured; a README without the markers, or an output without figures, is
# refused and the file left as it was.
set -uo pipefail
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "FAIL: $*"; fail=1; }
printf '# x\n\nbefore\n<!-- bench-table:begin -->\nold row\n<!-- bench-table:end -->\nafter\n' >"$tmp/README.md"
python3 "$src/bench/readme_table.py" "$src/tests/data/bench/run_output.txt" "$tmp/README.md" >"$tmp/out" 2>&1 ||
    say "readme_table exited $?: $(cat "$tmp/out")"
r=$tmp/README.md
grep -q '^old row$' "$r" && say "the old table is kept"
grep -q '^before$' "$r" && grep -q '^after$' "$r" || say "text around the markers changed"
# bench_sim: fgd median 0.210 s, 51514 pods/s; the others 0.130 and 0.155 s.
grep -qF '| one FGD run, default trace, seed 42, tune 1.3 (10,818 pod decisions on 1,213 nodes) | 0.21 s median of 5 (51,514 pods/s); other policies 0.13-0.15 s |' "$r" ||
    grep -qF '0.21 s median of 5 (51,514 pods/s); other policies 0.13-0.16 s' "$r" || say "FGD row: $(grep 'FGD run' "$r")"
# fgd scale (bench/run.sh's two lines): 86,544 decisions in 1.850 s is 46,781/s (46,780.5
# rounded by %.0f); 173,088 in 4.120 s is 42,011.7, printed 42012.
grep -qF '| FGD on the default trace replicated 8x (9,704 nodes) | 46,781 decisions/s (86,544 decisions in 1.85 s, median of 3) | 50,000/s or more |' "$r" ||
    say "8x row: $(grep 'replicated 8x' "$r")"
grep -qF '| FGD on the default trace replicated 16x (19,408 nodes) | 42,012 decisions/s (173,088 decisions in 4.12 s, median of 3) | 40,000/s or more |' "$r" ||
    say "16x row: $(grep 'replicated 16x' "$r")"
# sweep: 75.2 s, 111,702 pods/s, 8.4 million decisions.
grep -qF '| 75 s (111,702 pods/s, 8.4 million decisions) |' "$r" || say "sweep row: $(grep 'sweep' "$r")"
grep -qF '| median 15.3 us, p99 34.0 us (bestfit, bounded scan) |' "$r" || say "decision row"
grep -qF '| median 13.3 us, p99 28.3 us |' "$r" || say "live decision row"
grep -qF '| 0.17 us / 0.06 us per node (6 classes) |' "$r" || say "node update row"
grep -qF '| 69 ms | 1 s or less |' "$r" || say "adopt row"
grep -qF '| 1,791 B per node, 433 B per pending pod |' "$r" || say "memory row"
grep -qF '| 1.10 ms with 20,000 running pods |' "$r" || say "preemption row"
grep -qF '| 3.10 ms / 0.040 ms / 8.40 ms |' "$r" || say "gang row"
# bench_usage: 80,972 intervals/s, 106,383 per CPU-second, 254 MiB, a year's report 0.110 s.
grep -qF '| 80,972/s (106,383 per CPU-second, batches of 1,000 events) | 50,000/s or more |' "$r" || say "usage write row"
grep -qF '| 254 MiB per million intervals |' "$r" || say "usage size row"
grep -qF '| 0.110 s (22,335 intervals) | under 1 s |' "$r" || say "usage report row"
# The agent was skipped and the big list not run: three agent rows and one list row.
[ "$(grep -c 'not measured in this run' "$r")" = 4 ] || say "not-measured rows: $(grep -c 'not measured' "$r")"
grep -q 'Measured by `make bench` on [0-9-]* (2 cores, Test CPU @ 2.0GHz)' "$r" || say "machine line"
grep -q '^readme_table: 14 of 18 figures written' "$tmp/out" || say "summary: $(cat "$tmp/out")"
# Refusals leave the file alone.
cp "$r" "$tmp/keep"
echo "nothing here" >"$tmp/empty.txt"
python3 "$src/bench/readme_table.py" "$tmp/empty.txt" "$r" >/dev/null 2>&1 && say "an output without figures was accepted"
cmp -s "$r" "$tmp/keep" || say "a refused run changed the README"
printf '# no markers\n' >"$tmp/plain.md"
python3 "$src/bench/readme_table.py" "$src/tests/data/bench/run_output.txt" "$tmp/plain.md" >/dev/null 2>&1 &&
    say "a README without markers was accepted"
[ $fail = 0 ] && echo "bench_table: all checks passed"
exit $fail
