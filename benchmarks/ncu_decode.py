"""One decode step of ours and of each peer, each inside an NVTX range named ncu_<impl>, for Nsight
Compute to profile every kernel of that one call (scripts/device_session.sh measure,
MEASURE_NCU_DECODE):

    ncu --nvtx --nvtx-include "ncu_flashattn/" --nvtx-include "ncu_cudnn/" --clock-control none \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
        python3 benchmarks/ncu_decode.py --shape 1,32,8,131072

The question it serves (docs/perf.md, session 70): the protocol's GQA decode row streams the same
537 MB in ~179 us of our packed kernel against ~172 us of cuDNN's, so how each kernel cuts the keys
(grid, threads, registers, shared memory) and how its DRAM traffic runs. Random inputs (never
zeros); every implementation runs --warmup calls outside any range first, so what ncu sees is a
steady call (ncu itself clears the caches before each profiled kernel, like do_bench's L2 clear).
"""
import argparse
import os
import sys


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_decode as bd

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="1,32,8,131072", metavar="BATCH,HQ,HKV,KV_LEN")
    ap.add_argument("--impls", default="flashattn,cudnn",
                    help="comma-separated, of bench_gpu.py's (device_session.sh's ncu line includes the "
                         "ncu_flashattn and ncu_cudnn ranges only)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--kv-layout", choices=("bshd", "bhsd"), default="bshd", help="bench_decode.py's")
    bd.add_headdim_option(ap)
    args = ap.parse_args()
    bd.take_headdim(args, ap)
    import torch
    import bench_gpu as bg

    try:
        batch, hq, hkv, kv_len = bd.parse_shape(args.shape)
    except ValueError as e:
        ap.error(str(e))
    names = [n for n in args.impls.split(",") if n]
    unknown = [n for n in names if n not in bg.IMPLS]
    if unknown:
        ap.error(f"--impls: unknown {', '.join(unknown)}; known: {', '.join(bg.IMPLS)}")
    torch.manual_seed(0)
    q = torch.randn(batch, 1, hq, bd.HEADDIM, device="cuda", dtype=torch.bfloat16)
    k, v = (bd.kv_tensor(batch, kv_len, hkv, args.kv_layout) for _ in range(2))
    for name in names:
        impl = bg.IMPLS[name]
        for _ in range(args.warmup):
            impl(q, k, v, False)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"ncu_{name}")
        impl(q, k, v, False)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    print(f"shape {batch},{hq},{hkv},{kv_len}: {bd.kv_bytes(batch, hkv, kv_len) / 1e6:.1f} MB of K and V a call; "
          f"{args.kv_layout}; ran {', '.join(names)}")


if __name__ == "__main__":
    main()
