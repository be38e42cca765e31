#!/usr/bin/env bash
# make fuzz: builds every libFuzzer target with clang (BUILD_DIR, default build-fuzz) and runs
# each for a fixed number of executions from a fixed seed, starting from its committed corpus
# and dictionary: the corpus is replayed first, then the fuzzer mutates for the remaining runs.
# New inputs go to a scratch directory, never into tests/fuzz/corpus. A crash, a sanitizer
# report or a broken oracle fails the run; libFuzzer leaves the input as crash-* in BUILD_DIR.
#   usage: tests/fuzz/run.sh [BUILD_DIR] [RUNS] [JOBS]   (defaults: build-fuzz 20000 2)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build-fuzz}")
runs=${2:-20000}
jobs=${3:-2}
targets=(fuzz_trace fuzz_qconfig fuzz_fake_yaml fuzz_devplugin_config fuzz_grpc_frame fuzz_http2 fuzz_watch fuzz_kworld
         fuzz_usage_time fuzz_dpkube fuzz_webhook fuzz_prom_range fuzz_prom_text fuzz_log_json
         fuzz_podmap fuzz_migplan)

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        >/dev/null
fi
cmake --build "$build" -j "$jobs" -t "${targets[@]}" -- --no-print-directory >/dev/null

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
one() { # target
    local t=$1 name=${1#fuzz_} dict=() log="$scratch/$1.log"
    [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
    mkdir -p "$scratch/$name"
    if ! (cd "$build" && "$build/tests/fuzz/$t" -seed=1 -runs="$runs" "${dict[@]}" \
        "$scratch/$name" "$root/tests/fuzz/corpus/$name") >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz: $t FAILED (input saved as crash-* in $build)" >&2
        return 1
    fi
    local done_line
    done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1)
    echo "fuzz: $t: ${done_line:-done}, corpus $(ls "$root/tests/fuzz/corpus/$name" | wc -l) files"
}
export -f one
export root build runs scratch
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'one {}'
