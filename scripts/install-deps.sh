#!/usr/bin/env bash
# Installs the Debian packages that gpusched's build and tests need. This is the one place the
# dependencies are listed. Idempotent, and quiet when everything is already present.
set -euo pipefail

packages=(
    build-essential  # gcc, make
    cmake            # build system (CMake + CTest)
    pkg-config
    clang            # libFuzzer targets (clang -fsanitize=fuzzer)
    clang-format clang-tidy # make lint
    libclang-rt-14-dev # sanitizer and libFuzzer runtimes for clang
    libcmocka-dev    # unit tests
    libcsv-dev       # CSV parsing of traces
    gnuplot-nox      # plots of simulation results
    python3          # tools/ scripts (comparison with published results)
    libyaml-dev      # queue/PriorityClass config, fake GPU backend, agent config
    libnghttp2-dev   # gRPC over HTTP/2 (kubelet device-plugin and pod-resources APIs)
    libprotobuf-c-dev protobuf-c-compiler protobuf-compiler # protobuf messages
    libmicrohttpd-dev # /metrics and /healthz of the node agent and the scheduler
    libgnutls28-dev  # the scheduler's admission webhook: TLS (libmicrohttpd's HTTPS is GnuTLS)
    libcurl4-openssl-dev # Kubernetes API client (HTTPS, HTTP/2)
    libjansson-dev   # Kubernetes API client (JSON bodies and watch events); JSON reports
    libsqlite3-dev   # usage accounting store (src/usage)
    tzdata           # report --tz Europe/Berlin: the tz database read through localtime_r
    libglpk-dev      # gpusched bound: the offline LP bound (src/sim/bound.c; never the core)
    chromium         # tests: the HTML usage report rendered headless
    python3-grpcio python3-protobuf # tests: a real gRPC peer playing kubelet
    python3-jsonschema # tests/k8s: the agent's annotations against docs/schemas/
    python3-yaml     # tests/k8s: the Helm chart's render compared with deploy/
    prometheus       # tests: a real Prometheus server scraping the agent
    openssl curl ca-certificates # tests/k8s: certificates, readiness probes, the Go module proxy
    unzip            # tests/k8s: unpacking a Go toolchain from the module proxy (below)
)

# tests/k8s builds Kubernetes from the Go module proxy and needs Go >= GO_MIN. Debian 12's
# golang (1.19) is too old, so when no such `go` is on PATH this fetches the official toolchain
# that the module proxy serves as the module golang.org/toolchain (the same zip `GOTOOLCHAIN`
# downloads), checks it against the pinned SHA-256 and unpacks it into /usr/local/go.
GO_MIN=1.26
GO_TOOLCHAIN=go1.26.8
GO_TOOLCHAIN_SHA256_amd64=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7

go_ok() {
    local v
    v=$(PATH=$PATH:/usr/local/go/bin go env GOVERSION 2>/dev/null) || return 1
    v=${v#go}
    [ "$(printf '%s\n%s\n' "$GO_MIN" "$v" | sort -V | head -n1)" = "$GO_MIN" ]
}

install_go() {
    local arch zip want dir
    arch=$(dpkg --print-architecture)
    want=GO_TOOLCHAIN_SHA256_$arch
    [ -n "${!want:-}" ] || { echo "install-deps: no pinned Go toolchain for $arch; install Go >= $GO_MIN" >&2; exit 1; }
    zip=$(mktemp /tmp/go-toolchain.XXXXXX.zip)
    dir=$(mktemp -d /tmp/go-toolchain.XXXXXX)
    echo "install-deps: installing $GO_TOOLCHAIN into /usr/local/go from the Go module proxy" >&2
    curl -fsSL -o "$zip" "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-$arch.zip"
    echo "${!want}  $zip" | sha256sum -c --quiet -
    unzip -q "$zip" -d "$dir"
    rm -rf /usr/local/go
    mv "$dir/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$arch" /usr/local/go
    ln -sf /usr/local/go/bin/go /usr/local/bin/go
    rm -rf "$zip" "$dir"
}

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ] && go_ok; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    [ ${#missing[@]} -eq 0 ] || echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
    go_ok || echo "install-deps: no Go >= $GO_MIN on PATH; run as root or install it" >&2
    exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
go_ok || install_go
