#!/usr/bin/env bash
# A real Kubernetes control plane for gpusched's tests: etcd, kube-apiserver, kube-scheduler and
# kube-controller-manager, built from their published Go modules and run on 127.0.0.1. No
# kubelet runs: tests create Node objects themselves and give them capacity through the status
# subresource. This script is the one place that knows the versions and the flags.
#
#   control-plane.sh build                 build the binaries into the cache (skipped when there)
#   control-plane.sh up [options]          build if needed, start, wait until ready
#   control-plane.sh env [--state DIR]     print `export VAR=...` lines for a running plane
#   control-plane.sh status [--state DIR]  show each component and whether it answers
#   control-plane.sh down [--state DIR]    stop everything started from DIR and remove DIR
#   control-plane.sh restart NAME [--state DIR]  stop one component (SIGTERM) and start it again
#                                          with the same command line and ports (fault tests)
#   control-plane.sh gomod                 regenerate kube/go.mod and etcd/go.mod (+ go.sum)
#   control-plane.sh bin                   print the cached bin directory (builds if needed)
# up options: --state DIR, --scheduler=0|1, --controller-manager=0|1 (both default to 1, or
# GPUSCHED_K8S_SCHEDULER / GPUSCHED_K8S_CONTROLLER_MANAGER).
#
# Environment: GPUSCHED_K8S_CACHE (binary cache root, default /var/cache/gpusched/k8s),
# GPUSCHED_K8S_STATE (state dir, default /tmp/gpusched-k8s), GPUSCHED_K8S_BUILD_JOBS (go build
# -p, default 2), GPUSCHED_K8S_READY_TIMEOUT_S (default 120). Go's own GOCACHE, GOMODCACHE,
# GOPROXY and GOTOOLCHAIN apply to the build.
set -euo pipefail

# ---- versions: change here, then run `control-plane.sh gomod` and commit the go.mod/go.sum.
K8S_MODULE=k8s.io/kubernetes
K8S_VERSION=v1.37.2     # k8s.io/kubernetes release
K8S_STAGING=v0.37.2     # the same release of every k8s.io/* staging module
ETCD_MODULE=go.etcd.io/etcd/server/v3
ETCD_VERSION=v3.6.16    # newest 3.6 served by the module proxy on 2026-12-01
K8S_TOOLS=(
    k8s.io/kubernetes/cmd/kube-apiserver
    k8s.io/kubernetes/cmd/kube-scheduler
    k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kubectl
)
# Only the controllers that make sense without kubelets: PDB status, the `default`
# ServiceAccount (pods cannot be created without it), namespace deletion, legacy SA token
# secrets, the kube-root-ca.crt ConfigMap. Never nodelifecycle: it would taint every node
# not-ready because no kubelet posts status.
KCM_CONTROLLERS=disruption,serviceaccount,serviceaccount-token,namespace,root-ca-cert-publisher
SERVICE_CIDR=10.0.0.0/24

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${GPUSCHED_K8S_STATE:-/tmp/gpusched-k8s}
READY_TIMEOUT_S=${GPUSCHED_K8S_READY_TIMEOUT_S:-120}
WANT_SCHED=${GPUSCHED_K8S_SCHEDULER:-1}
WANT_KCM=${GPUSCHED_K8S_CONTROLLER_MANAGER:-1}

LOG_TAG=control-plane
# shellcheck source=tests/k8s/build_lib.sh
. "$HERE/build_lib.sh"

# ---- build -------------------------------------------------------------------------------

k8s_ldflags() {
    # The same variables hack/lib/version.sh sets, so /version and `kubectl version` report the
    # release. buildDate is the release's module time, which keeps the build reproducible.
    local minor date info
    minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    info=$(go mod download -json "$K8S_MODULE@$K8S_VERSION" | sed -n 's/.*"Info": *"\([^"]*\)".*/\1/p')
    date=$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info")
    local f="-s -w" p
    for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        f+=" -X $p.gitTreeState=clean -X $p.buildDate=${date:-1970-01-01T00:00:00Z}"
    done
    echo "$f"
}

# The cache key covers the versions, the Go toolchain and the exact module graph (go.mod and
# go.sum of both builds), so a change to any of them builds into a new directory.
cache_key() {
    local h
    h=$(cat "$HERE/kube/go.mod" "$HERE/kube/go.sum" "$HERE/etcd/go.mod" "$HERE/etcd/go.sum" \
        <(go env GOVERSION) <(echo "${K8S_TOOLS[*]} cgo=0 trimpath $(k8s_ldflags)") | sha256sum | cut -c1-16)
    echo "k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$h"
}

bin_dir() { echo "$CACHE_ROOT/$(cache_key)/bin"; }

build_k8s() {
    local t0
    t0=$(now_ms)
    log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION (go build -p $JOBS; the first build takes long)"
    (cd "$HERE/kube" && go build -p "$JOBS" -trimpath -ldflags "$(k8s_ldflags)" -o "$1/bin/" "${K8S_TOOLS[@]}")
    log "kube binaries built in $(secs_since "$t0") s"
    (cd "$HERE/etcd" && go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$1/bin/etcd" "$ETCD_MODULE")
    printf 'k8s %s\netcd %s\n%s\n' "$K8S_VERSION" "$ETCD_VERSION" "$(go env GOVERSION)" >"$1/VERSIONS"
}

cmd_build() {
    need_go
    cached_build k8s "$(cache_key)" bin/kube-apiserver build_k8s
}

cmd_gomod() {
    need_go
    python3 "$HERE/gomod.py" "$K8S_MODULE" "$K8S_VERSION" "$K8S_STAGING" "$HERE/kube/go.mod" "${K8S_TOOLS[@]}"
    python3 "$HERE/gomod.py" "$ETCD_MODULE" "$ETCD_VERSION" "$ETCD_VERSION" "$HERE/etcd/go.mod" "$ETCD_MODULE"
    (cd "$HERE/kube" && GOWORK=off go mod tidy)
    (cd "$HERE/etcd" && GOWORK=off go mod tidy)
}

# ---- up / down -----------------------------------------------------------------------------

# free_ports N: N distinct free TCP ports on 127.0.0.1 (all held open while chosen, so no two
# are the same; another process may still take one before we bind it, which `up` reports).
free_ports() {
    python3 -c 'import socket,sys
s=[socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1",0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"
}

# sign NAME CN ORG EXT: a key and a certificate signed by the CA, with extensions EXT.
sign() {
    local name=$1 cn=$2 org=$3 ext=$4 pki=$STATE/pki subj="/CN=$2"
    [ -n "$org" ] && subj="/O=$org/CN=$cn"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
    openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
    printf '%s\n' "$ext" >"$pki/$name.ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
    rm -f "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
    local pki=$STATE/pki client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
    mkdir -p "$pki"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=gpusched-test-ca" -days 3650 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$pki/ca.crt" 2>/dev/null
    sign apiserver kube-apiserver "" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    sign admin admin system:masters "$client"
    # The front-proxy pair as kubeadm makes it (its own CA would be stricter; one CA is enough
    # here). Without a request-header CA the scheduler's and controller-manager's delegated
    # authentication logs an error for the missing bundle every few seconds.
    sign front-proxy-client front-proxy-client "" "$client"
    sign scheduler system:kube-scheduler "" "$client"
    sign controller-manager system:kube-controller-manager "" "$client"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
    openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    chmod 600 "$pki"/*.key
}

# kubeconfig NAME USER: a kubeconfig for the client certificate NAME.
kubeconfig() {
    cat >"$STATE/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpusched-test
  cluster:
    server: $SERVER
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $STATE/pki/$1.crt
    client-key: $STATE/pki/$1.key
contexts:
- name: gpusched-test
  context: {cluster: gpusched-test, user: $2}
current-context: gpusched-test
EOF
}

# start NAME ARGS...: runs one component detached from our stdio (so ctest does not wait on
# its pipes) in its own session, logging to logs/NAME.log.
start() {
    local name=$1
    shift
    mkdir -p "$STATE/cmd"
    printf '%q ' "$@" >"$STATE/cmd/$name" # for `restart`
    setsid "$@" </dev/null >>"$STATE/logs/$name.log" 2>&1 &
    echo $! >"$STATE/pids/$name"
}

# stop_one NAME: SIGTERM, then SIGKILL after 5 s.
stop_one() {
    local name=$1 pid i
    alive "$name" || return 0
    pid=$(cat "$STATE/pids/$name")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do alive "$name" || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 20); do alive "$name" || return 0; sleep 0.1; done
}

# alive NAME: the process recorded for NAME still runs our binary (guards against PID reuse).
alive() {
    local f=$STATE/pids/$1 pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$1"
}

# starting NAME: alive, or its process not yet exec'd (a forked copy of this script, or setsid):
# right after `start`, on a loaded machine, /proc/PID/cmdline can still show this script. While
# the kernel is inside execve() (between the new address space and its argument pages) cmdline
# reads empty, so an empty one counts as starting unless the process is a zombie (whose cmdline
# is empty too): /proc/PID/stat's state, the field after the parenthesised command name.
starting() {
    local f=$STATE/pids/$1 pid cmd state
    alive "$1" && return 0
    [ -f "$f" ] || return 1
    pid=$(cat "$f")
    state=$(sed 's/.*) //; s/ .*//' "/proc/$pid/stat" 2>/dev/null) || return 1
    case $state in '' | Z | X) return 1 ;; esac
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    case $cmd in '' | *control-plane.sh* | setsid*) return 0 ;; esac
    return 1
}

# wait_for NAME URL [CURL_ARGS...]: polls URL until it answers 200 "ok", NAME dies, or timeout.
wait_for() {
    local name=$1 url=$2 deadline=$(($(date +%s) + READY_TIMEOUT_S))
    shift 2
    until [ "$(curl -sS --max-time 2 "$@" "$url" 2>/dev/null)" = "ok" ]; do
        starting "$name" || { log "$name exited; last log lines:"; tail -n 30 "$STATE/logs/$name.log" >&2; return 1; }
        [ "$(date +%s)" -lt "$deadline" ] || { log "$name not ready at $url after ${READY_TIMEOUT_S} s; last log lines:"; tail -n 30 "$STATE/logs/$name.log" >&2; return 1; }
        sleep 0.2
    done
}

admin_curl() { curl -sS --max-time 5 --cacert "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" "$@"; }

components() { echo kube-controller-manager kube-scheduler kube-apiserver etcd; }

stop_all() {
    local name
    for name in $(components); do stop_one "$name"; done
    return 0
}

is_up() {
    [ -f "$STATE/env" ] || return 1
    local name
    for name in etcd kube-apiserver; do alive "$name" || return 1; done
    [ -f "$STATE/pids/kube-scheduler" ] && { alive kube-scheduler || return 1; }
    [ -f "$STATE/pids/kube-controller-manager" ] && { alive kube-controller-manager || return 1; }
    # shellcheck disable=SC1091
    [ "$(. "$STATE/env"; admin_curl "$GPUSCHED_K8S_SERVER/readyz" 2>/dev/null)" = ok ]
}

up_cleanup() {
    [ "${UP_DONE:-1}" = 1 ] && return 0
    log "up failed; stopping what it started and removing $STATE"
    stop_all
    rm -rf "$STATE"
}

cmd_down() {
    [ -e "$STATE" ] || return 0
    [ -d "$STATE/pids" ] || [ -f "$STATE/env" ] || [ -z "$(ls -A "$STATE")" ] ||
        die "$STATE does not look like a control-plane state dir; not removing it"
    stop_all
    rm -rf "$STATE"
    log "down: stopped and removed $STATE"
}

cmd_up() {
    local t0 bin
    if is_up; then
        log "already up ($STATE)"
        return 0
    fi
    cmd_down
    cmd_build
    bin=$(bin_dir)
    t0=$(now_ms)
    mkdir -p "$STATE/logs" "$STATE/pids" "$STATE/etcd"
    chmod 700 "$STATE/etcd"
    # Whatever stops `up` before the end (an error, die, a signal from ctest's timeout) stops
    # what it started and removes the state dir, after showing where it stopped.
    UP_DONE=0
    trap 'up_cleanup' EXIT
    trap 'exit 1' INT TERM HUP
    local etcd_port peer_port api_port sched_port kcm_port
    read -r etcd_port peer_port api_port sched_port kcm_port <<<"$(free_ports 5)"
    SERVER=https://127.0.0.1:$api_port
    make_pki
    kubeconfig admin admin
    kubeconfig scheduler system:kube-scheduler
    kubeconfig controller-manager system:kube-controller-manager

    start etcd "$bin/etcd" --name default --data-dir "$STATE/etcd/data" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn
    local deadline=$(($(date +%s) + READY_TIMEOUT_S))
    until curl -sS --max-time 2 "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"'; do
        starting etcd || { tail -n 30 "$STATE/logs/etcd.log" >&2; die "etcd exited"; }
        [ "$(date +%s)" -lt "$deadline" ] || { tail -n 30 "$STATE/logs/etcd.log" >&2; die "etcd not healthy"; }
        sleep 0.2
    done

    # TaintNodesByCondition is off because it adds node.kubernetes.io/not-ready to every new
    # Node and no kubelet would ever clear it. The endpoint reconciler is off because it would
    # publish 127.0.0.1 as the kubernetes Service's endpoint, which validation rejects.
    start kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
        --client-ca-file "$STATE/pki/ca.crt" \
        --requestheader-client-ca-file "$STATE/pki/ca.crt" \
        --requestheader-allowed-names front-proxy-client \
        --requestheader-username-headers X-Remote-User \
        --requestheader-group-headers X-Remote-Group \
        --requestheader-extra-headers-prefix X-Remote-Extra- \
        --proxy-client-cert-file "$STATE/pki/front-proxy-client.crt" \
        --proxy-client-key-file "$STATE/pki/front-proxy-client.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "$STATE/pki/sa.pub" \
        --service-account-signing-key-file "$STATE/pki/sa.key" \
        --service-cluster-ip-range "$SERVICE_CIDR" \
        --authorization-mode Node,RBAC \
        --disable-admission-plugins TaintNodesByCondition \
        --endpoint-reconciler-type none \
        --allow-privileged=true
    wait_for kube-apiserver "$SERVER/readyz" --cacert "$STATE/pki/ca.crt" \
        --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key"

    if [ "$WANT_SCHED" = 1 ]; then
        start kube-scheduler "$bin/kube-scheduler" \
            --kubeconfig "$STATE/scheduler.kubeconfig" \
            --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
            --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
            --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
    fi
    if [ "$WANT_KCM" = 1 ]; then
        start kube-controller-manager "$bin/kube-controller-manager" \
            --kubeconfig "$STATE/controller-manager.kubeconfig" \
            --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
            --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
            --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
            --controllers "$KCM_CONTROLLERS" --use-service-account-credentials \
            --service-account-private-key-file "$STATE/pki/sa.key" \
            --root-ca-file "$STATE/pki/ca.crt"
    fi
    [ "$WANT_SCHED" = 1 ] && wait_for kube-scheduler "https://127.0.0.1:$sched_port/healthz" -k
    [ "$WANT_KCM" = 1 ] && wait_for kube-controller-manager "https://127.0.0.1:$kcm_port/healthz" -k
    if [ "$WANT_KCM" = 1 ]; then
        # Pods cannot be created before the `default` ServiceAccount exists; wait for it here so
        # every test can start at once.
        until admin_curl -o /dev/null -w '%{http_code}' "$SERVER/api/v1/namespaces/default/serviceaccounts/default" 2>/dev/null | grep -q 200; do
            [ "$(date +%s)" -lt "$deadline" ] || die "no default ServiceAccount after ${READY_TIMEOUT_S} s"
            sleep 0.2
        done
    fi

    cat >"$STATE/env" <<EOF
export GPUSCHED_K8S_STATE=$STATE
export GPUSCHED_K8S_BIN=$bin
export GPUSCHED_K8S_SERVER=$SERVER
export GPUSCHED_K8S_CA=$STATE/pki/ca.crt
export GPUSCHED_K8S_CLIENT_CERT=$STATE/pki/admin.crt
export GPUSCHED_K8S_CLIENT_KEY=$STATE/pki/admin.key
export GPUSCHED_K8S_ETCD=http://127.0.0.1:$etcd_port
export KUBECONFIG=$STATE/admin.kubeconfig
export PATH=$bin:\$PATH
EOF
    UP_DONE=1
    trap - EXIT INT TERM HUP
    log "up in $(secs_since "$t0") s: $SERVER (state $STATE; source <(tests/k8s/control-plane.sh env --state $STATE))"
}

# restart NAME: the component stopped and started again as `up` started it (same flags, ports
# and certificates), then waited for: what a fault test needs to restart the API server under a
# running scheduler. Prints the seconds it was down.
cmd_restart() {
    local name=${RESTART_NAME:-} t0
    [ -n "$name" ] || die "restart needs a component name ($(components))"
    [ -f "$STATE/cmd/$name" ] || die "$name was not started from $STATE"
    t0=$(now_ms)
    stop_one "$name"
    alive "$name" && die "$name did not stop"
    log "$name stopped; starting it again"
    local -a argv
    eval "argv=($(cat "$STATE/cmd/$name"))"
    start "$name" "${argv[@]}"
    # shellcheck disable=SC1091
    . "$STATE/env"
    case $name in
    kube-apiserver) wait_for kube-apiserver "$GPUSCHED_K8S_SERVER/readyz" --cacert "$STATE/pki/ca.crt" \
        --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" ;;
    etcd) until curl -sS --max-time 2 "$GPUSCHED_K8S_ETCD/health" 2>/dev/null | grep -q '"health":"true"'; do sleep 0.2; done ;;
    *) sleep 1 ;;
    esac
    log "$name restarted: down and up again in $(secs_since "$t0") s"
}

cmd_env() {
    [ -f "$STATE/env" ] || die "not up ($STATE/env missing); run control-plane.sh up"
    cat "$STATE/env"
}

cmd_status() {
    local name rc=0
    for name in etcd kube-apiserver kube-scheduler kube-controller-manager; do
        if [ ! -f "$STATE/pids/$name" ]; then
            printf '%-24s not started\n' "$name"
        elif alive "$name"; then
            printf '%-24s running (pid %s)\n' "$name" "$(cat "$STATE/pids/$name")"
        else
            printf '%-24s DEAD (log %s)\n' "$name" "$STATE/logs/$name.log"
            rc=1
        fi
    done
    if [ -f "$STATE/env" ]; then
        # shellcheck disable=SC1091
        printf '%-24s %s\n' "readyz" "$(. "$STATE/env"; admin_curl "$GPUSCHED_K8S_SERVER/readyz" 2>&1 || true)"
    else
        rc=1
    fi
    return $rc
}

main() {
    local cmd=${1:-}
    [ $# -gt 0 ] && shift
    while [ $# -gt 0 ]; do
        case $1 in
        --state) STATE=$2; shift 2 ;;
        --state=*) STATE=${1#*=}; shift ;;
        --scheduler=*) WANT_SCHED=${1#*=}; shift ;;
        --controller-manager=*) WANT_KCM=${1#*=}; shift ;;
        -*) die "unknown option $1" ;;
        *) [ "$cmd" = restart ] && [ -z "${RESTART_NAME:-}" ] || die "unknown argument $1"
           RESTART_NAME=$1; shift ;;
        esac
    done
    case $STATE in /*) ;; *) STATE=$PWD/$STATE ;; esac
    case $cmd in
    build) cmd_build ;;
    bin) cmd_build >&2 && bin_dir ;;
    gomod) cmd_gomod ;;
    up) cmd_up ;;
    down) cmd_down ;;
    env) cmd_env ;;
    status) cmd_status ;;
    restart) cmd_restart ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
}

main "$@"
