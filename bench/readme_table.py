#!/usr/bin/env python3
"""Writes the README's speed table from the output of bench/run.sh.

    python3 bench/readme_table.py BENCH_OUTPUT README.md

The table sits between the lines `<!-- bench-table:begin -->` and `<!-- bench-table:end -->`
of README.md and is replaced whole: one row per figure bench/run.sh prints, with its target,
and a last line naming the machine and the date of the run. A figure the output lacks (a
benchmark that was skipped or failed) is written as "not measured in this run" rather than
kept from an older run, so the README never mixes runs. Exit status 1 when the markers are
missing or no figure at all was found.
"""
import datetime
import re
import sys

BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"


def num(x):
    return float(x.replace(",", ""))


def fmt_int(x):
    return f"{int(round(x)):,}"


def rows(text):
    """(what, measured or None, target) for each figure, in README order."""
    out = []

    def find(pat):
        return re.search(pat, text, re.M)

    # 1. one run per policy on the default trace (bench_sim).
    runs = {m.group(1): (num(m.group(2)), int(m.group(4)), num(m.group(5)))
            for m in re.finditer(r"^(\w+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s*$", text, re.M)}
    fgd = runs.get("fgd")
    others = [v[0] for k, v in runs.items() if k != "fgd"]
    measured = None
    if fgd:
        measured = f"{fgd[0]:.2f} s median of 5 ({fmt_int(fgd[2])} pods/s)"
        if others:
            measured += f"; other policies {min(others):.2f}-{max(others):.2f} s"
    pods = f"{fmt_int(fgd[1])} pod decisions" if fgd else "pod decisions"
    out.append((f"one FGD run, default trace, seed 42, tune 1.3 ({pods} on 1,213 nodes)", measured,
                "under 1 s (the authors report about 10 minutes per run)"))

    # 1b. FGD on the trace replicated 8x and 16x.
    for nodes, target in (("9704", "50,000/s or more"), ("19408", "40,000/s or more")):
        m = find(r"^fgd scale: " + nodes + r" nodes, (\d+) decisions, ([\d.]+) s median of 3, "
                 r"(\d+) decisions/s")
        out.append((f"FGD on the default trace replicated {int(nodes) // 1213}x "
                    f"({fmt_int(num(nodes))} nodes)",
                    m and f"{fmt_int(num(m.group(3)))} decisions/s ({fmt_int(num(m.group(1)))} "
                          f"decisions in {num(m.group(2)):.2f} s, median of 3)",
                    target))

    # 2. the published sweep.
    m = find(r"^sweep: ([\d.]+) s wall, (\d+) pod decisions, (\d+) pods/s")
    out.append(("the whole sweep, 13 traces x 6 policies x 10 seeds, all cores",
                m and f"{num(m.group(1)):.0f} s ({fmt_int(num(m.group(3)))} pods/s, "
                      f"{num(m.group(2)) / 1e6:.1f} million decisions)",
                "under 5 minutes"))

    # 3. a pod list that tuning must shrink.
    m = find(r"^big list: (\d+) pods \((\d+) MB\), ([\d.]+) s wall")
    out.append(("one run on a 1.4M-pod list tuned down to the cluster (read, shrink, place)",
                m and f"{num(m.group(3)):.1f} s for {fmt_int(num(m.group(1)))} pods "
                      f"({m.group(2)} MB)",
                "seconds, not minutes"))

    # 4-9. the tenancy engine (bench_tenant).
    m = find(r"^decisions \((\w+), ([\w ]+)\): .*median ([\d.]+) us, p99 ([\d.]+) us")
    out.append(("one tenancy decision (queue order + placement), 10,000 nodes / 80,000 GPUs, "
                "100,000 pending pods in 50 queues",
                m and f"median {m.group(3)} us, p99 {m.group(4)} us ({m.group(1)}, {m.group(2)})",
                "median 20 us or less"))
    m = find(r"^live decisions \((\w+), ([\w ]+)\): .*median ([\d.]+) us, p99 ([\d.]+) us")
    out.append(("the same when half of the pending pods carry a zone nodeSelector or a "
                "toleration (10% of nodes tainted)",
                m and f"median {m.group(3)} us, p99 {m.group(4)} us", "median 20 us or less"))
    m = find(r"^live node update: label change ([\d.]+) us per node \((\d+) filter classes\), "
             r"GPU health flip ([\d.]+) us")
    out.append(("a node update: a label change re-judged in every filter class / a GPU health flip",
                m and f"{m.group(1)} us / {m.group(3)} us per node ({m.group(2)} classes)", ""))
    m = find(r"^live adopt: 100,000 running pods .* in (\d+) ms")
    out.append(("adopt 100,000 running pods after a restart (60,000 one-GPU, 20,000 fractional, "
                "20,000 CPU-only)", m and f"{m.group(1)} ms", "1 s or less"))
    m = find(r"^live memory: (\d+) B per node .*, (\d+) B per pending pod")
    out.append(("memory", m and f"{fmt_int(num(m.group(1)))} B per node, "
                               f"{fmt_int(num(m.group(2)))} B per pending pod", ""))
    m = find(r"^preemption \(\w+\): (\d+) running pods .*one preemption decision ([\d.]+) ms")
    out.append(("one preemption decision", m and f"{m.group(2)} ms with "
                                                 f"{fmt_int(num(m.group(1)))} running pods",
                "5 ms or less"))
    m = find(r"^gang \(\w+\): 512-pod gang placed in ([\d.]+) ms .*refused with 300 GPUs free in "
             r"([\d.]+) ms.*after 300 trial placements in ([\d.]+) ms")
    out.append(("a 512-pod gang placed / refused / refused after 300 trial placements",
                m and f"{m.group(1)} ms / {m.group(2)} ms / {m.group(3)} ms", "20 ms or less"))

    # the usage store (bench_usage).
    m = find(r"^write \(synchronous=FULL, batches of (\d+) events\): (\d+) intervals in [\d.]+ s = "
             r"(\d+) intervals/s wall, (\d+) per CPU-second; database [\d.]+ MiB = ([\d.]+) MiB")
    out.append(("usage store: 1,000,000 intervals written (WAL, synchronous FULL, batched)",
                m and f"{fmt_int(num(m.group(3)))}/s ({fmt_int(num(m.group(4)))} per CPU-second, "
                      f"batches of {fmt_int(num(m.group(1)))} events)",
                "50,000/s or more"))
    out.append(("usage store size", m and f"{num(m.group(5)):.0f} MiB per million intervals", ""))
    m = find(r"^report usage --by team over the year: ([\d.]+) s")
    y = find(r"^year: .* = ([\d.]+) days, (\d+) intervals")
    out.append(("`report usage --by team` over one year of the README's replay (median of 5)",
                m and f"{m.group(1)} s" + (f" ({fmt_int(num(y.group(2)))} intervals)" if y else ""),
                "under 1 s"))

    # the node agent (bench/agent.sh).
    m = find(r"^allocate: (\d+) calls, 1 GPU each: p50 (\d+) us, p99 (\d+) us")
    f = find(r"^allocate: client\+transport floor .*: p50 (\d+) us, p99 (\d+) us")
    out.append(("node agent: Allocate through a grpcio client",
                m and f"p50 {m.group(2)} us, p99 {m.group(3)} us over {fmt_int(num(m.group(1)))} "
                      f"calls" + (f" (the client's own floor: p99 {f.group(2)} us)" if f else ""),
                "p99 1 ms or less"))
    m = find(r"^metrics: \d+ scrapes, 8 GPUs, 32 pods, (\d+) bytes.*p50 ([\d.]+) ms, p99 ([\d.]+) ms")
    out.append(("node agent: one /metrics scrape, 8 GPUs, 32 pods",
                m and f"p50 {m.group(2)} ms, p99 {m.group(3)} ms ({fmt_int(num(m.group(1)))} bytes)",
                "5 ms or less"))
    m = find(r"^cpu: ([\d.]+) % of one core over")
    out.append(("node agent CPU, scraped every second", m and f"{m.group(1)}% of a core",
                "1% or less"))
    return out


def machine(text):
    m = re.search(r"^== machine: (.*)$", text, re.M)
    return m.group(1) if m else "unknown machine"


def table(text, when):
    lines = ["| what (`make bench`, Release build) | measured | target |", "|---|---|---|"]
    found = 0
    for what, measured, target in rows(text):
        found += measured is not None
        lines.append(f"| {what} | {measured or 'not measured in this run'} | {target} |")
    lines.append("")
    lines.append(f"Measured by `make bench` on {when} ({machine(text)}); the table is written by "
                 "bench/readme_table.py from that run's output.")
    return lines, found


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: readme_table.py BENCH_OUTPUT README.md")
    text = open(sys.argv[1], encoding="utf-8").read()
    readme = open(sys.argv[2], encoding="utf-8").read().split("\n")
    try:
        b, e = readme.index(BEGIN), readme.index(END)
    except ValueError:
        sys.exit(f"{sys.argv[2]}: no {BEGIN} ... {END} lines")
    if e < b:
        sys.exit(f"{sys.argv[2]}: {END} before {BEGIN}")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    lines, found = table(text, when)
    if found == 0:
        sys.exit(f"{sys.argv[1]}: no benchmark figure found; README left as it was")
    readme[b + 1:e] = lines
    with open(sys.argv[2], "w", encoding="utf-8") as fo:
        fo.write("\n".join(readme))
    print(f"readme_table: {found} of {len(lines) - 4} figures written to {sys.argv[2]}")


if __name__ == "__main__":
    main()
