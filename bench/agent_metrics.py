#!/usr/bin/python3
"""/metrics scrape time and idle CPU of `gpusched agent` (Debian's python3-grpcio for the
PodResources stand-in).

The agent runs on a fake 8-GPU node (deploy/fake-gpus.yaml without its fault script), every GPU
time-sliced 4 ways, next to a grpcio PodResources stand-in that reports 32 pods, one replica
each: 4 pods on every GPU. The pods are on gpusched_gpu_pod_info; DCGM value series of a pod
exist only where its processes are seen, and this fake node runs none, so the device series
are written once per GPU.

1. Scrape time: SCRAPES sequential GET /metrics on one keep-alive HTTP connection, each timed
   from the request to the last byte of the body: p50/p99 (target <= 5 ms).
2. CPU: utime+stime of the agent from /proc/<pid>/stat over SECONDS seconds while it is scraped
   once a second, as a share of one core (target <= 1 %). The agent's own timers keep running
   (backend events every 100 ms, samples and PodResources every refresh interval, 1 s here).

  agent_metrics.py --gpusched BUILD/gpusched --source-dir . [--scrapes 1000] [--seconds 30]
"""
import argparse
import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_allocate import load_protos, quiet_node, start_agent, stop_agent, pct  # noqa: E402

CONFIG = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4
exporter:
  refreshInterval: 1s
"""


class PodResources(grpc.GenericRpcHandler):
    def __init__(self, pr, sock, uuids):
        self.answer = pr.ListPodResourcesResponse(pod_resources=[
            pr.PodResources(name="job-%02d" % (4 * g + k), namespace="team-%d" % (g % 3),
                            containers=[pr.ContainerResources(name="main", devices=[
                                pr.ContainerDevices(resource_name="nvidia.com/gpu.shared",
                                                    device_ids=["%s::%d" % (u, k)])])])
            for g, u in enumerate(uuids) for k in range(4)]).SerializeToString()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((self,))
        self.server.add_insecure_port("unix:" + sock)
        self.server.start()

    def service(self, details):
        if details.method == "/v1.PodResourcesLister/List":
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: self.answer)
        return None


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--scrapes", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gsbench-") as tmp:
        _, pr = load_protos(os.path.join(args.source_dir, "proto"), tmp)
        node, uuids = quiet_node(args.source_dir, tmp)
        cfg = os.path.join(tmp, "config.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        plugin_dir = os.path.join(tmp, "dp")
        os.mkdir(plugin_dir)
        pr_sock = os.path.join(tmp, "pod-resources.sock")
        podres = PodResources(pr, pr_sock, uuids)
        proc = start_agent(args.gpusched, ["--gpu-backend", "fake", "--fake-gpus", node,
                                           "--config", cfg, "--kubelet-dir", plugin_dir,
                                           "--pod-resources-socket", pr_sock,
                                           "--metrics-addr", "127.0.0.1:0"])
        try:
            port = None
            end = time.monotonic() + 20
            while port is None:
                line = proc.stderr.readline()
                m = re.search(r"metrics on .* \(port (\d+)\)", line)
                if m:
                    port = int(m.group(1))
                elif not line or time.monotonic() > end:
                    raise SystemExit("agent did not start")
            # Drain the log so the agent never blocks on a full pipe.
            devnull = open(os.devnull, "w")
            drain = subprocess.Popen(["cat"], stdin=proc.stderr, stdout=devnull)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)

            def scrape():
                conn.request("GET", "/metrics")
                r = conn.getresponse()
                body = r.read()
                assert r.status == 200
                return body

            end = time.monotonic() + 20
            while True:
                body = scrape().decode()
                # Each pod's GPUs are on gpusched_gpu_pod_info; its value series exist only
                # where its processes are seen (none on this fake node).
                pods = set(re.findall(r'gpusched_gpu_pod_info\{[^}]*pod="([^"]+)"', body))
                if len(pods) == 32:
                    break
                if time.monotonic() > end:
                    raise SystemExit("only %d pods in /metrics" % len(pods))
                time.sleep(0.2)
            lat = []
            for _ in range(args.scrapes):
                t0 = time.perf_counter_ns()
                scrape()
                lat.append(time.perf_counter_ns() - t0)
            lat.sort()
            print("metrics: %d scrapes, 8 GPUs, 32 pods, %d bytes, %d lines: p50 %.2f ms, "
                  "p99 %.2f ms (target <= 5 ms)" % (len(lat), len(body), body.count("\n"),
                                                    pct(lat, 50) / 1e3, pct(lat, 99) / 1e3))
            hz = os.sysconf("SC_CLK_TCK")
            t0, c0 = time.monotonic(), cpu_ticks(proc.pid)
            for i in range(args.seconds):
                scrape()
                time.sleep(max(0.0, t0 + i + 1 - time.monotonic()))
            t1, c1 = time.monotonic(), cpu_ticks(proc.pid)
            share = 100.0 * (c1 - c0) / hz / (t1 - t0)
            print("cpu: %.2f %% of one core over %.0f s, scraped every 1 s, refresh 1 s "
                  "(target <= 1 %%)" % (share, t1 - t0))
            conn.close()
        finally:
            rc = stop_agent(proc)
            podres.server.stop(0)
        if rc != 0:
            raise SystemExit("agent exit status %s" % rc)
        return 0 if pct(lat, 99) <= 5000 and share <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
