#!/usr/bin/env python3
"""A validating admission webhook for pods/binding, for gpusched's fault tests.

It serves HTTPS on 127.0.0.1 (certificate and key made by the test with openssl), answers the
API server's AdmissionReview v1 for Bindings, and logs one line per review to LOG:
"<namespace>/<pod> <node> <user> <verdict>". Modes:

  reject POD             refuses every Binding of POD (allowed: false, code 403, with a message
                         naming this webhook); allows all others
  delay SECONDS [POD]    holds every Binding SECONDS before answering (logging "recv NS/POD T" with
                         the time it arrived, seconds since the epoch), then allows it, or refuses
                         it when it is POD's
  reject-for SECONDS POD [SECONDS POD...]
                         refuses each POD's Bindings for SECONDS after the first one it sees
                         ("inf": always), then allows them; allows all others
  race POD NODE          the first time gpusched binds POD, binds it itself to NODE first (through
                         the API server, as another scheduler would), then allows gpusched's
                         request, which the API server then answers 409 Conflict; its own Binding
                         carries the annotation gpusched.test/bound-by=webhook and is allowed

Registered for other resources (scheduler_shutdown_drain.sh registers it for Events), delay
mode holds their creates alike, NS/POD then naming the object (the Event).

Usage: bind_webhook.py CERT KEY PORTFILE LOG MODE ARGS... ; the port it listens on (picked by the
kernel) is written to PORTFILE once it serves. Race mode reads the API server address and admin
credentials from GPUSCHED_K8S_SERVER, GPUSCHED_K8S_CA, GPUSCHED_K8S_CLIENT_CERT/_KEY.
"""
import json
import os
import ssl
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

cert, key, portfile, logfile, mode = sys.argv[1:6]
args = sys.argv[6:]
lock = threading.Lock()
raced = set()
first_seen = {}


def log(line):
    with lock, open(logfile, "a") as f:
        f.write(line + "\n")


def bind_as_other(ns, pod, node):
    ctx = ssl.create_default_context(cafile=os.environ["GPUSCHED_K8S_CA"])
    ctx.load_cert_chain(os.environ["GPUSCHED_K8S_CLIENT_CERT"], os.environ["GPUSCHED_K8S_CLIENT_KEY"])
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": ns,
                         "annotations": {"gpusched.test/bound-by": "webhook"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    req = urllib.request.Request(
        "%s/api/v1/namespaces/%s/pods/%s/binding" % (os.environ["GPUSCHED_K8S_SERVER"], ns, pod),
        data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
        return r.status


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *a):
        pass

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        obj = req.get("object") or {}
        ns, pod = req.get("namespace", ""), req.get("name", "")
        node = (obj.get("target") or {}).get("name", "")
        own = ((obj.get("metadata") or {}).get("annotations") or {}).get("gpusched.test/bound-by")
        user = (req.get("userInfo") or {}).get("username", "")
        allowed, msg = True, ""
        if mode == "delay" and not own:
            log("recv %s/%s %.3f" % (ns, pod, time.time()))
            time.sleep(float(args[0]))
            if len(args) > 1 and pod == args[1]:
                allowed, msg = False, "rejected by the test webhook bind_webhook.py after a delay"
        if mode == "reject-for" and not own:
            for secs, name in zip(args[0::2], args[1::2]):
                if pod == name:
                    t0 = first_seen.setdefault(pod, time.time())
                    if secs == "inf" or time.time() - t0 < float(secs):
                        allowed, msg = False, "rejected by the test webhook bind_webhook.py for %s s" % secs
        if mode == "reject" and pod == args[0]:
            allowed, msg = False, "rejected by the test webhook bind_webhook.py"
        elif mode == "race" and pod == args[0] and not own and pod not in raced:
            raced.add(pod)
            status = bind_as_other(ns, pod, args[1])
            log("%s/%s %s webhook bound-first:%d" % (ns, pod, args[1], status))
        verdict = "allowed" if allowed else "denied"
        log("%s/%s %s %s %s%s" % (ns, pod, node, user, verdict, " own" if own else ""))
        resp = {"uid": req["uid"], "allowed": allowed}
        if not allowed:
            resp["status"] = {"code": 403, "message": msg}
        out = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
