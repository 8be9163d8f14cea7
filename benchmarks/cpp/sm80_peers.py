#!/usr/bin/env python3
"""Times PyTorch SDPA (FLASH = its bundled FlashAttention-2, and CUDNN) at the shapes of
flashattn_sm80_bench's output, in the same call on the same GPU, and prints one table with the
ratios ours / FA2 and ours / best peer (and, as "sync", our backward with a host wait after every
call). Forward: the SDPA call; backward: (fwd + bwd) - fwd.

Usage: sm80_peers.py ours.jsonl results.json
"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F


def median_ms(fn, reps=20):
    for _ in range(3):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    times = []
    for i in range(reps):
        start[i].record()
        fn()
        stop[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(start, stop))
    return times[len(times) // 2]


def time_peer(backend, batch, seqlen, heads, d, causal):
    # (batch, seqlen, heads, d) storage like ours, viewed as SDPA's (batch, heads, seqlen, d)
    q, k, v, do = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
                   for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    with sdpa_kernel(backend):
        fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))

        def fwd_bwd():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(out, (q, k, v), do)

        both = median_ms(fwd_bwd)
    return fwd, both - fwd


def main():
    ours = [json.loads(line) for line in open(sys.argv[1]) if line.strip().startswith("{")]
    rows = []
    shapes = sorted({(r["headdim"], r["seqlen"], r["causal"]) for r in ours})
    for d, seqlen, causal in shapes:
        batch, heads = 16384 // seqlen, 2048 // d
        flops = 4.0 * batch * heads * seqlen * seqlen * d / (2 if causal else 1)
        peers = {}
        for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                f_ms, b_ms = time_peer(backend, batch, seqlen, heads, d, causal)
                peers[name] = {"fwd": flops / f_ms * 1e-9, "bwd": 2.5 * flops / b_ms * 1e-9}
            except Exception as e:  # a backend that refuses a shape is reported, not fatal
                print(f"{name} d{d} s{seqlen} causal={causal}: {type(e).__name__}: {e}"[:200], file=sys.stderr)
            torch.cuda.empty_cache()
        for direction in ("fwd", "bwd"):
            mine = [r for r in ours if (r["headdim"], r["seqlen"], r["causal"], r["direction"]) == (d, seqlen, causal, direction)]
            if not mine:
                continue
            row = dict(mine[0])
            row["gpu"] = torch.cuda.get_device_name()
            row["torch"] = torch.__version__
            for name, v in peers.items():
                row[f"{name}_tflops"] = round(v[direction], 1)
            rows.append(row)
    json.dump(rows, open(sys.argv[2], "w"), indent=1)
    print(f"{'dir':4} {'d':>4} {'seqlen':>6} {'causal':>6} {'ours':>7} {'fa2':>7} {'cudnn':>7} {'/fa2':>6} {'/best':>6} "
          f"{'sync':>7}")
    for r in rows:
        fa2, cud = r.get("fa2_tflops", 0.0), r.get("cudnn_tflops", 0.0)
        best = max(fa2, cud)
        print(f"{r['direction']:4} {r['headdim']:>4} {r['seqlen']:>6} {str(r['causal']):>6} {r['tflops']:>7.1f} "
              f"{fa2:>7.1f} {cud:>7.1f} {r['tflops'] / fa2 if fa2 else 0:>6.2f} {r['tflops'] / best if best else 0:>6.2f} "
              f"{r.get('tflops_sync_each', 0.0):>7.1f}")


if __name__ == "__main__":
    main()
