#!/usr/bin/env bash
# The agent's GPU side on a machine with a real NVIDIA GPU (written for an H200 node).
#
#   tests/device/run.sh [OUT_DIR]
#
# 1. Shows what the machine has: nvidia-smi's view and whether libnvidia-ml.so.1 is visible.
# 2. Builds. With the project's dependencies installed (scripts/install-deps.sh) it builds
#    with CMake and runs the agent's unit tests (fake backend, health, exporter, labels, the
#    NVML stand-in); without them (a bare GPU machine with no network) it compiles gpu_probe
#    stand-alone from the NVML backend, health, labels and exporter rendering, which need only
#    libc and libdl.
# 3. Runs gpu_probe against the real driver: every GPU's information (UUID, model, memory,
#    PCI bus id, NUMA node, NVLink peers, MIG devices), one sample, the GPU Feature Discovery
#    labels, XID/ECC events for a few seconds, and one rendered /metrics scrape.
# 4. Compares gpu_probe's findings with nvidia-smi's (count, UUIDs, names, memory).
# 5. The per-process read: cuda_hold (a CUDA context holding 64 MiB on GPU 0) runs for a few
#    seconds while gpu_probe reads GPU 0's processes; the process must be listed with at least
#    64 MiB, and nvidia-smi's compute-apps view is shown beside it.
#
# Everything is read-only: nothing here changes MIG mode, clocks, persistence mode or any other
# GPU setting (gpu_probe only reads, and nvidia-smi is only queried). Output goes to the screen
# and to OUT_DIR (default $OUT, else ./out/device). Exit status 0 when the build, the tests
# and every check passed.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-$root/out/device}}
mkdir -p "$out"
log="$out/device-run.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
fails=0
fail() {
    say "FAIL: $*"
    fails=$((fails + 1))
}

say "== 1. machine"
say "$(uname -srm)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>&1 | tee -a "$log"
    nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version,mig.mode.current,temperature.gpu,power.draw,clocks.sm,clocks.mem,utilization.gpu \
        --format=csv 2>&1 | tee "$out/nvidia-smi.csv" | tee -a "$log"
    nvidia-smi topo -m 2>&1 | tee -a "$log" || true
else
    say "nvidia-smi not found (the probe below still tries NVML directly)"
fi
if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
    say "libnvidia-ml.so.1: $(ldconfig -p | grep 'libnvidia-ml.so.1' | head -1 | sed 's/.*=> //')"
else
    say "libnvidia-ml.so.1 is not in the loader cache; set GS_NVML_LIBRARY=/path/to/it if it lives elsewhere"
fi

say "== 2. build"
cc=${CC:-cc}
build="$out/build"
probe=""
have_deps=1
for pc in yaml-0.1 libmicrohttpd cmocka; do
    pkg-config --exists "$pc" 2>/dev/null || have_deps=0
done
command -v cmake >/dev/null 2>&1 || have_deps=0
if [ "$have_deps" = 1 ]; then
    say "dependencies present: CMake build with sanitizers off"
    if cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGS_WERROR=OFF >>"$log" 2>&1 &&
        cmake --build "$build" -j "$(nproc)" --target gpu_probe nvml_stub cuda_hold \
            test_gpu_fake test_health test_exporter test_labels >>"$log" 2>&1; then
        probe="$build/tests/agent/gpu_probe"
        hold="$build/tests/agent/cuda_hold"
        if (cd "$build" && ctest --output-on-failure \
            -R 'test_gpu_fake|test_health|test_exporter|test_labels|agent_gpu_probe') 2>&1 |
            tee -a "$log" | tail -3; then
            say "agent unit tests passed"
        else
            fail "agent unit tests"
        fi
    else
        say "CMake build failed (see $log); falling back to the stand-alone build"
    fi
fi
if [ -z "$probe" ]; then
    say "stand-alone build of gpu_probe (NVML backend only; needs libc and libdl)"
    probe="$out/gpu_probe"
    if ! "$cc" -std=c11 -O2 -Wall -Wextra -DGS_PROBE_NO_FAKE -I"$root/include" \
        -I"$root/src/agent" "$root/tests/device/gpu_probe.c" "$root/src/agent/gpu.c" \
        "$root/src/agent/gpu_nvml.c" "$root/src/agent/health.c" "$root/src/agent/labels.c" \
        "$root/src/agent/exporter.c" "$root/src/util/err.c" -ldl -o "$probe" 2>&1 |
        tee -a "$log"; then
        fail "stand-alone build"
    fi
    [ -x "$probe" ] || { say "no gpu_probe binary; giving up"; exit 1; }
fi
if [ -z "${hold:-}" ]; then
    hold="$out/cuda_hold"
    "$cc" -std=c11 -O2 -Wall -Wextra "$root/tests/device/cuda_hold.c" -ldl -o "$hold" 2>&1 |
        tee -a "$log" || fail "stand-alone build of cuda_hold"
fi

say "== 3. gpu_probe against the real driver (read-only)"
"$probe" --events-ms "${EVENTS_MS:-3000}" >"$out/gpu_probe.txt" 2>&1
rc=$?
tee -a "$log" <"$out/gpu_probe.txt"
case $rc in
0) say "gpu_probe: all checks passed" ;;
2) fail "gpu_probe could not open NVML (message above)" ;;
*) fail "gpu_probe reported failed checks (exit $rc)" ;;
esac
sed -n '/^--- \/metrics/,/^--- OK\|^--- FAILED/p' "$out/gpu_probe.txt" | sed '1d;$d' >"$out/metrics.txt"
if command -v promtool >/dev/null 2>&1 && [ -s "$out/metrics.txt" ]; then
    promtool check metrics <"$out/metrics.txt" >"$out/promtool.txt" 2>&1
    prc=$?
    # 3 = lint notes only (dcgm-exporter's camelCase labels); 1 = the text does not parse.
    if [ $prc = 1 ]; then fail "promtool cannot parse the scrape"; cat "$out/promtool.txt"; fi
fi

say "== 4. gpu_probe vs nvidia-smi"
if [ -s "$out/nvidia-smi.csv" ] && [ $rc -ne 2 ]; then
    smi_n=$(tail -n +2 "$out/nvidia-smi.csv" | grep -c .)
    probe_n=$(sed -n 's/^gpus *//p' "$out/gpu_probe.txt")
    [ "$smi_n" = "$probe_n" ] && say "GPU count agrees: $smi_n" ||
        fail "GPU count: nvidia-smi $smi_n, gpu_probe $probe_n"
    tail -n +2 "$out/nvidia-smi.csv" | while IFS=, read -r idx uuid name mem _; do
        idx=$(echo "$idx" | xargs)
        uuid=$(echo "$uuid" | xargs)
        name=$(echo "$name" | xargs)
        mem=$(echo "$mem" | sed 's/[^0-9]//g')
        grep -qxF "GPU $idx: $uuid" "$out/gpu_probe.txt" || echo "MISMATCH uuid of GPU $idx"
        grep -qxF "  model            $name" "$out/gpu_probe.txt" || echo "MISMATCH name of GPU $idx"
        grep -qxF "  memory           $mem MiB" "$out/gpu_probe.txt" ||
            echo "MISMATCH memory of GPU $idx ($mem MiB)"
    done >"$out/compare.txt"
    if [ -s "$out/compare.txt" ]; then
        tee -a "$log" <"$out/compare.txt"
        fail "gpu_probe and nvidia-smi disagree"
    else
        say "UUIDs, names and memory agree with nvidia-smi"
    fi
else
    say "(skipped: no nvidia-smi output or NVML did not open)"
fi

say "== 5. per-process read: cuda_hold on GPU 0 (64 MiB), gpu_probe reading it"
if [ $rc -ne 2 ] && [ -x "$hold" ]; then
    "$hold" --device 0 --mib 64 --seconds "${HOLD_S:-8}" >"$out/cuda_hold.txt" 2>&1 &
    hold_pid=$!
    for _ in $(seq 100); do
        grep -q "holds 64 MiB" "$out/cuda_hold.txt" 2>/dev/null && break
        kill -0 "$hold_pid" 2>/dev/null || break
        sleep 0.1
    done
    tee -a "$log" <"$out/cuda_hold.txt"
    if grep -q "holds 64 MiB" "$out/cuda_hold.txt"; then
        sleep 1 # one NVML sample period, so that the process has a utilisation sample
        "$probe" --events-ms 0 >"$out/gpu_probe_hold.txt" 2>&1
        command -v nvidia-smi >/dev/null 2>&1 &&
            nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv 2>&1 |
            tee "$out/compute-apps.csv" | tee -a "$log"
        sed -n '/^GPU 0:/,/^GPU 1:/p' "$out/gpu_probe_hold.txt" | grep -E "processes|pid " |
            tee -a "$log"
        # NVML names the process by its PID in the driver's (the host's) namespace: the same as
        # ours when this runs on the host or with hostPID, another one in a plain container.
        line=$(sed -n '/^GPU 0:/,/^GPU 1:/p' "$out/gpu_probe_hold.txt" | grep -E "^    pid $hold_pid " | head -1)
        if [ -n "$line" ]; then
            mem=$(echo "$line" | sed -n 's/.* mem=\([0-9]*\)MiB.*/\1/p')
            [ -n "$mem" ] && [ "$mem" -ge 64 ] && say "per-process read: pid $hold_pid with $mem MiB" ||
                fail "per-process read: pid $hold_pid listed without >= 64 MiB: $line"
        elif grep -qE "^  processes [12] +[1-9]" "$out/gpu_probe_hold.txt"; then
            say "per-process read: processes listed, none under pid $hold_pid (another PID namespace)"
        elif grep -q "processes        (not read" "$out/gpu_probe_hold.txt"; then
            say "per-process read: not available here: $(grep -m1 'processes        (not read' "$out/gpu_probe_hold.txt")"
        else
            fail "per-process read: GPU 0 lists no process while cuda_hold holds 64 MiB"
        fi
    else
        say "cuda_hold could not hold memory (no CUDA driver?); skipped"
    fi
    wait "$hold_pid" 2>/dev/null
else
    say "(skipped: NVML did not open or no cuda_hold)"
fi

say "== done: $fails failure(s); outputs in $out"
[ "$fails" = 0 ]
