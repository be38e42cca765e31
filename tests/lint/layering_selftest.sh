#!/usr/bin/env bash
# Tests the layering gate itself (scripts/check-layering.py): the tree as it is must pass, and a
# copy with wrong arrows planted (an include, a link, a core I/O call) must fail naming each
# planted file, line and arrow. Usage: layering_selftest.sh [SOURCE_ROOT]
# (run by ctest as lint_layering_fails_on_wrong_arrow, and by `make lint`).
set -uo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
check="$root/scripts/check-layering.py"
fail=0

if ! out="$(python3 "$check" "$root" 2>&1)"; then
    echo "FAIL: the tree itself has wrong arrows:" >&2
    echo "$out" >&2
    fail=1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/src" "$root/include" "$root/CMakeLists.txt" "$tmp/"

# 1. The agent includes a simulator header (the arrow gs_diag once made), at a known line.
n_agent=$(($(wc -l <"$tmp/src/agent/gpu.c") + 1))
echo '#include "gpusched/trace.h"' >>"$tmp/src/agent/gpu.c"
# 2. The RPC layer links the agent.
n_rpc=$(($(wc -l <"$tmp/src/rpc/CMakeLists.txt") + 1))
echo 'target_link_libraries(gsrpc PUBLIC gsagent)' >>"$tmp/src/rpc/CMakeLists.txt"
# 3. The core opens a file.
n_core=$(($(wc -l <"$tmp/src/core/rng.c") + 1))
echo 'static void *planted(void) { return fopen("x", "r"); }' >>"$tmp/src/core/rng.c"

out="$(python3 "$check" "$tmp" 2>&1)"
rc=$?
if [ $rc -ne 1 ]; then
    echo "FAIL: check-layering.py exited $rc on planted arrows, wanted 1" >&2
    fail=1
fi
for want in \
    "src/agent/gpu.c:$n_agent: agent -> sim: #include \"gpusched/trace.h\"" \
    "src/rpc/CMakeLists.txt:$n_rpc: rpc -> agent: gsrpc links gsagent" \
    "src/core/rng.c:$n_core: core -> I/O: call of fopen() (the core is pure)"; do
    if ! grep -qxF "$want" <<<"$out"; then
        echo "FAIL: no line '$want' in:" >&2
        echo "$out" >&2
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "layering gate: passes the tree, fails on 3 planted arrows (exit $rc)"
exit $fail
