"""How much of a short forward's protocol time is the host's: for ours and cuDNN (SDPA's CUDNN
backend), the protocol's figure (triton's do_bench, which clears the L2 before each call and puts
events around the call alone), the same call launched back to back (events around 50 calls, no
clearing), and the host time per call (enqueue only). Where the host time per call is longer
than the L2 clearing that do_bench runs before the call, the GPU idles inside the timed events.

    python3 benchmarks/host_exposure.py
"""
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashattn

SHAPES = [  # (batch, heads, seqlen, headdim, causal): the protocol's short rows
    (32, 16, 512, 128, False),
    (32, 16, 512, 128, True),
    (32, 32, 512, 64, True),
    (16, 16, 1024, 128, False),
]


def ours(q, k, v, causal):
    return flashattn.flash_attn_func(q, k, v, causal=causal)


def cudnn(q, k, v, causal):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=causal)
    return out.transpose(1, 2)


def back_to_back_ms(fn, calls=50, rounds=5):
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def host_us(fn, calls=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def main():
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    cache.zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        cache.zero_()
    end.record()
    torch.cuda.synchronize()
    print(f"do_bench's L2 clearing: {start.elapsed_time(end) / 20 * 1e3:.1f} us a call")
    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
        for name, impl in (("ours", ours), ("cudnn", cudnn)):
            fn = lambda: impl(q, k, v, causal)  # noqa: E731
            fn()
            protocol = do_bench(fn, warmup=200, rep=100, return_mode="median")
            kernel = back_to_back_ms(fn)
            host = host_us(fn)
            print(f"b{b} h{h} s{n} d{d} {'causal' if causal else 'full':6s} {name:5s} | protocol "
                  f"{protocol * 1e3:6.1f} us ({flops / protocol / 1e9:5.1f} TFLOP/s), back to back "
                  f"{kernel * 1e3:6.1f} us ({flops / kernel / 1e9:5.1f}), host {host:5.1f} us a call")


if __name__ == "__main__":
    main()
