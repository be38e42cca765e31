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
LOG_TAG=helm.sh
# shellcheck source=tests/k8s/build_lib.sh
. "$HERE/build_lib.sh"

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

build_helm() {
    log "building helm $HELM_VERSION (go build -p $JOBS)"
    (cd "$HERE/helm" && go build -p "$JOBS" -trimpath -ldflags "$(helm_ldflags)" -o "$1/bin/helm" "$HELM_TOOL")
    printf 'helm %s\n%s\n' "$HELM_VERSION" "$(go env GOVERSION)" >"$1/VERSIONS"
}

cmd_build() {
    need_go
    cached_build helm "$(cache_key)" bin/helm build_helm
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
