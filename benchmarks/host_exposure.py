"""How much of a short forward's protocol time is the host's: for ours and cuDNN (SDPA's CUDNN
backend), the protocol's figure (triton's do_bench, which clears the L2 before each call and puts
events around the call alone), the same call launched back to back (events around 50 calls, no
clearing), and the host time per call (clock_probe.py's: enqueue only, the GPU kept busy). Where
the host time per call is longer than the L2 clearing that do_bench runs before the call, the GPU
idles inside the timed events. (Session 29's run measured the host time without the GPU kept busy.)

    python3 benchmarks/host_exposure.py
"""
import statistics

import torch

from bench_gpu import attention_flops, median_ms  # benchmarks/ is the script's directory, so on sys.path
from clock_probe import IMPLS, host_us_per_call

SHAPES = [  # (batch, heads, seqlen, headdim, causal): the protocol's short rows
    (32, 16, 512, 128, False),
    (32, 16, 512, 128, True),
    (32, 32, 512, 64, True),
    (16, 16, 1024, 128, False),
]


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


def main():
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    print(f"do_bench's L2 clearing: {back_to_back_ms(cache.zero_, calls=20) * 1e3:.1f} us a call")
    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = attention_flops(b, h, n, n, d, causal)
        for name in ("flashattn", "cudnn"):
            fn = lambda: IMPLS[name](q, k, v, causal)  # noqa: E731
            fn()
            protocol = median_ms(fn)
            kernel = back_to_back_ms(fn)
            host = host_us_per_call(fn)
            print(f"b{b} h{h} s{n} d{d} {'causal' if causal else 'full':6s} {name:9s} | protocol "
                  f"{protocol * 1e3:6.1f} us ({flops / protocol / 1e9:5.1f} TFLOP/s), back to back "
                  f"{kernel * 1e3:6.1f} us ({flops / kernel / 1e9:5.1f}), host {host:5.1f} us a call")


if __name__ == "__main__":
    main()
