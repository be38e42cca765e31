#!/usr/bin/python3
"""Hostile local clients against gsrpc's server (issue 9), with Debian's python3-grpcio as the
well-behaved client playing kubelet; run with /usr/bin/python3.

Each case starts its own tests/rpc/echo_server (so VmHWM, the peak RSS, is the case's own),
runs the hostile clients written with raw sockets (HTTP/2 frames by hand) or grpcio, and
asserts, within a few seconds, that:
  - kubelet's calls keep succeeding: a new grpcio connection gets GetDevicePluginOptions, the
    first ListAndWatch message and an Allocate answer, each within 2 s, and a ListAndWatch
    stream opened before the attack stays open;
  - the server's peak RSS stays under the agent DaemonSet's memory limit (deploy/daemonset.yaml,
    128Mi; --rss-limit-mib changes it for sanitizer builds);
  - the defence's counters (the echo server's /gs.test.Echo/Stats) say what happened.

Cases:
  silent_connections_evicted  64 connections that never send the preface fill the table
                              (default limits): kubelet's new connection takes the place of the
                              oldest, which gets GOAWAY(NO_ERROR).
  handshake_and_idle_deadlines  64 silent connections and one sending its preface a byte per
                              50 ms are closed at the handshake deadline (300 ms here); one that
                              finished its handshake and only PINGs gets GOAWAY(NO_ERROR) at the
                              idle deadline (600 ms here).
  connections_before_accept   the server stopped (SIGSTOP) while 66 connections and then
                              kubelet's arrive: all wait in the listen backlog, and kubelet's
                              calls succeed once it runs again (0.3 s later); then 4000 more
                              queued at once, taken a table's worth a round, raise the peak
                              RSS by less than a quarter of the limit.
  streams_that_never_read     4 connections x 32 streams with a zero flow-control window, each
                              streaming 1.5 MB messages (default limits): the output caps reset
                              the fullest streams (RST_STREAM CANCEL, counted exactly) and keep
                              the queued bytes under the server cap, 32 MiB; a reading stream
                              still gets its 3 x 1 MiB.
  unfinished_request_bodies   one connection with 16 calls that each send a 4 MiB message and
                              never end it (64 MiB, all the server had), then 4 more with 2
                              each: the per-connection share (8 MiB) and the server budget
                              (32 MiB) refuse them and Allocate still succeeds; the body
                              deadline (3000 ms here) frees the rest.

--no-limit-options starts the echo server without its limit options, to run the cases against
a server that has none (main before issue 9): every case must fail there except
connections_before_accept, which is about the listen backlog, not the limits.
"""
import argparse
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import grpc

MIB = 1024 * 1024
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS = 0x1, 0x4
NO_ERROR, SETTINGS_TIMEOUT, CANCEL = 0, 4, 8
SETTINGS_INITIAL_WINDOW_SIZE = 4

ARGS = None


# ---- raw HTTP/2 ---------------------------------------------------------------------------------

def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream_id) + payload


def hpack_literal(name, value):
    """Literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2); names
    and values here are shorter than 127 bytes, so each length is one byte."""
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_headers(path):
    return b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def parse_frames(data):
    """(type, flags, stream_id, payload) of every whole frame in data."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        out.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7FFFFFFF,
                    data[i + 9:i + 9 + n]))
        i += 9 + n
    return out


def raw_connect(sock_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    return s


def read_until_eof(s, timeout_s):
    """Everything the server sends until it closes; None if it is still open after timeout_s."""
    s.settimeout(0.05)
    got = b""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    return None


def goaway_code(frames):
    codes = [int.from_bytes(p[4:8], "big") for t, _, _, p in frames if t == GOAWAY]
    return codes[-1] if codes else None


# ---- the server under test ----------------------------------------------------------------------

class Server:
    def __init__(self, tmp, name, **limits):
        self.sock = os.path.join(tmp, name + ".sock")
        argv = [ARGS.server]
        if not ARGS.no_limit_options:
            for k, v in limits.items():
                argv += ["--" + k.replace("_", "-"), str(v)]
        argv.append(self.sock)
        # Under ASan, freed blocks wait in a quarantine (256 MiB by default) that would count
        # in the RSS; keep it small. Without ASan the variable is ignored.
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=8"
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("echo_server did not start: %r %s" % (line, self.proc.stderr.read()))
        self.stderr_lines = []
        self.err_reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self.err_reader.start()
        self.kubelet = grpc.insecure_channel("unix:" + self.sock,
                                             options=[("grpc.use_local_subchannel_pool", 1)])

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

    def status_kib(self, field):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError("no %s in /proc/%d/status" % (field, self.proc.pid))

    def socket_fds(self):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.proc.pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd)).startswith("socket:"):
                    n += 1
            except OSError:
                pass
        return n

    def stats(self):
        # Instrumentation, not one of kubelet's calls: under ThreadSanitizer the server may be
        # busy for seconds with the hostile load (256 allocations and copies of 1.5 MB).
        text = self.kubelet.unary_unary("/gs.test.Echo/Stats")(b"", timeout=30).decode()
        return {k: int(v) for k, v in (kv.split("=") for kv in text.split())}

    def check_rss(self):
        hwm_mib = self.status_kib("VmHWM") / 1024.0
        assert hwm_mib < ARGS.rss_limit_mib, "peak RSS %.1f MiB, limit %d MiB" % (
            hwm_mib, ARGS.rss_limit_mib)
        return hwm_mib

    def stop(self):
        self.kubelet.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "hung"
        self.err_reader.join(timeout=5)
        assert rc == 0, "echo_server exit status %s\n%s" % (rc, "\n".join(self.stderr_lines[-20:]))


def wait_until(pred, what, timeout_s=5.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def kubelet_calls(srv, pb):
    """What kubelet does on a fresh connection after Register; each call within 2 s."""
    dp = pb["dp"]
    with grpc.insecure_channel("unix:" + srv.sock,
                               options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
        opts = dp.DevicePluginOptions.FromString(ch.unary_unary(
            "/v1beta1.DevicePlugin/GetDevicePluginOptions")(dp.Empty().SerializeToString(),
                                                            timeout=2))
        assert opts.get_preferred_allocation_available
        law = ch.unary_stream("/v1beta1.DevicePlugin/ListAndWatch")(
            dp.Empty().SerializeToString(), timeout=2)
        first = dp.ListAndWatchResponse.FromString(next(law))
        assert [d.ID for d in first.devices] == ["GPU-%d" % i for i in range(8)]
        law.cancel()
        req = dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=["GPU-3", "GPU-4"])])
        resp = dp.AllocateResponse.FromString(
            ch.unary_unary("/v1beta1.DevicePlugin/Allocate")(req.SerializeToString(), timeout=2))
        assert [dict(c.envs) for c in resp.container_responses] == [
            {"NVIDIA_VISIBLE_DEVICES": "GPU-3,GPU-4"}]


def hold_list_and_watch(srv, pb):
    """kubelet's long-lived ListAndWatch on srv.kubelet; returns the call."""
    dp = pb["dp"]
    law = srv.kubelet.unary_stream("/v1beta1.DevicePlugin/ListAndWatch")(
        dp.Empty().SerializeToString())
    first = dp.ListAndWatchResponse.FromString(next(law))
    assert len(first.devices) == 8
    return law


def assert_held_open(law):
    # A cancelled or reset stream is done; kubelet's must still be running.
    assert not law.done(), "kubelet's ListAndWatch ended: %s" % (law.code(),)


# ---- cases --------------------------------------------------------------------------------------

def t_silent_connections_evicted(tmp, pb):
    srv = Server(tmp, "silent")  # default limits: max_connections 64
    try:
        law = hold_list_and_watch(srv, pb)  # kubelet's connection, with its stream: 1 of 64
        base_fds = srv.socket_fds()  # the listening socket and kubelet's connection
        silent = [raw_connect(srv.sock) for _ in range(64)]
        # 63 fit; the 64th takes the place of the oldest silent one, silent[0].
        wait_until(lambda: srv.socket_fds() == base_fds + 63, "silent connections accepted")
        t0 = time.monotonic()
        kubelet_calls(srv, pb)  # a new connection: silent[1] makes room
        took = time.monotonic() - t0
        assert took < 3.0, "kubelet's calls took %.2f s" % took
        # Each evicted connection got our SETTINGS, then GOAWAY(NO_ERROR), then EOF.
        for s in silent[:2]:
            got = read_until_eof(s, 2.0)
            assert got is not None, "an evicted connection is still open"
            assert goaway_code(parse_frames(got)) == NO_ERROR, parse_frames(got)
        assert_held_open(law)
        st = srv.stats()  # on kubelet's connection: no new one
        assert st["evicted"] == 2 and st["refused"] == 0, st
        assert st["handshake_timeout"] == 0 and st["failed"] == 0, st
        wait_until(lambda: srv.stats()["conns"] == 63, "62 silent and kubelet's connection")
        for s in silent[2:]:
            s.setblocking(False)
            try:
                assert s.recv(65536) != b"", "a silent connection that was not evicted closed"
            except BlockingIOError:
                pass
        hwm = srv.check_rss()
        law.cancel()
        for s in silent:
            s.close()
        return "kubelet %.2fs, evicted %d, peak RSS %.1f MiB" % (took, st["evicted"], hwm)
    finally:
        srv.stop()


def t_handshake_and_idle_deadlines(tmp, pb):
    # 128 slots, so that no eviction mixes in with the deadlines.
    srv = Server(tmp, "deadlines", handshake_timeout_ms=300, idle_timeout_ms=600,
                 max_connections=128)
    try:
        law = hold_list_and_watch(srv, pb)  # kubelet's connection: never idle
        t0 = time.monotonic()
        silent = [raw_connect(srv.sock) for _ in range(64)]
        slow = raw_connect(srv.sock)
        pinger = raw_connect(srv.sock)
        pinger.sendall(PREFACE + frame(SETTINGS, 0, 0))
        stop = threading.Event()

        def trickle():
            for b in PREFACE:
                if stop.is_set():
                    return
                try:
                    slow.send(bytes([b]))
                except OSError:
                    return
                time.sleep(0.05)

        def ping():
            while not stop.is_set():
                try:
                    pinger.send(frame(PING, 0, 0, b"8 bytes!"))
                except OSError:
                    return
                time.sleep(0.1)

        threads = [threading.Thread(target=trickle), threading.Thread(target=ping)]
        for th in threads:
            th.start()
        kubelet_calls(srv, pb)
        closed_at = []
        for s in silent + [slow]:
            got = read_until_eof(s, 2.0 - (time.monotonic() - t0))
            assert got is not None, "a connection without handshake is open after 2 s"
            closed_at.append(time.monotonic() - t0)
            assert goaway_code(parse_frames(got)) in (SETTINGS_TIMEOUT, None), parse_frames(got)
        assert min(closed_at) >= 0.3, closed_at  # not before the deadline
        got = read_until_eof(pinger, 2.5 - (time.monotonic() - t0))
        idle_s = time.monotonic() - t0
        stop.set()
        for th in threads:
            th.join()
        assert got is not None, "a connection with no call stayed open for 2.5 s while pinging"
        assert goaway_code(parse_frames(got)) == NO_ERROR, parse_frames(got)
        assert idle_s >= 0.6, idle_s
        kubelet_calls(srv, pb)
        assert_held_open(law)
        st = srv.stats()
        assert st["handshake_timeout"] == 65 and st["idle_timeout"] == 1, st
        assert st["failed"] == 0 and st["evicted"] == 0, st
        hwm = srv.check_rss()
        law.cancel()
        for s in silent + [slow, pinger]:
            s.close()
        return "65 closed by %.2fs, idle one at %.2fs, peak RSS %.1f MiB" % (
            max(closed_at), idle_s, hwm)
    finally:
        srv.stop()


def t_connections_before_accept(tmp, pb):
    # The server is stopped (SIGSTOP: a loop busy elsewhere, a descheduled process) while the
    # 66 connections of handshake_and_idle_deadlines arrive, then kubelet's: all wait in the
    # listen backlog. With a backlog of 64 (65 queued) kubelet's non-blocking connect got
    # EAGAIN, which grpcio takes for a connect in progress, failing on its first read with
    # "recvmsg: Invalid argument" (that case's rare failure, when the server fell behind).
    srv = Server(tmp, "backlog", max_connections=128)  # no eviction mixes in, at first
    stopped = False
    try:
        law = hold_list_and_watch(srv, pb)  # kubelet's connection: never idle, never evicted
        os.kill(srv.proc.pid, signal.SIGSTOP)
        stopped = True
        queued = []
        for i in range(66):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(srv.sock)
            except BlockingIOError:
                raise AssertionError("listen backlog full after %d connections" % i)
            queued.append(s)
        resume = threading.Timer(0.3, os.kill, (srv.proc.pid, signal.SIGCONT))
        resume.start()
        t0 = time.monotonic()
        kubelet_calls(srv, pb)  # connects while the server is stopped
        took = time.monotonic() - t0
        resume.join()
        stopped = False
        st = srv.stats()
        assert st["accepted"] == 68 and st["refused"] == 0 and st["evicted"] == 0, st
        for s in queued:
            s.close()
        # A flood as deep as the backlog goes (4000 where somaxconn allows): taken a table's
        # worth a round, the evicted freed at the end of each, so it costs little memory.
        flood = min(4000, int(open("/proc/sys/net/core/somaxconn").read()),
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 100)
        hwm0 = srv.check_rss()
        queued = []
        os.kill(srv.proc.pid, signal.SIGSTOP)
        stopped = True
        for i in range(flood):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(srv.sock)
            except BlockingIOError:
                raise AssertionError("listen backlog full after %d connections" % i)
            queued.append(s)
        os.kill(srv.proc.pid, signal.SIGCONT)
        stopped = False
        wait_until(lambda: srv.stats()["accepted"] == 68 + flood, "the flood accepted")
        grew = srv.check_rss() - hwm0
        for s in queued:
            s.close()
        assert_held_open(law)
        law.cancel()
        assert grew < ARGS.rss_limit_mib / 4, "peak RSS grew %.1f MiB over %d connections" % (
            grew, flood)
        return "kubelet %.2fs behind 66 queued connections; %d more: peak RSS +%.1f MiB" % (
            took, flood, grew)
    finally:
        if stopped:
            os.kill(srv.proc.pid, signal.SIGCONT)
        srv.stop()


def t_streams_that_never_read(tmp, pb):
    srv = Server(tmp, "noread")  # default limits: 16 MiB per connection, 32 MiB in all
    try:
        law = hold_list_and_watch(srv, pb)
        n_conns, n_streams, size = 4, 32, 1500000
        body = grpc_message(struct.pack(">II", 1000000, size))
        conns = []
        for _ in range(n_conns):
            s = raw_connect(srv.sock)
            out = PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0))
            for k in range(n_streams):
                sid = 2 * k + 1
                out += frame(HEADERS, END_HEADERS, sid, request_headers(b"/gs.test.Echo/Stream"))
                out += frame(DATA, END_STREAM, sid, body)
            s.sendall(out)
            conns.append(s)
        # The echo server pushes while a queue is under 2 MiB, so each holds two messages,
        # 2 x 1,500,005 = 3,000,010 bytes (more than the 2 MiB + 10 of a stream whose peer
        # reads, so that is never the fullest); without caps 128 queues reach 384 MB.
        # Wait for the pushing to settle.
        prev = None
        end = time.monotonic() + 30
        t_settle = time.monotonic()
        while time.monotonic() < end:
            st = srv.stats()
            cur = (st.get("reset_output"), st["open"])
            if cur == prev:
                break
            prev = cur
            time.sleep(0.3)
        t_settle = time.monotonic() - t_settle
        kubelet_calls(srv, pb)
        # A stream whose peer reads still gets all it is sent, in spite of the full caps.
        got = list(srv.kubelet.unary_stream("/gs.test.Echo/Stream")(
            struct.pack(">II", 3, MIB), timeout=5))
        assert [len(m) for m in got] == [MIB] * 3
        assert_held_open(law)
        hwm = srv.check_rss()
        st = srv.stats()
        assert st["out_bytes"] <= 32 * MIB, st
        # Every stream reset for output shows as RST_STREAM(CANCEL) on its connection.
        rst = 0
        for s in conns:
            s.settimeout(0.2)
            data = b""
            try:
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    data += chunk
            except socket.timeout:
                pass
            rst += sum(1 for t, _, _, p in parse_frames(data)
                       if t == RST_STREAM and int.from_bytes(p, "big") == CANCEL)
        assert rst == st["reset_output"], (rst, st)
        # A stream that is not reset holds at least its first message (1,500,005 bytes), so at
        # most 32 MiB / 1,500,005 = 22 survive the server cap: at least 128 - 22 were reset.
        assert st["reset_output"] >= n_conns * n_streams - 22, st
        law.cancel()
        for s in conns:
            s.close()
        return "settled in %.2fs, reset %d streams, %.1f MiB queued, peak RSS %.1f MiB" % (
            t_settle, st["reset_output"], st["out_bytes"] / MIB, hwm)
    finally:
        srv.stop()


def t_unfinished_request_bodies(tmp, pb):
    # shares: 8 MiB per connection, 32 MiB in all (defaults); body deadline 3000 ms here
    srv = Server(tmp, "bodies", body_timeout_ms=3000)
    try:
        law = hold_list_and_watch(srv, pb)
        release = threading.Event()

        def one_message_then_wait(size):
            yield bytes(size)
            release.wait(10)

        def hostile(n_calls, size):
            ch = grpc.insecure_channel("unix:" + srv.sock,
                                       options=[("grpc.use_local_subchannel_pool", 1)])
            return ch, [ch.stream_unary("/gs.test.Echo/Unary").future(one_message_then_wait(size),
                                                                     timeout=10)
                        for _ in range(n_calls)]

        def settle(calls):
            # Until every call is answered or its bytes are buffered: nothing changes for 0.3 s.
            prev, end = None, time.monotonic() + 30
            while time.monotonic() < end:
                st = srv.stats()
                cur = (st.get("request_bytes"), sum(c.done() for c in calls))
                if cur == prev:
                    return st
                prev = cur
                time.sleep(0.3)
            raise AssertionError("hostile calls did not settle")

        # Phase 1, the case: one connection, 16 calls of one 4 MiB - 5 message each
        # (4 MiB with its prefix), never ended: exactly the 64 MiB the server had in all.
        ch1, calls = hostile(16, 4 * MIB - 5)
        settle(calls)
        t0 = time.monotonic()
        kubelet_calls(srv, pb)
        took1 = time.monotonic() - t0
        st = srv.stats()
        assert st["request_bytes"] <= 8 * MIB + 5, st  # its share, and the Stats request
        assert st["refused_body"] >= 14, st  # 16 x 4 MiB, at most 2 fit in 8 MiB
        # Phase 2: four more connections with two 4 MiB calls each. Each may hold 8 MiB, so
        # together 40 MiB: past the server's 32 MiB, where the connection holding the most
        # gives way, and Allocate still gets in.
        chans = [ch1]
        for _ in range(4):
            ch, more = hostile(2, 4 * MIB - 5)
            chans.append(ch)
            calls += more
        settle(calls)
        t0 = time.monotonic()
        kubelet_calls(srv, pb)
        took2 = time.monotonic() - t0
        st = srv.stats()
        assert st["request_bytes"] <= 32 * MIB + 5, st
        # The body deadline answers the rest DEADLINE_EXCEEDED and frees their bytes.
        wait_until(lambda: all(c.done() for c in calls), "every hostile call answered", 4.0)
        codes = [c.exception().code() if c.exception() else grpc.StatusCode.OK for c in calls]
        st = srv.stats()
        # All freed: what is left is the Stats call's own request, an empty message (its
        # 5-byte prefix), buffered while its handler runs.
        assert st["request_bytes"] == 5, st
        n_exhausted = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
        n_deadline = codes.count(grpc.StatusCode.DEADLINE_EXCEEDED)
        assert n_exhausted + n_deadline == len(calls), codes
        assert n_exhausted == st["refused_body"] and n_deadline == st["body_timeout"], (codes, st)
        assert n_deadline >= 1, codes
        kubelet_calls(srv, pb)
        assert_held_open(law)
        hwm = srv.check_rss()
        release.set()
        for ch in chans:
            ch.close()
        law.cancel()
        return "kubelet %.2fs and %.2fs; %d refused, %d past the deadline; peak RSS %.1f MiB" % (
            took1, took2, n_exhausted, n_deadline, hwm)
    finally:
        srv.stop()

def load_protos(proto_dir, tmp):
    out = os.path.join(tmp, "py")
    os.makedirs(out)
    subprocess.run(["/usr/bin/protoc", "--python_out=" + out, "-I", proto_dir,
                    "deviceplugin/v1beta1/api.proto"], check=True)
    sys.path.insert(0, out)
    from deviceplugin.v1beta1 import api_pb2 as dp  # noqa: E402
    return {"dp": dp}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--rss-limit-mib", type=int, default=128)
    ap.add_argument("--no-limit-options", action="store_true")
    ap.add_argument("cases", nargs="*")
    ARGS = ap.parse_args()

    cases = [t_silent_connections_evicted, t_handshake_and_idle_deadlines,
             t_connections_before_accept, t_streams_that_never_read, t_unfinished_request_bodies]
    if ARGS.cases:
        cases = [t for t in cases if t.__name__[2:] in ARGS.cases]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="gsrpc-hostile-") as tmp:
        pb = load_protos(ARGS.proto_dir, tmp)
        for t in cases:
            t0 = time.monotonic()
            try:
                note = t(tmp, pb)
                print("ok   %-32s %.2fs  %s" % (t.__name__, time.monotonic() - t0, note))
            except Exception:
                failures += 1
                print("FAIL %s (%.2fs)" % (t.__name__, time.monotonic() - t0))
                traceback.print_exc()
            sys.stdout.flush()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
