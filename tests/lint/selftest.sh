#!/usr/bin/env bash
# Tests the lint gate itself: clang-tidy with the repository's .clang-tidy must fail on
# planted.c, naming every planted check, and pass on clean.c, its fixed twin.
# Usage: selftest.sh [clang-tidy]   (run by ctest as lint_gate_fails_on_planted_faults)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tidy="${1:-clang-tidy}"
flags=(-- -std=c11 -Wall)
fail=0

out="$("$tidy" --quiet "$here/planted.c" "${flags[@]}" 2>&1)"
rc=$?
if [ $rc -eq 0 ]; then
    echo "FAIL: clang-tidy exited 0 on planted.c; the gate cannot fail" >&2
    fail=1
fi
for check in cert-err33-c clang-analyzer-unix.Malloc; do
    if ! grep -q "error: .*\[$check" <<<"$out"; then
        echo "FAIL: no error from $check on planted.c" >&2
        fail=1
    fi
done

if ! out2="$("$tidy" --quiet "$here/clean.c" "${flags[@]}" 2>&1)"; then
    echo "FAIL: clang-tidy rejects clean.c:" >&2
    echo "$out2" >&2
    fail=1
fi
[ $fail -eq 0 ] && echo "lint gate: fails on planted.c (exit $rc), passes clean.c"
exit $fail
