#!/usr/bin/env bash
# gpu_probe without a GPU: against the NVML stand-in (every backend path: MIG, NVLink, events,
# a lost GPU, a driver that fails to initialise), with no NVML library at all (a clear error,
# exit 2), and with the fake backend.
#
#   gpu_probe.sh GPU_PROBE NVML_STUB SOURCE_DIR FAULT_STUB
set -uo pipefail
probe=$1
stub=$2
src=$3
faults=$4
fails=0

# run NAME WANT_RC [ENV=VALUE...] -- ARGS...: runs gpu_probe, keeps its output in $out.
run() {
    local name=$1 want=$2
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    out=$(env "${envs[@]}" "$probe" "$@" 2>&1)
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL $name: exit $rc, want $want"
        echo "$out"
        fails=$((fails + 1))
    fi
}

# has NAME TEXT...: each TEXT must be a line (fixed string) of $out's output.
has() {
    local name=$1
    shift
    for t in "$@"; do
        if ! grep -qxF -- "$t" <<<"$out"; then
            echo "FAIL $name: no line '$t' in:"
            echo "$out"
            fails=$((fails + 1))
            return
        fi
    done
}

# has_part NAME TEXT...: each TEXT must appear somewhere in $out.
has_part() {
    local name=$1
    shift
    for t in "$@"; do
        if ! grep -qF -- "$t" <<<"$out"; then
            echo "FAIL $name: no '$t' in:"
            echo "$out"
            fails=$((fails + 1))
            return
        fi
    done
}

labels='gpu="1",UUID="GPU-stub-1",device="nvidia1",modelName="NVIDIA H200",Hostname="h"'
run stub 0 GS_NVML_LIBRARY="$stub" -- --events-ms 200 --hostname h
has stub "backend          nvml" "driver version   550.90.07" "cuda version     12.4" \
    "gpus             2" "GPU 0: GPU-stub-0" "  numa node        -1" "  nvlink peers     1" \
    "  compute cap.     9.0" "  mig              capable, disabled, 0 device(s)" \
    "GPU 1: GPU-stub-1" "  numa node        -1" "  pci bus id       0000FFFF:FF:1F.7" \
    "  mig              capable, enabled, 2 device(s)" \
    "    1g.18gb      MIG-stub-1-a 16384 MiB, start 0" \
    "    3g.71gb      MIG-stub-1-b 69888 MiB, start 4" \
    "      instance     gi 9, ci 0" "      instance     gi 2, ci 0" \
    "event: GPU 1 XID 79" "event: GPU 0 double-bit ECC error" \
    "nvidia.com/mig-1g.18gb.count=1" "nvidia.com/mig-3g.71gb.memory=69888" \
    "nvidia.com/gpu.family=hopper" \
    "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-stub-0\",device=\"nvidia0\",modelName=\"NVIDIA H200\",Hostname=\"h\"} 300.25" \
    "DCGM_FI_DEV_XID_ERRORS{$labels} 79" "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{$labels} 3" \
    "  processes 1      2" "    pid 4101 mem=3000MiB sm=30%" "    pid 4102 mem=2500MiB sm=25%" \
    "  processes 2      2" "    pid 4101 mem=3000MiB sm=0%" "    pid 5001 gi=9" \
    "  mig values       gi=9 mem=2048MiB" "  mig values       gi=2 mem=2048MiB" \
    "gpusched_gpu_health{$labels,reason=\"xid\"} 0" "gpusched_gpu_reset_required{$labels} 1" "gpusched_gpu_xid_total{$labels,xid=\"79\"} 1" \
    "--- OK: 0 check(s) failed"
# No GPM in this NVML backend: a MIG device's values are its memory only, never a utilisation.
if grep -qF "mig values       gi=9 mem=2048MiB util" <<<"$out"; then
    echo "FAIL stub: a MIG device got a utilisation without GPM"
    fails=$((fails + 1))
fi
if grep -qF "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\"" <<<"$out"; then
    echo "FAIL stub: GPU 1 runs MIG and reports no utilisation, yet a series was rendered"
    fails=$((fails + 1))
fi

run lost 1 GS_NVML_LIBRARY="$stub" STUB_NVML_LOST=1 -- --events-ms 0
has lost "CHECK FAILED: GPU 1 sample: GPU 1 is lost (NVML: GPU is lost)" \
    "--- FAILED: 1 check(s) failed"

# One GPU of eight without a handle (tests/agent/nvml_fault_stub.c): the backend opens, the
# other seven are read, the lost one is a named finding.
fault_file=$(mktemp)
echo "handle_lost 5" >"$fault_file"
run lost_handle 1 GS_NVML_LIBRARY="$faults" STUB_NVML_FAULTS="$fault_file" -- --events-ms 0
has lost_handle "gpus             8" "GPU 4: GPU-f0000000-0000-4000-8000-000000000004" \
    "GPU 6: GPU-f0000000-0000-4000-8000-000000000006" \
    "CHECK FAILED: GPU 5 is lost: GPU 5 is lost (no NVML handle)" "--- FAILED: 1 check(s) failed"
rm -f "$fault_file"

run init 2 GS_NVML_LIBRARY="$stub" STUB_NVML_INIT_FAIL=1 -- --events-ms 0
has init "gpu_probe: cannot open NVML (GS_EIO): nvmlInit_v2: Driver Not Loaded (9)"

run missing 2 GS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 -- --events-ms 0
has_part missing "gpu_probe: cannot open NVML (GS_ENOENT): cannot load /nonexistent/libnvidia-ml.so.1 (is the NVIDIA driver installed and visible in this container?)"

run fake 0 -- --fake "$src/deploy/fake-gpus.yaml" --events-ms 0 --hostname h
has fake "backend          fake" "gpus             8" "nvidia.com/gpu.product=NVIDIA-H200" \
    "--- OK: 0 check(s) failed"

if [ "$fails" -ne 0 ]; then
    echo "gpu_probe.sh: $fails failure(s)"
    exit 1
fi
echo "gpu_probe.sh: NVML stand-in, missing NVML, failed init, lost GPU and fake backend all as expected"
