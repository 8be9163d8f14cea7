#!/usr/bin/env python3
"""The SM clock and board power while one harness run is under way: the median of nvidia-smi's
samples taken beside it, over the busy part of the run (samples at 80% or more of the run's
highest power; the start and the end, when the card idles or loads inputs, are left out).

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > smi.csv &
    flashattn_sm90_variants 0 1 256 4096 0 n64_s2 1 3000 1 > run.json; kill %1
    smi_window.py smi.csv run.json          # one JSON line: variant, row, TFLOP/s, clock, power

Only reads files; the card's settings are never touched.
"""
import json
import statistics
import sys


def busy_samples(path):
    samples = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            samples.append((float(parts[1]), float(parts[2])))  # MHz, W
        except ValueError:
            continue
    if not samples:
        return []
    top = max(w for _, w in samples)
    return [(mhz, w) for mhz, w in samples if w >= 0.8 * top]


def main():
    smi, run = sys.argv[1], sys.argv[2]
    busy = busy_samples(smi)
    # The run's first timed row (a failed launch prints a row without "tflops").
    rows = (json.loads(line) for line in open(run) if line.startswith("{"))
    timed = next((r for r in rows if "tflops" in r), {})
    out = {key: timed.get(key) for key in ("variant", "hdim", "seqlen", "causal", "tflops")}
    out.update({
        "busy_samples": len(busy),
        "sm_mhz_median": statistics.median(m for m, _ in busy) if busy else None,
        "power_w_median": statistics.median(w for _, w in busy) if busy else None,
    })
    if out["tflops"] and out["sm_mhz_median"]:
        # Work a clock: TFLOP/s per GHz, the quantity the pair step compares off the power cap.
        out["tflops_per_ghz"] = round(out["tflops"] / (out["sm_mhz_median"] / 1000.0), 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
