#!/usr/bin/env bash
# The semantics tests of the core through both drivers (tests/k8s/two_drivers.py): every
# tests/data/whatif case (20 of those tests/integration/whatif.sh runs by default, others named
# by tests/k8s/CMakeLists.txt on planes of their own; with the same policy and
# timeline) runs through `gpusched whatif` (whatif.sh checks that against CASE.expected) and
# here through `gpusched scheduler` on a real API server, the timeline's steps applied through
# the API, with the same expected results checked after the dump and after each step; then
# `whatif --kubeconfig` reads the live cluster back and agrees. What is compared, and how each
# timeline action is played on the API server, is in two_drivers.py's header.
# On control planes of this test's own (GPUSCHED_TWO_DRIVERS_JOBS of them, default 2, each
# running its share of the cases one after another): the cases need exact node counts in their
# reasons, so no two cases share a plane at once.
#
# Usage: two_drivers.sh GPUSCHED_BINARY [CASE:POLICY...]  (no cases: the list below)
set -euo pipefail

bin=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
tmp=$(mktemp -d)
jobs=${GPUSCHED_TWO_DRIVERS_JOBS:-2}

cleanup() {
    local d
    for d in "$tmp"/cp*; do
        [ -d "$d" ] && bash "$HERE/control-plane.sh" down --state "$d" >/dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# The cases: CASE:POLICY arguments after the binary, else these 20, the longest first so that the
# planes finish together. The policies are those tests/integration/whatif.sh runs each case with.
if [ $# = 0 ]; then
    set -- gang_loss:bestfit lifecycle:bestfit pdb_late:fgd sharing_modes:fgd gang:bestfit \
        selector:fgd foreign:fgd reclaim:fgd preempt:fgd pdb:fgd inventory:fgd xres:bestfit \
        sharing_memory:fgd sharing_mig:fgd sharing_timeslice:fgd sharing_adopt:fgd \
        sharing_refused:fgd mig_capacity:fgd by_model:bestfit nvlink:fgd
fi
python3 "$HERE/two_drivers.py" "$bin" "$SRC" "$tmp" "$jobs" "$@"
