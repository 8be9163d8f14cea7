"""Where a decode step's time goes: the GPU kernels each implementation launches for one call,
with their device times (torch.profiler), beside the call's time between CUDA events without
do_bench's L2 clear (host_exposure.py's back to back) and the host's time a call (enqueue only,
clock_probe.py's). For the key splits' readings (docs/perf.md, session 67): whether a call's
time is its one kernel's, and how that kernel's time grows with the keys at a fixed number of
pieces (time = fixed + keys / rate).

The device times are kernel times only where calls do not overlap: with programmatic dependent
launch (FLASHATTN_SM90_PDL builds) a kernel queued behind another is resident early, waiting in
griddepcontrol.wait, and the profiler counts the wait (session 84: 216 us for calls 122 us apart).
Calls that synchronise (an eager paged call reads its table back) or that the host binds are clean.
So each line also gives the GPU's busy time a call: the union of all its device events' spans
(kernels, and copies such as an eager paged call's table read-back) over the profiled calls,
over the calls. A waiting kernel's span inside its predecessor's counts once; back-to-back calls
under PDL may merge into one span, so it is an upper bound on the kernels' own time.

  python3 benchmarks/decode_profile.py --shape 1,8,1,131072 --ours-env FLASHATTN_SM90_KEY_SPLITS=64
  python3 benchmarks/decode_profile.py --shape 1,32,8,131072 --paged 256
  python3 benchmarks/decode_profile.py --shape 1,32,8,32768 --headdim 256 --paged 256
"""
import argparse
import os
import sys


def busy_us(spans):
    """Length of the union of (start, end) spans: the time at least one of them covers."""
    total, reach = 0.0, None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def kernel_times(fn, calls):
    """Each CUDA kernel's name -> (launches a call, mean device us a launch) over `calls` calls,
    and the GPU's busy us a call (busy_us of every kernel's span, over the calls)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out, spans = {}, []
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        n, total = out.get(ev.name, (0, 0.0))
        out[ev.name] = (n + 1, total + ev.device_time)
        spans.append((ev.time_range.start, ev.time_range.end))
    return {name: (n / calls, total / n) for name, (n, total) in out.items()}, busy_us(spans) / calls


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_decode as bd

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", default=[], metavar="BATCH,HQ,HKV,KV_LEN")
    ap.add_argument("--ours-env", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE...]")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--paged", type=int, default=0, metavar="PAGE",
                    help="also ours on a paged cache of PAGE-row pages (bench_decode.py's --paged)")
    bd.add_headdim_option(ap)
    args = ap.parse_args()
    bd.take_headdim(args, ap)
    import torch
    import bench_gpu as bg
    from clock_probe import host_us_per_call
    from host_exposure import back_to_back_ms

    bg.add_ours_with_env(args.ours_env, ap)
    try:
        shapes = [bd.parse_shape(t) for t in args.shape]
    except ValueError as e:
        ap.error(str(e))
    torch.manual_seed(0)
    for batch, hq, hkv, kv_len in shapes:
        q = torch.randn(batch, 1, hq, bd.HEADDIM, device="cuda", dtype=torch.bfloat16)
        k, v = (bd.kv_tensor(batch, kv_len, hkv, "bshd") for _ in range(2))
        nbytes = bd.kv_bytes(batch, hkv, kv_len, bd.HEADDIM)
        impls = dict(bg.IMPLS)
        if args.paged:
            pools = bd.paged_pool(k, v, args.paged)
            for name, fn in bg.IMPLS.items():
                if name.startswith("flashattn"):
                    impls[bd.paged_name(name, args.paged)] = bd.paged_ours(*pools, getattr(fn, "env", ()))
        for name, impl in impls.items():
            fn = lambda: impl(q, k, v, False)  # noqa: E731
            try:
                us = 1000.0 * back_to_back_ms(fn, calls=args.calls)
                host = host_us_per_call(fn, calls=args.calls)
                kernels, busy = kernel_times(fn, args.calls)
            except Exception as e:  # a peer without a kernel for the shape
                print(f"b={batch} h={hq}/{hkv} kv={kv_len} {name}: {type(e).__name__}: {e}")
                continue
            print(f"b={batch} h={hq}/{hkv} kv={kv_len} {name}: {us:7.1f} us a call back to back "
                  f"({nbytes / us / 1e6:5.2f} TB/s, L2 warm), host {host:6.1f} us a call, GPU busy {busy:6.1f} us "
                  f"a call ({nbytes / busy / 1e6 if busy else 0.0:5.2f} TB/s)")
            for kname, (per_call, mean_us) in sorted(kernels.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
                print(f"    {per_call:4.1f} x {mean_us:8.1f} us  {kname[:110]}")
        del q, k, v, impls
        pools = None


if __name__ == "__main__":
    main()
