#!/usr/bin/env bash
# Helm for gpusched's chart tests (deploy/helm/gpusched), built from its published Go module
# helm.sh/helm/v3 through the Go module proxy, as control-plane.sh builds Kubernetes: its own
# go.mod under tests/k8s/helm (Helm's k8s.io/* versions differ from the control plane's), the
# binary cached outside the repo keyed by version, Go toolchain and module graph, so a later run
# on the same machine skips the build. The one place that knows Helm's version and flags.
#
#   helm.sh build    build into the cache (skipped when there); prints the build time
#   helm.sh bin      print the cached helm binary's path (builds if needed)
#   helm.sh gomod    regenerate helm/go.mod and go.sum from helm's own go.mod
#
# Environment: GPUSCHED_K8S_CACHE (cache root, default /var/cache/gpusched/k8s, shared with the
# control plane), GPUSCHED_K8S_BUILD_JOBS (go build -p, default 2); Go's GOCACHE, GOMODCACHE,
# GOPROXY and GOTOOLCHAIN apply.
set -euo pipefail

# ---- version: change here, then run `helm.sh gomod` and commit helm/go.mod and go.sum.
HELM_MODULE=helm.sh/helm/v3
HELM_VERSION=v3.22.0 # newest v3 served by the module proxy on 2026-12-02
HELM_TOOL=helm.sh/helm/v3/cmd/helm

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${GPUSCHED_K8S_CACHE:-/var/cache/gpusched/k8s}
JOBS=${GPUSCHED_K8S_BUILD_JOBS:-2}

log() { echo "helm.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
secs_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

need_go() {
    command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null || die "go not found on PATH; run scripts/install-deps.sh (it installs a Go toolchain)"
}

# The Kubernetes version helm assumes when it has no cluster (`helm template`, `helm lint`'s
# deprecation checks): the k8s.io/client-go minor helm's go.mod requires, as helm's Makefile sets.
helm_ldflags() {
    local cg minor
    cg=$(cd "$HERE/helm" && GOWORK=off go list -m -f '{{.Version}}' k8s.io/client-go)
    minor=${cg#v0.}
    minor=${minor%%.*}
    local f="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    f+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    f+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
    f+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
    echo "$f"
}

cache_key() {
    local h
    h=$(cat "$HERE/helm/go.mod" "$HERE/helm/go.sum" <(go env GOVERSION) \
        <(echo "$HELM_TOOL cgo=0 trimpath $(helm_ldflags)") | sha256sum | cut -c1-16)
    echo "helm-$HELM_VERSION-$h"
}

cmd_build() {
    need_go
    mkdir -p "$CACHE_ROOT" 2>/dev/null || die "cannot create $CACHE_ROOT; set GPUSCHED_K8S_CACHE"
    local key dest
    key=$(cache_key)
    dest=$CACHE_ROOT/$key
    if [ -x "$dest/bin/helm" ]; then
        log "helm cached in $dest/bin"
        return 0
    fi
    exec 9>"$CACHE_ROOT/.lock-helm"
    flock 9
    if [ -x "$dest/bin/helm" ]; then
        exec 9>&-
        log "helm cached in $dest/bin (built by another process)"
        return 0
    fi
    rm -rf "$CACHE_ROOT"/.build-helm-*
    local t0
    BUILD_TMP=$(mktemp -d "$CACHE_ROOT/.build-$key.XXXXXX")
    trap 'rm -rf "$BUILD_TMP"' EXIT
    t0=$(now_ms)
    log "building helm $HELM_VERSION into $dest (go build -p $JOBS)"
    export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly"
    (cd "$HERE/helm" && go build -p "$JOBS" -trimpath -ldflags "$(helm_ldflags)" -o "$BUILD_TMP/bin/helm" "$HELM_TOOL")
    printf 'helm %s\n%s\n' "$HELM_VERSION" "$(go env GOVERSION)" >"$BUILD_TMP/VERSIONS"
    chmod 755 "$BUILD_TMP"
    mv "$BUILD_TMP" "$dest" # atomic: a killed build leaves only a .build-* directory
    trap - EXIT
    exec 9>&-
    log "build time $(secs_since "$t0") s; helm in $dest/bin"
}

cmd_bin() {
    cmd_build
    echo "$CACHE_ROOT/$(cache_key)/bin/helm"
}

cmd_gomod() {
    need_go
    python3 "$HERE/gomod.py" "$HELM_MODULE" "$HELM_VERSION" "$HELM_VERSION" "$HERE/helm/go.mod" "$HELM_TOOL"
    sed -i 's|Regenerate with: tests/k8s/control-plane.sh gomod|Regenerate with: tests/k8s/helm.sh gomod|' "$HERE/helm/go.mod"
    (cd "$HERE/helm" && GOWORK=off go mod tidy)
}

case "${1:-}" in
build) cmd_build ;;
bin) cmd_bin ;;
gomod) cmd_gomod ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
