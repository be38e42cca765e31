#!/usr/bin/python3
"""Allocate latency of `gpusched agent` through Python's grpcio (Debian's python3-grpcio).

Starts the agent on a fake 8-GPU node (deploy/fake-gpus.yaml without its fault script), with no
kubelet (the plugin socket serves before registration) and no metrics, then makes CALLS
sequential Allocate calls of one whole GPU on one channel, each timed from the call to its
decoded answer, and prints p50/p99/max. GetDevicePluginOptions (an empty answer) is timed the
same way first: it shows what the Python client and the transport cost by themselves.

  agent_allocate.py --gpusched BUILD/gpusched --source-dir . [--calls 10000]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import yaml


def load_protos(proto_dir, tmp):
    out = os.path.join(tmp, "py")
    os.makedirs(out)
    subprocess.run(["/usr/bin/protoc", "--python_out=" + out, "-I", proto_dir,
                    "deviceplugin/v1beta1/api.proto", "podresources/v1/api.proto"], check=True)
    sys.path.insert(0, out)
    from deviceplugin.v1beta1 import api_pb2 as dp  # noqa: E402
    from podresources.v1 import api_pb2 as pr  # noqa: E402
    return dp, pr


def quiet_node(src, tmp):
    """deploy/fake-gpus.yaml without its script: no XIDs during a measurement."""
    node = yaml.safe_load(open(os.path.join(src, "deploy/fake-gpus.yaml")))
    node.pop("script", None)
    path = os.path.join(tmp, "node.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(node, f)
    return path, [g["uuid"] for g in node["gpus"]]


def start_agent(binary, args):
    proc = subprocess.Popen([binary, "agent"] + args, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    return proc


def wait_path(path, proc, timeout_s=20):
    end = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit("agent did not start: " + proc.stderr.read())
        time.sleep(0.02)


def stop_agent(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "hung"


def pct(sorted_ns, p):
    return sorted_ns[min(len(sorted_ns) - 1, int(len(sorted_ns) * p / 100.0))] / 1e3


def timed(fn, req, n):
    lat = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn(req, timeout=5)
        lat.append(time.perf_counter_ns() - t0)
    lat.sort()
    return lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--calls", type=int, default=10000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gsbench-") as tmp:
        dp, _ = load_protos(os.path.join(args.source_dir, "proto"), tmp)
        node, uuids = quiet_node(args.source_dir, tmp)
        plugin_dir = os.path.join(tmp, "dp")
        os.mkdir(plugin_dir)
        sock = os.path.join(plugin_dir, "gpusched-nvidia.com-gpu.sock")
        proc = start_agent(args.gpusched, ["--gpu-backend", "fake", "--fake-gpus", node,
                                           "--kubelet-dir", plugin_dir,
                                           "--pod-resources-socket", "", "--metrics-addr", ""])
        try:
            wait_path(sock, proc)
            ch = grpc.insecure_channel("unix:" + sock)
            opts = ch.unary_unary("/v1beta1.DevicePlugin/GetDevicePluginOptions")
            alloc = ch.unary_unary("/v1beta1.DevicePlugin/Allocate")
            empty = dp.Empty().SerializeToString()
            reqs = [dp.AllocateRequest(container_requests=[
                dp.ContainerAllocateRequest(devices_ids=[u])]).SerializeToString()
                for u in uuids]
            timed(opts, empty, 500)  # warm-up: connection, HTTP/2 windows, Python caches
            base = timed(opts, empty, min(args.calls, 5000))
            for r in reqs:
                dp.AllocateResponse.FromString(alloc(r, timeout=5))
            lat = []
            for i in range(args.calls):
                r = reqs[i % len(reqs)]
                t0 = time.perf_counter_ns()
                resp = dp.AllocateResponse.FromString(alloc(r, timeout=5))
                lat.append(time.perf_counter_ns() - t0)
                assert resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == \
                    uuids[i % len(uuids)]
            lat.sort()
            ch.close()
        finally:
            rc = stop_agent(proc)
        print("allocate: %d calls, 1 GPU each: p50 %.0f us, p99 %.0f us, max %.0f us "
              "(target p99 <= 1000 us)" % (len(lat), pct(lat, 50), pct(lat, 99), lat[-1] / 1e3))
        print("allocate: client+transport floor (GetDevicePluginOptions): p50 %.0f us, "
              "p99 %.0f us" % (pct(base, 50), pct(base, 99)))
        if rc != 0:
            raise SystemExit("agent exit status %s" % rc)
        return 0 if pct(lat, 99) <= 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
