#!/usr/bin/env bash
# Smoke test of the real control plane that tests/k8s/control-plane.sh starts: the API server
# reports the pinned release, kube-scheduler binds a GPU pod to a Node whose only GPUs come from
# a status patch (no kubelet runs), refuses a pod that asks for more GPUs than the node has, and
# kube-controller-manager fills a PodDisruptionBudget's status.
#
# Usage: smoke.sh  (GPUSCHED_K8S_STATE names the state dir of a plane that is up)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)

ns=gs-smoke-$$
node=gs-smoke-node-$$
fail() {
    echo "FAIL: $*" >&2
    local c
    for c in kube-scheduler kube-controller-manager kube-apiserver; do
        echo "--- last lines of $GPUSCHED_K8S_STATE/logs/$c.log" >&2
        tail -n 15 "$GPUSCHED_K8S_STATE/logs/$c.log" >&2 || true
    done
    exit 1
}

cleanup() {
    # No kubelet confirms a graceful delete of a bound pod, so delete pods at once (grace 0);
    # then the namespace controller can finish the namespace.
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl delete node "$node" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# wait_jsonpath WHAT EXPECTED TIMEOUT_S KUBECTL_GET_ARGS...: polls until the jsonpath matches.
wait_jsonpath() {
    local what=$1 want=$2 timeout_s=$3 got="" i
    shift 3
    for ((i = 0; i < timeout_s * 5; i++)); do
        got=$(kubectl get "$@" 2>/dev/null || true)
        [ "$got" = "$want" ] && return 0
        sleep 0.2
    done
    fail "$what: want '$want', got '$got' after ${timeout_s} s"
}

# 1. /version is the release the binaries were built from.
version=$(kubectl get --raw /version | python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])')
[ "$version" = v1.37.2 ] || fail "/version gitVersion is '$version', want v1.37.2"
echo "ok: /version reports $version"

# 2. A Node with 8 GPUs, given capacity the way a kubelet would: through the status subresource.
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels: {gpusched.test/smoke: "$node"}
EOF
kubectl patch node "$node" --subresource=status --type=merge -p '{"status":{
  "capacity":   {"cpu":"64","memory":"512Gi","pods":"110","nvidia.com/gpu":"8"},
  "allocatable":{"cpu":"64","memory":"512Gi","pods":"110","nvidia.com/gpu":"8"},
  "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"set by smoke.sh"}]}}' >/dev/null
wait_jsonpath "node GPU capacity" 8 10 node "$node" -o 'jsonpath={.status.allocatable.nvidia\.com/gpu}'
taints=$(kubectl get node "$node" -o 'jsonpath={.spec.taints}')
[ -z "$taints" ] || fail "node got taints $taints (TaintNodesByCondition must be off)"
echo "ok: node $node has 8 nvidia.com/gpu and no taints"

# 3. kube-scheduler binds a 1-GPU pod to it and leaves a 9-GPU pod pending as Unschedulable.
kubectl create namespace "$ns" >/dev/null
wait_jsonpath "default ServiceAccount in $ns" default 30 -n "$ns" serviceaccount default -o 'jsonpath={.metadata.name}'
for spec in "gpu-1 1" "gpu-9 9"; do
    read -r name gpus <<<"$spec"
    kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {app: smoke}
spec:
  nodeSelector: {gpusched.test/smoke: "$node"}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      limits: {nvidia.com/gpu: "$gpus"}
EOF
done
wait_jsonpath "gpu-1 spec.nodeName" "$node" 60 -n "$ns" pod gpu-1 -o 'jsonpath={.spec.nodeName}'
echo "ok: kube-scheduler bound gpu-1 to $node"
wait_jsonpath "gpu-9 PodScheduled condition" "False Unschedulable" 60 -n "$ns" pod gpu-9 \
    -o 'jsonpath={.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason}'
[ -z "$(kubectl -n "$ns" get pod gpu-9 -o 'jsonpath={.spec.nodeName}')" ] || fail "gpu-9 was bound"
echo "ok: gpu-9 (9 GPUs on an 8-GPU node) stays pending as Unschedulable"

# 4. kube-controller-manager's disruption controller fills the PDB's status: both pods match
# (expectedPods 2); none is Ready, since no kubelet runs them, so no disruption is allowed.
kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: smoke
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: smoke}
EOF
wait_jsonpath "PDB status" "1 2 1 0 0" 60 -n "$ns" pdb smoke \
    -o 'jsonpath={.status.observedGeneration} {.status.expectedPods} {.status.desiredHealthy} {.status.currentHealthy} {.status.disruptionsAllowed}'
echo "ok: PDB status filled by kube-controller-manager (expectedPods 2, disruptionsAllowed 0)"
echo "PASS"
