"""A few package backwards at one shape, for Nsight Compute to profile one launch of the main
backward kernel (scripts/device_session.sh measure, MEASURE_NCU):

    ncu --kernel-name regex:backward_kernel --launch-skip 2 --launch-count 1 \
        python3 benchmarks/ncu_backward.py --headdim 128 --seqlen 8192

Random inputs (never zeros); the forward runs once, the backward --repeats times on its output.
"""
import argparse

import torch

import flashattn


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    d, n = args.headdim, args.seqlen
    b, h = max(1, 16384 // n), 2048 // d  # the protocol's tokens and model width
    q, k, v, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flashattn.flash_attn_func(q, k, v, causal=args.causal)
    for _ in range(args.repeats):
        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
