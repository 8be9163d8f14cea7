#!/usr/bin/env python3
"""Sums an ncu source page (per-SASS-line CSV: `ncu --import R --page source --csv --print-source sass`,
written by `scripts/device_sm80.sh v7`) by instruction class: executed instructions, warp-stall samples
with the top stall reasons, shared-memory wavefronts against the ideal count (bank conflicts), L2
sectors and L1 global requests (e.g. how many requests the dQ reductions make). Used for docs/perf.md's
sm80 v7 comparison of our backward main kernel with FA2's. Usage: sm80_ncu_classes.py file.csv[.gz] ...
"""
import collections
import csv
import gzip
import sys

STALLS = ["stall_barrier", "stall_branch_resolving", "stall_dispatch", "stall_drain", "stall_lg", "stall_long_sb",
          "stall_math", "stall_membar", "stall_mio", "stall_misc", "stall_no_inst", "stall_not_selected",
          "stall_selected", "stall_short_sb", "stall_tex", "stall_wait", "stall_sleep", "stall_imc"]
CLASSES = {"HMMA": "HMMA", "LDSM": "LDSM", "LDS": "LDS", "STS": "STS", "BAR": "BAR", "RED": "RED", "REDG": "RED",
           "ATOMG": "RED", "ATOM": "RED", "MUFU": "MUFU", "LDGSTS": "CPASYNC", "LDGDEPBAR": "CPASYNC",
           "DEPBAR": "CPASYNC", "LDG": "LDG", "STG": "STG", "LDL": "LDL", "STL": "STL"}
FP32 = {"FFMA", "FMUL", "FADD", "FSETP", "FSEL", "FMNMX", "F2FP", "F2F", "FCHK"}
CTRL = {"BRA", "BSSY", "BSYNC", "EXIT", "CALL", "RET", "WARPSYNC", "BMOV"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    lines = opener(path, "rt", errors="replace").read().splitlines()
    start = next((i for i, line in enumerate(lines) if "Source" in line and "Address" in line), None)
    if start is None:
        raise SystemExit(f"{path}: no per-line table (Address, Source columns)")
    rows = list(csv.reader(lines[start:]))
    return rows[0], [r for r in rows[1:] if len(r) >= len(rows[0])]


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def instruction_name(source):
    """A SASS line's instruction name with its modifiers (MUFU.EX2), past a guard predicate; "?"
    for a line without one."""
    tokens = source.split()
    if tokens and tokens[0].startswith("@"):
        tokens = tokens[1:]
    return tokens[0] if tokens else "?"


def opclass(source):
    name = instruction_name(source)
    if name == "?":
        return "?"
    base = name.split(".")[0]
    if base in CLASSES:
        return CLASSES[base]
    return "FP32" if base in FP32 else "CTRL" if base in CTRL else "INT/other"


def main():
    for path in sys.argv[1:]:
        hdr, data = load(path)
        ix = {h: i for i, h in enumerate(hdr)}
        total = collections.Counter()
        per = collections.defaultdict(collections.Counter)
        count, wf, wfi, l2, req = (collections.Counter() for _ in range(5))
        samples = 0.0
        for r in data:
            c = opclass(r[ix["Source"]])
            count[c] += num(r[ix["Instructions Executed"]])
            samples += num(r[ix["Warp Stall Sampling (All Samples)"]])
            for st in STALLS:
                if st in ix:
                    v = num(r[ix[st]])
                    per[c][st] += v
                    total[st] += v
            wf[c] += num(r[ix["L1 Wavefronts Shared"]])
            wfi[c] += num(r[ix["L1 Wavefronts Shared Ideal"]])
            l2[c] += num(r[ix["L2 Theoretical Sectors Global"]])
            req[c] += num(r[ix["L1 Tag Requests Global"]])
        n = sum(count.values())
        print(f"== {path}: {n / 1e6:.1f} M instructions, {samples:.0f} samples")
        print(" stalls (% of samples):", ", ".join(f"{k[6:]} {100 * v / samples:.1f}" for k, v in total.most_common(9)))
        for c, k in count.most_common():
            top = ", ".join(f"{s[6:]} {100 * v / samples:.1f}" for s, v in per[c].most_common(3) if v > 0)
            extra = f" | smem {wf[c] / 1e6:.1f}M/{wfi[c] / 1e6:.1f}M ideal" if wf[c] else ""
            extra += f" | L2 sectors {l2[c] / 1e6:.1f}M, requests {req[c] / 1e6:.1f}M" if l2[c] else ""
            print(f" {c:10s} {k / 1e6:8.1f} M {100 * k / n:5.1f}% inst {100 * sum(per[c].values()) / samples:5.1f}% samples"
                  f"  {top}{extra}")


if __name__ == "__main__":
    main()
