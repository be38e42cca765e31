#!/usr/bin/env bash
# Regenerates docs/images/usage-report.png, the README's picture of the HTML usage report:
# reruns the README's recorded replay (Release build, about 50 s of replay), renders the first
# day as `gpusched report usage --format html` (by team) and screenshots it with headless
# Chromium, with the flags tests/integration/usage.sh uses (device scale 1, 960 px wide).
#
# Usage: scripts/readme_usage_png.sh [BUILD_DIR]   (default /tmp/relpng; configured and built
#        as Release when it has no gpusched yet)
# Writes docs/images/usage-report.png and prints the day's report table (by team and by queue)
# so the README's figures can be checked against it. Needs chromium.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-/tmp/relpng}
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "readme_usage_png.sh: chromium is not installed" >&2; exit 2; }
if [ ! -x "$build/gpusched" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 --target gpusched >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$src/data/alibaba-gpu-v2023
# The README's command, with the output in a scratch directory.
"$build/gpusched" replay --nodes "$data/csv/openb_node_list_gpu_node.csv" \
    --pods "$data/csv/openb_pod_list_default.csv" --queues "$data/queues.yaml" \
    --cluster-scale 0.1 --speedup 1000 --sample-s 60 --out "$tmp/replay" \
    --accounting "$tmp/usage.db" --start-time 2026-12-01 >"$tmp/replay.txt"
day=(--db "$tmp/usage.db" --from 2026-12-01 --to 2026-12-02)
"$build/gpusched" report usage "${day[@]}" --format html --out "$tmp/usage.html"
"$build/gpusched" report usage "${day[@]}"
"$build/gpusched" report usage "${day[@]}" --by queue
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
    --disable-component-update --no-first-run --force-device-scale-factor=1
    --hide-scrollbars --window-size=960,900 --user-data-dir="$tmp/chrome")
timeout 120 "$chrome" "${flags[@]}" --screenshot="$tmp/usage.png" "file://$tmp/usage.html" \
    >/dev/null 2>"$tmp/chrome.err" || { tail -5 "$tmp/chrome.err" >&2; exit 1; }
cp "$tmp/usage.png" "$src/docs/images/usage-report.png"
echo "wrote docs/images/usage-report.png"
