"""Where the host time of a paged decode step goes (session 77: flash_attn_with_kvcache on a
paged cache ran its kernel in 190 us but took 520 us a call back to back): the whole call and its
pieces, each timed back to back with the device drained between calls (each piece's wall time a
call), then a cProfile of the whole call ranked by own time.

    python3 benchmarks/paged_host.py --shape 16,32,8,8192 --page 256
"""
import argparse
import cProfile
import os
import pstats
import sys
import time


def wall_us(fn, reps):
    """Wall time a call, microseconds, over reps calls each followed by a synchronisation."""
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="16,32,8,8192", metavar="BATCH,HQ,HKV,KV_LEN")
    ap.add_argument("--page", type=int, default=256)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    import bench_decode as bd
    import flashattn
    from flashattn import ops, _ext

    batch, hq, hkv, kv_len = bd.parse_shape(args.shape)
    torch.manual_seed(0)
    q = torch.randn(batch, 1, hq, bd.HEADDIM, device="cuda", dtype=torch.bfloat16)
    k, v = (bd.kv_tensor(batch, kv_len, hkv, "bshd") for _ in range(2))
    k_pool, v_pool, table = bd.paged_pool(k, v, args.page)
    lengths = torch.full((batch,), kv_len, dtype=torch.int32, device="cuda")
    scale = _ext.softmax_scale(None, bd.HEADDIM)
    window = _ext.flash_attn_window((-1, -1))
    pieces = {
        "kvcache paged (no lengths)": lambda: flashattn.flash_attn_with_kvcache(q, k_pool, v_pool, block_table=table),
        "kvcache paged (cache_seqlens tensor)": lambda: flashattn.flash_attn_with_kvcache(
            q, k_pool, v_pool, cache_seqlens=lengths, block_table=table),
        "kvcache contiguous (no lengths)": lambda: flashattn.flash_attn_with_kvcache(q, k, v),
        "ops._run_forward paged": lambda: ops._run_forward(q, k_pool, v_pool, None, None, 0, 0, scale, False,
                                                           *window, 0.0, None, None, None, 0, table),
        "ops._run_forward contiguous": lambda: ops._run_forward(q, k, v, None, None, 0, 0, scale, False,
                                                                *window, 0.0, None, None, None, 0),
        "table read-back (cat + tolist)": lambda: torch.cat([table.flatten()]).tolist(),
        "table.long()": lambda: table.long(),
        "synchronize only": lambda: None,
    }
    for name, fn in pieces.items():
        print(f"{wall_us(fn, args.reps):8.1f} us a call (wall, drained)  {name}", flush=True)
    whole = pieces["kvcache paged (no lengths)"]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.reps):
        whole()
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
