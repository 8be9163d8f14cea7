#!/usr/bin/env python3
"""Runs PyTorch SDPA's FLASH backend (its bundled FlashAttention-2) forward + backward twice at one
protocol shape, bf16, so a profiler (ncu -k regex:flash_bwd) can look at FA2's backward kernel next
to ours. Usage: sm80_fa2_profile.py headdim seqlen causal [seconds]

With `seconds`, runs FA2's backward alone (one forward graph, backward repeated) back to back for
that long and prints its TFLOP/s over the window (what a clock sampler beside it sees).
"""
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

d, seqlen, causal = (int(x) for x in sys.argv[1:4])
seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
batch, heads = 16384 // seqlen, 2048 // d
q, k, v, do = (torch.randn(batch, seqlen, heads, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
               for _ in range(4))
for t in (q, k, v):
    t.requires_grad_(True)
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    for _ in range(2):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        torch.autograd.grad(out, (q, k, v), do)
    torch.cuda.synchronize()
    if seconds > 0:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        calls, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
            calls += 10
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
        flops = 2.5 * 4.0 * batch * heads * seqlen * seqlen * d / (2.0 if causal else 1.0)
        print(f"fa2 backward d{d} s{seqlen} causal {causal}: {calls} calls in {elapsed:.2f} s, "
              f"{elapsed / calls * 1e3:.4f} ms, {flops * calls / elapsed * 1e-12:.1f} TFLOP/s")
torch.cuda.synchronize()
