#!/usr/bin/python3
"""`gpusched agent --gpu-backend nvml` under GPU faults (issue 9), against a scripted stand-in
libnvidia-ml (tests/agent/nvml_fault_stub.c, eight H200s) and the grpcio kubelet of
test_devplugin.py. Each case writes the stub's fault file while the agent runs.

  lost_at_start     GPU 5 without a handle, then without a UUID: the agent starts, advertises
                    the other 7 (through an agent restart and a kubelet restart), logs the lost
                    GPU and exports it Unhealthy with reason "lost"; when GPU 5 answers again it
                    is seen reset and Healthy in the metrics.
  unhealthy_known   GPU 5 answers GPU_IS_LOST to every query but its UUID: advertised
                    Unhealthy; GetPreferredAllocation of 7 over the 8 offered IDs never
                    proposes it, and Allocate of the answer succeeds.
  failed_queries    GPU 3 starts failing every query (no XID): Unhealthy on the stream within
                    1 s; when it answers again it is seen reset and Healthy.
  event_wait_lost   the event wait answers GPU_IS_LOST naming GPU 6, then naming none while GPU
                    2's queries answer GPU_IS_LOST: exactly those GPUs Unhealthy within 1 s,
                    one log line each, no flood.
  xid_classes       XID 79 on GPU 1 and XID 94 on GPU 4: 94 recovers after the quiet period,
                    79 does not (reset_required 1) until GPU 1 falls off and comes back.
  operator_clear    the file gpusched-clear-health in the plugin directory clears GPU 2 (XID
                    79) at once.
  registration_race (fake backend) 30 kubelet restarts (GS_RACE_ROUNDS; 100 under make
                    soak), each 0-20 ms after the previous kubelet got its Register: every
                    kubelet gets at most one Register (within 1 s), the last exactly one, and
                    its stream stays open.
  client_logs       a device ID with a line feed is escaped; 3,000 refused calls cost a bounded
                    number of log lines; one "grpc:" prefix.
  metrics_clients   128 misbehaving TCP clients from two addresses: /healthz answers within
                    1 s; keep-alive and pipelining; a taken port named.
  small_things      a missing --kubelet-dir is made; SIGHUP stops cleanly; a MIG GPU under
                    migStrategy none is named in a warning.
"""
import os
import random
import re
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_devplugin as td  # noqa: E402

UUID = ["GPU-f0000000-0000-4000-8000-00000000000%d" % i for i in range(8)]
QUIET_MS = 1000


class Case:
    def __init__(self, env, name, faults="", refresh="500ms"):
        self.env = env
        self.name = name
        self.pb = env["dp"]
        self.dir = os.path.join(env["tmp"], name)
        os.mkdir(self.dir)
        self.faults = os.path.join(env["tmp"], name + ".faults")
        self.set_faults(faults)
        self.cfg = os.path.join(env["tmp"], name + ".yaml")
        with open(self.cfg, "w") as f:
            f.write("version: v1\nhealth:\n  recoveryQuietPeriod: %dms\n  probeInterval: 200ms\n"
                    "exporter:\n  refreshInterval: %s\n" % (QUIET_MS, refresh))
        self.sock = os.path.join(self.dir, "gpusched-nvidia.com-gpu.sock")
        self.kubelet = td.Kubelet(self.pb, self.dir)
        self.agent = None
        self.extra = []  # more agent options for the next start()
        self.start()

    def set_faults(self, text):
        """Replaces the fault file in one rename, so the stub never reads half of it."""
        tmp = self.faults + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.faults)

    def start(self):
        old = {k: os.environ.get(k) for k in ("GS_NVML_LIBRARY", "STUB_NVML_FAULTS")}
        os.environ["GS_NVML_LIBRARY"] = self.env["stub"]
        os.environ["STUB_NVML_FAULTS"] = self.faults
        try:
            self.agent = td.Agent(self.env["bin"], [
                "--gpu-backend", "nvml", "--config", self.cfg, "--kubelet-dir", self.dir,
                "--pod-resources-socket", "", "--metrics-addr", "127.0.0.1:0",
                "--node-name", "node-f"] + self.extra, self.name)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def watch(self):
        return self.kubelet.watch("nvidia.com/gpu")

    def metrics(self):
        return td.scrape(self.agent.metrics_port())

    def health(self):
        """{gpu: (value, reason)} of gpusched_gpu_health, and {gpu: value} of reset_required."""
        text = self.metrics()
        h = {l["gpu"]: (v, l["reason"]) for l, v in td.series(text, "gpusched_gpu_health")}
        rr = {l["gpu"]: v for l, v in td.series(text, "gpusched_gpu_reset_required")}
        return h, rr

    def close(self):
        self.kubelet.stop()
        if self.agent is not None:
            return self.agent.stop()
        return ""


def healthy_ids(m):
    return sorted(d.ID for d in m.devices if d.health == "Healthy")


def unhealthy_ids(m):
    return sorted(d.ID for d in m.devices if d.health == "Unhealthy")


def wait_health(c, want, what):
    """Waits until /metrics shows want = {gpu: (value, reason)} for the GPUs named."""
    def ok():
        h, rr = c.health()
        return all(h.get(g) == v for g, v in want.items()) and (h, rr)
    return td.wait_until(ok, what)


def f_lost_at_start(env):
    seven = sorted(UUID[:5] + UUID[6:])
    c = Case(env, "lost-at-start", "handle_lost 5\n")
    try:
        c.agent.wait_line(r"GPU 5 is lost at start \(.*\): not advertised; probing it")
        c.agent.wait_line(r"health: GPU 5: lost \(does not answer\): Healthy -> Unhealthy "
                          r"\(needs a GPU reset\)")
        _, _, m = c.watch().wait()
        assert sorted(d.ID for d in m.devices) == seven, td.devices_of(m)
        assert healthy_ids(m) == seven
        h, rr = wait_health(c, {"5": ("0", "lost"), "0": ("1", "none")}, "GPU 5 lost in metrics")
        assert rr["5"] == "1" and rr["0"] == "0", rr
        assert sorted(h) == [str(i) for i in range(8)], h

        # A kubelet restart: registered again with the same 7.
        c.kubelet.stop()
        for f in os.listdir(c.dir):
            os.unlink(os.path.join(c.dir, f))
        c.kubelet = td.Kubelet(c.pb, c.dir)
        _, _, m = c.watch().wait()
        assert healthy_ids(m) == seven and len(m.devices) == 7, td.devices_of(m)

        # An agent restart, this time with GPU 5 answering GPU_IS_LOST for its UUID: still 7;
        # and rediscovering every second.
        c.agent.stop()
        c.set_faults("uuid_lost 5\n")
        c.extra = ["--rediscover-s", "1"]
        n_regs = len(c.kubelet.registrations())
        c.start()
        td.wait_until(lambda: len(c.kubelet.registrations()) > n_regs, "registration after the "
                      "agent restart")
        c.agent.wait_line(r"GPU 5 is lost at start \(GPU 5 is lost \(nvmlDeviceGetUUID\)\): not "
                          r"advertised")
        _, _, m = c.watch().wait()
        assert healthy_ids(m) == seven and len(m.devices) == 7, td.devices_of(m)

        # GPU 5 answers again: seen reset, Healthy in the metrics, named with its UUID; the
        # next rediscovery (issue 9; 1 s here) reads its UUID and kubelet gets all 8, in GPU
        # order, every one Healthy, on the stream it has.
        w = c.watch()
        n_msgs = len(w.msgs)
        c.set_faults("")
        t_ans, _ = c.agent.wait_line(r"health: GPU 5: seen reset \(lost and found again\) and "
                                     r"answering: Unhealthy -> Healthy")
        c.agent.wait_line(r"GPU 5 \(%s\) answers again; the next rediscovery advertises it"
                          % UUID[5])
        _, t8, m = w.wait(lambda m: len(m.devices) == 8, after=n_msgs)
        assert [d.ID for d in m.devices] == UUID and healthy_ids(m) == sorted(UUID), \
            td.devices_of(m)
        assert t8 - t_ans <= 1.0 + 0.2 + 0.3, t8 - t_ans  # an interval, the settle, slack
        wait_health(c, {"5": ("1", "none")}, "GPU 5 Healthy again")
        text = c.metrics()
        assert 'gpusched_gpu_health{gpu="5",UUID="%s"' % UUID[5] in text, text
    finally:
        c.close()


def f_unhealthy_known(env):
    c = Case(env, "unhealthy-known", "query_lost 5\n")
    try:
        c.agent.wait_line(r"GPU 5 \(%s\) is lost at start \(GPU 5 is lost "
                          r"\(nvmlDeviceGetName\)\): advertised Unhealthy" % UUID[5])
        _, _, m = c.watch().wait()
        assert [d.ID for d in m.devices] == UUID, td.devices_of(m)
        assert unhealthy_ids(m) == [UUID[5]], td.devices_of(m)
        p = td.Plugin(c.pb, c.sock)
        try:
            # Kubelet still offers all 8 (it lists Unhealthy devices as available for a
            # moment after a change): 7 of them, never GPU 5.
            got = p.preferred((UUID, [], 7))
            assert got == [UUID[:5] + UUID[6:]], got
            resp = p.allocate(got[0])
            assert len(resp.container_responses) == 1
            # Asking for all 8: the best shorter list, still without GPU 5.
            assert p.preferred((UUID, [], 8)) == [UUID[:5] + UUID[6:]]
            # must_include of GPU 5 is kept (kubelet insists); nothing else unhealthy added.
            assert p.preferred((UUID, [UUID[5]], 2)) == [[UUID[5], UUID[0]]]
            # Allocate of GPU 5 is refused.
            td.expect_rpc_error(lambda: p.allocate([UUID[5]]),
                                td.grpc.StatusCode.FAILED_PRECONDITION, "Allocate of GPU 5")
        finally:
            p.close()
    finally:
        c.close()


def f_failed_queries(env):
    c = Case(env, "failed-queries")
    try:
        w = c.watch()
        i0, _, m = w.wait()
        assert healthy_ids(m) == UUID
        t0 = time.monotonic()
        c.set_faults("query_fail 3\n")
        i1, t_bad, m = w.wait(lambda m: unhealthy_ids(m) == [UUID[3]], after=i0 + 1)
        late = t_bad - t0
        # A sample every 500 ms: the change is on the stream within 1 s of the failure.
        assert late <= td.BOUND_S, "Unhealthy %.3f s after the queries began failing" % late
        print("     failing queries -> Unhealthy on the stream after %.0f ms" % (late * 1000))
        c.agent.wait_line(r"health: GPU 3: lost \(does not answer\): Healthy -> Unhealthy")
        wait_health(c, {"3": ("0", "lost")}, "GPU 3 lost in metrics")
        # It answers again: found again, so seen reset, Healthy on the stream.
        c.set_faults("")
        w.wait(lambda m: healthy_ids(m) == UUID, after=i1 + 1)
        c.agent.wait_line(r"health: GPU 3: seen reset \(lost and found again\) and answering")
    finally:
        c.close()


def f_event_wait_lost(env):
    c = Case(env, "event-wait-lost", refresh="60s")  # no samples: the event path alone
    try:
        w = c.watch()
        i0, _, _ = w.wait()
        t0 = time.monotonic()
        c.set_faults("wait_lost 6\n")
        i1, t_bad, m = w.wait(lambda m: unhealthy_ids(m) == [UUID[6]], after=i0 + 1)
        assert t_bad - t0 <= td.BOUND_S, "Unhealthy after %.3f s" % (t_bad - t0)
        time.sleep(1.5)  # fifteen polls of a wait that keeps answering GPU_IS_LOST
        log = c.agent.text()
        assert log.count("event: GPU 6: GPU is lost") == 1, log
        assert "backend events:" not in log, log
        # The wait names no GPU; GPU 2's own queries answer GPU_IS_LOST (and GPU 6's still
        # do): GPU 2 is found by its queries, and only it is added.
        c.set_faults("wait_lost -1\nquery_lost 2\nquery_lost 6\n")
        _, t2, m = w.wait(lambda m: unhealthy_ids(m) == sorted([UUID[2], UUID[6]]), after=i1 + 1)
        time.sleep(1.0)
        log = c.agent.text()
        assert log.count("event: GPU 2: GPU is lost") == 1, log
        assert len(re.findall(r"event: GPU \d: GPU is lost", log)) == 2, log
        assert "backend events:" not in log, log
        _, _, last = w.wait(lambda m: True, after=len(w.msgs) - 1)
        assert unhealthy_ids(last) == sorted([UUID[2], UUID[6]]), td.devices_of(last)
    finally:
        c.close()


def f_xid_classes(env):
    c = Case(env, "xid-classes")
    try:
        w = c.watch()
        i0, _, _ = w.wait()
        c.set_faults("xid 1 79 1\nxid 4 94 2\n")
        i1, t_bad, _ = w.wait(lambda m: unhealthy_ids(m) == sorted([UUID[1], UUID[4]]),
                              after=i0 + 1)
        c.agent.wait_line(r"health: GPU 1: XID 79: Healthy -> Unhealthy \(needs a GPU reset\)")
        c.agent.wait_line(r"health: GPU 4: XID 94: Healthy -> Unhealthy$")
        # 94 is contained: Healthy again after the quiet period and a probe.
        i2, t_good, m = w.wait(lambda m: unhealthy_ids(m) == [UUID[1]], after=i1 + 1)
        gap = t_good - t_bad
        assert QUIET_MS / 1000.0 - 0.15 <= gap <= QUIET_MS / 1000.0 + td.BOUND_S, gap
        # 79 needs a reset: three quiet periods later, probes answering, still Unhealthy.
        time.sleep(3 * QUIET_MS / 1000.0)
        _, _, last = w.wait(lambda m: True, after=len(w.msgs) - 1)
        assert unhealthy_ids(last) == [UUID[1]], td.devices_of(last)
        h, rr = wait_health(c, {"1": ("0", "xid"), "4": ("1", "none")}, "XID classes in metrics")
        assert rr["1"] == "1" and rr["4"] == "0", rr
        # GPU 1 falls off the bus and comes back (a reset): Healthy again.
        c.set_faults("query_lost 1\n")
        time.sleep(1.2)  # two samples see it lost
        c.set_faults("")
        w.wait(lambda m: unhealthy_ids(m) == [], after=i2 + 1)
        c.agent.wait_line(r"health: GPU 1: seen reset \(lost and found again\) and answering: "
                          r"Unhealthy -> Healthy")
        wait_health(c, {"1": ("1", "none")}, "GPU 1 Healthy after the reset")
    finally:
        c.close()


class RaceKubelet(td.Kubelet):
    """A kubelet that restarts a random 0-20 ms after a Register reaches it, the way kubelet
    does: a new process binds its socket, every file in the directory is removed (kubelet's
    device manager cleans the directory at start), then kubelet.sock appears (renamed into
    place, so the old server's own clean-up cannot remove the new file)."""

    def __init__(self, race, k):
        self.race = race
        self.k = k
        self.calls = 0
        self.pb = race.pb
        self.dir = race.dir
        self.refuse = 0
        self.refused = 0
        self.lock = td.threading.Lock()
        self.registered = []
        self.options = {}
        self.watches = {}
        self.server = td.grpc.server(td.futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((self,))
        tmp = os.path.join(race.dir, "kubelet-%d.tmp" % k)
        self.server.add_insecure_port("unix:" + tmp)
        self.server.start()
        self.t_started = time.monotonic()
        self.tmp = tmp

    def register(self, req, ctx):
        with self.lock:
            self.calls += 1
            self.t_first = getattr(self, "t_first", time.monotonic())
        self.race.on_register(self)
        return td.Kubelet.register(self, req, ctx)

    def stop(self):
        self.server.stop(0)  # no wait: a dial-back in flight may hold it for seconds
        with self.lock:
            for w in self.watches.values():
                w.close()


class Race:
    def __init__(self, env, rounds):
        self.pb = env["dp"]
        self.dir = os.path.join(env["tmp"], "race")
        os.mkdir(self.dir)
        self.rounds = rounds
        self.lock = td.threading.Lock()
        self.rng = random.Random(9)
        self.kubelets = []
        self.offsets = []
        self.current = self.new_kubelet()

    def new_kubelet(self):
        kb = RaceKubelet(self, len(self.kubelets))
        os.rename(kb.tmp, os.path.join(self.dir, "kubelet.sock"))
        kb.t_started = time.monotonic()
        self.kubelets.append(kb)
        return kb

    def on_register(self, kb):
        with self.lock:
            if kb is not self.current or len(self.kubelets) > self.rounds:
                return
            if getattr(kb, "restarting", False):
                return
            kb.restarting = True
        d = self.rng.uniform(0.0, 0.020)
        self.offsets.append(d)
        td.threading.Timer(d, self.restart, args=(kb,)).start()

    def restart(self, old):
        old.stop()
        for f in os.listdir(self.dir):
            if not f.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(self.dir, f))
                except FileNotFoundError:
                    pass
        with self.lock:
            self.current = self.new_kubelet()


def f_registration_race(env):
    """Exactly one Register per kubelet over 30 kubelet restarts (GS_RACE_ROUNDS; make soak runs
    100) a random 0-20 ms after the
    previous kubelet got its Register (that Register still in flight), and the last kubelet's
    ListAndWatch stays open."""
    rounds = int(os.environ.get("GS_RACE_ROUNDS", "30"))  # make soak: 100
    race = Race(env, rounds)
    fake = os.path.join(env["src"], "deploy/fake-gpus.yaml")
    agent = td.Agent(env["bin"], ["--gpu-backend", "fake:" + fake, "--kubelet-dir", race.dir,
                                  "--pod-resources-socket", "", "--metrics-addr", ""], "race")
    try:
        td.wait_until(lambda: len(race.kubelets) > rounds, "%d kubelet restarts" % rounds,
                      timeout_s=120)
        last = race.kubelets[-1]
        td.wait_until(lambda: last.registrations(), "registration with the last kubelet",
                      timeout_s=10)
        time.sleep(1.0)  # any second Register would come within this
        calls = [kb.calls for kb in race.kubelets]
        dup = [(kb.k, kb.calls) for kb in race.kubelets if kb.calls > 1]
        assert not dup, "kubelets registered with more than once (index, Registers): %s" % dup
        assert last.calls == 1, calls
        # Each kubelet that got its Register got it within 1 s of its socket appearing.
        late = max(kb.t_first - kb.t_started for kb in race.kubelets if kb.calls)
        assert late <= td.BOUND_S, "a Register came %.3f s after kubelet.sock appeared" % late
        w = last.watch("nvidia.com/gpu")
        assert w.ended is None, w.ended
        _, _, m = w.wait()
        assert len(m.devices) == 8
        print("     %d kubelet restarts at %.1f-%.1f ms after a Register: Registers per kubelet "
              "%s, the slowest %.0f ms after its socket" % (
                  rounds, 1000 * min(race.offsets), 1000 * max(race.offsets),
                  {n: calls.count(n) for n in sorted(set(calls))}, 1000 * late))
    finally:
        for kb in race.kubelets:
            kb.stop()
        agent.stop()


def f_client_logs(env):
    """What a careless or hostile local client can put in the agent's log: a device ID with a
    line feed is escaped (no forged line), 3,000 refused calls in a row cost a bounded number of
    lines with the rest counted, and the gRPC server's lines carry one "grpc:" prefix."""
    d = os.path.join(env["tmp"], "client-logs")
    os.mkdir(d)
    kb = td.Kubelet(env["dp"], d)
    fake = os.path.join(env["src"], "deploy/fake-gpus.yaml")
    agent = td.Agent(env["bin"], ["--gpu-backend", "fake:" + fake, "--kubelet-dir", d,
                                  "--pod-resources-socket", "", "--metrics-addr", ""], "logs")
    try:
        kb.watch("nvidia.com/gpu")
        sock = os.path.join(d, "gpusched-nvidia.com-gpu.sock")
        p = td.Plugin(env["dp"], sock)
        td.expect_rpc_error(lambda: p.allocate(["GPU-x\nforged: Allocate for pod ns/p"]),
                            td.grpc.StatusCode.INVALID_ARGUMENT, "ID with a line feed")
        agent.wait_line(r"Allocate refused: .*GPU-x\\x0aforged: Allocate for pod ns/p")
        assert not any(l.startswith("forged") for _, l in agent.lines), agent.text()
        n0 = len(agent.lines)
        t0 = time.monotonic()
        for i in range(3000):
            try:
                p.allocate(["GPU-nope-%d" % i])
            except td.grpc.RpcError:
                pass
        spent = time.monotonic() - t0
        time.sleep(0.3)
        refused = [l for _, l in agent.lines[n0:] if "Allocate refused" in l]
        # The budget: 50 at once, 10 a second after (plus one for rounding).
        assert len(refused) <= 50 + 10 * (spent + 0.3) + 1, (len(refused), spent)
        print("     3000 refused Allocates in %.1f s: %d log lines about them" % (spent,
                                                                           len(refused)))
        # Once the budget allows again, the count of what was left out is logged.
        time.sleep(0.2)
        td.expect_rpc_error(lambda: p.allocate(["GPU-nope-last"]),
                            td.grpc.StatusCode.INVALID_ARGUMENT, "one more")
        agent.wait_line(r"Allocate refused: .*GPU-nope-last", after=n0)
        rx = re.compile(r"\((\d+) more lines about clients left out: too many\)")
        left_out = sum(int(m.group(1)) for m in (rx.search(l) for _, l in agent.lines[n0:]) if m)
        refused = [l for _, l in agent.lines[n0:] if "Allocate refused" in l]
        assert left_out + len(refused) == 3001, (left_out, len(refused))
        p.close()
        # Bytes that are not HTTP/2: the connection's end is logged with one "grpc:" prefix.
        n1 = len(agent.lines)
        s = td.socket.socket(td.socket.AF_UNIX, td.socket.SOCK_STREAM)
        s.connect(sock)
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 100)
        s.close()
        time.sleep(0.5)
        assert "grpc: grpc:" not in agent.text(), agent.text()
    finally:
        kb.stop()
        agent.stop()


def f_operator_clear(env):
    """An operator clears a reset-class Unhealthy GPU through the file gpusched-clear-health in
    the device plugin directory: Healthy on the stream within 1 s, reason cleared in the log,
    the file removed; a name that is no GPU here is logged."""
    c = Case(env, "operator-clear")
    try:
        w = c.watch()
        i0, _, _ = w.wait()
        c.set_faults("xid 2 79 1\n")
        i1, _, _ = w.wait(lambda m: unhealthy_ids(m) == [UUID[2]], after=i0 + 1)
        path = os.path.join(c.dir, "gpusched-clear-health")
        with open(path + ".new", "w") as f:
            f.write("%s, 7\nGPU-nope\n" % UUID[2])
        t0 = time.monotonic()
        os.rename(path + ".new", path)
        _, t_ok, _ = w.wait(lambda m: unhealthy_ids(m) == [], after=i1 + 1)
        assert t_ok - t0 <= td.BOUND_S, "cleared after %.3f s" % (t_ok - t0)
        c.agent.wait_line(r"health: GPU 2: cleared by an operator: Unhealthy -> Healthy")
        c.agent.wait_line(r"gpusched-clear-health: no GPU 'GPU-nope' here; ignored")
        c.agent.wait_line(r"gpusched-clear-health: 2 GPU\(s\) named, 1 were Unhealthy and are "
                          r"Healthy now")
        td.wait_until(lambda: not os.path.exists(path), "the clear file removed")
        wait_health(c, {"2": ("1", "none")}, "GPU 2 Healthy in metrics")
    finally:
        c.close()


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def healthz(port, src="127.0.0.1"):
    """Seconds /healthz took from src, or None when it did not answer within 2 s."""
    t0 = time.monotonic()
    s = td.socket.socket(td.socket.AF_INET, td.socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        d = s.recv(4096)
        return time.monotonic() - t0 if d.startswith(b"HTTP/1.1 200") and d.endswith(b"ok") \
            else None
    except OSError:
        return None
    finally:
        s.close()


def f_metrics_clients(env):
    """The metrics port under clients that misbehave: 64 idle connections, then 64 sending
    one byte a second, each set from its own address, while /healthz from another address keeps
    answering within 1 s; keep-alive and pipelining; a taken port named as such."""
    d = os.path.join(env["tmp"], "metrics-clients")
    os.mkdir(d)
    fake = os.path.join(env["src"], "deploy/fake-gpus.yaml")
    agent = td.Agent(env["bin"], ["--gpu-backend", "fake:" + fake, "--kubelet-dir", d,
                                  "--pod-resources-socket", "", "--metrics-addr", "127.0.0.1:0"],
                     "metrics")
    held = []
    try:
        port = agent.metrics_port()
        assert healthz(port) is not None
        # Two pipelined requests on one connection: two answers, the connection kept.
        s = td.socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
        s.settimeout(1)
        got = b""
        try:
            while got.count(b"HTTP/1.1 200") < 2:
                x = s.recv(65536)
                if not x:
                    break
                got += x
        except OSError:
            pass
        assert got.count(b"HTTP/1.1 200") == 2 and b"Connection: close" not in got, got
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.close()
        # 64 connections that send nothing, from 127.0.0.2.
        for _ in range(64):
            c = td.socket.socket(td.socket.AF_INET, td.socket.SOCK_STREAM)
            c.bind(("127.0.0.2", 0))
            try:
                c.connect(("127.0.0.1", port))
            except OSError:
                pass
            held.append(c)
        worst = 0.0
        for _ in range(5):
            t = healthz(port)
            assert t is not None and t <= td.BOUND_S, "healthz with 64 idle connections: %s" % t
            worst = max(worst, t)
            time.sleep(0.2)
        # 64 connections from 127.0.0.3 each sending a byte a second for 3 s.
        slow = []
        for _ in range(64):
            c = td.socket.socket(td.socket.AF_INET, td.socket.SOCK_STREAM)
            c.bind(("127.0.0.3", 0))
            try:
                c.connect(("127.0.0.1", port))
            except OSError:
                pass
            slow.append(c)
        held += slow
        for k in range(3):
            for c in slow:
                try:
                    c.send(b"GET /metrics HTTP/1.1\r\n"[k:k + 1])
                except OSError:
                    pass
            t = healthz(port)
            assert t is not None and t <= td.BOUND_S, "healthz with slow clients: %s" % t
            worst = max(worst, t)
            time.sleep(1.0)
        rss = rss_mib(agent.proc.pid)
        print("     128 misbehaving connections: /healthz within %.0f ms, RSS %.0f MiB" %
              (worst * 1000, rss))
        assert rss < 128, rss  # the DaemonSet's memory limit, 128Mi
        # A taken port: named, exit 1.
        out = td.subprocess.run([env["bin"], "agent", "--gpu-backend", "fake:" + fake,
                                 "--kubelet-dir", d, "--pod-resources-socket", "",
                                 "--metrics-addr", "127.0.0.1:%d" % port],
                                capture_output=True, text=True, timeout=30)
        assert out.returncode == 1, out
        assert ("cannot serve metrics on 127.0.0.1:%d: bind: Address already in use" % port) \
            in out.stderr, out.stderr
    finally:
        for c in held:
            c.close()
        agent.stop()


def f_small_things(env):
    """What a new user hit: a --kubelet-dir that does not exist yet is made (its parent must
    exist); SIGHUP stops the agent cleanly, sockets removed; a MIG-mode GPU under migStrategy
    none is advertised whole with a warning naming it."""
    d = os.path.join(env["tmp"], "not-yet")
    node = os.path.join(env["src"], "tests/agent/data/mixed-node.yaml")
    agent = td.Agent(env["bin"], ["--gpu-backend", "fake:" + node, "--kubelet-dir", d,
                                  "--pod-resources-socket", "", "--metrics-addr", ""], "small")
    try:
        agent.wait_line(r"created the device plugin directory %s \(it did not exist\)" %
                        re.escape(d))
        agent.wait_line(r"warning: GPU 4 is in MIG mode \(3 MIG devices\) but "
                        r"flags.migStrategy is none: it is advertised whole")
        sock = os.path.join(d, "gpusched-nvidia.com-gpu.sock")
        td.wait_until(lambda: os.path.exists(sock), "the socket in the new directory")
        assert "warning: GPU 0 is in MIG mode" not in agent.text()
    finally:
        if agent.proc.poll() is None:
            agent.proc.send_signal(td.signal.SIGHUP)
            # Let it stop on the SIGHUP alone: stop()'s SIGTERM, arriving during a slow
            # shutdown (TSan), is a second signal, which ends the agent at once (-15).
            try:
                agent.proc.wait(timeout=30)
            except td.subprocess.TimeoutExpired:
                pass
        log = agent.stop()
    assert "stopping" in log, log
    assert not os.path.exists(os.path.join(d, "gpusched-nvidia.com-gpu.sock")), os.listdir(d)


CASES = [f_lost_at_start, f_unhealthy_known, f_failed_queries, f_event_wait_lost, f_xid_classes,
         f_operator_clear, f_registration_race, f_client_logs, f_metrics_clients,
         f_small_things]


def main():
    ap = td.argparse.ArgumentParser()
    ap.add_argument("--gpusched", required=True)
    ap.add_argument("--stub", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    failures = 0
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gsfault-") as tmp:
        dp, pr = td.load_protos(os.path.join(args.source_dir, "proto"), tmp)
        env = {"tmp": tmp, "bin": args.gpusched, "src": args.source_dir, "dp": dp, "pr": pr,
               "stub": args.stub}
        for fn in CASES:
            if args.only and fn.__name__[2:] not in args.only.split(","):
                continue
            t0 = time.monotonic()
            try:
                fn(env)
                print("ok   %-24s %.2fs" % (fn.__name__, time.monotonic() - t0), flush=True)
            except Exception:  # noqa: BLE001 - report and go on
                failures += 1
                print("FAIL %s" % fn.__name__, flush=True)
                traceback.print_exc()
                sys.stdout.flush()
    print("%d failure(s), %.1f s" % (failures, time.monotonic() - t_all))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
