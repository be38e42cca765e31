#!/usr/bin/env bash
# Fault: the API server restarted under a running gpusched scheduler, on a control plane of this
# test's own (tests/k8s/control-plane.sh up, then `restart kube-apiserver`: the same flags,
# ports and certificates, as a rolling upgrade of a single API server does it).
#   1. three 1-GPU pods bind before the restart;
#   2. two more are created and the API server is stopped at once, with their binds likely in
#      flight; while it is down and while it comes back the scheduler's watches fail, are
#      re-opened after backoff, and (their history gone with the old server's watch cache)
#      relist;
#   3. three more are created after it is back: all eight end bound, each once, on GPUs no other
#      pod holds (8 GPUs on two nodes of 4), and the scheduler never exited.
#
# Usage: scheduler_fault_restart.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_begin fr

setup_ns
mknode "r1-$run" 4
mknode "r2-$run" 4
start_sched

# 1. Before the restart.
for p in p1 p2 p3; do mkpod "$p" 1; done
wait_bound 30 p1 p2 p3
echo "ok: p1-p3 bound before the restart"

# 2. Two more, and the restart right away.
mkpod p4 1
mkpod p5 1
t0=$(date +%s.%N)
bash "$HERE/control-plane.sh" restart kube-apiserver --state "$PLANE" 2>"$tmp/restart.log" ||
    { cat "$tmp/restart.log" >&2; fail "the API server did not come back"; }
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited during the restart"
echo "ok: API server restarted ($(grep -o 'down and up again in [0-9.]* s' "$tmp/restart.log"))"

# 3. Three more after it.
for p in p6 p7 p8; do mkpod "$p" 1; done
wait_bound 40 p1 p2 p3 p4 p5 p6 p7 p8
t1=$(date +%s.%N)
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited"
no_double_use
[ "$(metric gpusched_binds_total)" = 8 ] || fail "gpusched_binds_total $(metric gpusched_binds_total), want 8"
refused=$(grep -c "bind refused" "$log" || true)
relists=$(metric gpusched_watch_relists_total)
echo "ok: all 8 pods bound once each, $(python3 -c "print('%.1f' % ($t1 - $t0))") s from the restart to the last bind; binds refused on the way: $refused; relists: $relists"
stop_sched
