#!/usr/bin/env bash
# The Kubernetes client (src/k8s) against a real kube-apiserver, through kube_client_probe:
#   - client-certificate auth from files and from inline -data, HTTP/2 negotiated;
#   - 25 nodes created by POST, listed with limit 10 (3 pages, one resourceVersion); an
#     expired continue token answered 410 Expired;
#   - merge, strategic-merge and JSON patches; NotFound, AlreadyExists, Conflict, Invalid and
#     Forbidden answers mapped to their error codes;
#   - a pod watched through ADDED, MODIFIED and DELETED; the watch resumed from the ADDED
#     event's resourceVersion sees exactly the later events; a too-old resourceVersion (older
#     than a new CRD's watch cache) is answered 410 and the informer relists;
#   - two informers stepped by one loop, re-watching across the server's watch timeouts;
#   - bearer-token auth with a ServiceAccount token from `kubectl create token`, inline and
#     through tokenFile.
# usage: kube_client.sh PATH/TO/kube_client_probe
#
# Finding the plane: GS_K8S_KUBECONFIG (an admin kubeconfig, taken as is), else the `env` of
# control-plane.sh (next to this script, or $GPUSCHED_K8S_CP) for state $GPUSCHED_K8S_STATE.
# When neither answers the test is skipped: exit 77 with a message (CTest SKIP_RETURN_CODE).
set -uo pipefail

PROBE=${1:?usage: kube_client.sh PATH/TO/kube_client_probe}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skip() { echo "SKIP: $*" >&2; exit 77; }

if [ -n "${GS_K8S_KUBECONFIG:-}" ]; then
    export KUBECONFIG=$GS_K8S_KUBECONFIG
else
    CP=${GPUSCHED_K8S_CP:-$HERE/control-plane.sh}
    [ -f "$CP" ] || skip "no control plane: $CP not found (set GPUSCHED_K8S_CP or GS_K8S_KUBECONFIG)"
    envtext=$(bash "$CP" env ${GPUSCHED_K8S_STATE:+--state "$GPUSCHED_K8S_STATE"} 2>&1) ||
        skip "no control plane running: $envtext"
    eval "$envtext"
fi
command -v kubectl >/dev/null || skip "kubectl not found"
kubectl get --raw /readyz >/dev/null 2>&1 || skip "the API server at $KUBECONFIG does not answer /readyz"

WORK=$(mktemp -d /tmp/kube_client_test.XXXXXX)
FAILS=0
PID_WATCH=
cleanup() {
    [ -n "$PID_WATCH" ] && kill "$PID_WATCH" 2>/dev/null
    kubectl delete nodes -l gs-client-test=1 --wait=false >/dev/null 2>&1
    kubectl delete clusterrolebinding gs-client-view --ignore-not-found >/dev/null 2>&1
    kubectl delete clusterrole gs-client-node-reader --ignore-not-found >/dev/null 2>&1
    kubectl delete crd gsclienttests.test.gpusched.io --ignore-not-found --wait=false >/dev/null 2>&1
    kubectl delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT
NS=gs-client-$$
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
# expect NAME PATTERN FILE: FILE has a line matching the extended regex PATTERN.
expect() {
    if grep -Eq -- "$2" "$3"; then pass "$1"; else fail "$1: no line matching '$2' in:"; sed 's/^/    /' "$3" | head -40; fi
}
probe() { "$PROBE" "$@"; }

kubectl create namespace "$NS" >/dev/null || { fail "create namespace $NS"; exit 1; }
# Pods need the namespace's `default` ServiceAccount, which the controller manager makes.
for _ in $(seq 100); do kubectl -n "$NS" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done

# ---- client certificate, from files (the plane's kubeconfig) and inline ----------------------
probe config >"$WORK/config" 2>&1
expect "kubeconfig with client-certificate files loads" 'cert_file=/.* key_file=/' "$WORK/config"
REPEAT=3 probe request GET /version >"$WORK/version" 2>&1
expect "GET /version over HTTP/2 with the client certificate" '^status=200 err=GS_OK .*http=2' "$WORK/version"
if [ "$(grep -o 'connects=[0-9]*' "$WORK/version" | tr '\n' ' ')" = "connects=1 connects=0 connects=0 " ]; then
    pass "one connection for three requests"; else fail "one connection for three requests"; cat "$WORK/version"; fi
probe request POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' >"$WORK/whoami" 2>&1
expect "the certificate's user is authenticated" '"username":"' "$WORK/whoami"

kubectl config view --raw --flatten >"$WORK/inline.kubeconfig"
KUBECONFIG=$WORK/inline.kubeconfig probe config >"$WORK/config2" 2>&1
expect "flattened kubeconfig has inline data" 'ca_file=- ca_data=[1-9][0-9]* cert_file=- cert_data=[1-9][0-9]* key_file=- key_data=[1-9]' "$WORK/config2"
KUBECONFIG=$WORK/inline.kubeconfig probe request GET /api/v1/namespaces/"$NS" >"$WORK/inline" 2>&1
expect "inline certificate-authority/client-certificate/client-key data authenticate" '^status=200 err=GS_OK' "$WORK/inline"

# ---- 25 nodes, listed 10 at a time -------------------------------------------------------------
for i in $(seq -w 0 24); do
    probe request POST /api/v1/nodes \
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"gs-client-node-$i\",\"labels\":{\"gs-client-test\":\"1\"}}}" \
        >"$WORK/node" 2>&1 || { fail "create node $i"; cat "$WORK/node"; }
done
probe list /api/v1/nodes --limit 10 --query 'labelSelector=gs-client-test%3D1' >"$WORK/list" 2>&1
expect "25 nodes listed in 3 pages of at most 10" '^items=25 pages=3 restarts=0 rv=[^ ]+$' "$WORK/list"
expect "list items get kind Node" '^item gs-client-node-24 Node$' "$WORK/list"
[ "$(grep -c '^item gs-client-node-' "$WORK/list")" = 25 ] && pass "every node once" || fail "every node once"
probe list /api/v1/nodes --query 'labelSelector=gs-client-test%3D1' >"$WORK/list1" 2>&1
expect "without a limit one page" '^items=25 pages=1 ' "$WORK/list1"

# ---- patches and error answers -----------------------------------------------------------------
N=/api/v1/nodes/gs-client-node-00
probe request MERGE $N '{"metadata":{"labels":{"merge":"yes"}}}' >"$WORK/p1" 2>&1
expect "merge patch" '"merge":"yes"' "$WORK/p1"
probe request STRATEGIC $N '{"metadata":{"labels":{"strategic":"yes"}}}' >"$WORK/p2" 2>&1
expect "strategic merge patch" '"strategic":"yes"' "$WORK/p2"
probe request JSONPATCH $N '[{"op":"add","path":"/metadata/labels/jsonpatch","value":"yes"}]' >"$WORK/p3" 2>&1
expect "JSON patch" '"jsonpatch":"yes"' "$WORK/p3"
probe request GET /api/v1/nodes/gs-client-no-such-node >"$WORK/e404" 2>&1
expect "404 -> GS_ENOENT NotFound" '^status=404 err=GS_ENOENT reason=NotFound' "$WORK/e404"
probe request POST /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gs-client-node-00"}}' >"$WORK/e409a" 2>&1
expect "409 -> GS_EEXIST AlreadyExists" '^status=409 err=GS_EEXIST reason=AlreadyExists' "$WORK/e409a"
probe request PUT $N '{"apiVersion":"v1","kind":"Node","metadata":{"name":"gs-client-node-00","resourceVersion":"1","labels":{"gs-client-test":"1"}}}' >"$WORK/e409c" 2>&1
expect "409 -> GS_ECONFLICT Conflict (stale resourceVersion)" '^status=409 err=GS_ECONFLICT reason=Conflict' "$WORK/e409c"
probe request POST /api/v1/namespaces/"$NS"/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bad"},"spec":{"containers":[]}}' >"$WORK/e422" 2>&1
expect "422 -> GS_EREJECTED Invalid" '^status=422 err=GS_EREJECTED reason=Invalid' "$WORK/e422"

# ---- many: 41 concurrent POSTs, 16 in flight; one name twice --------------------------------
probe many 40 "$NS" 16 >"$WORK/many" 2>&1
expect "many: the batch ran" '^batch=GS_OK' "$WORK/many"
# Each call has its own answer: ConfigMap many-i for call i; the repeated name (calls 3 and 40)
# is created once and refused once, whichever came second.
bad=$(awk '/^call=/ {split($1, c, "="); i = c[2] + 0; n++
        if (i != 3 && i != 40 && !($2 == "status=201" && $3 == "err=GS_OK" && $6 == "name=many-" i)) print}
     END {if (n != 41) print "calls: " n}' "$WORK/many")
[ -z "$bad" ] && pass "many: 39 distinct names created, each answer at its call" || fail "many: $bad"
dup=$(grep -E '^call=(3|40) ' "$WORK/many" | awk '{print $2, $3, $4}' | sort | tr '\n' ';')
[ "$dup" = "status=201 err=GS_OK reason=-;status=409 err=GS_EEXIST reason=AlreadyExists;" ] &&
    pass "many: the repeated name created once, refused once" || fail "many: repeated name: $dup"
# HTTP/2 multiplexes them: at most one new connection per 16 in flight.
conn=$(sed -n 's/^connects=//p' "$WORK/many")
if grep -q 'http=2' "$WORK/many"; then
    [ "${conn:-99}" -le 3 ] && pass "many: $conn new connection(s) over HTTP/2" || fail "many: $conn connections"
else
    pass "many: HTTP/1.1 ($conn connections; libcurl without HTTP/2)"
fi

# ---- watch a pod: ADDED, MODIFIED, DELETED; resume; too old -> 410 -> relist ------------------
PODS=/api/v1/namespaces/$NS/pods
probe list "$PODS" >"$WORK/plist" 2>&1
RV0=$(sed -n 's/^items=.* rv=//p' "$WORK/plist")
[ -n "$RV0" ] && pass "pod list RV $RV0" || fail "pod list RV"
probe watch "$PODS" --rv "$RV0" --until-deleted --timeout-s 60 >"$WORK/w1" 2>&1 &
PID_WATCH=$!
for _ in $(seq 100); do grep -q '^watching' "$WORK/w1" 2>/dev/null && break; sleep 0.1; done
# schedulerName: no scheduler owns it, so only our changes touch the pod.
probe request POST "$PODS" '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w"},"spec":{"schedulerName":"gs-client-nobody","containers":[{"name":"c","image":"busybox"}]}}' >"$WORK/pc" 2>&1
probe request MERGE "$PODS/w" '{"metadata":{"labels":{"step":"2"}}}' >"$WORK/pm" 2>&1
probe request DELETE "$PODS/w" '{"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0}' >"$WORK/pd" 2>&1
wait "$PID_WATCH"; rc=$?; PID_WATCH=
[ $rc = 0 ] && pass "watch reached the DELETED event" || fail "watch reached the DELETED event (exit $rc)"
# Our label patch is one MODIFIED; the deletion itself may add one (deletionTimestamp set).
SEQ=$(grep '^event' "$WORK/w1" | awk '{print $2}' | tr '\n' ' ')
if [[ "$SEQ" =~ ^ADDED\ (MODIFIED\ ){1,2}DELETED\ $ ]]; then pass "watch sees ADDED, MODIFIED, DELETED in order"
else fail "watch sees ADDED, MODIFIED, DELETED in order: got '$SEQ'"; cat "$WORK/w1"; fi
expect "no list when started from an RV" '^stats lists=0 watches=1 events=[34] .* gone=0 failures=0' "$WORK/w1"
RV_ADDED=$(awk '$1=="event" && $2=="ADDED" {print $4}' "$WORK/w1")
probe watch "$PODS" --rv "$RV_ADDED" --until-deleted --timeout-s 30 >"$WORK/w2" 2>&1
SEQ2=$(grep '^event' "$WORK/w2" | awk '{print $2 "@" $4}' | tr '\n' ' ')
WANT2=$(grep '^event' "$WORK/w1" | tail -n +2 | awk '{print $2 "@" $4}' | tr '\n' ' ')
if [ -n "$WANT2" ] && [ "$SEQ2" = "$WANT2" ]; then
    pass "resume from the ADDED event's RV $RV_ADDED sees exactly the later events ($SEQ2)"
else fail "resume from RV $RV_ADDED: got '$SEQ2', want '$WANT2'"; cat "$WORK/w2"; fi

# Too old: the API server keeps a watch cache per resource, filled from when it started, so on a
# fresh plane every RV is still in it. A resource created now (a CRD) has a cache that starts
# now: an RV from before it is "too old" -> 410 Expired, and the informer relists.
RV_OLD=$(probe list /api/v1/namespaces/"$NS"/pods | sed -n 's/^items=.* rv=//p')
kubectl apply -f - >/dev/null <<EOF
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gsclienttests.test.gpusched.io}
spec:
  group: test.gpusched.io
  scope: Namespaced
  names: {plural: gsclienttests, singular: gsclienttest, kind: GsClientTest}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
kubectl wait --for=condition=Established crd/gsclienttests.test.gpusched.io --timeout=60s >/dev/null
CRS=/apis/test.gpusched.io/v1/namespaces/$NS/gsclienttests
for _ in $(seq 50); do
    probe request POST "$CRS" '{"apiVersion":"test.gpusched.io/v1","kind":"GsClientTest","metadata":{"name":"one"}}' >"$WORK/cr" 2>&1 && break
    sleep 0.2
done
probe watch "$CRS" --rv "$RV_OLD" --until-synced --timeout-s 30 >"$WORK/w3" 2>&1
expect "too old RV is answered 410 and relisted" '^stats lists=1 watches=[12] events=0 bookmarks=[0-9]+ gone=1 ' "$WORK/w3"
expect "relist brackets the objects" '^relist$' "$WORK/w3"
expect "... the relist delivers the object" '^listed ADDED one ' "$WORK/w3"
expect "... and ends synced" '^synced$' "$WORK/w3"
# An expired continue token: the server answers 410 Expired, which gs_kube_list takes as "start
# the list again". Continue tokens are served from the watch cache's snapshots, which on a fresh
# plane reach back to the start, so the token is for the CRD (its cache starts at its creation)
# at an RV from before it, with that RV compacted in the plane's etcd. Tokens are base64 JSON;
# this one is made by hand for the test.
if [ -n "${GPUSCHED_K8S_ETCD:-}" ]; then
    REV=$(curl -sS -X POST "$GPUSCHED_K8S_ETCD/v3/kv/range" -d '{"key":"AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
    curl -sS -X POST "$GPUSCHED_K8S_ETCD/v3/kv/compaction" -d "{\"revision\":\"$REV\",\"physical\":true}" >/dev/null
    TOK=$(printf '{"v":"meta.k8s.io/v1","rv":%s,"start":"/one\\u0000"}' "$RV_OLD" | base64 -w0 | tr -d '=' | tr '+/' '-_')
    probe request GET "$CRS?limit=1&continue=$TOK" >"$WORK/cont" 2>&1
    expect "an expired continue token -> 410 GS_EGONE Expired" '^status=410 err=GS_EGONE reason=Expired' "$WORK/cont"
    probe list /api/v1/nodes --limit 10 --query 'labelSelector=gs-client-test%3D1' >"$WORK/list2" 2>&1
    expect "lists still work after the compaction" '^items=25 pages=3 restarts=0 ' "$WORK/list2"
else
    echo "skip expired continue token: GPUSCHED_K8S_ETCD not set (no etcd to compact)"
fi
kubectl delete crd gsclienttests.test.gpusched.io --wait=false >/dev/null 2>&1
# One client, one step loop, two informers (pods and configmaps), with the server ending each
# watch after 2 s: the informers re-watch from their last RV and lose nothing.
probe list "$PODS" >"$WORK/plist2" 2>&1
RV1=$(sed -n 's/^items=.* rv=//p' "$WORK/plist2")
probe watch "$PODS" --rv "$RV1" --watch-timeout-s 2 --until-deleted --timeout-s 60 \
    --also /api/v1/namespaces/"$NS"/configmaps >"$WORK/w5" 2>&1 &
PID_WATCH=$!
for _ in $(seq 100); do grep -q '^watching' "$WORK/w5" 2>/dev/null && break; sleep 0.1; done
sleep 3 # past the first server-side timeout
probe request POST /api/v1/namespaces/"$NS"/configmaps '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"b"}}' >/dev/null 2>&1
probe request POST "$PODS" '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w2"},"spec":{"schedulerName":"gs-client-nobody","containers":[{"name":"c","image":"busybox"}]}}' >/dev/null 2>&1
sleep 2.5
probe request DELETE "$PODS/w2" '{"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0}' >/dev/null 2>&1
wait "$PID_WATCH"; rc=$?; PID_WATCH=
[ $rc = 0 ] && pass "multiplexed watch reached the DELETED event" || { fail "multiplexed watch (exit $rc)"; cat "$WORK/w5"; }
expect "pod events across server-side watch timeouts" '^event ADDED w2 ' "$WORK/w5"
expect "... ending in DELETED" '^event DELETED w2 ' "$WORK/w5"
expect "re-watched after each timeout without failures" '^stats lists=0 watches=([3-9]|[1-9][0-9]) .* gone=0 failures=0' "$WORK/w5"
expect "the second informer listed, then saw the configmap" '^also event ADDED cm ' "$WORK/w5"
expect "... with one list and no failures" '^also stats lists=1 watches=[1-9][0-9]* events=[1-9][0-9]* failures=0' "$WORK/w5"

# From no RV: list first, then watch.
probe watch "$PODS" --until-synced --timeout-s 30 >"$WORK/w4" 2>&1
expect "informer without RV lists first" '^stats lists=1 watches=[01] .* gone=0 failures=0' "$WORK/w4"

# ---- bearer token of a ServiceAccount ----------------------------------------------------------
kubectl -n "$NS" create serviceaccount gs-client-sa >/dev/null
TOKEN=$(kubectl -n "$NS" create token gs-client-sa --duration=10m)
SERVER=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
CA_DATA=$(kubectl config view --raw --flatten --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
printf '%s' "$TOKEN" >"$WORK/token"
for form in token tokenFile; do
    if [ $form = token ]; then cred="token: $TOKEN"; else cred="tokenFile: token"; fi
    cat >"$WORK/sa-$form.kubeconfig" <<EOF
apiVersion: v1
kind: Config
current-context: sa
contexts: [{name: sa, context: {cluster: c, user: sa, namespace: $NS}}]
clusters: [{name: c, cluster: {server: '$SERVER', certificate-authority-data: '$CA_DATA'}}]
users:
- name: sa
  user:
    $cred
EOF
    KUBECONFIG=$WORK/sa-$form.kubeconfig probe request POST /apis/authentication.k8s.io/v1/selfsubjectreviews \
        '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}' >"$WORK/sa-who-$form" 2>&1
    expect "bearer $form authenticates as the ServiceAccount" "\"username\":\"system:serviceaccount:$NS:gs-client-sa\"" "$WORK/sa-who-$form"
    KUBECONFIG=$WORK/sa-$form.kubeconfig probe list /api/v1/nodes --limit 10 >"$WORK/sa-list-$form" 2>&1
    expect "403 -> GS_EAUTH Forbidden for the ServiceAccount ($form)" '^error=GS_EAUTH status=403 reason=Forbidden' "$WORK/sa-list-$form"
done
# `view` does not cover nodes (cluster-scoped); a role of our own does.
kubectl create clusterrole gs-client-node-reader --verb=get,list,watch --resource=nodes >/dev/null
kubectl create clusterrolebinding gs-client-view --clusterrole=gs-client-node-reader --serviceaccount="$NS:gs-client-sa" >/dev/null
for _ in $(seq 50); do
    KUBECONFIG=$WORK/sa-tokenFile.kubeconfig probe list /api/v1/nodes --limit 10 --query 'labelSelector=gs-client-test%3D1' >"$WORK/sa-list2" 2>&1 && break
    sleep 0.2
done
expect "with a node-reader role the token lists nodes" '^items=25 pages=3 ' "$WORK/sa-list2"
printf 'not-a-token' >"$WORK/token"
KUBECONFIG=$WORK/sa-token.kubeconfig probe request GET /api/v1/nodes/gs-client-node-00 >"$WORK/sa-ok" 2>&1
expect "inline token still works" '^status=200 err=GS_OK' "$WORK/sa-ok"
KUBECONFIG=$WORK/sa-tokenFile.kubeconfig probe request GET /api/v1/nodes/gs-client-node-00 >"$WORK/sa-bad" 2>&1
expect "a bad token file is answered 401 -> GS_EAUTH" '^status=401 err=GS_EAUTH reason=Unauthorized' "$WORK/sa-bad"

echo "kube_client: $FAILS failure(s)"
[ $FAILS = 0 ]
