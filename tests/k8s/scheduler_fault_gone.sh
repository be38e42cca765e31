#!/usr/bin/env bash
# Fault: a watch answered 410 Gone, provoked for real on a control plane of this test's own. The
# scheduler reaches the API server through a TCP forwarder (tcp_proxy.py) that the test kills to
# take the network away from it. While it is cut off, the pod that holds the only GPU is
# deleted, etcd is compacted at its current revision and the API server restarted, so neither
# its new watch cache nor etcd reaches back to the resourceVersion the scheduler watched from.
# Then the network comes back:
#   1. the scheduler's watch from its old resourceVersion is answered 410 and it relists (its
#      log names the relist and the 410, gpusched_watch_relists_total counts it);
#   2. the deletion that no watch event will ever tell is found by the relist (what was known
#      and is not listed again is deleted), so the pod waiting for the GPU binds.
#
# Usage: scheduler_fault_gone.sh GPUSCHED_BINARY
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
proxy_pid=
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"

private_test_extra_cleanup() {
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
}
private_test_begin fg

start_proxy() {
    python3 "$HERE/tcp_proxy.py" "$pport" "$aport" &
    proxy_pid=$!
    for ((i = 0; i < 50; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$pport") 2>/dev/null && return 0
        sleep 0.1
    done
    fail "the forwarder did not listen"
}

setup_ns
aport=${GPUSCHED_K8S_SERVER##*:}
pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed "s#server: .*#server: https://127.0.0.1:$pport#" "$KUBECONFIG" >"$tmp/via-proxy.kubeconfig"
start_proxy
mknode "g1-$run" 1
SCHED_KUBECONFIG=$tmp/via-proxy.kubeconfig start_sched

mkpod hold 1
wait_node hold "g1-$run"
mkpod waiter 1
wait_reason waiter 'Insufficient nvidia.com/gpu'
[ "$(metric gpusched_watch_relists_total)" = 0 ] || fail "relists before the fault"
echo "ok: hold has g1's only GPU; waiter waits (Insufficient nvidia.com/gpu)"

# The network goes; hold is deleted; history goes too.
kill "$proxy_pid"
wait "$proxy_pid" 2>/dev/null || true
proxy_pid=
kubectl -n "$ns" delete pod hold --grace-period=0 --force >/dev/null 2>&1
rev=$(curl -sf "$GPUSCHED_K8S_ETCD/v3/kv/range" -d '{"key": "AA=="}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
curl -sf "$GPUSCHED_K8S_ETCD/v3/kv/compaction" -d "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null ||
    fail "etcd compaction at revision $rev failed"
bash "$HERE/control-plane.sh" restart kube-apiserver --state "$PLANE" 2>"$tmp/restart.log" ||
    { cat "$tmp/restart.log" >&2; fail "the API server did not come back"; }
echo "ok: while the scheduler was cut off: hold deleted, etcd compacted at revision $rev, API server restarted"

start_proxy
wait_node waiter "g1-$run" 40
grep -q "relist of /api/v1/pods (its watch answered 410 Gone [1-9][0-9]* time" "$log" ||
    fail "no relist of pods after a 410 in the log"
grep -q "relist of /api/v1/pods: 1 object(s) deleted while the watch was down" "$log" ||
    fail "the relist did not find hold gone"
r=$(metric gpusched_watch_relists_total)
[ "$r" -ge 1 ] || fail "gpusched_watch_relists_total $r, want >= 1"
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited"
no_double_use
echo "ok: the pods watch was answered 410 and relisted ($r relists in all); the relist found hold gone and waiter bound to g1-$run"
stop_sched
