"""Cycles a key block of the sm90 forward's steady loop, away from the power cap.

Two 128-row query tiles of one head against many keys: the cluster-pairs kernel runs them as one
pair, the static kernel as two CTAs, and every other SM stays idle, so the card holds its clock
and a key block's time times the clock is the loop's cost a clock: the number to set beside
benchmarks/cpp/sm90_pipe_probe.cu's one-pair forms (2048 cycles a step when the tensor cores
never wait). Not a test and not the protocol's benchmark.

    python3 benchmarks/sm90_pair_step.py [--keys 65536] [--reps 200] [--out FILE.jsonl]

The clock is sampled by nvidia-smi while the timed launches run (its median is used). It reads
high: 1980 MHz where the pipe probe's clock64 / globaltimer saw 1785-1815 on one pair (session
52), so compare `ms` (or `tflops`) between runs and kernels; `cycles_per_block` is an upper bound.
Head dims 128 and 256 only: d64's kernels run three warpgroups on 192-row tiles, which the
tile and FLOP arithmetic here does not describe.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

import flashattn

TILE_ROWS = 128
VARIANTS = {128: ["cluster", "static", "default"], 256: ["static", "default"]}
KEY_BLOCK = {128: 128, 256: 64}  # the kernels' key-block widths (config.h)


def sample_clock():
    return subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-lms", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def time_variant(q, k, v, variant, reps):
    os.environ["FLASHATTN_SM90_VARIANT"] = variant
    for _ in range(20):
        flashattn.flash_attn_func(q, k, v)
    torch.cuda.synchronize()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    clock = sample_clock()
    for i in range(reps):
        start[i].record()
        flashattn.flash_attn_func(q, k, v)
        end[i].record()
    torch.cuda.synchronize()
    clock.terminate()
    mhz = [int(line) for line in clock.communicate()[0].split() if line.strip().isdigit()]
    ms = statistics.median(s.elapsed_time(e) for s, e in zip(start, end))
    return ms, (statistics.median(mhz) if mhz else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=65536)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--headdims", default="128,256")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    headdims = [int(h) for h in args.headdims.split(",")]
    if any(h not in VARIANTS for h in headdims):
        ap.error(f"--headdims: {args.headdims}: only {sorted(VARIANTS)} are described here")
    out = open(args.out, "a") if args.out else sys.stdout
    torch.manual_seed(0)
    for hdim in headdims:
        q = torch.randn(1, 2 * TILE_ROWS, 1, hdim, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, args.keys, 1, hdim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, args.keys, 1, hdim, device="cuda", dtype=torch.bfloat16)
        blocks = args.keys // KEY_BLOCK[hdim]
        for variant in VARIANTS[hdim]:
            ms, mhz = time_variant(q, k, v, variant, args.reps)
            # A key block of a tile: S (64 x N x d) and P V (64 x d x N) of each of two warpgroups.
            cycles = ms * 1e-3 * mhz * 1e6 / blocks
            flops = 4.0 * 2 * TILE_ROWS * args.keys * hdim
            row = {"hdim": hdim, "variant": variant, "keys": args.keys, "key_block": KEY_BLOCK[hdim], "ms": round(ms, 4),
                   "mhz": mhz, "cycles_per_block": round(cycles, 1),
                   "tensor_share_per_clock": round(2048.0 * KEY_BLOCK[hdim] / 128 * hdim / 128 / cycles, 4),
                   "tflops": round(flops / (ms * 1e-3) / 1e12, 2)}
            print(json.dumps(row), file=out, flush=True)
    os.environ.pop("FLASHATTN_SM90_VARIANT", None)


if __name__ == "__main__":
    main()
