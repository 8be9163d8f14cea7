"""How much of a short forward's protocol time is the host's: for ours and cuDNN (SDPA's CUDNN
backend), the protocol's figure (triton's do_bench, which clears the L2 before each call and puts
events around the call alone), the same call launched back to back (events around 50 calls, no
clearing), and the host time per call (clock_probe.py's: enqueue only, the GPU kept busy). Where
the host time per call is longer than the L2 clearing that do_bench runs before the call, the GPU
idles inside the timed events. (Session 29's run measured the host time without the GPU kept busy.)

    python3 benchmarks/host_exposure.py
    python3 benchmarks/host_exposure.py --decode 1,32,8,32768 --headdim 64 \
        --ours-env FLASHATTN_SM90_SLICED_DECODE=1 --ours-env FLASHATTN_SM90_SLICED_DECODE=0

With --decode rows (bench_decode.py's 'batch,hq,hkv,kv_len', one query row) those rows instead of
the protocol's short ones, in TB/s of K and V read, and one more column: the call replayed from a
CUDA graph under do_bench (its L2 clearing included), which takes the host out of the protocol's
figure (session 96: the sliced decode kernel's 8-tile call took ~15 us outside its kernels in
do_bench against ~5 us for the packed kernel's). Each --ours-env setting (bench_gpu.py's) is
timed as flashattn[SETTING] beside plain ours and cuDNN.
"""
import argparse
import statistics

import torch

import bench_decode as bd  # benchmarks/ is the script's directory, so on sys.path
import bench_gpu as bg
from bench_gpu import attention_flops, median_ms
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


def graph_ms(fn):
    """do_bench's median of fn replayed from a CUDA graph (captured on a side stream after a
    warm-up call there); None where fn cannot be captured."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.stream(stream):
            fn()
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                fn()
    except RuntimeError as e:
        print(f"  (no graph: {str(e).splitlines()[0][:100]})")
        return None
    torch.cuda.synchronize()
    return median_ms(graph.replay)


def decode_rows(shapes, names):
    for b, hq, hkv, kv_len in shapes:
        q = torch.randn(b, 1, hq, bd.HEADDIM, device="cuda", dtype=torch.bfloat16)
        k, v = bd.kv_tensor(b, kv_len, hkv, "bshd"), bd.kv_tensor(b, kv_len, hkv, "bshd")
        tb = bd.kv_bytes(b, hkv, kv_len) / 1e6  # MB: MB / us = TB/s
        for name in names:
            fn = lambda: bg.IMPLS[name](q, k, v, False)  # noqa: E731
            fn()
            protocol, kernel, host = median_ms(fn), back_to_back_ms(fn), host_us_per_call(fn)
            replay = graph_ms(fn)
            graphed = f"{replay * 1e3:6.1f} us ({tb / (replay * 1e3):4.2f})" if replay else "  -"
            print(f"b={b} h={hq}/{hkv} kv={kv_len} d{bd.HEADDIM} {name:40s} | protocol {protocol * 1e3:6.1f} us "
                  f"({tb / (protocol * 1e3):4.2f} TB/s), graph {graphed}, back to back {kernel * 1e3:6.1f} us "
                  f"({tb / (kernel * 1e3):4.2f}), host {host:5.1f} us a call", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decode", action="append", default=[], metavar="BATCH,HQ,HKV,KV_LEN",
                    help="a decode row to time instead of the protocol's short rows (repeatable)")
    ap.add_argument("--ours-env", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE...]",
                    help="with --decode: ours once more with these settings (bench_gpu.py's)")
    bd.add_headdim_option(ap)
    args = ap.parse_args()
    bd.take_headdim(args, ap)
    try:
        shapes = [bd.parse_shape(text) for text in args.decode]
    except ValueError as e:
        ap.error(str(e))
    if args.ours_env and not args.decode:
        ap.error("--ours-env: only with --decode rows")
    bg.add_ours_with_env(args.ours_env, ap)
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    print(f"do_bench's L2 clearing: {back_to_back_ms(cache.zero_, calls=20) * 1e3:.1f} us a call")
    if shapes:
        decode_rows(shapes, ["flashattn", *(f"flashattn[{s}]" for s in args.ours_env), "cudnn"])
        return
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
