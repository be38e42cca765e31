#!/usr/bin/env bash
# CI: runs the commit-msg hook over every commit after the recorded base (scripts/commit-msg-base,
# the last commit made before the hook existed), so old messages are not judged. Merge commits
# are skipped (git writes their messages), and so are the commits listed, each with its reason,
# in scripts/commit-msg-known-bad (already on main; named in the output). Exit 1 on the first
# other bad message, naming the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(tr -d '[:space:]' <scripts/commit-msg-base)
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
    echo "check-commits: base $base is not in this clone's history (shallow clone?)" >&2
    exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
known=$(grep -v '^#' scripts/commit-msg-known-bad 2>/dev/null | awk '{print $1}' || true)
n=0
for c in $(git rev-list --no-merges --reverse "$base..HEAD"); do
    if grep -qx "$c" <<<"$known"; then
        echo "check-commits: $(git rev-parse --short "$c") skipped: $(grep "^$c " scripts/commit-msg-known-bad | cut -d' ' -f2-)"
        continue
    fi
    git log -1 --format=%B "$c" >"$tmp"
    if ! bash scripts/git-hooks/commit-msg "$tmp"; then
        echo "check-commits: commit $(git rev-parse --short "$c") has a bad message" >&2
        exit 1
    fi
    n=$((n + 1))
done
echo "check-commits: $n commit messages after ${base:0:12} are well formed"
