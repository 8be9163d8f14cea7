#!/usr/bin/env python3
"""Runs PyTorch SDPA's FLASH backend (its bundled FlashAttention-2) forward + backward twice at one
protocol shape, bf16, so a profiler (ncu -k regex:flash_bwd) can look at FA2's backward kernel next
to ours. Usage: sm80_fa2_profile.py headdim seqlen causal
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

d, seqlen, causal = (int(x) for x in sys.argv[1:4])
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
