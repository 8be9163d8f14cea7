#!/usr/bin/env python3
"""Where a kernel's warps wait, from the per-SASS-line CSV that benchmarks/cpp/sm90_ncu.sh writes.

    python3 benchmarks/cpp/sm90_ncu_stalls.py SOURCE.csv [SOURCE.csv ...] [--lines N]

SOURCE.csv: `ncu -i REP --page source --csv --print-source sass` (sm90_ncu.sh's *_source.csv).
Prints per file the stall samples by reason, then by opcode (the mnemonic before its first dot)
with each opcode's executed warp instructions and its three largest reasons, and with --lines the
N SASS lines holding the most samples. Shares are of all the file's samples: every resident warp
is sampled alike, so a share is also the share of warp time (the producer warp's included).
Session 44 read the d128 pairs this way (docs/perf.md).
"""
import argparse
import collections
import pathlib
import sys

# The source page's reader and number parser are sm80_ncu_classes.py's (same CSV, .gz too).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sm80_ncu_classes import instruction_name, load, num  # noqa: E402

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def opcode(source):
    """The mnemonic before its first dot, past a predicate."""
    return instruction_name(source).split(".")[0]


def report(path, top_lines):
    header, rows = load(path)
    col = {name: i for i, name in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and not h.endswith("(Not Issued)")]
    samples = [num(r[col[SAMPLES]]) for r in rows]
    total = sum(samples) or 1
    by_reason = collections.Counter()
    by_op = collections.Counter()
    op_reasons = collections.defaultdict(collections.Counter)
    op_executed = collections.Counter()
    for r, n_samples in zip(rows, samples):
        op = opcode(r[col["Source"]])
        by_op[op] += n_samples
        op_executed[op] += num(r[col[EXECUTED]])
        for name in reasons:
            n = num(r[col[name]])
            by_reason[name] += n
            op_reasons[op][name] += n
    print(f"== {path}: {total:.0f} samples, {sum(op_executed.values()) / 1e6:.1f} M warp instructions")
    print("   reasons: " + ", ".join(f"{k[6:]} {v / total * 100:.1f}%" for k, v in by_reason.most_common(10)))
    for op, n in by_op.most_common(16):
        top = ", ".join(f"{k[6:]} {v / total * 100:.1f}" for k, v in op_reasons[op].most_common(3))
        print(f"   {op:12s} {n / total * 100:5.1f}%  {op_executed[op] / 1e6:8.2f} M  [{top}]")
    if top_lines:
        print(f"   the {top_lines} lines with the most samples:")
        ranked = sorted(zip(rows, samples), key=lambda rs: -rs[1])[:top_lines]
        for r, n_samples in ranked:
            top = sorted(((num(r[col[k]]), k[6:]) for k in reasons), reverse=True)[:2]
            print(f"   {r[col['Address']][-6:]} {n_samples / total * 100:5.2f}% "
                  f"x{num(r[col[EXECUTED]]) / 1e3:8.0f}k  {r[col['Source']].strip()[:60]:60s} "
                  + ", ".join(f"{name} {n:.0f}" for n, name in top))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--lines", type=int, default=0, help="also list the N lines with the most samples")
    args = ap.parse_args()
    for path in args.files:
        report(path, args.lines)


if __name__ == "__main__":
    main()
