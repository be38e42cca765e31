#!/usr/bin/env python3
"""Pixel probes of the HTML usage report's screenshot (tests/integration/usage.sh).

usage: usage_png.py SCREENSHOT.png DOM.html REPORT.json

Reads the bars from the DOM Chromium dumped (each <rect> with data-key, data-gpu-hours, its
geometry and fill), checks that the bars' GPU-hours add up to the JSON report's charged and
idle totals, and that the screenshot shows each bar's colour at the centre of the largest bar
of every group, of the widest queue-share bar and (with utilisation samples) of the widest
used bar (the SVG is drawn at the page's top left, 1 CSS pixel per unit, device scale 1).
A small PNG reader (8-bit RGB/RGBA, non-interlaced) stands in for an imaging library.
"""
import json
import re
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"FAIL: {path} is not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                sys.exit(f"FAIL: {path}: unsupported PNG (depth {depth}, type {ctype})")
            bpp = 4 if ctype == 6 else 3
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    png, dom_path, json_path = sys.argv[1:4]
    width, height, bpp, rows = read_png(png)
    dom = open(dom_path, encoding="utf-8").read()
    rep = json.load(open(json_path))
    rects = []
    for m in re.finditer(r"<rect ([^>]*data-gpu-hours[^>]*)>", dom):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        rects.append({k: attrs[k] for k in ("x", "y", "width", "height", "fill", "data-key",
                                            "data-gpu-hours")})
    if not rects:
        sys.exit("FAIL: no bars in the DOM")
    charged = sum(float(r["data-gpu-hours"]) for r in rects if r["data-key"] != "(idle)")
    idle = sum(float(r["data-gpu-hours"]) for r in rects if r["data-key"] == "(idle)")
    fails = 0
    if abs(charged - rep["charged_gpu_hours"]) > 1e-3 * max(1, rep["charged_gpu_hours"]):
        print(f"FAIL: bars hold {charged} charged GPU-hours, the report {rep['charged_gpu_hours']}")
        fails += 1
    if abs(idle - rep["idle_gpu_hours"]) > 1e-3 * max(1, rep["idle_gpu_hours"]):
        print(f"FAIL: bars hold {idle} idle GPU-hours, the report {rep['idle_gpu_hours']}")
        fails += 1
    probes = 0
    by_key = {}
    for r in rects:
        if float(r["height"]) >= 3 and float(r["width"]) >= 3:
            best = by_key.get(r["data-key"])
            if not best or float(r["height"]) > float(best["height"]):
                by_key[r["data-key"]] = r
    for key, r in sorted(by_key.items()):
        x = int(float(r["x"]) + float(r["width"]) / 2)
        y = int(float(r["y"]) + float(r["height"]) / 2)
        if x >= width or y >= height:
            print(f"FAIL: bar {key} at ({x}, {y}) is outside the {width}x{height} screenshot")
            fails += 1
            continue
        got = tuple(rows[y][x * bpp:x * bpp + 3])
        want = tuple(int(r["fill"][i:i + 2], 16) for i in (1, 3, 5))
        if max(abs(g - w) for g, w in zip(got, want)) > 6:
            print(f"FAIL: pixel ({x}, {y}) of bar {key} is {got}, its fill is {want}")
            fails += 1
        probes += 1
    if "(idle)" not in by_key or len(by_key) < 2:
        print(f"FAIL: too few bars to probe: {sorted(by_key)}")
        fails += 1
    # One share bar (the widest allocated-share bar) and, when the report has utilisation
    # samples, one used bar (the widest): its fill at its centre.
    for attr, need in (("data-alloc-pct", bool(rep.get("queues"))),
                       ("data-used-gpu-hours",
                        any(g.get("used_gpu_hours") is not None for g in rep["groups"]))):
        bars = []
        for m in re.finditer(r"<rect ([^>]*" + attr + r"[^>]*)>", dom):
            a = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
            if float(a["width"]) >= 3:
                bars.append(a)
        if not bars:
            if need:
                print(f"FAIL: no {attr} bar at least 3 px wide to probe")
                fails += 1
            continue
        b = max(bars, key=lambda a: float(a["width"]))
        x = int(float(b["x"]) + float(b["width"]) / 2)
        y = int(float(b["y"]) + float(b["height"]) / 2)
        if x >= width or y >= height:
            print(f"FAIL: the {attr} bar at ({x}, {y}) is outside the {width}x{height} screenshot")
            fails += 1
            continue
        got = tuple(rows[y][x * bpp:x * bpp + 3])
        want = tuple(int(b["fill"][i:i + 2], 16) for i in (1, 3, 5))
        if max(abs(g - w) for g, w in zip(got, want)) > 6:
            print(f"FAIL: pixel ({x}, {y}) of the {attr} bar is {got}, its fill is {want}")
            fails += 1
        else:
            print(f"{attr} bar of {b.get('data-queue', b.get('data-key'))}: pixel ({x}, {y}) "
                  f"is its fill {b['fill']}")
        probes += 1
    # Outside the bars, inside the plot's top-left margin: the page's white background.
    corner = tuple(rows[50][5 * bpp:5 * bpp + 3])
    if corner != (255, 255, 255):
        print(f"FAIL: the background at (5, 50) is {corner}, not white")
        fails += 1
    print(f"{probes} pixel probes, {len(rects)} bars")
    sys.exit(1 if fails else 0)


main()
