#!/usr/bin/env bash
# The mutating admission webhook end to end on the real API server: gpusched scheduler serves it
# (--webhook-addr/--webhook-cert/--webhook-key, a certificate of a CA that openssl makes here),
# and a MutatingWebhookConfiguration of this test registers it (url clientConfig to 127.0.0.1,
# caBundle that CA, failurePolicy Fail, for this test's namespace only). Node w1 has 2 GPUs.
#   1. `whole` (nvidia.com/gpu: 1) is created unchanged (no gpu-slice) and takes one GPU;
#   2. half1 and half2 ask for a fraction by KAI annotation only (gpu-fraction: "0.5"): the API
#      server stores each with gpusched.io/gpu-slice: "1" in its first container's limits and
#      requests, and gpusched binds both with milli 500 on the one GPU `whole` left: 500 + 500
#      = 1000 milli, exactly one GPU (Must show 1: milli fractions through the webhook);
#   3. a gpu-memory pod is patched the same way (its placement belongs to the core's GPU
#      sharing, not asserted here); a pod of another scheduler with gpu-fraction, and a second
#      container's limits, are left alone;
#   4. a bad fraction ("1.5") is admitted unpatched, and kubectl shows the webhook's warning;
#   5. malformed reviews sent to the webhook directly get 400 with the field named, a GET 405,
#      and the scheduler goes on serving (a pod created after them is still patched);
#   6. deploy/webhook.yaml's own rules and CEL matchConditions (its clientConfig pointed at this
#      scheduler, its schedulerName at this test's): a KAI pod is sent and patched; a pod
#      without the annotations and another scheduler's KAI pod are never sent.
#
# Usage: scheduler_webhook.sh GPUSCHED_BINARY  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
# shellcheck source=tests/k8s/fault_lib.sh
source "$HERE/fault_lib.sh"
fault_test_begin wh

cleanup_wh() {
    kubectl delete mutatingwebhookconfiguration "gs-wh-$run" >/dev/null 2>&1 || true
    fault_test_cleanup
}
trap cleanup_wh EXIT

# fpod NAME META-EXTRA-JSON [SCHEDULER] [CONTAINERS-JSON]: a pod of this test's scheduler with no
# GPU resource of its own (what a KAI user writes).
fpod() {
    local name=$1 meta=$2 sched=${3:-gs-$run}
    local conts=${4:-'[{"name": "main", "image": "registry.invalid/none:1", "resources": {"requests": {"cpu": "1"}}}]'}
    kubectl -n "$ns" create -f - 2>>"$tmp/kubectl.err" >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$name" $meta},
 "spec": {"schedulerName": "$sched", "terminationGracePeriodSeconds": 0,
          "nodeSelector": {"fault": "$run"},
          "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}],
          "containers": $conts}}
JSON
}

slice_of() { # slice_of POD limits|requests [CONTAINER-INDEX]
    jp "$1" "{.spec.containers[${3:-0}].resources.$2.gpusched\\.io/gpu-slice}"
}

milli_of() { # the milli of each GPU of a pod's assignment, "500"
    jp "$1" '{.metadata.annotations.gpusched\.io/assigned-gpus}' |
        python3 -c 'import json,sys
t=sys.stdin.read().strip()
print(",".join(str(g["milli"]) for g in json.loads(t)["gpus"]) if t else "")'
}

setup_ns
mknode "w1-$run" 2
mkcerts "$tmp/wh"
start_sched --webhook-addr 127.0.0.1:0 --webhook-cert "$tmp/wh/tls.crt" --webhook-key "$tmp/wh/tls.key"
port=""
for ((i = 0; i < 100; i++)); do
    port=$(sed -n 's/.*serving the admission webhook at .* (port \([0-9]*\)).*/\1/p' "$log" | tail -n 1)
    [ -n "$port" ] && break
    kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler exited"
    sleep 0.1
done
[ -n "$port" ] || fail "the scheduler did not say where the webhook is served"
kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
 "metadata": {"name": "gs-wh-$run"},
 "webhooks": [{"name": "fractions.gpusched.io", "admissionReviewVersions": ["v1"],
   "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
   "reinvocationPolicy": "Never",
   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "$ns"}},
   "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["pods"], "scope": "Namespaced"}],
   "clientConfig": {"url": "https://127.0.0.1:$port/mutate-pods",
                    "caBundle": "$(base64 -w0 <"$tmp/wh/ca.crt")"}}]}
JSON
# The API server reads webhook configurations through an informer: wait until ours applies
# (a probe pod of another scheduler is admitted and logged by the webhook).
for ((i = 0; i < 100; i++)); do
    kubectl -n "$ns" delete pod probe --grace-period=0 --force >/dev/null 2>&1 || true
    fpod probe '' other-$run
    grep -q "webhook: pod=$ns/probe" "$log" && break
    sleep 0.2
done
grep -q "webhook: pod=$ns/probe unchanged" "$log" || fail "the API server never called the webhook"
kubectl -n "$ns" delete pod probe --grace-period=0 --force >/dev/null 2>&1 || true
echo "ok: the API server calls the webhook at https://127.0.0.1:$port/mutate-pods"

# 1. A whole-GPU pod: unchanged, bound first.
mkpod whole 1
wait_node whole "w1-$run" 20
[ -z "$(slice_of whole limits)" ] || fail "whole got a gpu-slice"
wg=$(gpus_of whole)
echo "ok: whole -> w1-$run GPU $wg, no gpu-slice"

# 2. Two KAI fractions: patched by the API server, then bound together on the other GPU.
fpod half1 ', "annotations": {"gpu-fraction": "0.5"}'
fpod half2 ', "annotations": {"gpu-fraction": "0.5"}'
for p in half1 half2; do
    [ "$(slice_of $p limits)" = 1 ] || fail "$p: limits gpusched.io/gpu-slice is '$(slice_of $p limits)', want 1"
    [ "$(slice_of $p requests)" = 1 ] || fail "$p: requests gpusched.io/gpu-slice is '$(slice_of $p requests)', want 1"
    [ "$(jp $p '{.spec.containers[0].resources.requests.cpu}')" = 1 ] || fail "$p lost its cpu request"
done
wait_node half1 "w1-$run" 20
wait_node half2 "w1-$run" 20
h1=$(gpus_of half1)
h2=$(gpus_of half2)
[ "$(milli_of half1)" = 500 ] && [ "$(milli_of half2)" = 500 ] ||
    fail "milli: half1 '$(milli_of half1)', half2 '$(milli_of half2)', want 500 each"
[ "$h1" = "$h2" ] && [ "$h1" != "$wg" ] && [ "$((h1 + wg))" = 1 ] ||
    fail "GPUs: whole $wg, half1 $h1, half2 $h2; want both halves on the GPU whole left"
grep -q "webhook: pod=$ns/half1 patched: annotation gpu-fraction=0.5: added gpusched.io/gpu-slice: 1 to container main" "$log" ||
    fail "the webhook did not log half1's patch"
no_double_use
echo "ok: half1, half2 patched (limits and requests gpu-slice 1) and bound to w1-$run GPU $h1 at 500 milli each"

# 3. gpu-memory patched too; another scheduler's pod and container 1 left alone.
fpod mem ', "annotations": {"gpu-memory": "4096"}'
[ "$(slice_of mem limits)" = 1 ] || fail "mem: no gpu-slice in limits"
fpod other ', "annotations": {"gpu-fraction": "0.5"}' other-$run
[ -z "$(slice_of other limits)" ] || fail "another scheduler's pod was patched"
fpod two ', "annotations": {"gpu-fraction": "0.25"}' "gs-$run" \
    '[{"name": "a", "image": "registry.invalid/none:1"}, {"name": "b", "image": "registry.invalid/none:1", "resources": {"limits": {"cpu": "1"}}}]'
[ "$(slice_of two limits 0)" = 1 ] && [ "$(slice_of two requests 0)" = 1 ] || fail "two: container a not patched"
[ -z "$(slice_of two limits 1)" ] && [ "$(jp two '{.spec.containers[1].resources.limits.cpu}')" = 1 ] ||
    fail "two: container b was changed"
echo "ok: gpu-memory patched; another scheduler's pod and the second container untouched"

# 4. A bad fraction: admitted unpatched, with the webhook's warning shown by kubectl.
: >"$tmp/kubectl.err"
fpod bad ', "annotations": {"gpu-fraction": "1.5"}'
[ -z "$(slice_of bad limits)" ] || fail "bad was patched"
grep -q 'Warning: gpusched: annotation gpu-fraction: "1.5" is not a number in (0, 1]' "$tmp/kubectl.err" ||
    fail "kubectl showed no warning for bad: '$(cat "$tmp/kubectl.err")'"
echo "ok: bad admitted unpatched; kubectl: $(grep -m1 Warning "$tmp/kubectl.err")"

# 5. Malformed reviews straight to the webhook, then a pod still patched.
url=https://127.0.0.1:$port/mutate-pods
code=$(curl -s -o "$tmp/r400" -w '%{http_code}' --cacert "$tmp/wh/ca.crt" -H 'Content-Type: application/json' -d 'not json' "$url")
[ "$code" = 400 ] && grep -q 'body: not JSON' "$tmp/r400" || fail "garbage: HTTP $code $(cat "$tmp/r400")"
code=$(curl -s -o "$tmp/r400" -w '%{http_code}' --cacert "$tmp/wh/ca.crt" -H 'Content-Type: application/json' \
    -d '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}' "$url")
[ "$code" = 400 ] && grep -q 'request.uid: missing' "$tmp/r400" || fail "no uid: HTTP $code $(cat "$tmp/r400")"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/wh/ca.crt" "$url")
[ "$code" = 405 ] || fail "GET: HTTP $code, want 405"
kill -0 "$sched_pid" 2>/dev/null || fail "the scheduler died on a malformed review"
fpod after ', "annotations": {"gpu-fraction": "0.5"}'
[ "$(slice_of after limits)" = 1 ] || fail "after: not patched after the malformed reviews"
echo "ok: malformed reviews answered 400 naming the field, GET 405; the webhook goes on"

# 6. deploy/webhook.yaml's configuration in place of the test's.
kubectl delete mutatingwebhookconfiguration "gs-wh-$run" >/dev/null
python3 - "$HERE/../../deploy/webhook.yaml" "$run" "$ns" "$port" "$tmp/wh/ca.crt" >"$tmp/deploy-mwc.json" <<'PY'
import base64, json, sys, yaml
path, run, ns, port, ca = sys.argv[1:6]
mwc = [d for d in yaml.safe_load_all(open(path)) if d and d["kind"] == "MutatingWebhookConfiguration"][0]
mwc["metadata"]["name"] = "gs-wh-" + run
w = mwc["webhooks"][0]
w["clientConfig"] = {"url": "https://127.0.0.1:%s/mutate-pods" % port,
                     "caBundle": base64.b64encode(open(ca, "rb").read()).decode()}
w["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": ns}
for c in w["matchConditions"]:
    c["expression"] = c["expression"].replace("'gpusched'", "'gs-%s'" % run)
json.dump(mwc, sys.stdout)
PY
kubectl apply -f "$tmp/deploy-mwc.json" >/dev/null
for ((i = 0; i < 100; i++)); do
    kubectl -n "$ns" delete pod cel-probe --grace-period=0 --force >/dev/null 2>&1 || true
    fpod cel-probe ', "annotations": {"gpu-fraction": "0.5"}' "gs-$run" \
        '[{"name": "main", "image": "registry.invalid/none:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]'
    grep -q "webhook: pod=$ns/cel-probe" "$log" && break
    sleep 0.2
done
kubectl -n "$ns" delete pod cel-probe --grace-period=0 --force >/dev/null 2>&1 || true
fpod cel-kai ', "annotations": {"gpu-fraction": "0.5"}'
[ "$(slice_of cel-kai limits)" = 1 ] || fail "cel-kai: not patched through deploy/webhook.yaml"
fpod cel-plain ''
fpod cel-other ', "annotations": {"gpu-fraction": "0.5"}' other-$run
for p in cel-plain cel-other; do
    [ -n "$(jp $p '{.metadata.uid}')" ] || fail "$p was not created"
    grep -q "webhook: pod=$ns/$p " "$log" && fail "$p was sent to the webhook despite matchConditions"
done
echo "ok: deploy/webhook.yaml: cel-kai sent and patched; cel-plain and cel-other never sent (matchConditions)"
stop_sched
