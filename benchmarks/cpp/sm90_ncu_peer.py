"""One cuDNN SDPA forward (PyTorch, bf16) of a chosen protocol shape, for ncu to profile next to
our kernel (benchmarks/cpp/sm90_ncu.sh). Usage: python3 sm90_ncu_peer.py [hdim=128] [seqlen=8192]
[causal=0]; tokens 16384, nheads * hdim = 2048 as in the benchmarks."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

d = int(sys.argv[1]) if len(sys.argv) > 1 else 128
s = int(sys.argv[2]) if len(sys.argv) > 2 else 8192
causal = bool(int(sys.argv[3])) if len(sys.argv) > 3 else False
b, h = 16384 // s, 2048 // d
q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
