#!/usr/bin/python3
"""Real-peer test of gsrpc against Python's grpcio (Debian's python3-grpcio; run it with
/usr/bin/python3).

Part 1 drives tests/rpc/echo_server (our server) with a grpcio client: unary round trips,
4 MiB and 1 MiB streamed messages (flow control), 100 concurrent calls, UNIMPLEMENTED for an
unknown method, status/message round trip, the device plugin methods with messages generated
by /usr/bin/protoc from our .proto files, cancellation of a stream, and raw sockets sending
garbage while another client keeps its stream and the next client is served.

Part 2 runs tests/rpc/probe_client (our client) against a grpcio server playing kubelet:
Registration/Register, PodResourcesLister/List, echo, a 1 MiB reply, a server stream, an error
status with a message, an unknown method, a deadline, and a missing socket.

Finally the echo server gets SIGTERM and must exit 0 (under ASan: no leak, no error).
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent import futures

import grpc

MIB = 1024 * 1024


def pattern(n, seed):
    """Byte i is (31 i + seed) mod 256; the period is 256 because 31 is odd."""
    block = bytes((31 * i + seed) & 0xFF for i in range(256))
    return (block * (n // 256 + 1))[:n]


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return "%08x" % h


def count_size(count, size):
    return count.to_bytes(4, "big") + size.to_bytes(4, "big")


class Peer:
    """Our echo server and a grpcio channel to it."""

    def __init__(self, server_bin, sock):
        self.sock = sock
        self.proc = subprocess.Popen([server_bin, sock], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("echo_server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.channel = grpc.insecure_channel("unix:" + sock)

    def unary(self, method):
        return self.channel.unary_unary(method)

    def stream(self, method):
        return self.channel.unary_stream(method)

    def stats(self):
        text = self.unary("/gs.test.Echo/Stats")(b"", timeout=5).decode()
        return dict(kv.split("=") for kv in text.split())


def wait_until(pred, what, timeout_s=5.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


# ---- part 1: grpcio client -> our server -------------------------------------------------------

def t_unary_roundtrip(p, pb):
    echo = p.unary("/gs.test.Echo/Unary")
    for n in (0, 1, 100 * 1024):
        data = pattern(n, 5)
        assert echo(data, timeout=5) == data, n


def t_large_streamed_messages(p, pb):
    # 1 MiB messages pushed from the server's loop, and one of exactly 4 MiB (the limit).
    got = list(p.stream("/gs.test.Echo/Stream")(count_size(3, MIB), timeout=10))
    assert [len(m) for m in got] == [MIB] * 3
    for k, m in enumerate(got):
        assert m == pattern(MIB, k), k
    got = list(p.stream("/gs.test.Echo/Stream")(count_size(1, 4 * MIB), timeout=10))
    assert len(got) == 1 and got[0] == pattern(4 * MIB, 0)


def t_100_concurrent_calls(p, pb):
    echo = p.unary("/gs.test.Echo/Unary")
    calls = [echo.future(b"call-%d" % i, timeout=10) for i in range(100)]
    for i, f in enumerate(calls):
        assert f.result() == b"call-%d" % i
    # and 100 concurrent streams of 10 small messages
    st = p.stream("/gs.test.Echo/Stream")
    streams = [st(count_size(10, 100 + i), timeout=10) for i in range(100)]
    for i, s in enumerate(streams):
        got = list(s)
        assert len(got) == 10 and all(len(m) == 100 + i for m in got), i


def t_unknown_method(p, pb):
    try:
        p.unary("/gs.test.Echo/Missing")(b"x", timeout=5)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e.code()
        assert "/gs.test.Echo/Missing" in e.details(), e.details()
    else:
        raise AssertionError("expected UNIMPLEMENTED")


def t_status_and_message(p, pb):
    msg = "bad \u00fcn\u00efcode 100% \"quoted\""
    try:
        p.unary("/gs.test.Echo/Fail")(bytes([3]) + msg.encode(), timeout=5)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
        assert e.details() == msg, e.details()
    else:
        raise AssertionError("expected INVALID_ARGUMENT")


def t_oversize_request(p, pb):
    try:
        p.unary("/gs.test.Echo/Unary")(bytes(4 * MIB + 1), timeout=10)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.code()
    else:
        raise AssertionError("expected RESOURCE_EXHAUSTED")


def t_device_plugin(p, pb):
    dp = pb["dp"]
    opts = dp.DevicePluginOptions.FromString(
        p.unary("/v1beta1.DevicePlugin/GetDevicePluginOptions")(dp.Empty().SerializeToString(),
                                                               timeout=5))
    assert opts.get_preferred_allocation_available and not opts.pre_start_required

    req = dp.AllocateRequest(container_requests=[
        dp.ContainerAllocateRequest(devices_ids=["GPU-1", "GPU-2"]),
        dp.ContainerAllocateRequest(devices_ids=["GPU-5"])])
    resp = dp.AllocateResponse.FromString(
        p.unary("/v1beta1.DevicePlugin/Allocate")(req.SerializeToString(), timeout=5))
    assert [dict(c.envs) for c in resp.container_responses] == [
        {"NVIDIA_VISIBLE_DEVICES": "GPU-1,GPU-2"}, {"NVIDIA_VISIBLE_DEVICES": "GPU-5"}]

    pref = dp.PreferredAllocationRequest(container_requests=[
        dp.ContainerPreferredAllocationRequest(available_deviceIDs=["GPU-0", "GPU-1", "GPU-2"],
                                               must_include_deviceIDs=["GPU-2"],
                                               allocation_size=2)])
    presp = dp.PreferredAllocationResponse.FromString(
        p.unary("/v1beta1.DevicePlugin/GetPreferredAllocation")(pref.SerializeToString(),
                                                               timeout=5))
    assert list(presp.container_responses[0].deviceIDs) == ["GPU-2", "GPU-0"]

    p.unary("/v1beta1.DevicePlugin/PreStartContainer")(
        dp.PreStartContainerRequest(devices_ids=["GPU-0"]).SerializeToString(), timeout=5)

    try:
        p.unary("/v1beta1.DevicePlugin/Allocate")(b"\x0a\x30\xff", timeout=5)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
    else:
        raise AssertionError("garbage AllocateRequest accepted")

    before = p.stats()
    law = p.stream("/v1beta1.DevicePlugin/ListAndWatch")(dp.Empty().SerializeToString())
    first = dp.ListAndWatchResponse.FromString(next(law))
    assert [d.ID for d in first.devices] == ["GPU-%d" % i for i in range(8)]
    assert all(d.health == "Healthy" for d in first.devices)
    assert [d.topology.nodes[0].ID for d in first.devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    law.cancel()
    wait_until(lambda: int(p.stats()["cancelled"]) > int(before["cancelled"]),
               "server to see ListAndWatch cancelled")


def t_cancel_stream(p, pb):
    # Counters only grow, so earlier tests' streams closing late cannot confuse this one.
    before = p.stats()
    call = p.stream("/gs.test.Echo/Stream")(count_size(0xFFFFFFFF, 1000))
    assert len(next(call)) == 1000
    assert int(p.stats()["opened"]) == int(before["opened"]) + 1
    call.cancel()
    wait_until(lambda: int(p.stats()["cancelled"]) == int(before["cancelled"]) + 1,
               "server to see the cancellation")
    wait_until(lambda: int(p.stats()["open"]) == 0, "no stream left open")


def raw_garbage(sock, data):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(sock)
    s.sendall(data)
    # The server may answer with SETTINGS and GOAWAY; then it must close the connection.
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
    s.close()


def t_garbage_connections(p, pb):
    dp = pb["dp"]
    before = int(p.stats()["failed"])
    held = p.stream("/v1beta1.DevicePlugin/ListAndWatch")(dp.Empty().SerializeToString())
    next(held)
    raw_garbage(p.sock, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    raw_garbage(p.sock, os.urandom(4096))
    raw_garbage(p.sock, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x08\x07\x00\x00\x00\x00\x01"
                + bytes(8))  # GOAWAY on a stream: PROTOCOL_ERROR
    assert int(p.stats()["failed"]) == before + 3, p.stats()
    # The channel holding the stream is unharmed, and a new client is served.
    assert p.unary("/gs.test.Echo/Unary")(b"same channel", timeout=5) == b"same channel"
    with grpc.insecure_channel("unix:" + p.sock) as ch2:
        assert ch2.unary_unary("/gs.test.Echo/Unary")(b"next client", timeout=5) == b"next client"
    held.cancel()


# ---- part 2: our client -> grpcio server ------------------------------------------------------

class Kubelet(grpc.GenericRpcHandler):
    """grpcio server playing kubelet's Registration and PodResources services."""

    def __init__(self, pb):
        self.pb = pb
        self.registered = []
        self.metadata = []

    def service(self, details):
        m = details.method
        u = grpc.unary_unary_rpc_method_handler
        table = {
            "/v1beta1.Registration/Register": u(self.register),
            "/v1.PodResourcesLister/List": u(self.list),
            "/gs.test.Peer/Echo": u(lambda req, ctx: req),
            "/gs.test.Peer/Big": u(lambda req, ctx: pattern(MIB, 9)),
            "/gs.test.Peer/Slow": u(self.slow),
            "/gs.test.Peer/Fail": u(self.fail),
            "/gs.test.Peer/Stream": grpc.unary_stream_rpc_method_handler(self.stream),
        }
        return table.get(m)

    def register(self, req, ctx):
        dp = self.pb["dp"]
        r = dp.RegisterRequest.FromString(req)
        self.metadata.append(dict(ctx.invocation_metadata()))
        if r.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      "unsupported version \u201c%s\u201d" % r.version)
        self.registered.append(r)
        return dp.Empty().SerializeToString()

    def list(self, req, ctx):
        pr = self.pb["pr"]
        pr.ListPodResourcesRequest.FromString(req)
        resp = pr.ListPodResourcesResponse(pod_resources=[
            pr.PodResources(name="train-0", namespace="ml", containers=[
                pr.ContainerResources(name="main", devices=[
                    pr.ContainerDevices(resource_name="nvidia.com/gpu",
                                        device_ids=["GPU-0", "GPU-1"])])]),
            pr.PodResources(name="infer", namespace="web", containers=[
                pr.ContainerResources(name="srv", cpu_ids=[1, 2], devices=[
                    pr.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=["GPU-3"])])]),
        ])
        return resp.SerializeToString()

    def slow(self, req, ctx):
        time.sleep(1.0)
        return req

    def fail(self, req, ctx):
        ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, "not now: 50% \u00fcber\nline")

    def stream(self, req, ctx):
        for k in range(3):
            yield pattern(300 * 1024, k)


def probe(client_bin, *args):
    out = subprocess.run([client_bin] + [str(a) for a in args], capture_output=True, text=True,
                         timeout=20)
    if out.returncode != 0:
        raise AssertionError("probe_client %s failed: %s" % (args, out.stderr))
    lines = out.stdout.splitlines()
    res = {"msgs": [], "lines": lines}
    for i, line in enumerate(lines):
        if line.startswith("msg "):
            kv = dict(x.split("=") for x in line[4:].split())
            res["msgs"].append((int(kv["len"]), kv["fnv"]))
        elif line.startswith("status="):
            res["status"] = int(line[7:])
            res["message"] = "\n".join(lines[i + 1:])[len("message="):]
            break
    return res


def t_client_against_grpcio(client_bin, pb, tmp):
    sock = os.path.join(tmp, "kubelet.sock")
    handler = Kubelet(pb)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + sock)
    server.start()
    try:
        r = probe(client_bin, "register", sock, "v1beta1", "gpusched.sock", "example.com/gpu", 5000)
        assert r["status"] == 0, r
        reg = handler.registered[-1]
        assert (reg.version, reg.endpoint, reg.resource_name) == (
            "v1beta1", "gpusched.sock", "example.com/gpu")
        assert reg.options.get_preferred_allocation_available
        md = handler.metadata[-1]
        assert md.get("user-agent", "").startswith("gpusched-grpc/"), md

        r = probe(client_bin, "register", sock, "v0", "x.sock", "example.com/gpu", 5000)
        assert r["status"] == 3 and r["message"] == "unsupported version \u201cv0\u201d", r

        r = probe(client_bin, "list", sock, 5000)
        assert r["status"] == 0, r
        assert r["lines"][:2] == ["pod ml/train-0 main nvidia.com/gpu GPU-0,GPU-1",
                                  "pod web/infer srv nvidia.com/gpu GPU-3"], r

        data = b"hello kubelet"
        r = probe(client_bin, "unary", sock, "/gs.test.Peer/Echo", data.hex(), 5000)
        assert r["status"] == 0 and r["msgs"] == [(len(data), fnv1a(data))], r

        r = probe(client_bin, "unary", sock, "/gs.test.Peer/Big", "-", 5000)
        assert r["status"] == 0 and r["msgs"] == [(MIB, fnv1a(pattern(MIB, 9)))], r

        r = probe(client_bin, "stream", sock, "/gs.test.Peer/Stream", "-", 5000)
        assert r["status"] == 0, r
        assert r["msgs"] == [(300 * 1024, fnv1a(pattern(300 * 1024, k))) for k in range(3)], r

        r = probe(client_bin, "unary", sock, "/gs.test.Peer/Fail", "-", 5000)
        assert r["status"] == 9 and r["message"] == "not now: 50% \u00fcber\nline", r

        r = probe(client_bin, "unary", sock, "/gs.test.Peer/Nothing", "-", 5000)
        assert r["status"] == 12, r

        t0 = time.monotonic()
        r = probe(client_bin, "unary", sock, "/gs.test.Peer/Slow", "00", 200)
        assert r["status"] == 4, r
        assert time.monotonic() - t0 < 0.9, "deadline not enforced by the client"

        r = probe(client_bin, "unary", os.path.join(tmp, "absent.sock"), "/a.B/C", "-", 500)
        assert r["status"] == 14 and "absent.sock" in r["message"], r
    finally:
        server.stop(0)


# ---- driver -----------------------------------------------------------------------------------

def load_protos(proto_dir, tmp):
    out = os.path.join(tmp, "py")
    os.makedirs(out)
    subprocess.run(["/usr/bin/protoc", "--python_out=" + out, "-I", proto_dir,
                    "deviceplugin/v1beta1/api.proto", "podresources/v1/api.proto"], check=True)
    sys.path.insert(0, out)
    from deviceplugin.v1beta1 import api_pb2 as dp  # noqa: E402
    from podresources.v1 import api_pb2 as pr  # noqa: E402
    return {"dp": dp, "pr": pr}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--client", required=True)
    ap.add_argument("--proto-dir", required=True)
    args = ap.parse_args()

    failures = 0
    with tempfile.TemporaryDirectory(prefix="gsrpc-peer-") as tmp:
        pb = load_protos(args.proto_dir, tmp)
        peer = Peer(args.server, os.path.join(tmp, "echo.sock"))
        try:
            for t in (t_unary_roundtrip, t_large_streamed_messages, t_100_concurrent_calls,
                      t_unknown_method, t_status_and_message, t_oversize_request,
                      t_device_plugin, t_cancel_stream, t_garbage_connections):
                t0 = time.monotonic()
                try:
                    t(peer, pb)
                    print("ok   %-28s %.2fs" % (t.__name__, time.monotonic() - t0))
                except Exception:
                    failures += 1
                    print("FAIL %s" % t.__name__)
                    traceback.print_exc()
            t0 = time.monotonic()
            try:
                t_client_against_grpcio(args.client, pb, tmp)
                print("ok   %-28s %.2fs" % ("t_client_against_grpcio", time.monotonic() - t0))
            except Exception:
                failures += 1
                print("FAIL t_client_against_grpcio")
                traceback.print_exc()
        finally:
            peer.channel.close()
            peer.proc.send_signal(signal.SIGTERM)
            try:
                rc = peer.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                peer.proc.kill()
                rc = "hung"
            err = peer.proc.stderr.read()
            if rc != 0:
                failures += 1
                print("FAIL echo_server exit status %s\n%s" % (rc, err))
            else:
                print("ok   echo_server clean exit")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
