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
# Every command answers an unknown option with the same one line.
for c in simulate replay whatif bound scheduler agent "report usage" "report export" "report compact" \
    "report ingest"; do
    # shellcheck disable=SC2086 # "report usage" is two words
    "$bin" $c --bogus >"$tmp/stdout" 2>"$tmp/stderr"
    got=$?
    if [ $got != 2 ] || [ -s "$tmp/stdout" ] ||
        [ "$(cat "$tmp/stderr")" != "gpusched $c: unknown option '--bogus' (see --help)" ]; then
        echo "FAIL: gpusched $c --bogus -> rc $got:"; cat "$tmp/stdout" "$tmp/stderr"; fail=1
    fi
done
expect 2 '--nodes and --pods are required' -- simulate --nodes "$nodes"
# bound: help, bad values named, and runs on the slice: the bound's mean line and each policy's
# with its gap (the bound is never above a policy's result: checked with numbers in
# tests/unit/test_bound.c), column generation converged, and stopped by a cap of 5 columns or of
# 1 search node per pricing (10 and 100 when escalated).
expect 0 '^exit status:' -- bound --help
expect 2 "bound: --seeds: expected N or N-M" -- bound --nodes "$nodes" --pods "$pods" --seeds 5-1
expect 2 "bound: --tune: expected" -- bound --nodes "$nodes" --pods "$pods" --tune 0
expect 2 "bound: --policy: unknown policy 'fastest'" -- bound --nodes "$nodes" --pods "$pods" \
    --policy fgd,fastest
expect 2 "bound: --columns: expected 1\.\.10000000, got '0'" -- bound --nodes "$nodes" \
    --pods "$pods" --columns 0
expect 2 '--nodes and --pods are required' -- bound --pods "$pods"
expect 0 '^    bound +[0-9]+\.[0-9]{2} ± +[0-9]+\.[0-9]{2}$' -- bound --nodes "$nodes" \
    --pods "$pods" --seeds 42-43 --policy none
expect 0 '^    fgd +[0-9]+\.[0-9]{2} ± +[0-9]+\.[0-9]{2} +gap +[0-9]+\.[0-9]{2}$' -- bound \
    --nodes "$nodes" --pods "$pods" --seeds 42-43 --policy FGD
expect 0 ' 42 .* converged$' -- bound --nodes "$nodes" --pods "$pods" --seeds 42 --policy none
expect 0 ' 42 .* column cap$' -- bound --nodes "$nodes" --pods "$pods" --seeds 42 --policy none \
    --columns 5
expect 0 ' 42 .* search cap$' -- bound --nodes "$nodes" --pods "$pods" --seeds 42 --policy none \
    --pricing-nodes 1
# replay --defrag: values checked, the defrag report printed.
expect 2 "replay: --defrag: expected a wait" -- replay --nodes "$nodes" --pods "$pods" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --defrag=-1
expect 2 "replay: --defrag-moves: expected 1..6" -- replay --nodes "$nodes" --pods "$pods" \
    --queues "$src/data/alibaba-gpu-v2023/queues.yaml" --defrag-moves 9
d=$src/tests/data/defrag
expect 0 '^  team +1 +1 +2\.0m +16\.0m +14\.0m$' -- replay --nodes "$d/nodes.csv" --pods "$d/pods.csv" \
    --queues "$d/queues.yaml" --policy bestfit --defrag --no-plot --out "$tmp/defrag"
# The summary's breakdown names the defrag move, so its reasons add up to the eviction total.
expect 0 ' 1 eviction \(preemption 0, reclaim 0, gang 0, defrag 1\),' -- replay --nodes "$d/nodes.csv" \
    --pods "$d/pods.csv" --queues "$d/queues.yaml" --policy bestfit --defrag --no-plot \
    --out "$tmp/defrag"
expect 2 "unknown policy 'fastest'" -- simulate --nodes "$nodes" --pods "$pods" --policy fgd,fastest
# whatif and scheduler read --policy as simulate and replay do: any case, the names listed.
w=$src/tests/data/whatif/preempt.yaml
expect 0 'bind +t/low-a' -- whatif --cluster "$w" --policy FGD
expect 2 "unknown policy 'fastest' \(random, dotprod" -- whatif --cluster "$w" --policy fastest
expect 2 "unknown policy 'fastest' \(random, dotprod" -- scheduler --policy fastest
# An API server that cannot be reached is told in the log, not only by /readyz (port 1 refuses).
cat >"$tmp/kc.yaml" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
EOF
expect 0 'warn watch Node: list /api/v1/nodes: .*(refused|connect)' -- \
    scheduler --kubeconfig "$tmp/kc.yaml" --dry-run --max-runtime-s 1
# The same as JSON lines (--log-format json): each parses, with ts, level, component, msg.
"$bin" scheduler --kubeconfig "$tmp/kc.yaml" --dry-run --max-runtime-s 1 --log-format json \
    >"$tmp/stdout" 2>"$tmp/json.log"
python3 "$src/tests/integration/check_json_log.py" "$tmp/json.log" scheduler \
    'level=^warn$' 'msg=^watch Node: list /api/v1/nodes: .*(refused|connect)' >"$tmp/stdout" ||
    { echo "FAIL: scheduler --log-format json:"; cat "$tmp/stdout" "$tmp/json.log"; fail=1; }
# A start-up failure after the options are read is a JSON line too (1.2.3.4 is no address here).
"$bin" scheduler --kubeconfig "$tmp/kc.yaml" --metrics-addr 1.2.3.4:1 --log-format json \
    >"$tmp/stdout" 2>"$tmp/json-fail.log"
rc=$?
python3 "$src/tests/integration/check_json_log.py" "$tmp/json-fail.log" scheduler 'level=^error$' \
    'msg=^--metrics-addr 1\.2\.3\.4:1: cannot listen there$' >"$tmp/stdout" && [ $rc = 2 ] ||
    { echo "FAIL: a start-up failure with --log-format json (rc $rc):"; cat "$tmp/stdout" "$tmp/json-fail.log"; fail=1; }
# --name=value as well as --name value (the Helm chart writes --lease-namespace=kube-system).
expect 2 "unknown policy 'fastest' \(random, dotprod" -- scheduler --lease-namespace=x --policy=fastest
expect 2 "^gpusched scheduler: --log-format must be text or json, not 'xml'$" -- scheduler --log-format=xml
expect 2 "^gpusched scheduler: --log-format needs a value$" -- scheduler --log-format
# Dynamic MIG: the plan's timeout needs the option, and is whole seconds 1..3600.
expect 2 "^gpusched scheduler: --mig-plan-timeout-s needs --dynamic-mig$" -- scheduler --mig-plan-timeout-s 5
expect 2 "^gpusched scheduler: --mig-plan-timeout-s must be a whole number of seconds from 1 to 3600, not '0'$" -- scheduler --dynamic-mig --mig-plan-timeout-s=0
expect 2 "^gpusched scheduler: --mig-plan-timeout-s must be a whole number of seconds from 1 to 3600, not '1m'$" -- scheduler --dynamic-mig --mig-plan-timeout-s 1m
expect 2 "--seeds '9-3': the range 9-3 goes down \\(write 3-9\\)" -- simulate --nodes "$nodes" --pods "$pods" --seeds 9-3
expect 2 "--seeds 'x1': 'x1' is not a whole number" -- simulate --nodes "$nodes" --pods "$pods" --seeds x1
expect 2 "--tune: expected" -- simulate --nodes "$nodes" --pods "$pods" --tune -1
expect 2 "--jobs: expected" -- simulate --nodes "$nodes" --pods "$pods" --jobs 0
expect 2 "--out needs a value" -- simulate --nodes "$nodes" --pods "$pods" --out
expect 2 "--nodes needs a value" -- simulate --nodes= --pods "$pods"
# Every command that reads --name=value answers an empty value with the same one line
# (gs__cli_value() in src/cli/args.c), before it opens anything.
for c in "simulate --nodes" "replay --nodes" "whatif --cluster" "report usage --db" \
    "report export --db" "report compact --db" "report ingest --db"; do
    # shellcheck disable=SC2086 # the command and option are several words
    "$bin" $c= >"$tmp/stdout" 2>"$tmp/stderr"
    got=$?
    if [ $got != 2 ] || [ -s "$tmp/stdout" ] ||
        [ "$(cat "$tmp/stderr")" != "gpusched ${c% *}: ${c##* } needs a value" ]; then
        echo "FAIL: gpusched $c= -> rc $got:"; cat "$tmp/stdout" "$tmp/stderr"; fail=1
    fi
done
expect 2 "no-such.csv" -- simulate --nodes "$nodes" --pods "$tmp/no-such.csv"
# An --out that is a file is refused before anything is read (gs__cli_out_dir()).
: >"$tmp/a-file"
expect 2 "^gpusched simulate: --out $tmp/a-file: exists and is not a directory$" -- \
    simulate --nodes "$nodes" --pods "$pods" --out "$tmp/a-file"
expect 2 "^gpusched replay: --out $tmp/a-file: exists and is not a directory$" -- \
    replay --nodes "$nodes" --pods "$pods" --queues "$src/data/alibaba-gpu-v2023/queues.yaml" \
    --out "$tmp/a-file"

# A successful run: the summary table, every result file, a real PNG, nothing temporary left.
expect 0 'fgd .*±' -- simulate --nodes "$nodes" --pods "$pods" --policy bestfit,fgd --seeds 7-8 \
    --out "$tmp/out"
# The footer says what ± is: the sample standard deviation (n - 1) of the two seeds' values
# (seeds 7 and 8: bestfit 7.72 and 7.52 unallocated, |7.72 - 7.52| / sqrt 2 = 0.14).
grep -qxF '  mean ± sample standard deviation (n - 1) over the 2 seeds; failed pods, wall s/run: means' \
    "$tmp/stdout" || { echo "FAIL: no ± footer:"; cat "$tmp/stdout"; fail=1; }
grep -q 'bestfit  *7.62 ±  0.14 ' "$tmp/stdout" || { echo "FAIL: bestfit spread:"; cat "$tmp/stdout"; fail=1; }
for f in allocation.csv fragmentation.csv frag_ratio.csv runs.csv summary.csv allocation.png fragmentation.png; do
    [ -s "$tmp/out/$f" ] || { echo "FAIL: $f missing"; fail=1; }
done
for f in allocation.png fragmentation.png; do
    if [ "$(head -c 8 "$tmp/out/$f" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
        echo "FAIL: $f is not a PNG"; fail=1
    fi
done
leftover=$(find "$tmp/out" -name '*.tmp*' -o -name '*.gp' -o -name '*.dat')
[ -z "$leftover" ] || { echo "FAIL: temporary files left: $leftover"; fail=1; }
# Four data rows (bestfit, fgd; two seeds) plus the header in each column file.
[ "$(wc -l <"$tmp/out/allocation.csv")" = 5 ] || { echo "FAIL: allocation.csv rows"; fail=1; }

# What a new user met: --version, --opt=VALUE, policy names in any case, "1 pod", no "± 0.00"
# with one seed, exit codes in --help, an unwritable --out named as such.
queues=$src/data/alibaba-gpu-v2023/queues.yaml
expect 0 '^gpusched [0-9]' -- --version
for c in simulate replay; do
    expect 0 '^exit status:' -- $c --help
    expect 0 '^  2  bad usage or bad input' -- $c --help
    expect 0 '^  1  internal error, or the results cannot be written' -- $c --help
done
expect 0 'fgd ' -- simulate --nodes="$nodes" --pods="$pods" --policy=FGD,BestFit --seeds=7 \
    --no-plot --out="$tmp/eq"
[ -s "$tmp/eq/runs.csv" ] || { echo "FAIL: --out=DIR did not write there"; fail=1; }
if grep -q '±' "$tmp/stdout"; then echo "FAIL: one seed prints a spread:"; cat "$tmp/stdout"; fail=1; fi
expect 2 "no-plot takes no value" -- simulate --nodes "$nodes" --pods "$pods" --no-plot=1
# The report subcommands read their options by one table (parse_opts in src/cli/cmd_report.c).
expect 2 "^gpusched report compact: --delete takes no value$" -- report compact --delete=1
expect 2 "^gpusched report ingest: --help takes no value$" -- report ingest --help=1
expect 2 "^gpusched report export: --from: expected RFC 3339 \(2026-12-01T00:00:00Z\) or a date \(2026-12-01\), got 'x'$" -- report export --from x
expect 2 "^gpusched report ingest: --step-s: expected seconds in \[1, 86400\], got '0'$" -- report ingest --step-s=0
expect 2 "unknown policy 'fastest'" -- simulate --nodes "$nodes" --pods "$pods" --policy=fastest
expect 2 "a replay runs one policy; 'all' is for simulate" -- replay --nodes "$nodes" --pods "$pods" \
    --queues "$queues" --policy all
expect 0 'with fgd, preemption' -- replay --nodes="$nodes" --pods="$pods" --queues="$queues" \
    --policy=FGD --cluster-scale=0.25 --speedup=2000 --no-plot --out="$tmp/req"
[ -s "$tmp/req/queues.csv" ] || { echo "FAIL: replay --out=DIR did not write there"; fail=1; }
head -2 "$pods" >"$tmp/one_pod.csv"
expect 0 '^one_pod: 1 pod; ' -- simulate --nodes "$nodes" --pods "$tmp/one_pod.csv" --policy fgd \
    --seeds 7 --no-plot --out "$tmp/one"
expect 0 '^replayed 1 pod over' -- replay --nodes "$nodes" --pods "$tmp/one_pod.csv" \
    --queues "$queues" --no-plot --out "$tmp/one-r"
# A pod list with columns of the user's own: ignored, named in one note, same results as without.
awk -F, -v OFS=, '{print (NR == 1 ? "team" : "t" NR), $0, (NR == 1 ? "job" : NR)}' "$pods" >"$tmp/own.csv"
expect 0 "note: .*own.csv: ignoring columns that are not in the pod list format: team, job" -- \
    simulate --nodes "$nodes" --pods "$tmp/own.csv" --policy fgd --seeds 7 --no-plot --out "$tmp/own"
"$bin" simulate --nodes "$nodes" --pods "$pods" --policy fgd --seeds 7 --no-plot --out "$tmp/plain" \
    >/dev/null 2>&1
sed 's/^own,/slice_pods,/' "$tmp/own/runs.csv" | cmp -s - "$tmp/plain/runs.csv" ||
    { echo "FAIL: own columns changed the results"; diff "$tmp/own/runs.csv" "$tmp/plain/runs.csv"; fail=1; }
expect 0 "note: .*own.csv: ignoring columns .*: team, job" -- replay --nodes "$nodes" \
    --pods "$tmp/own.csv" --queues "$queues" --cluster-scale 0.25 --speedup 2000 --no-plot \
    --out "$tmp/own-r"
# Its footer says which time base share% has (the samples while a queue waited).
grep -qxF "waiting ('-': it never waited); not over the whole replay, as 'report usage' share% is." \
    "$tmp/stdout" || { echo "FAIL: replay share% footer:"; cat "$tmp/stdout"; fail=1; }
expect 0 'gpu_spec \(GPU models the pod accepts' -- simulate --help
expect 0 'Other columns are ignored' -- replay --help
# A read-only --out (root reads and writes everything: run as nobody there).
mkdir -p "$tmp/ro" && chmod 755 "$tmp" && chmod 555 "$tmp/ro"
as_user=()
if [ "$(id -u)" = 0 ]; then
    as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    command -v setpriv >/dev/null || as_user=()
fi
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    for c in sim rep; do
        if [ $c = sim ]; then args=(simulate --nodes "$nodes" --pods "$pods" --policy fgd --seeds 7)
        else args=(replay --nodes "$nodes" --pods "$pods" --queues "$queues"); fi
        "${as_user[@]}" "$bin" "${args[@]}" --no-plot --out "$tmp/ro" >"$tmp/stdout" 2>"$tmp/stderr"
        rc=$?
        if [ $rc != 1 ] || ! grep -q "cannot write $tmp/ro: Permission denied" "$tmp/stderr"; then
            echo "FAIL: $c into a read-only --out: rc $rc:"; cat "$tmp/stderr"; fail=1
        fi
        "${as_user[@]}" "$bin" "${args[@]}" --no-plot --out "$tmp/ro/sub" >"$tmp/stdout" 2>"$tmp/stderr"
        grep -q "cannot write $tmp/ro/sub: Permission denied" "$tmp/stderr" || {
            echo "FAIL: $c into a new folder under a read-only one:"; cat "$tmp/stderr"; fail=1; }
    done
else
    echo "note: read-only --out not checked (root without setpriv)"
fi
[ $fail = 0 ] && echo "cli: all checks passed"
exit $fail
