#!/usr/bin/env python3
"""Checks the one-way layering of docs/internals/layering.md.

Reads every `#include "..."` of src/ and include/gpusched/ and every
`target_link_libraries` and `add_library` of the CMake files, gives each file, header and
library target its layer, and fails on an arrow the layering does not allow, naming the file,
the line and the arrow:

    src/agent/gpu_fake.c:22: agent -> sim: #include "gpusched/trace.h"
    src/rpc/CMakeLists.txt:74: rpc -> agent: gsrpc links gsagent

It also keeps the pure core pure: no header of I/O, threads or the clock, and none of the calls
that would do them (fopen, printf, getenv, time ...).

Usage: check-layering.py [ROOT]   (ROOT: the source tree, default the one holding this script)
Exit status: 0 clean, 1 a wrong arrow (each printed on stderr), 2 the tree cannot be read.
"""
import os
import re
import sys

# Who may depend on whom: each layer and the layers it may include headers of or link.
# A layer always may use itself. Kept in step with docs/internals/layering.md.
ALLOWED = {
    "util": set(),
    "core": {"util"},
    "rpc": {"util"},
    "agent": {"util", "core", "rpc", "k8s"},
    "sim": {"util", "core"},
    "kworld": {"util", "core"},
    "k8s": {"util", "core"},
    "usage": {"util", "core"},
    "webhook": {"util", "core", "kworld", "k8s"},
    "cli": {"util", "core", "rpc", "agent", "sim", "kworld", "k8s", "usage", "webhook"},
}

# Public headers (include/gpusched/NAME) by layer.
HEADERS = {
    "util": ["compiler.h", "diag.h", "err.h", "log.h", "names.h"],
    "core": ["charge.h", "cluster.h", "defrag.h", "explain.h", "filter.h", "frag.h", "mig.h",
             "mig_plan.h", "rng.h", "sched.h", "tenant.h", "topo.h"],
    "rpc": ["grpc.h"],
    "agent": ["devplugin.h", "dpkube.h", "exporter.h", "gfd_labels.h", "gpu.h", "health.h",
              "podmap.h", "podnames.h"],
    "sim": ["bound.h", "qconfig.h", "replay.h", "sim.h", "trace.h"],
    "kworld": ["kquantity.h", "kworld.h"],
    "k8s": ["kevents.h", "kmigplan.h", "kube.h", "schedmetrics.h"],
    "usage": ["usage.h", "usage_report.h", "usage_ingest.h"],
    "webhook": ["webhook.h"],
}

# src/k8s holds two layers: the translation of Kubernetes objects into the core (gskworld) and
# the API client below the scheduler command (gpusched_k8s).
KWORLD_FILES = {"kworld.c", "kquantity.c", "kselect.c", "kselect.h", "kworld_inventory.c",
                "kworld_inv.h", "kworld_gpus.c", "kworld_gpus.h", "kworld_xres.c", "kworld_xres.h",
                "kworld_capmig.c", "kworld_capmig.h", "kworld_pdb.c", "kworld_pdb.h",
                "kworld_queue.c", "kworld_queue.h",
                "kworld_kai.c", "kworld_kai.h", "kworld_qspec.c", "kworld_qspec.h",
                "kworld_node.c", "kworld_int.h",
                "kjson.h", "yamljson.c", "yamljson.h"}
# The admission webhook sits above both: it reads Pod quantities as the translation does and
# serves on the address reader of the client's HTTP servers.
WEBHOOK_FILES = {"webhook.c", "webhook_http.c"}

# CMake library targets by layer; test, fuzz and bench targets are not checked.
TARGETS = {
    "gsutil": "util",
    "gsyaml": "util",
    "gscore": "core",
    "gsrpc": "rpc",
    "gsrpc_deps": "rpc",
    "gsrpc_proto": "rpc",
    "gsagent": "agent",
    "gssim": "sim",
    "gsbound": "sim",
    "gskworld": "kworld",
    "gsusage": "usage",
    "gpusched_k8s": "k8s",
    "gpusched_schedmetrics": "k8s",
    "gpusched_webhook": "webhook",
    "gpusched": "cli",
}

# The core does no I/O, starts no threads and never reads the clock (STYLE.md principle 1).
CORE_BANNED_HEADERS = re.compile(
    r"^(pthread|threads|unistd|fcntl|dirent|time|signal|dlfcn|poll|netdb|yaml|csv|jansson"
    r"|sqlite3|microhttpd|sys/.*|curl/.*|nghttp2/.*|protobuf-c/.*)\.h$"
)
CORE_BANNED_CALLS = re.compile(
    r"\b(fopen|fdopen|freopen|fread|fwrite|fprintf|printf|vprintf|vfprintf|puts|fputs|getenv"
    r"|time|clock_gettime|gettimeofday|clock|pthread_create|thrd_create|rand|srand|exit|abort)"
    r"\s*\("
)

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def layer_of_path(rel):
    """The layer of a source or header file, by its path; None when outside the layers."""
    parts = rel.split("/")
    if len(parts) >= 3 and parts[0] == "include" and parts[1] == "gpusched":
        for layer, names in HEADERS.items():
            if parts[2] in names:
                return layer
        return "unknown"
    if len(parts) >= 3 and parts[0] == "src":
        sub = parts[1]
        if sub == "k8s":
            if parts[2] in WEBHOOK_FILES:
                return "webhook"
            return "kworld" if parts[2] in KWORLD_FILES else "k8s"
        if sub in ALLOWED:
            return sub
        return "unknown"
    return None


def resolve(rel_dir, name, root):
    """The repository path a quoted include names: beside the file, under src/ or include/."""
    for base in (rel_dir, "src", "include"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def check_sources(root, errors):
    files = []
    for top in ("src", os.path.join("include", "gpusched")):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), root))
    for rel in sorted(files):
        src = layer_of_path(rel)
        if src is None:
            continue
        if src == "unknown":
            errors.append(f"{rel}:1: file has no layer (add it to scripts/check-layering.py)")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for no, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, name = m.groups()
            if kind == "<":
                if src == "core" and CORE_BANNED_HEADERS.match(name):
                    errors.append(f"{rel}:{no}: core -> I/O: #include <{name}> (the core is pure)")
                continue
            target = resolve(os.path.dirname(rel), name, root)
            if target is None:
                continue  # generated (protobuf-c) or system header found by quotes
            dst = layer_of_path(target)
            if dst is None or dst == src:
                continue
            if dst == "unknown" or dst not in ALLOWED[src]:
                errors.append(f'{rel}:{no}: {src} -> {dst}: #include "{name}"')
        if src == "core":
            for no, line in enumerate(strip_comments(text).splitlines(), 1):
                m = CORE_BANNED_CALLS.search(line)
                if m:
                    errors.append(f"{rel}:{no}: core -> I/O: call of {m.group(1)}() "
                                  "(the core is pure)")


def cmake_commands(text, name):
    """(line, arguments) of each call of a CMake command, comments removed."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"\b" + name + r"\s*\(([^)]*)\)", text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1).split()


def check_cmake(root, errors):
    lists = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".")) and d != "tests"]
        if "CMakeLists.txt" in names:
            lists.append(os.path.relpath(os.path.join(dirpath, "CMakeLists.txt"), root))
    for rel in sorted(lists):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        here = os.path.dirname(rel)
        for no, args in cmake_commands(text, "target_link_libraries"):
            if not args or args[0] not in TARGETS:
                continue
            src = TARGETS[args[0]]
            for lib in args[1:]:
                dst = TARGETS.get(lib)
                if dst is not None and dst != src and dst not in ALLOWED[src]:
                    errors.append(f"{rel}:{no}: {src} -> {dst}: {args[0]} links {lib}")
        for no, args in cmake_commands(text, "add_library"):
            if not args or args[0] not in TARGETS:
                continue
            src = TARGETS[args[0]]
            for a in args[1:]:
                if not a.endswith(".c") or "$" in a:
                    continue
                path = os.path.normpath(os.path.join(here, a))
                dst = layer_of_path(path)
                if dst is not None and dst != src:
                    errors.append(f"{rel}:{no}: {src} -> {dst}: {args[0]} compiles {path}")


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"check-layering: {root}: no src/ directory", file=sys.stderr)
        return 2
    errors = []
    check_sources(root, errors)
    check_cmake(root, errors)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check-layering: {len(errors)} wrong arrow(s); see docs/internals/layering.md",
              file=sys.stderr)
        return 1
    print("check-layering: every include and link follows docs/internals/layering.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
