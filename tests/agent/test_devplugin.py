#!/usr/bin/python3
"""Integration test of `gpusched agent` (the device plugin) against Python's grpcio playing
kubelet (Debian's python3-grpcio: run with /usr/bin/python3).

Three agents run against fake GPUs, each next to a grpcio Registration server that behaves like
kubelet's: inside Register it dials the plugin's socket back, calls GetDevicePluginOptions and
opens ListAndWatch, recording every list it receives with its arrival time.

  A. deploy/fake-gpus.yaml (8 H200s, NVLink among 0-5, NUMA 0/1), default configuration:
     Register fields, GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation (NVLink,
     NUMA, must_include, determinism), Allocate and PreStartContainer, every response field;
     a ListAndWatch stream cancelled or disconnected by the peer and a new one; malformed
     protobuf bytes and malformed gRPC/HTTP2 frames; kubelet restarts (files wiped, directory
     re-created) answered by a new Register within 1 s.
  B. tests/agent/data/mixed-node.yaml + mixed-config.yaml: whole, time-sliced and MIG (mixed)
     GPUs on one node: resources, endpoints, device IDs, topology, Allocate of replicas and MIG
     devices, packing in GetPreferredAllocation; and /metrics with pod labels from a grpcio
     PodResources stand-in, two pods on one shared GPU giving two series.
  C. The mixed node with a scripted XID 94 (contained) on GPU 2 and an ignored XID 13 on GPU 0: only GPU
     2's replicas turn Unhealthy, within 1 s, on the shared resource's stream; Healthy again
     after the quiet period (not before, and within 1 s after it); CDI names, index naming
     and failRequestsGreaterThanOne.
  M. tests/agent/data/mig-node.yaml (a whole GPU and one split into seven 1g.18gb instances)
     under migStrategy mixed: the seven device IDs, packing, two instances of one card in one
     container, no limits without an assignment (the Kubernetes side: tests/k8s/agent_e2e.py).
  R. tests/agent/data/mig-repartition.yaml: GPU 1 put in MIG mode, re-partitioned and taken out
     of it while the agent runs with --rediscover-s 1: the new lists within one interval (plus
     the agent's 200 ms between withdrawal and advertisement), empty lists for MIG resources
     that are gone, one Register per resource, and never a device (or GPU 1 whole and as MIG
     devices) under two resources at any moment kubelet saw.
Plus command-line checks: a bad configuration names file:line:column and key, `agent labels`,
and the Kubernetes side: none without a configuration, a bad --kubeconfig named, an API server
that refuses connections logged while the device plugin serves.

Every agent must exit 0 on SIGTERM (under ASan: no leak, no error). The 1 s bounds are asserted
as such; every other wait is generous, for a loaded 2-core machine.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from concurrent import futures

import grpc
import yaml

BOUND_S = 1.0        # the bounds the agent promises
WAIT_S = 20.0        # generous waits for everything else
DP = "/v1beta1.DevicePlugin/"
CONTROL_NODES = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]


def wait_until(pred, what, timeout_s=WAIT_S, step_s=0.02):
    end = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step_s)


def expect_rpc_error(fn, code, what):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, (what, e.code(), e.details())
        return e.details()
    raise AssertionError("%s: expected %s" % (what, code))


# ---- the agent ------------------------------------------------------------------------------

class Agent:
    """`gpusched agent` with its stderr lines collected with arrival times."""

    def __init__(self, binary, args, name):
        self.name = name
        self.t_popen = time.monotonic()
        self.proc = subprocess.Popen([binary, "agent"] + args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cv = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cv.notify_all()

    def wait_line(self, pattern, timeout_s=WAIT_S, after=0):
        """(time, match) of the first line from index `after` matching the regex."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout_s
        with self.cv:
            while True:
                for t, line in self.lines[after:]:
                    m = rx.search(line)
                    if m:
                        return t, m
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self.reader.is_alive():
                    raise AssertionError("%s: no log line /%s/; log:\n%s" % (
                        self.name, pattern, self.text()))
                self.cv.wait(min(left, 0.1))

    def text(self):
        return "\n".join(l for _, l in self.lines)

    def metrics_port(self):
        _, m = self.wait_line(r"metrics on .* \(port (\d+)\)")
        return int(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "hung"
        self.reader.join(timeout=5)
        log = self.text()
        assert rc == 0, "%s exit status %s; log:\n%s" % (self.name, rc, log)
        assert "Sanitizer" not in log and "runtime error" not in log, log
        return log


# ---- kubelet stand-ins ----------------------------------------------------------------------

class Watch:
    """A ListAndWatch stream, read on a thread; messages kept with arrival times."""

    def __init__(self, channel, pb, resource):
        self.pb = pb
        self.resource = resource
        self.channel = channel
        self.msgs = []
        self.ended = None
        self.cv = threading.Condition()
        self.call = channel.unary_stream(DP + "ListAndWatch")(pb.Empty().SerializeToString())
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for raw in self.call:
                m = self.pb.ListAndWatchResponse.FromString(raw)
                with self.cv:
                    self.msgs.append((time.monotonic(), m))
                    self.cv.notify_all()
            end = "finished"
        except grpc.RpcError as e:
            end = e.code()
        with self.cv:
            self.ended = end
            self.cv.notify_all()

    def wait(self, pred=lambda m: True, after=0, timeout_s=WAIT_S):
        """(index, time, message) of the first message from `after` satisfying pred."""
        end = time.monotonic() + timeout_s
        with self.cv:
            while True:
                for i in range(after, len(self.msgs)):
                    if pred(self.msgs[i][1]):
                        return i, self.msgs[i][0], self.msgs[i][1]
                left = end - time.monotonic()
                if left <= 0 or self.ended is not None:
                    raise AssertionError("%s: no matching ListAndWatch message (%d seen, ended "
                                         "%s)" % (self.resource, len(self.msgs), self.ended))
                self.cv.wait(min(left, 0.1))

    def close(self):
        self.call.cancel()
        self.channel.close()


class Kubelet(grpc.GenericRpcHandler):
    """grpcio server on <dir>/kubelet.sock playing kubelet's Registration service."""

    def __init__(self, pb, plugin_dir, refuse=0):
        self.pb = pb
        self.dir = plugin_dir
        self.refuse = refuse   # Register calls to answer UNAVAILABLE first
        self.refused = 0
        self.lock = threading.Lock()
        self.registered = []   # (time, RegisterRequest)
        self.options = {}      # resource -> DevicePluginOptions from the dial-back
        self.watches = {}      # resource -> Watch
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers((self,))
        self.server.add_insecure_port("unix:" + os.path.join(plugin_dir, "kubelet.sock"))
        self.server.start()
        self.t_started = time.monotonic()

    def service(self, details):
        if details.method == "/v1beta1.Registration/Register":
            return grpc.unary_unary_rpc_method_handler(self.register)
        return None

    def register(self, req, ctx):
        t = time.monotonic()
        dp = self.pb
        r = dp.RegisterRequest.FromString(req)
        with self.lock:
            if self.refused < self.refuse:
                self.refused += 1
                ctx.abort(grpc.StatusCode.UNAVAILABLE, "kubelet is not ready yet")
        # Like kubelet: dial the plugin back before answering (the agent must still be serving).
        ch = grpc.insecure_channel("unix:" + os.path.join(self.dir, r.endpoint))
        try:
            grpc.channel_ready_future(ch).result(timeout=10)
            opts = dp.DevicePluginOptions.FromString(
                ch.unary_unary(DP + "GetDevicePluginOptions")(dp.Empty().SerializeToString(),
                                                              timeout=10))
            w = Watch(ch, dp, r.resource_name)
            w.wait(timeout_s=10)
        except Exception as e:  # noqa: BLE001 - reported to the plugin like kubelet does
            ch.close()
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "dial-back failed: %s" % e)
        with self.lock:
            self.registered.append((t, r))
            self.options[r.resource_name] = opts
            old = self.watches.get(r.resource_name)
            self.watches[r.resource_name] = w
        if old is not None:
            old.close()
        return dp.Empty().SerializeToString()

    def registrations(self, resource=None):
        with self.lock:
            return [(t, r) for t, r in self.registered
                    if resource is None or r.resource_name == resource]

    def watch(self, resource):
        return wait_until(lambda: self.watches.get(resource), "registration of " + resource)

    def stop(self):
        self.server.stop(0).wait(5)
        with self.lock:
            for w in self.watches.values():
                w.close()
            self.watches.clear()


class PodResources(grpc.GenericRpcHandler):
    """grpcio server playing kubelet's PodResourcesLister with a fixed pod list."""

    def __init__(self, pr, sock, pods):
        self.pr = pr
        self.pods = pods  # [(namespace, pod, container, resource, [ids])]
        self.calls = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((self,))
        self.server.add_insecure_port("unix:" + sock)
        self.server.start()

    def service(self, details):
        if details.method == "/v1.PodResourcesLister/List":
            return grpc.unary_unary_rpc_method_handler(self.list)
        return None

    def list(self, req, ctx):
        pr = self.pr
        pr.ListPodResourcesRequest.FromString(req)
        self.calls += 1
        out = []
        for ns, pod, ctr, res, ids in self.pods:
            out.append(pr.PodResources(name=pod, namespace=ns, containers=[
                pr.ContainerResources(name=ctr, devices=[
                    pr.ContainerDevices(resource_name=res, device_ids=ids)])]))
        # A device of another plugin must not be attributed to a GPU.
        out.append(pr.PodResources(name="nic-user", namespace="net", containers=[
            pr.ContainerResources(name="c", devices=[
                pr.ContainerDevices(resource_name="example.com/nic", device_ids=["0"])])]))
        return pr.ListPodResourcesResponse(pod_resources=out).SerializeToString()

    def stop(self):
        self.server.stop(0).wait(5)


# ---- helpers on the plugin side -------------------------------------------------------------

class Plugin:
    """A grpcio client of one of the agent's sockets."""

    def __init__(self, pb, path):
        self.pb = pb
        self.path = path
        self.ch = grpc.insecure_channel("unix:" + path)

    def options(self):
        return self.pb.DevicePluginOptions.FromString(
            self.ch.unary_unary(DP + "GetDevicePluginOptions")(
                self.pb.Empty().SerializeToString(), timeout=10))

    def preferred(self, *containers):
        dp = self.pb
        req = dp.PreferredAllocationRequest(container_requests=[
            dp.ContainerPreferredAllocationRequest(available_deviceIDs=a,
                                                   must_include_deviceIDs=m,
                                                   allocation_size=n)
            for a, m, n in containers])
        resp = dp.PreferredAllocationResponse.FromString(
            self.ch.unary_unary(DP + "GetPreferredAllocation")(req.SerializeToString(),
                                                             timeout=10))
        return [list(c.deviceIDs) for c in resp.container_responses]

    def allocate(self, *containers):
        dp = self.pb
        req = dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=ids) for ids in containers])
        return dp.AllocateResponse.FromString(
            self.ch.unary_unary(DP + "Allocate")(req.SerializeToString(), timeout=10))

    def raw(self, method, data):
        return self.ch.unary_unary(DP + method)(data, timeout=10)

    def close(self):
        self.ch.close()


def devices_of(msg):
    return [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in msg.devices]


def check_container(c, visible, nodes, annotations, envs_extra=None, cdi=()):
    envs = {"NVIDIA_VISIBLE_DEVICES": visible}
    envs.update(envs_extra or {})
    assert dict(c.envs) == envs, dict(c.envs)
    assert [(d.container_path, d.host_path, d.permissions) for d in c.devices] == \
        [(p, p, "rw") for p in nodes + CONTROL_NODES], c.devices
    assert dict(c.annotations) == annotations, dict(c.annotations)
    assert list(c.mounts) == [], c.mounts
    assert [d.name for d in c.cdi_devices] == list(cdi), c.cdi_devices


# ---- raw HTTP/2 for malformed gRPC frames ---------------------------------------------------

def h2_frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    """Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    def s(x):
        assert len(x) < 127
        return bytes([len(x)]) + x
    return b"\x00" + s(name.encode()) + s(value.encode())


def raw_grpc_call(sock_path, method, body):
    """Sends one request with hand-made framing. Returns (got_data, ended_how)."""
    block = b"".join(hpack_literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", method), (":authority", "localhost"),
        ("content-type", "application/grpc"), ("te", "trailers")))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"") +
              h2_frame(1, 0x4, 1, block) + h2_frame(0, 0x1, 1, body))
    buf = b""
    got_data = False
    try:
        while True:
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + n:
                    break
                ftype, flags = buf[3], buf[4]
                stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                buf = buf[9 + n:]
                if ftype == 4 and not flags & 1:
                    s.sendall(h2_frame(4, 1, 0, b""))  # SETTINGS ACK
                if stream == 1 and ftype == 0:
                    got_data = True
                if stream == 1 and ftype == 1 and flags & 1:
                    return got_data, "trailers"
                if stream == 1 and ftype == 3:
                    return got_data, "rst"
                if ftype == 7:
                    return got_data, "goaway"
            chunk = s.recv(65536)
            if not chunk:
                return got_data, "eof"
            buf += chunk
    finally:
        s.close()


# ---- A: the 8-GPU node --------------------------------------------------------------------------

class RunA:
    pass


def a_registration(r):
    regs = r.kubelet.registrations()
    assert len(regs) == 1, regs
    req = regs[0][1]
    assert req.version == "v1beta1", req
    assert req.endpoint == "gpusched-nvidia.com-gpu.sock", req
    assert req.resource_name == "nvidia.com/gpu", req
    assert req.options.pre_start_required and req.options.get_preferred_allocation_available
    opts = r.kubelet.options["nvidia.com/gpu"]
    assert opts.pre_start_required and opts.get_preferred_allocation_available
    _, _, first = r.kubelet.watch("nvidia.com/gpu").wait()
    assert devices_of(first) == [(u, "Healthy", [n]) for u, n in zip(r.uuids, r.numa)], first


def a_options_and_list(r):
    o = r.plugin.options()
    assert o.pre_start_required is True and o.get_preferred_allocation_available is True
    w = Watch(grpc.insecure_channel("unix:" + r.sock), r.pb, "nvidia.com/gpu")
    try:
        _, _, m = w.wait()
        assert devices_of(m) == [(u, "Healthy", [n]) for u, n in zip(r.uuids, r.numa)], m
        assert all(len(d.ID) <= 63 for d in m.devices)
    finally:
        w.close()


def a_preferred(r):
    u = r.uuids
    p = r.plugin.preferred
    # An NVLink pair on one NUMA node for 2 GPUs; 1 GPU from outside the NVLink island.
    assert p((u, [], 2)) == [[u[0], u[1]]]
    assert p((u, [], 1)) == [[u[6]]]
    # must_include first; then NVLink to it before NUMA, NUMA to break ties.
    assert p((u, [u[4]], 3)) == [[u[4], u[0], u[5]]]
    # Six from a full node: the NVLink island exactly.
    assert p((u, [], 6)) == [[u[0], u[1], u[2], u[3], u[4], u[5]]]
    # Only what is offered, and the best shorter list when too little is.
    assert p(([u[7], u[6]], [], 3)) == [[u[6], u[7]]]
    # Unknown offered IDs are never chosen; an unknown must_include is kept.
    assert p((["GPU-nope", u[3]], ["GPU-must"], 2)) == [["GPU-must", u[3]]]
    # Two containers in one call, answered in order; deterministic on repeat.
    two = p((u[:4], [], 2), (u[4:], [], 2))
    assert two == [[u[0], u[1]], [u[4], u[5]]], two
    assert p((u[:4], [], 2), (u[4:], [], 2)) == two
    # More must_include than the allocation size is refused.
    expect_rpc_error(lambda: p((u, u[:3], 2)), grpc.StatusCode.INVALID_ARGUMENT,
                     "must_include > size")


def a_allocate(r):
    u = r.uuids
    resp = r.plugin.allocate([u[1], u[0]], [u[7]])
    assert len(resp.container_responses) == 2
    check_container(resp.container_responses[0], "%s,%s" % (u[1], u[0]),
                    ["/dev/nvidia0", "/dev/nvidia1"],
                    {"gpusched.io/resource": "nvidia.com/gpu",
                     "gpusched.io/devices": "%s,%s" % (u[1], u[0]),
                     "gpusched.io/gpus": "%s,%s" % (u[1], u[0])})
    check_container(resp.container_responses[1], u[7], ["/dev/nvidia7"],
                    {"gpusched.io/resource": "nvidia.com/gpu", "gpusched.io/devices": u[7],
                     "gpusched.io/gpus": u[7]})
    d = expect_rpc_error(lambda: r.plugin.allocate([u[0], "GPU-unknown"]),
                         grpc.StatusCode.INVALID_ARGUMENT, "unknown ID")
    assert "GPU-unknown" in d, d
    expect_rpc_error(lambda: r.plugin.allocate([u[0], u[0]]), grpc.StatusCode.INVALID_ARGUMENT,
                     "duplicate ID")
    expect_rpc_error(lambda: r.plugin.allocate([]), grpc.StatusCode.INVALID_ARGUMENT,
                     "empty container request")
    pre = r.plugin.raw("PreStartContainer",
                       r.pb.PreStartContainerRequest(devices_ids=[u[0]]).SerializeToString())
    assert pre == b"", pre


def a_stream_dropped(r):
    before = len(r.agent.lines)
    ch = grpc.insecure_channel("unix:" + r.sock)
    w = Watch(ch, r.pb, "nvidia.com/gpu")
    _, _, first = w.wait()
    w.call.cancel()
    r.agent.wait_line(r"ListAndWatch closed \(cancelled by the peer", after=before)
    w2 = Watch(grpc.insecure_channel("unix:" + r.sock), r.pb, "nvidia.com/gpu")
    _, _, again = w2.wait()
    assert devices_of(again) == devices_of(first) and len(again.devices) == 8
    # The peer going away without a cancel (connection closed) is cleaned up too.
    before = len(r.agent.lines)
    w2.channel.close()
    r.agent.wait_line(r"ListAndWatch closed \((peer disconnected|cancelled by the peer)",
                      after=before)
    ch.close()
    # kubelet's own stream is unharmed.
    assert r.kubelet.watch("nvidia.com/gpu").ended is None


def a_malformed(r):
    held = Watch(grpc.insecure_channel("unix:" + r.sock), r.pb, "nvidia.com/gpu")
    held.wait()
    for method in ("Allocate", "GetPreferredAllocation", "PreStartContainer"):
        expect_rpc_error(lambda: r.plugin.raw(method, b"\x0a\x30\xff"),
                         grpc.StatusCode.INVALID_ARGUMENT, method + " with garbage")
    expect_rpc_error(lambda: r.plugin.raw("NoSuchMethod", b""), grpc.StatusCode.UNIMPLEMENTED,
                     "unknown method")
    # Hand-made gRPC framing: compressed flag, short message, garbage protobuf.
    path = DP + "Allocate"
    for body in (b"\x01\x00\x00\x00\x02\x0a\x00",        # compressed (unsupported)
                 b"\x00\x00\x00\x00\x64\x0a\x01",        # says 100 bytes, has 2
                 b"\x00\x00\x00\x00\x05\xff\xff\xff\xff\xff"):  # not a protobuf
        got_data, how = raw_grpc_call(r.sock, path, body)
        assert not got_data and how in ("trailers", "rst"), (body, got_data, how)
    # Bytes that are not HTTP/2 at all cost only their own connection.
    for junk in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(2048)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(r.sock)
        s.sendall(junk)
        while s.recv(4096):
            pass
        s.close()
    # Still serving: a real call, the held stream and kubelet's stream.
    resp = r.plugin.allocate([r.uuids[2]])
    assert dict(resp.container_responses[0].envs)["NVIDIA_VISIBLE_DEVICES"] == r.uuids[2]
    assert held.ended is None and r.kubelet.watch("nvidia.com/gpu").ended is None
    held.close()


def a_kubelet_restart(r):
    """Kubelet restarts: every file removed, then a new kubelet.sock; the whole directory
    replaced; a new kubelet that refuses the first Register; only our socket removed."""
    for round_ in ("files", "directory", "refused once"):
        n_before = len(r.kubelet.registrations())
        r.kubelet.stop()
        if round_ != "directory":
            for f in os.listdir(r.dir):
                os.unlink(os.path.join(r.dir, f))
        else:
            # Replaced: moved away (the agent's sockets go with it) and removed, then made anew.
            os.rename(r.dir, r.dir + ".old")
            shutil.rmtree(r.dir + ".old")
            time.sleep(0.3)  # the agent notices the directory is gone and waits for it
            os.mkdir(r.dir)
        # The agent re-creates its socket...
        wait_until(lambda: os.path.exists(r.sock), "socket re-created after the " + round_ +
                   " wipe", timeout_s=5)
        # ...and a new kubelet gets a Register within 1 s of its socket appearing.
        r.kubelet = Kubelet(r.pb, r.dir, refuse=1 if round_ == "refused once" else 0)
        regs = wait_until(lambda: r.kubelet.registrations(), "re-registration (%s)" % round_)
        assert r.kubelet.refused == r.kubelet.refuse
        delay = regs[0][0] - r.kubelet.t_started
        assert delay <= BOUND_S, "%s: re-registered after %.3f s" % (round_, delay)
        print("     kubelet restart (%s): Register after %.0f ms" % (round_, delay * 1000))
        _, _, m = r.kubelet.watch("nvidia.com/gpu").wait()
        assert len(m.devices) == 8 and all(d.health == "Healthy" for d in m.devices)
        assert n_before >= 1
        r.plugin.close()
        r.plugin = Plugin(r.pb, r.sock)
        assert r.plugin.options().pre_start_required
    # Only our socket removed (kubelet still there): served again and registered again.
    n_before = len(r.kubelet.registrations())
    t0 = time.monotonic()
    os.unlink(r.sock)
    regs = wait_until(lambda: r.kubelet.registrations()[n_before:], "re-registration after the "
                      "socket was removed")
    delay = regs[0][0] - t0
    assert delay <= BOUND_S, "socket removed: re-registered after %.3f s" % delay
    print("     socket removed: Register after %.0f ms" % (delay * 1000))
    r.plugin.close()
    r.plugin = Plugin(r.pb, r.sock)


def run_a(env):
    tmp = env["tmp"]
    r = RunA()
    r.pb = env["dp"]
    r.dir = os.path.join(tmp, "a-device-plugins")
    os.mkdir(r.dir)
    node = yaml.safe_load(open(os.path.join(env["src"], "deploy/fake-gpus.yaml")))
    r.uuids = [g["uuid"] for g in node["gpus"]]
    r.numa = [g["numa_node"] for g in node["gpus"]]
    r.sock = os.path.join(r.dir, "gpusched-nvidia.com-gpu.sock")
    r.kubelet = Kubelet(r.pb, r.dir)
    r.agent = Agent(env["bin"], ["--gpu-backend", "fake", "--fake-gpus",
                                 os.path.join(env["src"], "deploy/fake-gpus.yaml"),
                                 "--kubelet-dir", r.dir, "--pod-resources-socket", "",
                                 "--metrics-addr", "127.0.0.1:0", "--node-name", "node-a"], "A")
    try:
        r.kubelet.watch("nvidia.com/gpu")
        r.plugin = Plugin(r.pb, r.sock)
        yield from [(f, r) for f in (a_registration, a_options_and_list, a_preferred, a_allocate,
                                     a_stream_dropped, a_malformed, a_kubelet_restart)]
    finally:
        r.kubelet.stop()
        r.agent.stop()
        assert not os.path.exists(r.sock), "socket left behind"


# ---- B: mixed sharing and pod metrics --------------------------------------------------------

MIXED_RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.18gb",
                   "nvidia.com/mig-1g.18gb.shared", "nvidia.com/mig-3g.71gb"]


class Mixed:
    def __init__(self, src):
        node = yaml.safe_load(open(os.path.join(src, "tests/agent/data/mixed-node.yaml")))
        self.gpu = [g["uuid"] for g in node["gpus"]]
        self.mig = [m["uuid"] for m in node["gpus"][4]["mig"]["instances"]]
        g, m = self.gpu, self.mig
        self.expected = {
            "nvidia.com/gpu": [(g[0], [0]), (g[1], [0])],
            "nvidia.com/gpu.shared": [("%s::%d" % (g[2], k), [0]) for k in range(4)] +
                                     [("%s::%d" % (g[3], k), [1]) for k in range(4)],
            "nvidia.com/mig-1g.18gb": [(m[0], [1])],
            "nvidia.com/mig-1g.18gb.shared": [("%s::%d" % (m[1], k), [1]) for k in range(2)],
            "nvidia.com/mig-3g.71gb": [(m[2], [1])],
        }


def endpoint(resource):
    return "gpusched-" + resource.replace("/", "-") + ".sock"


def b_resources(r):
    regs = r.kubelet.registrations()
    assert sorted(q.resource_name for _, q in regs) == MIXED_RESOURCES, regs
    for _, q in regs:
        assert q.endpoint == endpoint(q.resource_name), q
        assert q.version == "v1beta1" and q.options.get_preferred_allocation_available
        _, _, m = r.kubelet.watch(q.resource_name).wait()
        got = [(i, t) for i, h, t in devices_of(m)]
        assert got == r.mx.expected[q.resource_name], (q.resource_name, got)
        assert all(d.health == "Healthy" for d in m.devices)


def b_allocate(r):
    g, m = r.mx.gpu, r.mx.mig
    shared = r.plugins["nvidia.com/gpu.shared"]
    resp = shared.allocate(["%s::1" % g[2], "%s::3" % g[2]], ["%s::0" % g[3]])
    c0, c1 = resp.container_responses
    check_container(c0, g[2], ["/dev/nvidia2"],
                    {"gpusched.io/resource": "nvidia.com/gpu.shared",
                     "gpusched.io/devices": "%s::1,%s::3" % (g[2], g[2]),
                     "gpusched.io/gpus": g[2], "gpusched.io/replicas": "%s=2/4" % g[2]},
                    {"GPUSCHED_GPU_REPLICAS": "%s=2/4" % g[2],
                     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"})
    check_container(c1, g[3], ["/dev/nvidia3"],
                    {"gpusched.io/resource": "nvidia.com/gpu.shared",
                     "gpusched.io/devices": "%s::0" % g[3],
                     "gpusched.io/gpus": g[3], "gpusched.io/replicas": "%s=1/4" % g[3]},
                    {"GPUSCHED_GPU_REPLICAS": "%s=1/4" % g[3],
                     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"})
    # Replicas of two GPUs in one container.
    resp = shared.allocate(["%s::0" % g[3], "%s::2" % g[2]])
    c = resp.container_responses[0]
    assert dict(c.envs)["NVIDIA_VISIBLE_DEVICES"] == "%s,%s" % (g[3], g[2])
    assert dict(c.envs)["GPUSCHED_GPU_REPLICAS"] == "%s=1/4,%s=1/4" % (g[3], g[2])
    assert [d.host_path for d in c.devices][:2] == ["/dev/nvidia2", "/dev/nvidia3"]
    mig = r.plugins["nvidia.com/mig-3g.71gb"].allocate([m[2]]).container_responses[0]
    check_container(mig, m[2], ["/dev/nvidia4"],
                    {"gpusched.io/resource": "nvidia.com/mig-3g.71gb",
                     "gpusched.io/devices": m[2], "gpusched.io/gpus": m[2]})
    ms = r.plugins["nvidia.com/mig-1g.18gb.shared"].allocate(["%s::1" % m[1]])
    assert dict(ms.container_responses[0].envs)["NVIDIA_VISIBLE_DEVICES"] == m[1]
    assert dict(ms.container_responses[0].envs)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    # An ID of another resource is unknown here.
    expect_rpc_error(lambda: shared.allocate([g[0]]), grpc.StatusCode.INVALID_ARGUMENT,
                     "whole GPU on the shared socket")
    whole = r.plugins["nvidia.com/gpu"].allocate([g[0], g[1]]).container_responses[0]
    assert dict(whole.envs) == {"NVIDIA_VISIBLE_DEVICES": "%s,%s" % (g[0], g[1])}


def b_preferred(r):
    g = r.mx.gpu
    shared = r.plugins["nvidia.com/gpu.shared"]
    rep = lambda i, k: "%s::%d" % (g[i], k)  # noqa: E731
    every = [rep(i, k) for i in (2, 3) for k in range(4)]
    # Nothing in use: the first GPU's replicas, packed.
    assert shared.preferred((every, [], 1)) == [[rep(2, 0)]]
    assert shared.preferred((every, [], 2)) == [[rep(2, 0), rep(2, 1)]]
    # GPU 3 partly in use by others: pack onto it, keep GPU 2 whole.
    offered = [rep(2, k) for k in range(4)] + [rep(3, k) for k in (1, 3)]
    assert shared.preferred((offered, [], 1)) == [[rep(3, 1)]]
    assert shared.preferred((offered, [], 2)) == [[rep(3, 1), rep(3, 3)]]
    # Three do not fit on GPU 3's two free slots: GPU 2 takes all three.
    assert shared.preferred((offered, [], 3)) == [[rep(2, 0), rep(2, 1), rep(2, 2)]]
    # must_include on GPU 2 keeps the container on GPU 2.
    assert shared.preferred((offered, [rep(2, 2)], 2)) == [[rep(2, 2), rep(2, 0)]]
    # Whole GPUs: the NVLink pair.
    whole = r.plugins["nvidia.com/gpu"]
    assert whole.preferred(([g[1], g[0]], [], 2)) == [[g[0], g[1]]]


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
        assert resp.status == 200
        return resp.read().decode()


def series(text, name):
    out = []
    for line in text.splitlines():
        m = re.match(name + r"\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
            out.append((labels, m.group(2)))
    return out


# The pods of run B's processes (tests/agent/data/mixed-node.yaml): their cgroups in a fake
# /proc, as the systemd driver (A, B), cgroupfs (infer) and a host service (5000005) write them.
B_UID_A = "3f2a9c1e-0000-4aaa-8bbb-00000000000a"
B_UID_B = "3f2a9c1e-0000-4aaa-8bbb-00000000000b"
B_UID_I = "3f2a9c1e-0000-4aaa-8bbb-00000000000c"
B_CID = "ab" * 32
# GPU 4's MIG pods: C (systemd driver, container "ef" * 32), D (cgroupfs), E (in its pod's own
# cgroup, no container).
B_UID_C = "3f2a9c1e-0000-4aaa-8bbb-00000000000d"
B_UID_D = "3f2a9c1e-0000-4aaa-8bbb-00000000000e"
B_UID_E = "3f2a9c1e-0000-4aaa-8bbb-00000000000f"
B_CGROUPS = {
    5000007: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
             "cri-containerd-%s.scope\n" % (B_UID_C.replace("-", "_"), "ef" * 32),
    5000008: "0::/kubepods/burstable/pod%s/%s\n" % (B_UID_D, "12" * 32),
    5000009: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod%s.slice\n"
             % B_UID_E.replace("-", "_"),
    5000010: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
             "cri-containerd-%s.scope\n" % (B_UID_C.replace("-", "_"), "ef" * 32),
    5000001: "12:memory:/kubepods/pod%s/%s\n1:name=systemd:/kubepods/pod%s/%s\n"
             % (B_UID_I, B_CID, B_UID_I, B_CID),
    5000002: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
             "cri-containerd-%s.scope\n" % (B_UID_A.replace("-", "_"), B_CID),
    5000003: "0::/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope\n"
             % (B_UID_B.replace("-", "_"), "cd" * 32),
    5000004: "0::/kubepods.slice/kubepods-pod%s.slice/crio-%s.scope\n"
             % (B_UID_B.replace("-", "_"), "cd" * 32),
    5000005: "0::/system.slice/nvidia-persistenced.service\n",
}


def fake_proc(root):
    for pid, text in B_CGROUPS.items():
        os.makedirs(os.path.join(root, str(pid)))
        with open(os.path.join(root, str(pid), "cgroup"), "w") as f:
            f.write(text)


def b_pod_metrics(r):
    g, m = r.mx.gpu, r.mx.mig
    port = r.agent.metrics_port()

    def ready():
        text = scrape(port)
        pods = [l.get("pod") for l, _ in series(text, "gpusched_gpu_pod_info")]
        uids = [l.get("pod_uid") for l, _ in series(text, "DCGM_FI_DEV_GPU_UTIL")]
        ok = {"train-a", "train-b", "infer", "mig-job"} <= set(pods) and \
            {B_UID_A, B_UID_B, B_UID_I, B_UID_C} <= set(uids)
        return text if ok else None
    text = wait_until(ready, "pod values and pod info in /metrics")
    util = series(text, "DCGM_FI_DEV_GPU_UTIL")
    fb = series(text, "DCGM_FI_DEV_FB_USED")
    for l, v in util + fb:
        assert l["Hostname"] == "node-b" and l["modelName"] == "NVIDIA H200", l
        assert l["UUID"] == g[int(l["gpu"])] and l["device"] == "nvidia" + l["gpu"], l
    # Issue 9: each pod's own measured value, not the device's copied. GPU 2 (42 %, 20480
    # MiB): pod A 20 % / 6000 MiB; pod B's two processes 15 + 5 = 20 % / 8000 + 2000 = 10000
    # MiB; the host process (2 %, 1000 MiB) and the exited one count for no pod.
    on2 = sorted((l.get("pod_uid", ""), l.get("container_id", ""), v)
                 for l, v in util if l["gpu"] == "2")
    assert on2 == [("", "", "42"), (B_UID_A, B_CID, "20"), (B_UID_B, "cd" * 32, "20")], on2
    fb2 = sorted((l.get("pod_uid", ""), v) for l, v in fb if l["gpu"] == "2")
    assert fb2 == [("", "20480"), (B_UID_A, "6000"), (B_UID_B, "10000")], fb2
    # They add up to no more than the device: 20 + 20 = 40 <= 42; 16000 <= 20480.
    assert sum(int(v) for l, v in util if l["gpu"] == "2" and "pod_uid" in l) <= 42
    # GPU 0 (cgroup v1, cgroupfs driver): infer's process, 80 % of the device's 91 %.
    on0 = sorted((l.get("pod_uid", ""), v) for l, v in util if l["gpu"] == "0")
    assert on0 == [("", "91"), (B_UID_I, "80")], on0
    # GPUs without processes of a pod have their own series only.
    g1 = [l for l, v in util if l["gpu"] in ("1", "3")]
    assert len(g1) == 2 and all("pod_uid" not in l and "pod" not in l for l in g1), g1
    # GPU 4 in MIG mode (dcgm-exporter #587: MIG pods got the whole GPU's values): each pod
    # series has its instance's GPU_I_ID and GPU_I_PROFILE and is bounded by the instance's
    # own values, never the GPU's 12 % / 8192 MiB.
    #   gi 11 (1g.18gb, GPM 35 %, 3000 MiB): C's process, no utilisation of its own, the only
    #     one there: the instance's 35 %; 2500 MiB <= 3000.
    #   gi 12 (1g.18gb, no GPM, 4000 MiB): D (10 %) and E: no utilisation series; memory
    #     1800 + 2600 = 4400 > 4000, scaled: 1800*4000/4400 = 1636.4 -> 1636,
    #     2600*4000/4400 = 2363.6 -> 2363.
    #   gi 2 (3g.71gb, GPM 9 %, 1000 MiB): C's 20 % > 9 + 5 -> 20*9/20 = 9; 1500 MiB > 1000
    #     -> 1500*1000/1500 = 1000.
    def on4(fam):
        return sorted((l.get("pod_uid", ""), l.get("container_id", ""), l.get("GPU_I_ID", ""),
                       l.get("GPU_I_PROFILE", ""), v) for l, v in fam if l["gpu"] == "4")
    # Each instance also has its own series (no pod labels): GPM utilisation where the
    # instance has it, memory used.
    assert on4(util) == [("", "", "", "", "12"), ("", "", "11", "1g.18gb", "35"),
                         ("", "", "2", "3g.71gb", "9"),
                         (B_UID_C, "ef" * 32, "11", "1g.18gb", "35"),
                         (B_UID_C, "ef" * 32, "2", "3g.71gb", "9")], on4(util)
    assert on4(fb) == [("", "", "", "", "8192"), ("", "", "11", "1g.18gb", "3000"),
                       ("", "", "12", "1g.18gb", "4000"), ("", "", "2", "3g.71gb", "1000"),
                       (B_UID_C, "ef" * 32, "11", "1g.18gb", "2500"),
                       (B_UID_C, "ef" * 32, "2", "3g.71gb", "1000"),
                       (B_UID_D, "12" * 32, "12", "1g.18gb", "1636"),
                       (B_UID_E, "", "12", "1g.18gb", "2363")], on4(fb)
    # Every GPU has exactly one series without pod labels.
    assert sorted(l["gpu"] for l, v in util if "pod_uid" not in l and "GPU_I_ID" not in l) == \
        [str(i) for i in range(5)]
    # Device-only families get no pod series at all.
    for fam in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_FREE"):
        s = series(text, fam)
        assert len(s) == 5 and all("pod_uid" not in l and "pod" not in l for l, _ in s), (fam, s)
    # Who holds which GPU, with replicas and MIG device, from kubelet's PodResources.
    info = sorted((l["gpu"], l["pod"], l["namespace"], l["container"], l.get("replica", ""),
                   l.get("GPU_I_PROFILE", "")) for l, v in series(text, "gpusched_gpu_pod_info"))
    assert info == [("0", "infer", "web", "srv", "", ""),
                    ("2", "train-a", "ml", "main", "0", ""),
                    ("2", "train-b", "ml", "main", "1,2", ""),
                    ("4", "mig-job", "ml", "main", "0", "1g.18gb")], info
    assert not [l for l, v in util if l.get("pod") == "nic-user"]
    health = {l["gpu"]: v for l, v in series(text, "gpusched_gpu_health")}
    assert health == {str(i): "1" for i in range(5)}, health
    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5) as resp:
        assert resp.status == 200
    assert r.podres.calls >= 1


def run_b(env):
    tmp = env["tmp"]
    r = RunA()
    r.pb = env["dp"]
    r.mx = Mixed(env["src"])
    r.dir = os.path.join(tmp, "b-device-plugins")
    os.mkdir(r.dir)
    pr_sock = os.path.join(tmp, "b-pod-resources.sock")
    g, m = r.mx.gpu, r.mx.mig
    r.podres = PodResources(env["pr"], pr_sock, [
        ("ml", "train-a", "main", "nvidia.com/gpu.shared", ["%s::0" % g[2]]),
        ("ml", "train-b", "main", "nvidia.com/gpu.shared", ["%s::1" % g[2], "%s::2" % g[2]]),
        ("web", "infer", "srv", "nvidia.com/gpu", [g[0]]),
        ("ml", "mig-job", "main", "nvidia.com/mig-1g.18gb.shared", ["%s::0" % m[1]]),
    ])
    r.kubelet = Kubelet(r.pb, r.dir)
    data = os.path.join(env["src"], "tests/agent/data")
    proc = os.path.join(tmp, "b-proc")
    fake_proc(proc)
    r.agent = Agent(env["bin"], ["--gpu-backend", "fake",
                                 "--fake-gpus", os.path.join(data, "mixed-node.yaml"),
                                 "--config", os.path.join(data, "mixed-config.yaml"),
                                 "--proc-root", proc,
                                 "--kubelet-dir", r.dir, "--pod-resources-socket", pr_sock,
                                 "--metrics-addr", "127.0.0.1:0", "--node-name", "node-b"], "B")
    r.plugins = {}
    try:
        for res in MIXED_RESOURCES:
            r.kubelet.watch(res)
            r.plugins[res] = Plugin(r.pb, os.path.join(r.dir, endpoint(res)))
        yield from [(f, r) for f in (b_resources, b_allocate, b_preferred, b_pod_metrics)]
    finally:
        r.kubelet.stop()
        r.podres.stop()
        r.agent.stop()


# ---- C: health, CDI, index names, failRequestsGreaterThanOne ------------------------------------

XID_AT_MS = 4000
QUIET_MS = 1500


def c_xid(r):
    g = r.mx.gpu
    shared = r.kubelet.watch("nvidia.com/gpu.shared")
    whole = r.kubelet.watch("nvidia.com/gpu")
    i0, _, first = shared.wait()
    assert all(d.health == "Healthy" for d in first.devices)
    unhealthy = {"%s::%d" % (g[2], k) for k in range(4)}

    def flipped(m):
        return {d.ID for d in m.devices if d.health == "Unhealthy"} == unhealthy
    i1, t_bad, bad = shared.wait(flipped, after=i0 + 1)
    assert len(bad.devices) == 8, bad  # the full list, not a delta
    t_open_max = r.agent.wait_line(r"resource nvidia.com/gpu: ")[0]  # backend opened before
    late = t_bad - (t_open_max + XID_AT_MS / 1000.0)
    assert t_bad >= r.agent.t_popen + XID_AT_MS / 1000.0, "Unhealthy before the XID"
    assert late <= BOUND_S, "Unhealthy %.3f s after the XID" % late
    print("     XID 94 -> Unhealthy on the stream within %.0f ms" % (max(late, 0) * 1000))
    # Recovery of a contained error (94; a reset-class XID such as 79 waits for a reset, see
    # test_agent_faults.py): after the quiet period and a probe, Healthy again.
    i2, t_good, good = shared.wait(lambda m: all(d.health == "Healthy" for d in m.devices),
                                   after=i1 + 1)
    gap = t_good - t_bad
    assert gap >= QUIET_MS / 1000.0 - 0.15, "recovered after %.3f s, before the quiet period" % gap
    assert gap <= QUIET_MS / 1000.0 + BOUND_S, "recovered %.3f s after Unhealthy" % gap
    print("     recovered %.0f ms after Unhealthy (quiet period %d ms)" % (gap * 1000, QUIET_MS))
    # Other resources' streams never saw a change (the ignored XID 13 on GPU 0 included).
    assert len(whole.msgs) == 1, whole.msgs
    for res in ("nvidia.com/mig-1g.18gb", "nvidia.com/mig-3g.71gb"):
        assert len(r.kubelet.watch(res).msgs) == 1
    log = r.agent.text()
    assert "XID 13 (ignored)" in log and "XID 94" in log, log
    assert re.search(r"health: GPU 2: XID 94: Healthy -> Unhealthy$", log, re.M), log
    # Counted and exported (the exporter's snapshot follows within one refresh).
    port = r.agent.metrics_port()

    def counted():
        text = scrape(port)
        trans = {(l["gpu"], l["to"]): v for l, v in
                 series(text, "gpusched_gpu_health_transitions_total")}
        xid = {(l["gpu"], l["xid"]): v for l, v in series(text, "gpusched_gpu_xid_total")}
        return (trans.get(("2", "unhealthy")) == "1" and trans.get(("2", "healthy")) == "1" and
                trans.get(("0", "unhealthy")) == "0" and xid.get(("2", "94")) == "1" and
                xid.get(("0", "13")) == "1")
    wait_until(counted, "health transitions and XIDs in /metrics")


def c_cdi_index_and_fail(r):
    g, m = r.mx.gpu, r.mx.mig
    shared = Plugin(r.pb, os.path.join(r.dir, endpoint("nvidia.com/gpu.shared")))
    one = shared.allocate(["%s::0" % g[3]]).container_responses[0]
    assert dict(one.envs)["NVIDIA_VISIBLE_DEVICES"] == "3"
    assert [d.name for d in one.cdi_devices] == ["nvidia.com/gpu=3"]
    d = expect_rpc_error(lambda: shared.allocate(["%s::0" % g[3], "%s::1" % g[3]]),
                         grpc.StatusCode.INVALID_ARGUMENT, "two replicas")
    assert "failRequestsGreaterThanOne" in d, d
    mig = Plugin(r.pb, os.path.join(r.dir, endpoint("nvidia.com/mig-3g.71gb")))
    c = mig.allocate([m[2]]).container_responses[0]
    assert dict(c.envs)["NVIDIA_VISIBLE_DEVICES"] == "4:2"
    assert [d.name for d in c.cdi_devices] == ["nvidia.com/gpu=4:2"]
    whole = Plugin(r.pb, os.path.join(r.dir, endpoint("nvidia.com/gpu")))
    c = whole.allocate([g[1], g[0]]).container_responses[0]
    assert dict(c.envs)["NVIDIA_VISIBLE_DEVICES"] == "1,0"
    assert [d.name for d in c.cdi_devices] == ["nvidia.com/gpu=1", "nvidia.com/gpu=0"]
    for p in (shared, mig, whole):
        p.close()


def run_c(env):
    tmp = env["tmp"]
    r = RunA()
    r.pb = env["dp"]
    r.mx = Mixed(env["src"])
    r.dir = os.path.join(tmp, "c-device-plugins")
    os.mkdir(r.dir)
    data = os.path.join(env["src"], "tests/agent/data")
    node = os.path.join(tmp, "c-node.yaml")
    with open(os.path.join(data, "mixed-node.yaml")) as f, open(node, "w") as out:
        out.write(f.read() + "script:\n"
                  "  - {t_ms: %d, gpu: 2, xid: 94}\n"
                  "  - {t_ms: %d, gpu: 0, xid: 13}\n" % (XID_AT_MS, XID_AT_MS))
    cfg = os.path.join(tmp, "c-config.yaml")
    with open(os.path.join(data, "mixed-config.yaml")) as f, open(cfg, "w") as out:
        text = f.read().replace("flags:\n  migStrategy: mixed\n",
                                "flags:\n  migStrategy: mixed\n  plugin:\n"
                                "    deviceListStrategy: [envvar, cdi-cri]\n"
                                "    deviceIDStrategy: index\n")
        text = text.replace("    renameByDefault: true\n",
                            "    renameByDefault: true\n    failRequestsGreaterThanOne: true\n")
        out.write(text + "health:\n  recoveryQuietPeriod: %dms\n  probeInterval: 200ms\n"
                  % QUIET_MS)
    r.kubelet = Kubelet(r.pb, r.dir)
    r.agent = Agent(env["bin"], ["--gpu-backend", "fake", "--fake-gpus", node, "--config", cfg,
                                 "--kubelet-dir", r.dir, "--pod-resources-socket", "",
                                 "--metrics-addr", "127.0.0.1:0", "--node-name", "node-c"], "C")
    try:
        for res in MIXED_RESOURCES:
            r.kubelet.watch(res)
        yield from [(f, r) for f in (c_xid, c_cdi_index_and_fail)]
    finally:
        r.kubelet.stop()
        r.agent.stop()


# ---- M: seven MIG instances of one profile on one GPU --------------------------------------------

def mig_node(src):
    node = yaml.safe_load(open(os.path.join(src, "tests/agent/data/mig-node.yaml")))
    return ([g["uuid"] for g in node["gpus"]],
            [(m["uuid"], m["start"]) for m in node["gpus"][1]["mig"]["instances"]])


def m_mig_devices(r):
    """One profile, seven devices told apart only by their start: what an assignment of a MIG
    instance names (tests/k8s/agent_e2e.py follows one through the real API server; without a
    Kubernetes side here there is no assignment, so no limits and the packing's choice)."""
    regs = r.kubelet.registrations()
    assert sorted(q.resource_name for _, q in regs) == ["nvidia.com/gpu",
                                                        "nvidia.com/mig-1g.18gb"], regs
    _, _, lst = r.kubelet.watch("nvidia.com/mig-1g.18gb").wait()
    ids = [u for u, _ in r.migs]
    assert [(i, t) for i, h, t in devices_of(lst)] == [(u, [0]) for u in ids], devices_of(lst)
    assert [s for _, s in r.migs] == list(range(7))
    mig = r.plugins["nvidia.com/mig-1g.18gb"]
    # Packing without an assignment: the first devices of the GPU, whatever the offer's order.
    assert mig.preferred((ids[::-1], [], 2)) == [[ids[0], ids[1]]]
    # Two instances of one card in one container: both visible in request order, the GPU's
    # device node once, no memory or SM limit (a MIG instance has its own memory and SMs).
    c = mig.allocate([ids[5], ids[2]]).container_responses[0]
    check_container(c, "%s,%s" % (ids[5], ids[2]), ["/dev/nvidia1"],
                    {"gpusched.io/resource": "nvidia.com/mig-1g.18gb",
                     "gpusched.io/devices": "%s,%s" % (ids[5], ids[2]),
                     "gpusched.io/gpus": "%s,%s" % (ids[5], ids[2])})
    # The whole GPU beside it is its own resource; without an assignment no limits either.
    c = r.plugins["nvidia.com/gpu"].allocate([r.gpus[0]]).container_responses[0]
    assert dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": r.gpus[0]}, dict(c.envs)


def run_m(env):
    tmp = env["tmp"]
    r = RunA()
    r.pb = env["dp"]
    r.gpus, r.migs = mig_node(env["src"])
    r.dir = os.path.join(tmp, "m-device-plugins")
    os.mkdir(r.dir)
    cfg = os.path.join(tmp, "m-config.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nflags:\n  migStrategy: mixed\n")
    r.kubelet = Kubelet(r.pb, r.dir)
    r.agent = Agent(env["bin"], ["--gpu-backend", "fake", "--fake-gpus",
                                 os.path.join(env["src"], "tests/agent/data/mig-node.yaml"),
                                 "--config", cfg, "--kubelet-dir", r.dir,
                                 "--pod-resources-socket", "", "--metrics-addr", "",
                                 "--node-name", "node-m"], "M")
    r.plugins = {}
    try:
        for res in ("nvidia.com/gpu", "nvidia.com/mig-1g.18gb"):
            r.kubelet.watch(res)
            r.plugins[res] = Plugin(r.pb, os.path.join(r.dir, endpoint(res)))
        yield (m_mig_devices, r)
    finally:
        for p in r.plugins.values():
            p.close()
        r.kubelet.stop()
        r.agent.stop()


# ---- R: MIG re-partitioned while the agent runs (issue 9) ---------------------------------------

REDISCOVER_S = 1.0  # --rediscover-s of run R
SETTLE_S = 0.2      # the agent's pause between a withdrawal and the new lists (WITHDRAW_SETTLE_MS)
SLACK_S = 0.3       # loop rounds and a loaded machine


def rep_node(src):
    node = yaml.safe_load(open(os.path.join(src, "tests/agent/data/mig-repartition.yaml")))
    gpus = [g["uuid"] for g in node["gpus"]]
    steps = [(s["t_ms"] / 1000.0, [m["uuid"] for m in s["mig"].get("instances", [])])
             for s in node["script"]]
    return gpus, steps


def ids_of(msg):
    return [d.ID for d in msg.devices]


def timeline(kubelet):
    """Every list any stream received, in arrival order: (time, resource, [(id, health)])."""
    with kubelet.lock:
        watches = list(kubelet.watches.items())
    ev = []
    for res, w in watches:
        with w.cv:
            ev += [(t, res, [(d.ID, d.health) for d in m.devices]) for t, m in w.msgs]
    return sorted(ev)


def never_twice(events, gpu1, gpu1_migs):
    """(d): after every message kubelet received, the lists in force hold no device ID twice,
    and GPU 1 is never Healthy whole (nvidia.com/gpu) while any of its MIG devices is Healthy
    (a device a container holds after the hardware dropped it stays listed, Unhealthy)."""
    cur = {}
    for t, res, devs in events:
        cur[res] = devs
        where = {}
        for rr, lst in cur.items():
            for i, _ in lst:
                assert i not in where, "%s under %s and %s at %.3f" % (i, where[i], rr, t)
                where[i] = rr
        healthy = {i for lst in cur.values() for i, h in lst if h == "Healthy"}
        migs = sorted(i for i in healthy if i in gpu1_migs)
        assert not (gpu1 in healthy and migs), "GPU 1 whole and as %s at %.3f: %s" % (
            migs, t, cur)


def r_repartition(r):
    """GPU 1 goes MIG on, re-partitioned, MIG off (tests/agent/data/mig-repartition.yaml), the
    agent rediscovering every second, and a pod (PodResources stand-in) holding M111 from the
    start. Expected lists, worked out from the file (G0/G1 the GPUs; M110..M114 the MIG UUIDs
    ending so; migStrategy mixed; U = Unhealthy, else Healthy):
      start            nvidia.com/gpu [G0, G1]
      (a) t=2.0 s MIG on: 1g@0 M110, 1g@1 M111, 3g@4 M112
                       nvidia.com/gpu [G0] (withdrawal: G1 leaves first), then, new,
                       nvidia.com/mig-1g.18gb [M110, M111], nvidia.com/mig-3g.71gb [M112]
      (b) t=4.5 s 2g@0 M113, 1g@2 M114, 3g@4 M112 (kept); M111 is gone but the pod holds it
                       mig-1g.18gb [M111 U] (M110 withdrawn), then [M114, M111 U];
                       new mig-2g.35gb [M113]; mig-3g.71gb and nvidia.com/gpu send nothing
      (c) t=7.0 s MIG off
                       mig-1g.18gb [M111 U], mig-2g.35gb [], mig-3g.71gb [] (withdrawn: sockets
                       stay, kubelet counts 0), then nvidia.com/gpu [G0, G1]
      the pod ends     mig-1g.18gb [] at the next List (1 s) and rediscovery (1 s)
    Each resource registers once. Times are measured from the agent's start, which is before the
    backend's clock starts, so a measured delay is an upper bound of the real one."""
    g0, g1 = r.gpus
    (ta, mig_a), (tb, mig_b), (tc, _) = r.steps
    m110, m111, m112 = mig_a
    m113, m114, m112b = mig_b
    assert m112b == m112
    t0 = r.agent.t_popen
    k = r.kubelet
    gpu = k.watch("nvidia.com/gpu")
    _, _, first = gpu.wait()
    assert ids_of(first) == [g0, g1], ids_of(first)
    # (a) MIG enabled on GPU 1.
    i_wd, t_wd, _ = gpu.wait(lambda m: ids_of(m) == [g0], timeout_s=ta + 10)
    assert t0 + ta < t_wd <= t0 + ta + REDISCOVER_S + SLACK_S, (t_wd - t0, ta)
    w1 = k.watch("nvidia.com/mig-1g.18gb")
    w3 = k.watch("nvidia.com/mig-3g.71gb")
    _, t1, l1 = w1.wait()
    _, t3, l3 = w3.wait()
    assert ids_of(l1) == [m110, m111] and ids_of(l3) == [m112], (ids_of(l1), ids_of(l3))
    assert all(d.health == "Healthy" and [n.ID for n in d.topology.nodes] == [1]
               for d in list(l1.devices) + list(l3.devices))
    for t in (t1, t3):
        assert t_wd < t <= t0 + ta + REDISCOVER_S + SETTLE_S + SLACK_S + 1.0, (t - t0, t_wd - t0)
    r.agent.wait_line(r"rediscovery: GPU 1 \(%s\): MIG on, 3 instance\(s\): 1g.18gb 1g.18gb "
                      r"3g.71gb, was MIG off" % g1)
    plug = Plugin(r.pb, os.path.join(r.dir, endpoint("nvidia.com/gpu")))
    p1 = Plugin(r.pb, os.path.join(r.dir, endpoint("nvidia.com/mig-1g.18gb")))
    r.plugins += [plug, p1]
    expect_rpc_error(lambda: plug.allocate([g1]), grpc.StatusCode.INVALID_ARGUMENT,
                     "GPU 1 whole while in MIG mode")
    c = p1.allocate([m111]).container_responses[0]
    check_container(c, m111, ["/dev/nvidia1"],
                    {"gpusched.io/resource": "nvidia.com/mig-1g.18gb",
                     "gpusched.io/devices": m111, "gpusched.io/gpus": m111})
    # (b) re-partitioned: 1g.18gb loses both instances (M111 held: kept Unhealthy) and gains
    # one, 2g.35gb is new.
    i_e, t_e, _ = w1.wait(lambda m: ids_of(m) == [m111], after=1, timeout_s=tb + 10)
    assert i_e == 1 and t0 + tb < t_e <= t0 + tb + REDISCOVER_S + SLACK_S, (i_e, t_e - t0)
    i_n, t_n, _ = w1.wait(lambda m: ids_of(m) == [m114, m111], after=2)
    assert i_n == 2 and t_n - t_e >= SETTLE_S - 0.05, (i_n, t_n - t_e)
    r.agent.wait_line(r"rediscovery: warning: %s \(nvidia.com/mig-1g.18gb\) is held by pod "
                      r"ml/holder but GPU 1 no longer has it" % m111)
    why = expect_rpc_error(lambda: p1.allocate([m111]), grpc.StatusCode.FAILED_PRECONDITION,
                           "a held device that the GPU no longer has")
    assert "no longer exists" in why, why
    w2 = k.watch("nvidia.com/mig-2g.35gb")
    _, t2, l2 = w2.wait()
    assert ids_of(l2) == [m113] and t2 > t_e, (ids_of(l2), t2 - t_e)
    # (c) MIG disabled: every MIG resource sends an empty list, then GPU 1 is whole again.
    _, t_back, back = gpu.wait(lambda m: ids_of(m) == [g0, g1], after=i_wd + 1,
                               timeout_s=tc + 10)
    assert t0 + tc < t_back <= t0 + tc + REDISCOVER_S + SETTLE_S + SLACK_S, t_back - t0
    empties = []
    for w, after, want in ((w1, 3, [m111]), (w2, 1, []), (w3, 1, [])):
        i, t, _ = w.wait(lambda m, want=want: ids_of(m) == want, after=after)
        assert i == after, (w.resource, i, [ids_of(m) for _, m in w.msgs])
        empties.append(t)
    assert max(empties) < t_back, (empties, t_back)
    assert all(d.health == "Healthy" for d in back.devices)
    c = plug.allocate([g1]).container_responses[0]
    assert dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": g1}, dict(c.envs)
    expect_rpc_error(lambda: p1.allocate([m114]), grpc.StatusCode.INVALID_ARGUMENT,
                     "a MIG device after MIG was disabled")
    # The pod ends: M111 goes at the next List and rediscovery.
    r.podres.pods = []
    t_end = time.monotonic()
    _, t_gone, _ = w1.wait(lambda m: ids_of(m) == [], after=4)
    assert t_gone - t_end <= 1.0 + REDISCOVER_S + SLACK_S, t_gone - t_end
    time.sleep(0.5)  # nothing more may come
    H, U = "Healthy", "Unhealthy"
    got = {res: [[(d.ID, d.health) for d in m.devices] for _, m in w.msgs] for res, w in (
        ("nvidia.com/gpu", gpu), ("nvidia.com/mig-1g.18gb", w1),
        ("nvidia.com/mig-2g.35gb", w2), ("nvidia.com/mig-3g.71gb", w3))}
    assert got == {"nvidia.com/gpu": [[(g0, H), (g1, H)], [(g0, H)], [(g0, H), (g1, H)]],
                   "nvidia.com/mig-1g.18gb": [[(m110, H), (m111, H)], [(m111, U)],
                                              [(m114, H), (m111, U)], [(m111, U)], []],
                   "nvidia.com/mig-2g.35gb": [[(m113, H)], []],
                   "nvidia.com/mig-3g.71gb": [[(m112, H)], []]}, got
    # One Register per resource; withdrawn resources keep their sockets.
    assert sorted(q.resource_name for _, q in k.registrations()) == [
        "nvidia.com/gpu", "nvidia.com/mig-1g.18gb", "nvidia.com/mig-2g.35gb",
        "nvidia.com/mig-3g.71gb"], k.registrations()
    for res in ("nvidia.com/mig-1g.18gb", "nvidia.com/mig-2g.35gb", "nvidia.com/mig-3g.71gb"):
        assert stat_is_socket(os.path.join(r.dir, endpoint(res))), res
    # (d) over everything kubelet saw.
    never_twice(timeline(k), g1, set(mig_a) | set(mig_b))


def stat_is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def run_r(env):
    tmp = env["tmp"]
    r = RunA()
    r.pb = env["dp"]
    r.gpus, r.steps = rep_node(env["src"])
    r.dir = os.path.join(tmp, "r-device-plugins")
    os.mkdir(r.dir)
    cfg = os.path.join(tmp, "r-config.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nflags:\n  migStrategy: mixed\n")
    pr_sock = os.path.join(tmp, "r-pod-resources.sock")
    m111 = r.steps[0][1][1]
    r.podres = PodResources(env["pr"], pr_sock, [
        ("ml", "holder", "main", "nvidia.com/mig-1g.18gb", [m111])])
    r.kubelet = Kubelet(r.pb, r.dir)
    r.agent = Agent(env["bin"], ["--gpu-backend", "fake", "--fake-gpus",
                                 os.path.join(env["src"], "tests/agent/data/mig-repartition.yaml"),
                                 "--config", cfg, "--kubelet-dir", r.dir,
                                 "--pod-resources-socket", pr_sock, "--metrics-addr", "127.0.0.1:0",
                                 "--node-name", "node-r", "--rediscover-s", str(REDISCOVER_S)],
                    "R")
    r.plugins = []
    try:
        yield (r_repartition, r)
    finally:
        for p in r.plugins:
            p.close()
        r.kubelet.stop()
        r.podres.stop()
        r.agent.stop()


# ---- command line -------------------------------------------------------------------------------

def run_cli(env):
    yield (cli_checks, env)


def cli_checks(env):
    tmp, binary, src = env["tmp"], env["bin"], env["src"]
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "      - name: nvidia.com/gpu\n        replicas: 1\n")
    fake = os.path.join(src, "deploy/fake-gpus.yaml")
    out = subprocess.run([binary, "agent", "--gpu-backend", "fake", "--fake-gpus", fake,
                          "--config", bad], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2, out
    assert "%s:6:19: field 'replicas': sharing.timeSlicing.resources[0].replicas: 1 is out of " \
        "range 2..256" % bad in out.stderr, out.stderr
    with open(bad, "w") as f:
        f.write("version: v1\nflags:\n  migStrategy: mixed\n  bogus: 1\n")
    out = subprocess.run([binary, "agent", "labels", "--gpu-backend", "fake:" + fake,
                          "--config", bad], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "%s:4:3: field 'bogus': flags: unknown key 'bogus'" % bad \
        in out.stderr, out
    out = subprocess.run([binary, "agent", "--bogus"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2 and "unknown option '--bogus'" in out.stderr, out
    out = subprocess.run([binary, "agent", "--help"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0 and "--kubelet-dir" in out.stdout, out
    data = os.path.join(src, "tests/agent/data")
    out = subprocess.run([binary, "agent", "labels", "--gpu-backend", "fake",
                          "--fake-gpus", os.path.join(data, "mixed-node.yaml"),
                          "--config", os.path.join(data, "mixed-config.yaml")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out
    labels = dict(l.split("=", 1) for l in out.stdout.splitlines())
    for k, v in (("nvidia.com/gpu.count", "5"), ("nvidia.com/gpu.replicas", "4"),
                 ("nvidia.com/mig.strategy", "mixed"), ("nvidia.com/mig-1g.18gb.count", "2"),
                 ("nvidia.com/gpu.product", "NVIDIA-H200")):
        assert labels.get(k) == v, (k, labels)
    # The ConfigMap example of deploy/ is a valid configuration.
    cm = yaml.safe_load(open(os.path.join(src, "deploy/agent-config.yaml")))
    example = os.path.join(tmp, "example.yaml")
    with open(example, "w") as f:
        f.write(cm["data"]["config.yaml"])
    out = subprocess.run([binary, "agent", "labels", "--gpu-backend", "fake:" + fake,
                          "--config", example], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "nvidia.com/mig.strategy=mixed" in out.stdout, out
    ds = [d for d in yaml.safe_load_all(open(os.path.join(src, "deploy/daemonset.yaml")))
          if d["kind"] == "DaemonSet"][0]
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    assert ctr["args"] == ["agent", "--config", "/etc/gpusched/config.yaml"], ctr
    # A plugin directory whose parent does not exist is a clear runtime error (one whose
    # parent exists is made: test_agent_faults.py's small_things).
    out = subprocess.run([binary, "agent", "--gpu-backend", "fake", "--fake-gpus", fake,
                          "--kubelet-dir", os.path.join(tmp, "absent", "dp"),
                          "--metrics-addr", ""],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "absent" in out.stderr, out
    kube_checks(tmp, binary, fake)


def kube_checks(tmp, binary, fake):
    """The Kubernetes side's command line: none without a configuration, a bad --kubeconfig
    stops the agent with the file named, and an API server that does not answer costs nothing
    but log lines (the device plugin serves; SIGTERM still ends it within seconds)."""
    missing = os.path.join(tmp, "missing.kubeconfig")
    out = subprocess.run([binary, "agent", "--gpu-backend", "fake:" + fake, "--metrics-addr", "",
                          "--kubelet-dir", tmp, "--kubeconfig", missing],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "gpusched agent: %s: cannot open" % missing in out.stderr, out
    dpdir = os.path.join(tmp, "kube-dp")
    os.mkdir(dpdir)
    kc = os.path.join(tmp, "dead.kubeconfig")
    with open(kc, "w") as f:  # port 1 on loopback: connection refused at once
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n"
                "  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\n"
                "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n"
                "  context: {cluster: k, user: u}\n")
    for args, want in (([], r"kubernetes: no configuration \(--kubeconfig, in-cluster\): the "
                            r"GPU inventory is not published"),
                       (["--kubeconfig", kc, "--node-name", "n1"],
                        r"kubernetes: list /api/v1/nodes.*(refused|connect)")):
        old_env = os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        try:
            a = Agent(binary, ["--gpu-backend", "fake:" + fake, "--metrics-addr", "",
                               "--pod-resources-socket", "", "--kubelet-dir", dpdir] + args,
                      "kube")
        finally:
            if old_env is not None:
                os.environ["KUBERNETES_SERVICE_HOST"] = old_env
        try:
            a.wait_line(want)
            a.wait_line(r"nvidia.com/gpu: serving 8 devices")
        finally:
            t0 = time.monotonic()
            a.stop()
            assert time.monotonic() - t0 < 8, "SIGTERM took %.1f s" % (time.monotonic() - t0)


# ---- driver -------------------------------------------------------------------------------------

def load_protos(proto_dir, tmp):
    out = os.path.join(tmp, "py")
    os.makedirs(out)
    subprocess.run(["/usr/bin/protoc", "--python_out=" + out, "-I", proto_dir,
                    "deviceplugin/v1beta1/api.proto", "podresources/v1/api.proto"], check=True)
    sys.path.insert(0, out)
    from deviceplugin.v1beta1 import api_pb2 as dp  # noqa: E402
    from podresources.v1 import api_pb2 as pr  # noqa: E402
    return dp, pr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--only", default="abcmrx",
                    help="runs to do: a, b, c, m, r, x (command line)")
    args = ap.parse_args()
    failures = 0
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gsagent-") as tmp:
        dp, pr = load_protos(os.path.join(args.source_dir, "proto"), tmp)
        env = {"tmp": tmp, "bin": args.gpusched, "src": args.source_dir, "dp": dp, "pr": pr}
        runs = {"a": run_a, "b": run_b, "c": run_c, "m": run_m, "r": run_r, "x": run_cli}
        for key in args.only:
            gen = runs[key](env)
            try:
                for fn, ctx in gen:
                    t0 = time.monotonic()
                    try:
                        fn(ctx)
                        print("ok   %-24s %.2fs" % (fn.__name__, time.monotonic() - t0),
                              flush=True)
                    except Exception:  # noqa: BLE001 - report and go on
                        failures += 1
                        print("FAIL %s" % fn.__name__, flush=True)
                        traceback.print_exc()
                        sys.stdout.flush()
            except Exception:  # noqa: BLE001 - a run's setup or teardown failed
                failures += 1
                print("FAIL run %s" % key, flush=True)
                traceback.print_exc()
            finally:
                gen.close()
    print("%d failure(s), %.1f s" % (failures, time.monotonic() - t_all))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
