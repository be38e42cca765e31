#!/usr/bin/env bash
# deploy/scheduler-rbac.yaml is enough, and the JSON log format holds up, on the real control
# plane (RBAC on). The manifest's ServiceAccount, ClusterRole, Role and their bindings are applied
# with their rules verbatim, only renamed for this run (the namespaces gpusched-system and
# kube-system become this test's namespace, the cluster-scoped names get a -RUN suffix: tests
# share the plane); a token for the ServiceAccount comes from the TokenRequest API (kubectl
# create token) and goes into a bearer-token kubeconfig. The scheduler runs as that account only,
# with leader election (the Lease "gpusched" in the test namespace, as the Role names it),
# Events, Queue status, --accounting (its namespace informer) and --log-format json, and places
# what the e2e places:
#   whole GPUs (w, 2 GPUs), milli fractions (h1, h2: gpu-fraction 0.5, sharing one GPU), a gang
#   (PodGroup g, minMember 3, members g-0..g-2), a pod of a Queue (q, queue rbac-RUN), a pod
#   that cannot fit (big, 16 GPUs: PodScheduled=False and a FailedScheduling Event), and a
#   preemption (low, then high of a higher PriorityClass on the 1-GPU node p: a DisruptionTarget
#   condition, an Eviction, high bound).
# Then: no 403/Forbidden anywhere in the log, every pod above but big is bound, the Lease is held
# by this process, Events from gpusched exist, the Queue's status was written, and every log
# line parses as JSON (check_json_log.py) with the bound lines naming pod, node and queue.
# The account's reach is checked from the other side too (kubectl auth can-i): it may create
# Bindings, may not list Secrets, and the token authenticates as it.
#
# Usage: scheduler_rbac.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin rbac
rbac_cleanup() {
    kubectl delete clusterrole "gpusched-scheduler-$run" >/dev/null 2>&1 || true
    kubectl delete clusterrolebinding "gpusched-scheduler-$run" >/dev/null 2>&1 || true
    kubectl delete queues.scheduling.gpusched.io "rbac-$run" >/dev/null 2>&1 || true
    kubectl delete priorityclass "rbac-low-$run" "rbac-high-$run" >/dev/null 2>&1 || true
    fault_test_cleanup
}
trap rbac_cleanup EXIT

kubectl apply -f "$SRC/deploy/crds/" >/dev/null
kubectl wait --for=condition=Established crd/queues.scheduling.gpusched.io \
    crd/podgroups.scheduling.x-k8s.io --timeout=30s >/dev/null
setup_ns

# The manifest, renamed for this run; the rules are not touched (checked: same rules as read).
python3 - "$SRC/deploy/scheduler-rbac.yaml" "$ns" "$run" >"$tmp/rbac.yaml" <<'PY'
import copy, sys, yaml
path, ns, run = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(path)) if d]
kinds = sorted(d["kind"] for d in docs)
assert kinds == ["ClusterRole", "ClusterRoleBinding", "Namespace", "Role", "RoleBinding",
                 "ServiceAccount"], kinds
out = []
for d in docs:
    if d["kind"] == "Namespace":
        continue
    o = copy.deepcopy(d)
    m = o["metadata"]
    if m.get("namespace") in ("gpusched-system", "kube-system"):
        m["namespace"] = ns
    if o["kind"] in ("ClusterRole", "ClusterRoleBinding"):
        m["name"] += "-" + run
    if "roleRef" in o and o["roleRef"]["kind"] == "ClusterRole":
        o["roleRef"]["name"] += "-" + run
    for s in o.get("subjects", []):
        s["namespace"] = ns
    assert o.get("rules") == d.get("rules")
    out.append(o)
print(yaml.safe_dump_all(out))
PY
kubectl apply -f "$tmp/rbac.yaml" >/dev/null
token=$(kubectl -n "$ns" create token gpusched-scheduler --duration 1h)
[ -n "$token" ] || fail "TokenRequest gave no token"
cat >"$tmp/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$GPUSCHED_K8S_SERVER", certificate-authority: "$GPUSCHED_K8S_CA"}}]
users: [{name: sa, user: {token: "$token"}}]
contexts: [{name: sa, context: {cluster: c, user: sa}}]
current-context: sa
EOF
sa="system:serviceaccount:$ns:gpusched-scheduler"
[ "$(kubectl auth can-i create pods --subresource=binding --as "$sa" -n "$ns")" = yes ] || fail "the account may not bind"
[ "$(kubectl auth can-i list secrets --as "$sa" -n "$ns" || true)" = no ] || fail "the account may list Secrets"
[ "$(kubectl --kubeconfig "$tmp/sa.kubeconfig" auth can-i list nodes)" = yes ] ||
    fail "the token does not authenticate as the account"
echo "ok: deploy/scheduler-rbac.yaml applied for $sa; TokenRequest token in a kubeconfig"

kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.gpusched.io/v1alpha1", "kind": "Queue",
 "metadata": {"name": "rbac-$run"}, "spec": {"resources": {"gpu": {"quota": 4, "limit": 8}}}}
EOF
kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "rbac-low-$run"}, "value": 10}
EOF
kubectl apply -f - >/dev/null <<EOF
{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "rbac-high-$run"}, "value": 1000}
EOF
mknode "r1-$run" 8
mknode "p-$run" 1

SCHED_KUBECONFIG=$tmp/sa.kubeconfig
# fault_lib's start_sched turns election off; the last --leader-elect wins.
start_sched --leader-elect --lease-namespace "$ns" --lease-name gpusched --log-format json \
    --accounting "$tmp/usage.db"
for ((i = 0; i < 150; i++)); do grep -q 'leader: acquired lease' "$log" && break; sleep 0.2; done
grep -q "leader: acquired lease $ns/gpusched" "$log" || fail "the Lease was not acquired"

on_r1=$(on_node "r1-$run")
mkpod w 2 "$on_r1"
for h in h1 h2; do # half a GPU as KAI writes it: the annotation, no nvidia.com/gpu limit
    kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$h", "annotations": {"gpu-fraction": "0.5"}},
 "spec": {"schedulerName": "gs-$run", "terminationGracePeriodSeconds": 0,
          "nodeSelector": {"fault": "$run"},
          "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}] $on_r1,
          "containers": [{"name": "c", "image": "registry.invalid/none:1",
                          "resources": {"requests": {"cpu": "1"}}}]}}
JSON
done
kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
 "metadata": {"name": "g"}, "spec": {"minMember": 3}}
JSON
for i in 0 1 2; do mkpod "g-$i" 1 "$on_r1" ', "labels": {"scheduling.x-k8s.io/pod-group": "g"}'; done
mkpod q 1 "$on_r1" ", \"labels\": {\"gpusched.io/queue\": \"rbac-$run\"}"
mkpod big 16 "$on_r1"
wait_bound 60 w h1 h2 g-0 g-1 g-2 q
wait_reason big 'Insufficient nvidia.com/gpu'
[ "$(gpus_of h1)" = "$(gpus_of h2)" ] || fail "h1 ($(gpus_of h1)) and h2 ($(gpus_of h2)) do not share a GPU"
echo "ok: whole, fractions (h1, h2 on GPU $(gpus_of h1)), gang g-0..g-2, queue pod q bound; big waits"

# Preemption: low on p, then high; the victim is finalised by hand, as kubelet would.
mkpod low 1 "$(on_node "p-$run"), \"priorityClassName\": \"rbac-low-$run\""
wait_bound 30 low
mkpod high 1 "$(on_node "p-$run"), \"priorityClassName\": \"rbac-high-$run\""
for ((i = 0; i < 150; i++)); do
    grep -q "evicted pod=$ns/low reason=preemption" "$log" && break
    sleep 0.2
done
grep -q "evicted pod=$ns/low reason=preemption" "$log" || fail "low was not evicted"
kubectl -n "$ns" delete pod low --grace-period=0 --force >/dev/null 2>&1 || true
wait_bound 60 high
echo "ok: preemption: low evicted, high bound on p-$run"

# Events and the Queue's status, written as the account.
n=0
for ((i = 0; i < 100; i++)); do
    n=$(kubectl -n "$ns" get events.v1.events.k8s.io -o json | python3 -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["items"] if e.get("reportingController") == "gpusched"))')
    [ "$n" -ge 3 ] && break
    sleep 0.2
done
[ "$n" -ge 3 ] || fail "$n Events from gpusched, want Scheduled, FailedScheduling, Preempted at least"
st=
for ((i = 0; i < 100; i++)); do
    st=$(kubectl get queues.scheduling.gpusched.io "rbac-$run" -o 'jsonpath={.status.running}' 2>/dev/null || true)
    [ -n "$st" ] && break
    sleep 0.2
done
[ -n "$st" ] || fail "the Queue's status was not written"
holder=$(kubectl -n "$ns" get lease gpusched -o 'jsonpath={.spec.holderIdentity}')
grep -q "identity=$holder" "$log" || fail "the Lease is held by '$holder', not this scheduler"
echo "ok: $n Events from gpusched, Queue rbac-$run status running=$st, Lease held by $holder"
stop_sched

# "HTTP 403" as the scheduler words a refused write, "not authenticated or not authorized" a
# refused list or watch (gs_strerror(GS_EAUTH)); a timestamp's ".403Z" is not one.
if grep -nE 'HTTP 403|[^.0-9]403[^0-9]|[Ff]orbidden|not authori' "$log" >&2; then
    fail "the scheduler was refused something (lines above): deploy/scheduler-rbac.yaml lacks a rule"
fi
echo "ok: no 403 in $(wc -l <"$log") log lines"
python3 "$SRC/tests/integration/check_json_log.py" "$log" scheduler \
    "msg=^bound pod=$ns/q node=r1-$run cycle=[0-9]+ queue=rbac-$run gpus=" \
    "queue=^rbac-$run\$" "pod=^$ns/g-2\$" "node=^p-$run\$" "level=^info\$" ||
    fail "the JSON log"
