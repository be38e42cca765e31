#!/usr/bin/env bash
# The semantics tests of the core through both drivers (tests/k8s/two_drivers.py): each
# tests/data/whatif case below runs through `gpusched whatif` (tests/integration/whatif.sh checks
# that against CASE.expected) and here through `gpusched scheduler` on a real API server, with
# the same expected results; then `whatif --kubeconfig` reads the live cluster back and agrees.
# On a control plane of this test's own: the cases need exact node counts in their reasons.
#
# Usage: two_drivers.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
run=$$
tmp=$(mktemp -d)
log=$tmp/unused.log
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

cleanup() {
    bash "$HERE/control-plane.sh" down --state "$tmp/cp" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

private_plane
# The policies are those tests/integration/whatif.sh runs each case with.
python3 "$HERE/two_drivers.py" "$bin" "$SRC" selector:fgd foreign:fgd reclaim:fgd preempt:fgd \
    inventory:fgd xres:bestfit sharing_memory:fgd sharing_mig:fgd sharing_timeslice:fgd \
    sharing_adopt:fgd mig_capacity:fgd by_model:bestfit
