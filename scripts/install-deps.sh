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
    libmicrohttpd-dev # /metrics and /healthz of the node agent
    libcurl4-openssl-dev # Kubernetes API client (HTTPS, HTTP/2)
    libjansson-dev   # Kubernetes API client (JSON bodies and watch events)
    python3-grpcio python3-protobuf # tests: a real gRPC peer playing kubelet
    prometheus       # tests: a real Prometheus server scraping the agent
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
