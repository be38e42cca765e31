# shellcheck shell=bash
# Shared by the tests that run a real Prometheus (tests/agent/prometheus.sh,
# tests/integration/usage_ingest.sh): finding Debian's prometheus and promtool, a free port,
# starting the server, and stopping every process the test started on every exit path.
#
# Source it after `set -euo pipefail`, then `tmp=$(mktemp -d)` and `trap stop_started EXIT`.
#
#   prom_require TEST [promtool]   sets prom and promtool ($PROMETHEUS, $PROMTOOL, else
#                                  /usr/bin/...); exits 77 (skipped), naming TEST, when prometheus
#                                  (and with `promtool`, promtool) is not installed
#   started PID                    stop PID on exit (stop_started)
#   stop_started                   TERM each started process, wait up to 5 s, KILL, reap; only
#                                  those, by their ids; then removes $tmp
#   free_port                      prints a free 127.0.0.1 TCP port (bound and released at once;
#                                  the window is tiny)
#   prom_start CONFIG TSDB LOG [ARG...]
#                                  starts prometheus on a free port with that config file,
#                                  storage directory and stderr log (warnings and up), ARGs
#                                  added; sets prom_pid (started), prom_port and prom_url
#   prom_wait_ready                waits up to 10 s for $prom_url/-/ready to answer

started_pids=""

prom_require() {
    prom=${PROMETHEUS:-/usr/bin/prometheus}
    promtool=${PROMTOOL:-/usr/bin/promtool}
    if [ ! -x "$prom" ]; then
        echo "$1: $prom not installed, skipping" >&2
        exit 77
    fi
    if [ "${2:-}" = promtool ] && [ ! -x "$promtool" ]; then
        echo "$1: $promtool not installed, skipping" >&2
        exit 77
    fi
}

started() {
    started_pids="$started_pids $1"
}

stop_started() {
    local pid
    for pid in $started_pids; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $started_pids; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

prom_start() {
    local config=$1 tsdb=$2 log=$3
    shift 3
    prom_port=$(free_port)
    prom_url="http://127.0.0.1:$prom_port"
    "$prom" --config.file="$config" --storage.tsdb.path="$tsdb" \
        --web.listen-address="127.0.0.1:$prom_port" --log.level=warn "$@" 2>"$log" &
    prom_pid=$!
    started "$prom_pid"
}

prom_wait_ready() {
    for _ in $(seq 100); do
        python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
            "$prom_url/-/ready" 2>/dev/null && return 0
        sleep 0.1
    done
    return 0 # the test's own checks say what is wrong
}
