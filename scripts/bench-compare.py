#!/usr/bin/env python3
"""Side by side: the rows of several bench_gpu logs (one build each), one line per row.

usage: bench-compare.py LOG... ; each column is named after its log file (NAME.rN.log -> NAME.rN).
A row is a figure's section, shape, layout and backend; its cells are us (% of the ceiling).
"""
import os
import re
import sys

# "prefill (graph) D=8192 T=1k 1 seq   channel-last native   14.35   2338   58.7%"
ROW = re.compile(r"^(?P<section>[a-z ]+\(graph\))\s+(?P<rest>.*?)\s+(?P<us>[\d.]+)\s+(?P<gbs>\d+)\s+(?P<pct>[\d.]+)%")


def rows(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m:
                key = m["section"] + " " + re.sub(r"\s+", " ", m["rest"])
                out[key] = (float(m["us"]), float(m["pct"]))
    return out


def main(paths):
    if not paths:
        print(__doc__.strip())
        return 2
    tables = [rows(p) for p in paths]
    names = [re.sub(r"\.log$", "", os.path.basename(p)) for p in paths]
    keys = list(dict.fromkeys(k for t in tables for k in t))
    width = max((len(k) for k in keys), default=10)
    print(f"{'row':<{width}} " + " ".join(f"{n:>15}" for n in names))
    for k in keys:
        cells = [f"{t[k][0]:8.2f} {t[k][1]:5.1f}%" if k in t else f"{'-':>15}" for t in tables]
        print(f"{k:<{width}} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
