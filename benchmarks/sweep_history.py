"""Each protocol row's forward ratio (ours / best peer) across several bench_gpu.py runs: how many
runs timed it, the lowest, median and highest ratio, and in how many it met the target issue 4
sets for it (1.10 from 2048 keys, 1.0 below). One run's ratio moves by several percent with the
card and the run (docs/perf.md, session 73), so whether a row meets its target is a question about
this spread, not about one sweep.

    python3 benchmarks/sweep_history.py benchmarks/results/sm90-session{59,65,67,72,73}-*.json

Runs of another dtype than --dtype, and rows without a forward ratio, are left out.
"""
import argparse
import json
import statistics


def target_of(seqlen):
    return 1.10 if seqlen >= 2048 else 1.0


def row_key(row):
    gqa = row["nheads"] != row["nheads_kv"]
    return (row["headdim"], row["seqlen"], bool(row["causal"]), gqa)


def collect(paths, dtype):
    """{row key: [ratio of each run that timed it]} and the runs' (path, gpu, matmul ceiling)."""
    ratios, runs = {}, []
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        header = run.get("header", {})
        if header.get("dtype", "bf16") != dtype:
            continue
        runs.append((path, header.get("gpu", "?"), header.get("ceilings", {}).get("bf16_mm_tflops")))
        for row in run.get("rows", []):
            if row.get("ratio_fwd") is not None:
                ratios.setdefault(row_key(row), []).append(row["ratio_fwd"])
    return ratios, runs


def lines(ratios):
    yield "hdim seqlen causal gqa | runs   min  median   max | met target"
    for key in sorted(ratios):
        headdim, seqlen, causal, gqa = key
        values = ratios[key]
        met = sum(v >= target_of(seqlen) for v in values)
        flag = "" if met == len(values) else "  <"
        yield (f"{headdim:4d} {seqlen:6d} {str(causal):6s} {'yes' if gqa else 'no':3s} | {len(values):4d} "
               f"{min(values):5.3f} {statistics.median(values):6.3f} {max(values):5.3f} | "
               f"{met}/{len(values)} at {target_of(seqlen):.2f}{flag}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="bench_gpu.py --out JSON files")
    ap.add_argument("--dtype", default="bf16")
    args = ap.parse_args()
    ratios, runs = collect(args.runs, args.dtype)
    for path, gpu, matmul in runs:
        print(f"{path}: {gpu}, matmul {matmul:.0f} TFLOP/s" if matmul else f"{path}: {gpu}")
    for line in lines(ratios):
        print(line)


if __name__ == "__main__":
    main()
