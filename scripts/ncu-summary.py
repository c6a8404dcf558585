#!/usr/bin/env python3
"""Where one kernel's time goes, from Nsight Compute's per-instruction page.

usage: ncu-summary.py SOURCE.csv [TOP]
  SOURCE.csv: `ncu -i REPORT --page source --csv --print-source sass` of a report taken with
  `--set full` (its warp-state sampling and instruction counts); TOP: rows per table (default 15).

Prints: the warp instructions executed and how they split by execution count (a block of code
executed N times: the loop bodies, the per-piece and per-thread parts), the stall reasons over
all samples, and the instructions that collect the most samples with their top stalls.
"""
import collections
import csv
import sys


def opcode(sass):
    s = sass.strip()
    if s.startswith("@"):
        s = s.split(None, 1)[1]
    return s.split()[0] if s else ""


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    top = int(argv[2]) if len(argv) > 2 else 15
    with open(argv[1], newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if header_at is None:
        print(f"{argv[1]}: no 'Address'/'Source' header: not ncu's source page as CSV", file=sys.stderr)
        return 1
    hdr, data = rows[header_at], [r for r in rows[header_at + 1 :] if len(r) == len(rows[header_at])]
    col = {h: i for i, h in enumerate(hdr)}
    need = ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)")
    missing = [h for h in need if h not in col]
    if missing:
        print(f"{argv[1]}: no column {missing}: profile with --set full", file=sys.stderr)
        return 1
    num = lambda r, h: int(r[col[h]]) if r[col[h]].isdigit() else 0  # noqa: E731
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]

    executed = [num(r, "Instructions Executed") for r in data]
    samples = [num(r, "Warp Stall Sampling (All Samples)") for r in data]
    total, total_samples = sum(executed), sum(samples)
    print(f"{len(data)} SASS instructions, {total} warp instructions executed, {total_samples} samples")
    total, total_samples = max(total, 1), max(total_samples, 1)  # the shares' divisors

    print(f"\nby execution count (a block of code run N times), top {top}:")
    print(f"{'times':>10} {'instr':>6} {'executed':>10} {'share':>6} {'samples':>8}  commonest opcodes")
    blocks = collections.defaultdict(list)
    for k, n in enumerate(executed):
        if n:
            blocks[n].append(k)
    for n, ks in sorted(blocks.items(), key=lambda kv: -kv[0] * len(kv[1]))[:top]:
        ops = collections.Counter(opcode(data[k][col["Source"]]) for k in ks).most_common(5)
        print(
            f"{n:>10} {len(ks):>6} {n * len(ks):>10} {n * len(ks) / total:>6.1%} "
            f"{sum(samples[k] for k in ks):>8}  " + ", ".join(f"{o} {c}" for o, c in ops)
        )

    print("\nstall reasons, all samples:")
    agg = collections.Counter({h: sum(num(r, h) for r in data) for h in stalls})
    for h, n in agg.most_common(top):
        if n:
            print(f"  {h:<28} {n:>7} {n / total_samples:>6.1%}")

    print(f"\ninstructions with the most samples, top {top}:")
    for k in sorted(range(len(data)), key=lambda k: -samples[k])[:top]:
        r = data[k]
        why = sorted(((num(r, h), h) for h in stalls), reverse=True)[:2]
        why_s = ", ".join(f"{h[6:]} {n}" for n, h in why if n)
        print(f"  #{k:<5} {samples[k]:>5} {samples[k] / total_samples:>6.1%}  x{executed[k]:<7} "
              f"{r[col['Source']].strip()[:56]:<56} {why_s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
