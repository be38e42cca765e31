#!/usr/bin/env bash
# Tests scripts/git-hooks/commit-msg with good and bad messages (ctest: commit_msg_hook_*).
set -uo pipefail
hook="$(cd "$(dirname "$0")/../.." && pwd)/scripts/git-hooks/commit-msg"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
fail=0
check() { # expected-exit description message
    printf '%b' "$3" >"$tmp"
    "$hook" "$tmp" 2>/dev/null
    local rc=$?
    if [ "$rc" -ne "$1" ]; then
        echo "FAIL ($2): exit $rc, wanted $1" >&2
        fail=1
    fi
}
s72="sim: $(printf 'x%.0s' $(seq 67))"  # exactly 72 characters
check 0 "one area and a body" "sim: fix the thing\n\nWhy, and how it was checked.\n"
check 0 "several areas" "rpc, agent, sim: one call\n\nBody.\n"
check 0 "72-character subject" "$s72\n\nBody.\n"
check 0 "comment lines ignored" "core: x\n\nBody.\n# Please enter the commit message\n"
check 0 "git's merge subject" "Merge branch 'lint' into main\n"
check 1 "73-character subject" "${s72}y\n\nBody.\n"
check 1 "no area" "fix the thing\n\nBody.\n"
check 1 "capitalised area" "Sim: fix the thing\n\nBody.\n"
check 1 "no space after colon" "sim:fix\n\nBody.\n"
check 1 "empty summary" "sim: \n\nBody.\n"
check 1 "no body" "sim: fix the thing\n"
check 1 "blank body" "sim: fix the thing\n\n\n  \n"
check 1 "no blank line before body" "sim: fix the thing\nBody.\n"
check 1 "empty message" "\n# only a comment\n"
[ $fail -eq 0 ] && echo "commit-msg hook: 5 good and 9 bad messages judged right"
exit $fail
