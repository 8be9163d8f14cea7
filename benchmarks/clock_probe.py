"""Why a kernel is slower under sustained load than in a single launch: the SM clock and the board
power while each implementation runs back to back, beside the host's cost per call.

For one forward shape, per implementation (ours through the package, PyTorch SDPA under cuDNN and
FA2), in two interleaved rounds:
  - host cost: microseconds of Python + launch per call, measured while the GPU is kept busy by
    torch.cuda._sleep (so the host never waits on the device);
  - cold: one call after a second of idle, timed with CUDA events (what ncu's single launch sees);
  - sustained: calls back to back for --seconds, TFLOP/s over the whole window, with nvidia-smi
    sampling the SM clock, the power draw and the active clock-event (throttle) reasons.
Only reads the card's state; changes no setting.

    python3 benchmarks/clock_probe.py [--headdim 128] [--seqlen 8192] [--causal] [--seconds 3] [--impls a,b] [--out f.json]
"""
import argparse
import json
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn
from bench_gpu import ours_with_env, smi_fields, start_smi  # benchmarks/ is the script's directory, so on sys.path

FIELDS = smi_fields()


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal)
    return run


IMPLS = {
    "flashattn": lambda q, k, v, causal: flashattn.flash_attn_func(q, k, v, causal=causal),
    **{f"flashattn_{v}": ours_with_env([("FLASHATTN_SM90_VARIANT", v)]) for v in ("default", "static", "short_rows", "cluster", "tall")},
    **{f"flashattn_groups_{g}": ours_with_env([("FLASHATTN_SM90_CAUSAL_GROUPS", g)]) for g in ("all", "l2", "one")},
    "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
    "fa2": sdpa(SDPBackend.FLASH_ATTENTION),
}


def host_us_per_call(fn, calls=50):
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU spin: the calls below only queue
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def cold_ms(fn):
    torch.cuda.synchronize()
    time.sleep(1.0)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e)


def sustained(fn, seconds):
    """(ms per call over the window, samples of nvidia-smi while it ran)."""
    with tempfile.NamedTemporaryFile("r", suffix=".csv") as log:
        smi = start_smi(log.name, FIELDS)
        time.sleep(0.3)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        calls, t_end = 0, time.perf_counter() + seconds
        s.record()
        while time.perf_counter() < t_end:
            for _ in range(8):
                fn()
            calls += 8
            if calls % 64 == 0:
                torch.cuda.synchronize()  # keeps the queue (and the window) bounded
        e.record()
        torch.cuda.synchronize()
        time.sleep(0.1)
        smi.terminate()
        smi.wait()
        rows = [l.strip().split(", ") for l in open(log.name) if l.strip()]
    samples = []
    for r in rows[len(rows) // 5:]:  # the first fifth is the ramp from idle
        try:
            samples.append({"sm_mhz": float(r[0]), "power_w": float(r[1]), "temp_c": float(r[2]), "reasons": r[3] if len(r) > 3 else "?"})
        except (ValueError, IndexError):
            pass
    return s.elapsed_time(e) / calls, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--headdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--impls", default="flashattn,cudnn,fa2", help="comma-separated, from: " + ",".join(IMPLS))
    args = ap.parse_args()
    impls = {name: IMPLS[name] for name in args.impls.split(",")}
    d, n = args.headdim, args.seqlen
    b, h = 16384 // n, 2048 // d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4.0 * b * h * n * n * d / (2 if args.causal else 1)
    rows = []
    for rnd in range(args.rounds):
        for name, impl in impls.items():
            fn = lambda: impl(q, k, v, args.causal)
            fn()
            host = host_us_per_call(fn)
            cold = cold_ms(fn)
            ms, samples = sustained(fn, args.seconds)
            mhz = [x["sm_mhz"] for x in samples]
            watts = [x["power_w"] for x in samples]
            row = {"impl": name, "round": rnd, "headdim": d, "seqlen": n, "causal": args.causal,
                   "host_us_per_call": round(host, 1), "cold_tflops": round(flops / cold / 1e9, 1),
                   "sustained_tflops": round(flops / ms / 1e9, 1),
                   "sm_mhz_median": statistics.median(mhz) if mhz else None,
                   "power_w_median": statistics.median(watts) if watts else None,
                   "temp_c_max": max((x["temp_c"] for x in samples), default=None),
                   "reasons": sorted({x["reasons"] for x in samples}), "samples": len(samples)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"{'impl':>10} {'round':>5} {'host us':>8} {'cold':>7} {'sustained':>9} {'MHz':>6} {'W':>6} reasons")
    for r in rows:
        print(f"{r['impl']:>10} {r['round']:>5} {r['host_us_per_call']:>8} {r['cold_tflops']:>7} "
              f"{r['sustained_tflops']:>9} {str(r['sm_mhz_median']):>6} {str(r['power_w_median']):>6} {r['reasons']}")
    if args.out:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(args.out, "w"),
                  indent=1)


if __name__ == "__main__":
    sys.exit(main())
