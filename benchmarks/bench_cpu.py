"""Side-by-side CPU benchmark: flashattn's CPU backend vs PyTorch's CPU SDPA at the same thread count.

Run once per thread count, with OMP_NUM_THREADS set to it (flashattn's OpenMP runtime reads it;
PyTorch's is set through torch.set_num_threads):

    OMP_NUM_THREADS=16 python3 benchmarks/bench_cpu.py --threads 16 --out cpu16.json

--backward times the backward of each forward shape too (the gradients of q, k and v from one
recorded forward, through autograd on both sides; 2.5x the forward's FLOPs).
--decode adds decode steps (a few queries against a long cache, GQA and MHA, unmasked on both
sides), timed the same way, with the K/V bytes read per second. --paged 16,256 times ours on
each decode step again with the cache in shuffled pages of those sizes
(flash_attn_with_kvcache with a block_table), against ours on the contiguous cache.
"""
import argparse
import json
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

import flashattn
from bench_decode import paged_pool  # the same shuffled pool the GPU decode rows use

SHAPES = [  # (batch, nheads, seqlen, headdim, causal)
    (1, 16, 1024, 64, False), (1, 16, 1024, 128, False),
    (1, 16, 2048, 64, False), (1, 16, 2048, 128, False),
    (1, 16, 4096, 64, False), (1, 16, 4096, 128, False),
    (1, 16, 2048, 128, True), (1, 16, 4096, 128, True),
]

DECODE_SHAPES = [  # (batch, seqlen_q, seqlen_k, nheads_q, nheads_kv, headdim)
    (1, 1, 8192, 32, 8, 128), (4, 1, 4096, 32, 8, 128),
    (1, 1, 8192, 32, 32, 128), (1, 16, 8192, 32, 8, 128),
]


def median_seconds(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seqlens", default="1024,2048,4096", help="comma-separated subset of the shape table")
    ap.add_argument("--backward", action="store_true", help="also time the backward of each forward shape")
    ap.add_argument("--decode", action="store_true", help="also time the decode steps of DECODE_SHAPES")
    ap.add_argument("--paged", default="", metavar="PAGES",
                    help="with --decode, comma-separated page sizes to time ours on a paged cache too")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    seqlens = {int(n) for n in args.seqlens.split(",") if n.strip()}  # "": decode rows only
    if os.environ.get("OMP_NUM_THREADS") != str(args.threads):
        sys.exit("set OMP_NUM_THREADS to --threads so both libraries use the same thread count")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        for b, h, n, d, causal in (s for s in SHAPES if s[2] in seqlens):
            q, k, v = (torch.randn(b, n, h, d, dtype=dtype) for _ in range(3))
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # SDPA's own layout
            flops = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
            ours = median_seconds(lambda: flashattn.flash_attn_func(q, k, v, causal=causal), args.reps)
            peer = median_seconds(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), args.reps)
            # The float64 reference on one head keeps the check cheap next to the timing.
            out = flashattn.flash_attn_func(q, k, v, causal=causal)[:, :, :1].double()
            ref = F.scaled_dot_product_attention(qt[:, :1].double(), kt[:, :1].double(), vt[:, :1].double(),
                                                 is_causal=causal).transpose(1, 2)
            err = ((out - ref).norm() / ref.norm()).item()
            row = dict(threads=args.threads, dtype=dtype_name, batch=b, nheads=h, seqlen=n, headdim=d,
                       causal=causal, flashattn_gflops=flops / ours / 1e9, torch_sdpa_gflops=flops / peer / 1e9,
                       ratio=peer / ours, rel_error_vs_fp64=err)
            rows.append(row)
            print(f"{dtype_name} threads={args.threads} n={n} d={d} causal={int(causal)}: ours "
                  f"{row['flashattn_gflops']:7.1f} torch {row['torch_sdpa_gflops']:7.1f} GFLOP/s  "
                  f"ratio {row['ratio']:.2f}  err {err:.1e}", flush=True)
            if args.backward:
                rows.append(backward_row(args, dtype_name, (q, k, v), (qt, kt, vt), causal, flops))
    if args.decode:
        rows += decode_rows(args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                                  "threads": args.threads, "simd": flashattn.cpu_simd_flavour()
                                  if hasattr(flashattn, "cpu_simd_flavour") else None}, "rows": rows}, f, indent=1)


def backward_row(args, dtype_name, ours_in, peer_in, causal, forward_flops):
    """The backward of one forward shape, both sides from a recorded forward (retain_graph), with
    dq's error against float64 autograd on one head."""
    q, k, v = (t.detach().requires_grad_() for t in ours_in)
    qt, kt, vt = (t.detach().requires_grad_() for t in peer_in)
    dout = torch.randn_like(q)
    dout_t = dout.transpose(1, 2).contiguous()
    out = flashattn.flash_attn_func(q, k, v, causal=causal)
    out_t = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    ours = median_seconds(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), args.reps)
    peer = median_seconds(lambda: torch.autograd.grad(out_t, (qt, kt, vt), dout_t, retain_graph=True), args.reps)
    dq = torch.autograd.grad(out, (q,), dout, retain_graph=True)[0][:, :, :1].double()
    q64, k64, v64 = (t[:, :1].detach().double().requires_grad_() for t in (qt, kt, vt))
    ref_out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    ref = torch.autograd.grad(ref_out, (q64,), dout_t[:, :1].double())[0].transpose(1, 2)
    err = ((dq - ref).norm() / ref.norm()).item()
    b, n, h, d = q.shape
    flops = 2.5 * forward_flops
    row = dict(threads=args.threads, dtype=dtype_name, backward=True, batch=b, nheads=h, seqlen=n, headdim=d,
               causal=causal, flashattn_gflops=flops / ours / 1e9, torch_sdpa_gflops=flops / peer / 1e9,
               ratio=peer / ours, rel_error_vs_fp64=err)
    print(f"{dtype_name} threads={args.threads} n={n} d={d} causal={int(causal)} backward: ours "
          f"{row['flashattn_gflops']:7.1f} torch {row['torch_sdpa_gflops']:7.1f} GFLOP/s  "
          f"ratio {row['ratio']:.2f}  err(dq) {err:.1e}", flush=True)
    return row


def decode_rows(args):
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        for b, sq, sk, hq, hk, d in DECODE_SHAPES:
            q = torch.randn(b, sq, hq, d, dtype=dtype)
            k, v = (torch.randn(b, sk, hk, d, dtype=dtype) for _ in range(2))
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
            reps = max(args.reps, 20)  # a step takes milliseconds
            ours = median_seconds(lambda: flashattn.flash_attn_func(q, k, v), reps)
            peer = median_seconds(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True), reps)
            out = flashattn.flash_attn_func(q, k, v).double()
            ref = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), enable_gqa=True).transpose(1, 2)
            err = ((out - ref).norm() / ref.norm()).item()
            kv_bytes = 2 * k.numel() * k.element_size()
            row = dict(threads=args.threads, dtype=dtype_name, decode=True, batch=b, seqlen_q=sq, seqlen_k=sk,
                       nheads_q=hq, nheads_kv=hk, headdim=d, flashattn_ms=ours * 1e3, torch_sdpa_ms=peer * 1e3,
                       flashattn_kv_gbps=kv_bytes / ours / 1e9, ratio=peer / ours, rel_error_vs_fp64=err)
            paged = []
            for page in (int(x) for x in args.paged.split(",") if x.strip()):
                k_pages, v_pages, table = paged_pool(k, v, page)
                ms = median_seconds(lambda: flashattn.flash_attn_with_kvcache(q, k_pages, v_pages, block_table=table),
                                    reps) * 1e3
                row[f"flashattn_paged{page}_ms"] = ms
                paged.append(f"paged {page}: {ms:.2f} ms (x{ms / row['flashattn_ms']:.2f})")
            rows.append(row)
            print(f"{dtype_name} threads={args.threads} decode b={b} q={sq} k={sk} heads={hq}/{hk} d={d}: ours "
                  f"{row['flashattn_ms']:7.2f} ms ({row['flashattn_kv_gbps']:5.1f} GB/s of K/V) torch "
                  f"{row['torch_sdpa_ms']:7.2f} ms  ratio {row['ratio']:.2f}  err {err:.1e}"
                  + "".join(f"; {p}" for p in paged), flush=True)
    return rows


if __name__ == "__main__":
    main()
