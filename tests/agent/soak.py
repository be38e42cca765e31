#!/usr/bin/python3
"""Soak of `gpusched agent` (issue 9, `make soak`; not part of the normal test run).

For --minutes (default 10) the agent runs on a fake 8-GPU node whose script raises an XID every
500 ms (contained 94 and reset-class 79 in turn, on rotating GPUs), loses a GPU and finds it
again every 10 s and re-partitions GPU 7 every 10 s (5 s after each loss: two MIG layouts and
MIG off in turn, under migStrategy mixed with a rediscovery every second, so resources are
withdrawn, come back and gain a socket), while the grpcio kubelet of test_devplugin.py restarts
every 2 s (directory cleaned, new kubelet.sock), /metrics is scraped every 100 ms and Allocate
is called every 200 ms. Every 30 s it records the agent's RSS and open descriptors; at the end
the descriptors must be where they were after the first minute (+-4) and RSS within 10 % +
4 MiB of it, and the agent must have logged each MIG change.

  soak.py --gpusched BIN --source-dir DIR [--minutes N]
"""
import argparse
import os
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_devplugin as td  # noqa: E402


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def node_file(src, tmp, minutes):
    """deploy/fake-gpus.yaml with its script replaced by the soak's."""
    text = open(os.path.join(src, "deploy/fake-gpus.yaml")).read()
    text = text[:text.index("\nscript:") + 1] if "\nscript:" in text else text
    lines = ["script:"]
    end_ms = int(minutes * 60000) + 60000
    k = 0
    for t in range(500, end_ms, 500):
        gpu = k % 8
        xid = 94 if k % 2 == 0 else 79
        lines.append("  - {t_ms: %d, gpu: %d, xid: %d}" % (t, gpu, xid))
        k += 1
    for t in range(10000, end_ms, 10000):
        gpu = (t // 10000) % 8
        lines.append("  - {t_ms: %d, gpu: %d, lost: true}" % (t, gpu))
        lines.append("  - {t_ms: %d, gpu: %d, lost: false}" % (t + 3000, gpu))
    # GPU 7 (MIG in deploy/fake-gpus.yaml: 3g, 2g, 1g, 1g) re-partitioned in turn to 2g, 2g, 3g
    # (the 3g kept), to MIG off, and back to its own layout; H200 placements (3g at 0/4, 2g at
    # 0/2/4, 1g at 0..6).
    mig = "MIG-0b6a4f0e-6c1d-5e2a-8f3b-0000000007%02d"
    layouts = [
        "{enabled: true, instances: [{profile: 2g.35gb, uuid: %s, memory_mib: 33536, start: 0}, "
        "{profile: 2g.35gb, uuid: %s, memory_mib: 33536, start: 2}, {profile: 3g.71gb, uuid: %s, "
        "memory_mib: 69888, start: 4}]}" % (mig % 5, mig % 6, mig % 1),
        "{enabled: false}",
        "{enabled: true, instances: [{profile: 3g.71gb, uuid: %s, memory_mib: 69888, start: 4}, "
        "{profile: 2g.35gb, uuid: %s, memory_mib: 33536, start: 0}, {profile: 1g.18gb, uuid: %s, "
        "memory_mib: 16384, start: 2}, {profile: 1g.18gb, uuid: %s, memory_mib: 16384, "
        "start: 3}]}" % (mig % 1, mig % 2, mig % 3, mig % 4),
    ]
    n_mig = 0
    for k, t in enumerate(range(5000, end_ms, 10000)):
        lines.append("  - {t_ms: %d, gpu: 7, mig: %s}" % (t, layouts[k % 3]))
        if t < minutes * 60000:
            n_mig += 1
    path = os.path.join(tmp, "soak-node.yaml")
    with open(path, "w") as f:
        f.write(text + "\n".join(lines) + "\n")
    n_xid = sum(1 for t in range(500, end_ms, 500) if t < minutes * 60000)
    return path, n_xid, n_mig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--minutes", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gssoak-") as tmp:
        dp, _ = td.load_protos(os.path.join(args.source_dir, "proto"), tmp)
        d = os.path.join(tmp, "dp")
        os.mkdir(d)
        cfg = os.path.join(tmp, "cfg.yaml")
        with open(cfg, "w") as f:
            f.write("version: v1\nflags:\n  migStrategy: mixed\nhealth:\n"
                    "  recoveryQuietPeriod: 1s\n  probeInterval: 200ms\n"
                    "exporter:\n  refreshInterval: 200ms\n")
        kb = td.Kubelet(dp, d)
        node, n_xid, n_mig = node_file(args.source_dir, tmp, args.minutes)
        agent = td.Agent(args.gpusched, ["--gpu-backend", "fake:" + node, "--config", cfg,
                                         "--kubelet-dir", d, "--pod-resources-socket", "",
                                         "--metrics-addr", "127.0.0.1:0", "--rediscover-s", "1"],
                         "soak")
        port = agent.metrics_port()
        stop = threading.Event()
        counts = {"scrapes": 0, "scrape_errors": 0, "allocates": 0, "restarts": 0}
        refused, first_refusal = {}, {}

        def scraper():
            while not stop.is_set():
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                                timeout=5) as r:
                        r.read()
                    counts["scrapes"] += 1
                except OSError:
                    counts["scrape_errors"] += 1
                stop.wait(0.1)

        threading.Thread(target=scraper, daemon=True).start()
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        samples = []
        next_sample = t0
        next_restart = t0 + 2
        sock = os.path.join(d, "gpusched-nvidia.com-gpu.sock")
        uuids = [g for g in open(os.path.join(args.source_dir, "deploy/fake-gpus.yaml"))
                 .read().split() if g.startswith("GPU-")][:8]
        try:
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_sample:
                    samples.append((now - t0, rss_mib(agent.proc.pid), fds(agent.proc.pid)))
                    print("t=%5.0f s  RSS %6.1f MiB  fds %3d  scrapes %d (errors %d) allocates "
                          "%d kubelet restarts %d" % (samples[-1] + tuple(
                              counts[k] for k in ("scrapes", "scrape_errors", "allocates",
                                                  "restarts"))), flush=True)
                    next_sample = now + 30
                if now >= next_restart:
                    kb.stop()
                    for f in os.listdir(d):
                        try:
                            os.unlink(os.path.join(d, f))
                        except FileNotFoundError:
                            pass
                    kb = td.Kubelet(dp, d)
                    counts["restarts"] += 1
                    next_restart = now + 2
                # GPUs 0-5, in turn whether or not the last one was given (6 and 7 run MIG,
                # under migStrategy mixed not nvidia.com/gpu devices; GPU 7 only at times).
                uuid = uuids[(counts["allocates"] + sum(refused.values())) % 6]
                p = td.Plugin(dp, sock)
                try:
                    p.allocate([uuid])
                    counts["allocates"] += 1
                except grpc.RpcError as e:  # Unhealthy GPUs and kubelet restarts refuse some
                    refused[e.code().name] = refused.get(e.code().name, 0) + 1
                    first_refusal.setdefault(e.code().name, e.details())
                finally:
                    p.close()
                time.sleep(0.2)
            samples.append((time.monotonic() - t0, rss_mib(agent.proc.pid),
                            fds(agent.proc.pid)))
        finally:
            stop.set()
            kb.stop()
            log = agent.stop()
        base = next((s for s in samples if s[0] >= 60), samples[0])
        last = samples[-1]
        mig_seen = sum(1 for line in log.splitlines() if "rediscovery: GPU 7 " in line)
        xids = sum(1 for line in log.splitlines() if "event: GPU " in line and ": XID " in line)
        print("soak: %.1f min; after the first minute RSS %.1f MiB, fds %d; at the end RSS "
              "%.1f MiB, fds %d; max RSS %.1f MiB, fds %d; %d scrapes (%d failed), %d Allocates, "
              "%d kubelet restarts, %d XIDs scripted (%d logged), %d MIG changes scripted "
              "(%d logged), "
              "%d log lines" % (args.minutes, base[1], base[2], last[1], last[2],
                                max(s[1] for s in samples), max(s[2] for s in samples),
                                counts["scrapes"], counts["scrape_errors"], counts["allocates"],
                                counts["restarts"], n_xid, xids, n_mig, mig_seen,
                                log.count("\n") + 1))
        flat = abs(last[2] - base[2]) <= 4 and last[1] <= base[1] * 1.10 + 4
        print("soak: %s" % ("flat" if flat else "NOT FLAT"))
        ok = flat and mig_seen >= n_mig
        print("soak: Allocates refused: %s" % ("; ".join(
            "%s %d (first: %s)" % (k, n, first_refusal[k]) for k, n in sorted(refused.items()))
            or "none"))
        if mig_seen < n_mig:
            print("soak: the agent logged %d of the %d MIG changes" % (mig_seen, n_mig))
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
