"""Runs cuDNN's attention (through PyTorch's SDPA) twice at a few protocol shapes, each call inside
an NVTX range named after its shape, so that Nsight Compute can report the launch the peer picks
(grid, block, registers, shared memory, kernel name) beside ours. Used as:

  ncu --clock-control none --nvtx --print-nvtx-rename kernel \
      --metrics launch__grid_size,launch__block_size,launch__registers_per_thread,\
launch__shared_mem_per_block_dynamic,gpu__time_duration.sum \
      python3 benchmarks/peer_launch_probe.py

Shapes: (batch, heads, seqlen, head dim, causal), 16384 tokens and a width of 2048 as in
../shared/docs/benchmark-protocol.md. Times under ncu are single cold-clock launches, not the
protocol's figures.
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [
    (8, 16, 2048, 128, False),
    (4, 16, 4096, 128, False),
    (2, 16, 8192, 128, False),
    (32, 16, 512, 128, False),
    (32, 32, 512, 64, True),
    (8, 16, 2048, 128, True),
]


def main():
    for batch, heads, seqlen, hdim, causal in SHAPES:
        q, k, v = (torch.randn(batch, heads, seqlen, hdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(2):
                torch.cuda.nvtx.range_push(f"b{batch}h{heads}s{seqlen}d{hdim}c{int(causal)}")
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(batch, heads, seqlen, hdim, causal, flush=True)


if __name__ == "__main__":
    main()
