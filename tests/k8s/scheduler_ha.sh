#!/usr/bin/env bash
# Two replicas of gpusched scheduler against the real control plane (tests/k8s/control-plane.sh),
# electing a leader on a coordination.k8s.io/v1 Lease:
#   1. started together, exactly one acquires the Lease; the standby binds nothing;
#   2. six 1-GPU pods are each bound exactly once (one nodeName each, one "bound" line in the two
#      logs together);
#   3. SIGKILL of the leader: the standby takes the Lease once the record has not changed for the
#      lease duration (15 s of its clock, seen on its 2 s retries) and binds two new pods; the
#      time from the kill to its first bind is printed (want <= 25 s);
#   4. a third replica stands by; SIGTERM of the leader releases the Lease (holderIdentity empty)
#      and the third takes it at its next retry (want <= 5 s), binding one more pod;
#   5. the Lease written to another holder: the leader stops and exits 1, nothing more is bound;
#   6. no pod was bound twice across the three logs, and every leader renewed within the renew
#      deadline (the longest gap between renewals is printed);
#   7. all replicas run with --accounting on one file: only a leader opens it (a standby never
#      logs "accounting: recording"), and across both takeovers each pod has one interval.
# The replicas serve their own schedulerName and Lease, so no other test's pods are theirs.
#
# Usage: scheduler_ha.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)

run=$$
ns=gs-ha-$run
sn=gpusched-ha-$run
tmp=$(mktemp -d)
declare -A pid

fail() {
    echo "FAIL: $*" >&2
    for r in a b c; do
        [ -f "$tmp/$r.log" ] || continue
        echo "--- replica $r log (last 25 lines)" >&2
        tail -n 25 "$tmp/$r.log" >&2 || true
    done
    exit 1
}

cleanup() {
    for r in "${!pid[@]}"; do kill -KILL "${pid[$r]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl delete nodes -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

start() { # start REPLICA
    "$bin" scheduler --kubeconfig "$KUBECONFIG" --scheduler-name "$sn" --policy bestfit \
        --qps 500 --burst 1000 --max-runtime-s 280 --lease-namespace "$ns" \
        --lease-name "gpusched-$run" --metrics-addr 127.0.0.1:0 --accounting "$tmp/usage.db" \
        >>"$tmp/$1.log" 2>&1 &
    pid[$1]=$!
}

leader_of() { # the replica whose log says it acquired the Lease, among those named
    local r
    for r in "$@"; do grep -q "leader: acquired" "$tmp/$r.log" 2>/dev/null && echo "$r"; done
    return 0
}

mknode() {
    local name=$1 gpus=$2
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$name", "labels": {"gpusched.test/run": "$run", "ha": "$run"}},
 "spec": {"taints": [{"key": "gpusched.test/ha", "value": "$run", "effect": "NoSchedule"}]}}
JSON
    local res="{\"cpu\":\"32\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"$gpus\"}"
    kubectl patch node "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":$res,\"allocatable\":$res,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"test\"}]}}" >/dev/null
}

mkpod() { # mkpod NAME GPUS
    kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1"},
 "spec": {"schedulerName": "$sn", "terminationGracePeriodSeconds": 0,
          "nodeSelector": {"ha": "$run"},
          "tolerations": [{"key": "gpusched.test/ha", "operator": "Exists"}],
          "containers": [{"name": "c", "image": "registry.invalid/none:1",
                          "resources": {"limits": {"nvidia.com/gpu": "$2"}, "requests": {"cpu": "1"}}}]}}
JSON
}

wait_bound() { # wait_bound TIMEOUT_S POD...
    local t=$1 p i
    shift
    for p in "$@"; do
        for ((i = 0; i < t * 5; i++)); do
            [ -n "$(kubectl -n "$ns" get pod "$p" -o 'jsonpath={.spec.nodeName}' 2>/dev/null)" ] && break
            sleep 0.2
        done
        [ -n "$(kubectl -n "$ns" get pod "$p" -o 'jsonpath={.spec.nodeName}' 2>/dev/null)" ] ||
            fail "$p was not bound within ${t}s"
    done
}

binds() { grep -h -c "bound pod=" "$@" 2>/dev/null | paste -sd+ | bc; }

# The first "bound" line's time in a log, as seconds since the epoch.
first_bind_s() {
    grep -m1 "bound pod=" "$1" | cut -d' ' -f1 |
        python3 -c 'import sys,datetime; t=sys.stdin.read().strip(); print(datetime.datetime.strptime(t,"%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp())'
}

kubectl create namespace "$ns" >/dev/null
mknode "ha1-$run" 8
mknode "ha2-$run" 8

# 1. Two replicas at once: one leader.
start a
start b
for ((i = 0; i < 100; i++)); do
    [ -n "$(leader_of a b)" ] && break
    sleep 0.2
done
sleep 3 # a second acquisition would show within a retry period
leaders=$(leader_of a b | tr '\n' ' ')
[ "$(leader_of a b | wc -l)" = 1 ] || fail "leaders: '$leaders', want exactly one"
lead=$(leader_of a b)
standby=$([ "$lead" = a ] && echo b || echo a)
holder=$(kubectl -n "$ns" get lease "gpusched-$run" -o 'jsonpath={.spec.holderIdentity}')
grep -q "identity=$holder" "$tmp/$lead.log" || fail "Lease holder '$holder' is not replica $lead"
kill -0 "${pid[$standby]}" 2>/dev/null || fail "the standby $standby exited"
echo "ok: one leader: replica $lead holds the Lease as $holder; $standby stands by"

# The standby is ready (caches synced) but not the leader; /metrics says which is which.
scrape() { # scrape REPLICA METRIC
    local port
    port=$(sed -n 's/.*serving \/healthz \/readyz \/metrics on .* (port \([0-9]*\)).*/\1/p' "$tmp/$1.log")
    curl -sf "http://127.0.0.1:$port/metrics" | awk -v k="$2" '$1 == k {print $2}'
}
ready_code() {
    local port
    port=$(sed -n 's/.*serving \/healthz \/readyz \/metrics on .* (port \([0-9]*\)).*/\1/p' "$tmp/$1.log")
    curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz"
}
[ "$(scrape "$lead" gpusched_leader)" = 1 ] || fail "leader's gpusched_leader is not 1"
[ "$(scrape "$standby" gpusched_leader)" = 0 ] || fail "standby's gpusched_leader is not 0"
[ "$(ready_code "$standby")" = 200 ] || fail "standby's /readyz is not 200"
echo "ok: metrics: gpusched_leader 1 on $lead, 0 on $standby; the standby is ready"

# 2. Six pods, each bound once, all by the leader.
for i in 1 2 3 4 5 6; do mkpod "p$i" 1; done
wait_bound 30 p1 p2 p3 p4 p5 p6
sleep 1
[ "$(binds "$tmp/$lead.log")" = 6 ] || fail "leader logged $(binds "$tmp/$lead.log") binds, want 6"
[ "$(binds "$tmp/$standby.log")" = 0 ] || fail "standby bound $(binds "$tmp/$standby.log") pods"
grep -q "accounting: recording to" "$tmp/$lead.log" || fail "the leader does not record"
! grep -q "accounting: recording to" "$tmp/$standby.log" || fail "the standby opened the accounting file"
kill -0 "${pid[$standby]}" 2>/dev/null || fail "the standby $standby exited"
echo "ok: 6 pods bound once each by the leader, 0 by the standby"

# 3. SIGKILL the leader: the standby takes over and binds the next pods.
kill -KILL "${pid[$lead]}"
wait "${pid[$lead]}" 2>/dev/null || true
unset "pid[$lead]"
t_kill=$(date +%s.%N)
mkpod p7 1
mkpod p8 1
wait_bound 40 p7 p8
grep -q "leader: acquired" "$tmp/$standby.log" || fail "standby never acquired the Lease"
t_bind=$(first_bind_s "$tmp/$standby.log")
failover=$(python3 -c "print('%.1f' % ($t_bind - $t_kill))")
python3 -c "import sys; sys.exit(0 if $failover <= 25 else 1)" ||
    fail "failover took ${failover}s, want <= 25s"
echo "ok: failover: SIGKILL of $lead to $standby's first bind ${failover}s (lease 15 s, retry 2 s)"

# 4. A third replica stands by; SIGTERM of the leader releases the Lease and the third takes it.
start c
sleep 3
[ -z "$(leader_of c)" ] || fail "replica c acquired the Lease while $standby held it"
! grep -q "accounting: recording to" "$tmp/c.log" || fail "standby c opened the accounting file"
t_term=$(date +%s.%N)
kill -TERM "${pid[$standby]}"
wait "${pid[$standby]}" || fail "replica $standby exited $? on SIGTERM, want 0"
unset "pid[$standby]"
grep -q "leader: released lease" "$tmp/$standby.log" || fail "$standby did not release the Lease"
for ((i = 0; i < 50; i++)); do
    [ -n "$(leader_of c)" ] && break
    sleep 0.2
done
[ -n "$(leader_of c)" ] || fail "replica c did not take the released Lease within 10 s"
mkpod p9 1
wait_bound 20 p9
t_c=$(grep -m1 "leader: acquired" "$tmp/c.log" | cut -d' ' -f1 |
    python3 -c 'import sys,datetime; t=sys.stdin.read().strip(); print(datetime.datetime.strptime(t,"%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp())')
handover=$(python3 -c "print('%.1f' % ($t_c - $t_term))")
python3 -c "import sys; sys.exit(0 if $handover <= 5 else 1)" ||
    fail "handover after release took ${handover}s, want <= 5s"
echo "ok: release: SIGTERM of $standby to c acquiring ${handover}s; c bound p9"

# 5. Someone else takes the Lease (written as another holder would): c's next renewal sees it,
#    c stops scheduling at once and exits 1; a pod created then stays unbound.
t_steal=$(date +%s.%N)
kubectl -n "$ns" patch lease "gpusched-$run" --type=merge \
    -p '{"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 15}}' >/dev/null
rc=0
timeout 10 tail --pid="${pid[c]}" -f /dev/null || fail "c still runs 10 s after losing the Lease"
wait "${pid[c]}" || rc=$?
unset "pid[c]"
[ "$rc" = 1 ] || fail "c exited $rc after losing the Lease, want 1"
grep -q "leader: lost lease .*holder now 'intruder'" "$tmp/c.log" || fail "c did not log the loss"
lost=$(python3 -c "import time; print('%.1f' % (time.time() - $t_steal))")
mkpod p10 1
sleep 3
[ -z "$(kubectl -n "$ns" get pod p10 -o 'jsonpath={.spec.nodeName}')" ] || fail "p10 was bound"
echo "ok: lease taken: c exited 1 within ${lost}s of the takeover; p10 stays unbound"

# 6. No pod bound twice; every pod has a node; renewals within the deadline.
dups=$(grep -h "bound pod=" "$tmp"/*.log | sed 's/.*bound pod=\([^ ]*\).*/\1/' | sort | uniq -d)
[ -z "$dups" ] || fail "pods bound twice: $dups"
total=$(binds "$tmp"/a.log "$tmp"/b.log "$tmp"/c.log)
[ "$total" = 9 ] || fail "$total binds in the logs, want 9"
for p in p1 p2 p3 p4 p5 p6 p7 p8 p9; do
    [ -n "$(kubectl -n "$ns" get pod "$p" -o 'jsonpath={.spec.nodeName}')" ] || fail "$p has no node"
done
gaps=$(grep -h "longest gap between renewals" "$tmp"/*.log | sed 's/.*leader: renewals=\([0-9]*\) .*gap between renewals=\([0-9]*\) ms/\1 renewals, longest gap \2 ms/' | paste -sd';')
while read -r g; do
    [ -n "$g" ] && [ "$g" -lt 10000 ] || fail "a renewal gap of ${g} ms reached the renew deadline"
done < <(grep -h "longest gap between renewals" "$tmp"/*.log | sed 's/.* renewals=\([0-9]*\) ms$/\1/')
echo "ok: 9 pods bound once each across the replicas; renewals: $gaps"

# 7. One interval per pod across the takeovers (p10 was never bound: none), all still open.
ivs=$(python3 -c 'import sqlite3,sys
c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro",uri=True)
print(" ".join("%s:%d:%d" % r for r in c.execute("SELECT name, count(*), sum(end_ms IS NULL) FROM allocation GROUP BY name ORDER BY name")))' "$tmp/usage.db")
[ "$ivs" = "p1:1:1 p2:1:1 p3:1:1 p4:1:1 p5:1:1 p6:1:1 p7:1:1 p8:1:1 p9:1:1" ] ||
    fail "intervals (name:count:open): '$ivs'"
echo "ok: accounting: one open interval per pod across both takeovers; $(grep -h 'accounting: opened' "$tmp"/c.log | sed 's/.*accounting: //' | cut -d' ' -f1-4)"
