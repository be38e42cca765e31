#!/usr/bin/env python3
"""Compare gpusched simulate results with the FGD paper's published results.

Reads our allocation.csv and fragmentation.csv and the published analysis_allo_discrete.csv and
analysis_frag_discrete.csv (same columns), and for every (workload, policy) present in ours
compares the mean over seeds of
  - unallocated GPU % at 100% arrived workload (100 - column 100 of the allocation file), and
  - fragmented GPU % at 80% arrived workload (column 80 of the fragmentation file).
Acceptance (issue 2): per metric, at least 90% of cells within 0.5 points and all within 1.0.
Prints a Markdown table; exits 0 when both metrics pass, 1 otherwise, 2 on bad input.
"""
import csv
import statistics
import sys
from collections import defaultdict

POLICIES = ["01-Random", "02-DotProd", "03-GpuClustering", "04-GpuPacking", "05-BestFit", "06-FGD"]
SHORT = dict(zip(POLICIES, ["random", "dotprod", "clustering", "packing", "bestfit", "fgd"]))


def load(path, column, transform):
    cells = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            value = row[str(column)]
            if value == "":
                raise SystemExit(f"{path}: {row['workload']} {row['sc_policy']} seed {row['seed']}: "
                                 f"column {column} is empty")
            cells[(row["workload"], row["sc_policy"])].append(transform(float(value)))
    return cells


def main(argv):
    if len(argv) != 3:
        print("usage: compare_published.py OUR_DIR PUBLISHED_DIR", file=sys.stderr)
        return 2
    ours_dir, pub_dir = argv[1], argv[2]
    metrics = [
        ("unallocated GPU % @100%", "allocation.csv", "analysis_allo_discrete.csv", 100,
         lambda v: 100.0 - v),
        ("fragmented GPU % @80%", "fragmentation.csv", "analysis_frag_discrete.csv", 80,
         lambda v: v),
    ]
    ok = True
    for title, ours_file, pub_file, column, tf in metrics:
        ours = load(f"{ours_dir}/{ours_file}", column, tf)
        pub = load(f"{pub_dir}/{pub_file}", column, tf)
        workloads = sorted({w for w, _ in ours})
        policies = [p for p in POLICIES if any((w, p) in ours for w in workloads)]
        print(f"\n### {title}: ours / published (mean over seeds), difference\n")
        print("| trace | " + " | ".join(SHORT[p] for p in policies) + " |")
        print("|---" * (len(policies) + 1) + "|")
        within05 = within10 = total = 0
        worst = (0.0, None)
        for w in workloads:
            cells = []
            for p in policies:
                if (w, p) not in ours or (w, p) not in pub:
                    cells.append("n/a")
                    continue
                a = statistics.mean(ours[(w, p)])
                b = statistics.mean(pub[(w, p)])
                d = a - b
                total += 1
                within05 += abs(d) <= 0.5
                within10 += abs(d) <= 1.0
                if abs(d) > abs(worst[0]):
                    worst = (d, (w, p))
                mark = "" if abs(d) <= 0.5 else " **"
                cells.append(f"{a:.2f} / {b:.2f} ({d:+.2f}){mark}")
            print(f"| {w.replace('openb_pod_list_', '')} | " + " | ".join(cells) + " |")
        if total == 0:
            print("no cells to compare", file=sys.stderr)
            return 2
        share05 = within05 / total
        passed = share05 >= 0.9 and within10 == total
        ok &= passed
        print(f"\n{title}: {within05}/{total} cells within 0.5 ({100 * share05:.1f}%), "
              f"{within10}/{total} within 1.0; largest difference {worst[0]:+.2f} "
              f"({worst[1][0] if worst[1] else '-'} {worst[1][1] if worst[1] else ''}): "
              f"{'PASS' if passed else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
