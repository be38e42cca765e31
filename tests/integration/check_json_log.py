#!/usr/bin/env python3
"""Checks a `--log-format json` log (gpusched scheduler or agent): every line is one JSON object
(json.loads) with ts (RFC 3339 UTC to the millisecond, "2026-12-02T18:00:00.123Z"), level (one
of info, warn, error), component (as given) and msg (a string); pod, node and queue, where
present, are strings equal to the msg's own pod=, node= and queue= tokens, and a msg that has
such a token has the field.

Usage: check_json_log.py LOG COMPONENT [REQUIRE...]; each REQUIRE is "FIELD=REGEX": some line
must have FIELD matching REGEX (a search on its string value). Prints a one-line summary, exit 1
with the first bad line otherwise.
"""
import json
import re
import sys

path, component = sys.argv[1], sys.argv[2]
requires = [r.split("=", 1) for r in sys.argv[3:]]
ts_re = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# The token as the log library lifts it (include/gpusched/log.h, GS_LOG_JSON_KEYS).
def token(msg, key):
    for m in re.finditer(r"(?:^|(?<=[ (]))" + key + r"=([^ ,;)]*)", msg):
        v = m.group(1).rstrip(":.")
        if 0 < len(v) <= 127:
            return v
    return None

lines = 0
counts = {"pod": 0, "node": 0, "queue": 0}
found = [False] * len(requires)
with open(path, "rb") as f:
    for n, raw in enumerate(f, 1):
        text = raw.decode("utf-8")  # must be valid UTF-8
        try:
            obj = json.loads(text)
        except ValueError as e:
            sys.exit("%s:%d: not JSON (%s): %r" % (path, n, e, text[:200]))
        bad = None
        if not isinstance(obj, dict):
            bad = "not an object"
        elif not isinstance(obj.get("ts"), str) or not ts_re.match(obj["ts"]):
            bad = "ts %r" % obj.get("ts")
        elif obj.get("level") not in ("info", "warn", "error"):
            bad = "level %r" % obj.get("level")
        elif obj.get("component") != component:
            bad = "component %r, want %r" % (obj.get("component"), component)
        elif not isinstance(obj.get("msg"), str):
            bad = "msg %r" % obj.get("msg")
        else:
            for k in counts:
                if obj.get(k) != token(obj["msg"], k):
                    bad = "%s %r, but msg says %r" % (k, obj.get(k), token(obj["msg"], k))
                    break
                counts[k] += k in obj
        if bad:
            sys.exit("%s:%d: %s: %s" % (path, n, bad, text.rstrip()[:300]))
        for i, (field, rx) in enumerate(requires):
            if isinstance(obj.get(field), str) and re.search(rx, obj[field]):
                found[i] = True
        lines += 1
if lines == 0:
    sys.exit("%s: no lines" % path)
for (field, rx), ok in zip(requires, found):
    if not ok:
        sys.exit("%s: no line has %s matching %r" % (path, field, rx))
print("ok: %d JSON lines (component %s); with pod %d, node %d, queue %d"
      % (lines, component, counts["pod"], counts["node"], counts["queue"]))
