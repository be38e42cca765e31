# Helpers shared by gpusched's fault tests (tests/k8s/scheduler_fault_*.sh); sourced, not run.
# The caller sets: bin (the gpusched binary), run (a unique id), ns, tmp (a scratch dir), log
# (the scheduler's log file), and has KUBECONFIG and the control plane's env loaded; a test on
# the shared plane may call fault_test_begin for all but bin.

sched_pid=

fail() {
    echo "FAIL: $*" >&2
    echo "--- gpusched log (last 40 lines)" >&2
    tail -n 40 "$log" >&2 || true
    exit 1
}

# start_sched [ARGS...]: gpusched scheduler in the background, logging to $log.
start_sched() {
    "$bin" scheduler --kubeconfig "${SCHED_KUBECONFIG:-$KUBECONFIG}" --scheduler-name "gs-$run" \
        --policy bestfit --qps 500 --burst 1000 --max-runtime-s 280 --leader-elect=false \
        --metrics-addr 127.0.0.1:0 "$@" >>"$log" 2>&1 &
    sched_pid=$!
}

stop_sched() {
    if [ -n "$sched_pid" ]; then
        kill -TERM "$sched_pid" 2>/dev/null || true
        wait "$sched_pid" 2>/dev/null || true
        sched_pid=
    fi
}

# metric NAME: the value of one series on the scheduler's /metrics.
metric() {
    local port
    port=$(sed -n 's/.*serving \/healthz \/readyz \/metrics on .* (port \([0-9]*\)).*/\1/p' "$log" | tail -n 1)
    curl -sf "http://127.0.0.1:$port/metrics" | awk -v k="$1" '$1 == k {print $2}'
}

# mknode NAME GPUS: a Node labelled run=$run, with capacity set through the status subresource
# as a kubelet would, tainted so that only this test's pods (which tolerate it) go there.
mknode() {
    local name=$1 gpus=$2
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "$name", "labels": {"gpusched.test/run": "$run", "fault": "$run", "gpusched.test/node": "$name"}},
 "spec": {"taints": [{"key": "gpusched.test/fault", "value": "$run", "effect": "NoSchedule"}]}}
JSON
    local res="{\"cpu\":\"32\",\"memory\":\"256Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"$gpus\"}"
    kubectl patch node "$name" --subresource=status --type=merge \
        -p "{\"status\":{\"capacity\":$res,\"allocatable\":$res,\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"test\"}]}}" >/dev/null
}

# mkpod NAME GPUS [SPEC-EXTRA-JSON] [METADATA-EXTRA-JSON]: a pod of this test's scheduler that
# tolerates the test taint and selects the test's nodes.
mkpod() {
    local name=$1 gpus=$2 extra=${3:-} meta=${4:-}
    kubectl -n "$ns" apply -f - >/dev/null <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$name" $meta},
 "spec": {"schedulerName": "gs-$run", "terminationGracePeriodSeconds": 0,
          "nodeSelector": {"fault": "$run"},
          "tolerations": [{"key": "gpusched.test/fault", "operator": "Exists"}] $extra,
          "containers": [{"name": "c", "image": "registry.invalid/none:1",
                          "resources": {"limits": {"nvidia.com/gpu": "$gpus"}, "requests": {"cpu": "1"}}}]}}
JSON
}

# on_node NODE: the spec-extra JSON of a pod that may run only on NODE (required node affinity
# on metadata.name, as kube-scheduler and gpusched both read it).
on_node() {
    printf ', "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["%s"]}]}]}}}' "$1"
}

jp() { kubectl -n "$ns" get pod "$1" -o "jsonpath=$2" 2>/dev/null || true; }

wait_node() { # wait_node POD WANT-NODE [TIMEOUT_S]
    local pod=$1 want=$2 t=${3:-30} got="" i
    for ((i = 0; i < t * 5; i++)); do
        got=$(jp "$pod" '{.spec.nodeName}')
        [ -n "$got" ] && break
        sleep 0.2
    done
    [ "$got" = "$want" ] || fail "$pod: bound to '$got', want '$want'"
}

wait_bound() { # wait_bound TIMEOUT_S POD...: each gets a node (any)
    local t=$1 p i
    shift
    for p in "$@"; do
        for ((i = 0; i < t * 5; i++)); do
            [ -n "$(jp "$p" '{.spec.nodeName}')" ] && break
            sleep 0.2
        done
        [ -n "$(jp "$p" '{.spec.nodeName}')" ] || fail "$p was not bound within ${t} s"
    done
}

wait_reason() { # wait_reason POD REGEX [TIMEOUT_S]: PodScheduled=False with a matching message
    local pod=$1 want=$2 t=${3:-30} msg="" i
    for ((i = 0; i < t * 5; i++)); do
        msg=$(jp "$pod" '{.status.conditions[?(@.type=="PodScheduled")].message}')
        [[ "$msg" =~ $want ]] && return 0
        sleep 0.2
    done
    fail "$pod: PodScheduled message '$msg' does not match '$want'"
}

gpus_of() { # the GPU indices of a pod's assignment, "0,1"; "" without one
    jp "$1" '{.metadata.annotations.gpusched\.io/assigned-gpus}' |
        python3 -c 'import json,sys
t=sys.stdin.read().strip()
print(",".join(str(g["index"]) for g in json.loads(t)["gpus"]) if t else "")'
}

# no_double_use: over every bound pod of the namespace, no GPU of a node is given out beyond
# 1000 milli and no node holds more GPUs than it has; and no pod was bound twice by gpusched
# (one "bound pod=" line each in the log, no "already assigned" refusal of a pod it bound).
no_double_use() {
    kubectl get nodes -l "gpusched.test/run=$run" -o json >"$tmp/nodes.json"
    kubectl -n "$ns" get pods -o json >"$tmp/pods.json"
    python3 - "$tmp/nodes.json" "$tmp/pods.json" <<'PY' || fail "a GPU was handed out twice"
import json, sys
nodes = {n["metadata"]["name"]: int(n["status"]["allocatable"]["nvidia.com/gpu"])
         for n in json.load(open(sys.argv[1]))["items"]}
use, held = {}, {}
for p in json.load(open(sys.argv[2]))["items"]:
    node = p["spec"].get("nodeName")
    if not node or node not in nodes:
        continue
    a = (p["metadata"].get("annotations") or {}).get("gpusched.io/assigned-gpus")
    if a:
        for g in json.loads(a)["gpus"]:
            k = (node, g["index"])
            use[k] = use.get(k, 0) + g["milli"]
            assert 0 <= g["index"] < nodes[node], "%s GPU %d out of range" % k
    n = int(p["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", "0"))
    held[node] = held.get(node, 0) + n
bad = {k: v for k, v in use.items() if v > 1000}
over = {k: v for k, v in held.items() if v > nodes[k]}
if bad or over:
    print("over-used GPUs:", bad, "over-full nodes:", over, file=sys.stderr)
    sys.exit(1)
print("ok: no GPU handed out twice (%d GPUs in use on %d nodes)" % (len(use), len(held)))
PY
    local dups
    dups=$(grep -h "bound pod=" "$log" | sed 's/.*bound pod=\([^ ]*\).*/\1/' | sort | uniq -d)
    [ -z "$dups" ] || fail "pods bound twice: $dups"
}

# private_plane: a control plane of this test's own (no kube-scheduler, no controller manager),
# for faults that would disturb other tests: restarting the API server. Sets KUBECONFIG etc.
private_plane() {
    bash "$HERE/control-plane.sh" up --state "$tmp/cp" --scheduler=0 --controller-manager=0 >"$tmp/cp-up.log" 2>&1 ||
        { cat "$tmp/cp-up.log" >&2; fail "private control plane did not come up"; }
    PLANE=$tmp/cp
    # shellcheck disable=SC1090
    source <(bash "$HERE/control-plane.sh" env --state "$PLANE")
}

# setup_ns: the test namespace with its `default` ServiceAccount (made here when no controller
# manager runs to make it).
setup_ns() {
    kubectl create namespace "$ns" >/dev/null
    local i
    for i in $(seq 1 25); do
        kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    kubectl -n "$ns" create serviceaccount default >/dev/null 2>&1 || true
}

# mkcerts DIR: a CA (DIR/ca.crt) made by openssl and a serving certificate it signed for
# 127.0.0.1 (DIR/tls.crt, DIR/tls.key), for webhooks the API server calls by URL.
mkcerts() {
    local d=$1
    mkdir -p "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -subj "/CN=gpusched-test-webhook-ca" -days 1 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
        -out "$d/ca.crt" 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/tls.key" 2>/dev/null
    openssl req -new -key "$d/tls.key" -subj "/CN=127.0.0.1" -out "$d/tls.csr" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' >"$d/ext"
    openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 1 \
        -sha256 -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null
}

# start_webhook MODE ARGS...: bind_webhook.py on a certificate of a CA made here, registered as a
# ValidatingWebhookConfiguration for pods/binding in this test's namespace only (or for the
# rules in webhook_rules, a JSON array of RuleWithOperations, when the caller sets it). Its
# reviews are logged to $tmp/webhook.log. Sets webhook_pid; the registration is named
# gs-fault-$run.
start_webhook() {
    local d=$tmp/wh
    mkcerts "$d"
    : >"$tmp/webhook.log"
    python3 "$HERE/bind_webhook.py" "$d/tls.crt" "$d/tls.key" "$d/port" "$tmp/webhook.log" "$@" \
        2>"$tmp/webhook.err" &
    webhook_pid=$!
    local i
    for ((i = 0; i < 50; i++)); do [ -f "$d/port" ] && break; sleep 0.1; done
    [ -f "$d/port" ] || { cat "$tmp/webhook.err" >&2; fail "the webhook did not start"; }
    local rules='[{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
              "resources": ["pods/binding"], "scope": "Namespaced"}]'
    rules=${webhook_rules:-$rules}
    kubectl apply -f - >/dev/null <<JSON
{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
 "metadata": {"name": "gs-fault-$run"},
 "webhooks": [{"name": "bind.gpusched.test", "admissionReviewVersions": ["v1"],
   "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "$ns"}},
   "rules": $rules,
   "clientConfig": {"url": "https://127.0.0.1:$(cat "$d/port")/validate",
                    "caBundle": "$(base64 -w0 <"$d/ca.crt")"}}]}
JSON
}

stop_webhook() {
    kubectl delete validatingwebhookconfiguration "gs-fault-$run" >/dev/null 2>&1 || true
    [ -n "${webhook_pid:-}" ] && kill "$webhook_pid" 2>/dev/null || true
    webhook_pid=
}

# fault_test_begin PREFIX: run, ns (gs-PREFIX-RUN), tmp and log for a test on the shared plane,
# and an EXIT trap that stops its scheduler and webhook and removes what it made.
fault_test_begin() {
    run=$$
    ns=gs-$1-$run
    tmp=$(mktemp -d)
    log=$tmp/gpusched.log
    trap fault_test_cleanup EXIT
}

fault_test_cleanup() {
    stop_sched
    stop_webhook
    kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    kubectl delete nodes -l "gpusched.test/run=$run" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}

# private_test_begin PREFIX: run, ns (gs-PREFIX-RUN), tmp and log for a test on a control plane of
# its own, brought up here (private_plane), and an EXIT trap that stops its scheduler, runs the
# test's private_test_extra_cleanup if it defines one, takes the plane down and removes tmp.
private_test_begin() {
    run=$$
    ns=gs-$1-$run
    tmp=$(mktemp -d)
    log=$tmp/gpusched.log
    trap private_test_cleanup EXIT
    private_plane
}

private_test_cleanup() {
    stop_sched
    if declare -F private_test_extra_cleanup >/dev/null; then private_test_extra_cleanup; fi
    bash "$HERE/control-plane.sh" down --state "$tmp/cp" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
