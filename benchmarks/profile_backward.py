"""Where the time of one flash_attn_func forward + backward goes through the package, beside SDPA's
FLASH backend: torch.profiler's per-kernel CUDA time and the host time per call, at one shape.

    python3 benchmarks/profile_backward.py [--headdim 128] [--seqlen 512] [--causal]

The side-by-side numbers come from bench_gpu.py; this explains a gap between the package's backward
there and the C++ harness's (benchmarks/cpp/sm80_bench.cpp) at short sequences.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import flashattn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=512)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args()
    d, n = args.headdim, args.seqlen
    b, h = 16384 // n, 2048 // d
    q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))

    def ours():
        flashattn.flash_attn_func(q, k, v, causal=args.causal).backward(do)

    def fa2():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=args.causal)
        out.backward(do.transpose(1, 2))

    for name, fn in (("flashattn", ours), ("fa2", fa2)):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        reps = 30
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        host = (time.perf_counter() - t0) / reps * 1e3
        torch.cuda.synchronize()
        total = (time.perf_counter() - t0) / reps * 1e3
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        print(f"== {name}: host {host:.3f} ms per fwd+bwd (enqueue), wall {total:.3f} ms, "
              f"events {start.elapsed_time(end) / reps:.3f} ms")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))


if __name__ == "__main__":
    main()
