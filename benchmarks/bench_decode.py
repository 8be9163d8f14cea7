"""The protocol's decode rows side by side (../shared/docs/benchmark-protocol.md): one query token
against a KV cache, bf16, head dim 128; the figure is the bytes of K and V read over the time, in
TB/s, and the ratio is ours over the best peer. Same peers, warm-up and rotated rounds as
bench_gpu.py (whose helpers it uses).

    python3 benchmarks/bench_decode.py --out decode.json [--rounds 3] [--rows 0,1,2,3] [--paged 256]

With --paged PAGE ours also reads the same keys from a paged cache (flash_attn_with_kvcache with
a block_table over a shuffled pool of PAGE-row pages), as flashattn[paged PAGE] beside ours and
the peers on contiguous keys, so `--paged 256 --ours-env FLASHATTN_PAGED_GATHER=1` times the
pages read in place against the copy and against contiguous keys.

With --cache-used N each row's cache holds kv_len rows of which only the first N are filled (a
cache allocated to its longest and filled to cache_seqlens, as serving loops hold them): ours also
runs flash_attn_with_kvcache on the whole cache with cache_seqlens N (flashattn[used N], and with
--paged the paged entry reads N of its pages' rows too), while the peers and plain ours run on the
N filled keys alone, the same work; the TB/s count N keys.

A single query sees every key whether causal or not (the masks are bottom-right aligned), but
PyTorch's is_causal aligns them top-left (the query would see key 0 only), so every
implementation runs unmasked.
"""
import argparse
import datetime
import json
import os
import statistics
import sys

# (batch, nheads_q, nheads_kv, kv_len), the protocol's decode rows.
ROWS = [(1, 32, 8, 131072), (16, 32, 8, 8192), (64, 32, 8, 4096), (8, 32, 32, 32768)]
HEADDIM = 128


def kv_bytes(batch, nheads_kv, kv_len, headdim=None, element_bytes=2):
    """Bytes of K and V one decode step reads (headdim: HEADDIM where None)."""
    return 2 * batch * kv_len * nheads_kv * (headdim or HEADDIM) * element_bytes


def add_headdim_option(ap):
    """--headdim, as every decode script (this one, decode_profile.py, ncu_decode.py) takes it."""
    ap.add_argument("--headdim", type=int, default=0, help="head dim of q, k and v (128 if 0)")


def take_headdim(args, ap):
    """HEADDIM from --headdim (0 keeps 128; kv_tensor and kv_bytes read it at each call), a negative
    one refused before anything touches the GPU."""
    global HEADDIM
    if args.headdim < 0:
        ap.error(f"--headdim: {args.headdim} is negative")
    if args.headdim:
        HEADDIM = args.headdim


def tbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e12


def ratio_to_best_peer(row, peers=("fa2", "cudnn"), ours="flashattn"):
    """Ours (or ours with --ours-env settings) over the fastest peer that ran (None when ours or
    every peer failed)."""
    best = max((row[f"{p}_tbps"] for p in peers if row.get(f"{p}_tbps")), default=None)
    ours = row.get(f"{ours}_tbps")
    return ours / best if ours and best else None


def parse_shape(text):
    """A decode row outside the protocol's, 'batch,hq,hkv,kv_len' (e.g. MHA at one sequence:
    '1,32,32,32768'), as the protocol rows' tuples."""
    parts = text.split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--shape {text!r}: expected four positive integers batch,hq,hkv,kv_len")
    batch, hq, hkv, kv_len = (int(p) for p in parts)
    if hq % hkv != 0:
        raise ValueError(f"--shape {text!r}: hq ({hq}) must be a multiple of hkv ({hkv})")
    return batch, hq, hkv, kv_len


def kv_tensor(batch, kv_len, nheads_kv, layout):
    """Random (batch, kv_len, nheads_kv, HEADDIM) bf16 keys or values on the GPU; with layout "bhsd"
    a strided view of a head-major tensor (each head's rows contiguous)."""
    import torch
    if layout == "bhsd":
        return torch.randn(batch, nheads_kv, kv_len, HEADDIM, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    return torch.randn(batch, kv_len, nheads_kv, HEADDIM, device="cuda", dtype=torch.bfloat16)


def paged_pool(k, v, page):
    """k and v (batch, kv_len, heads, dim) as pages of `page` rows in a shuffled pool, and the
    int32 block table (batch, kv_len / page) that reads them back."""
    import torch
    batch, kv_len = k.shape[:2]
    blocks = kv_len // page
    table = torch.randperm(batch * blocks, device=k.device).view(batch, blocks).to(torch.int32)
    pools = []
    for t in (k, v):
        pool = torch.empty(batch * blocks, page, *t.shape[2:], device=t.device, dtype=t.dtype)
        pool[table.long()] = t.reshape(batch, blocks, page, *t.shape[2:])
        pools.append(pool)
    return pools[0], pools[1], table


def paged_name(name, page, graph=False):
    """flashattn -> flashattn[paged 256], flashattn[X=1] -> flashattn[X=1;paged 256]; with graph
    'paged 256 graph'."""
    tag = f"paged {page}{' graph' if graph else ''}"
    return f"{name[:-1]};{tag}]" if name.endswith("]") else f"{name}[{tag}]"


def used_name(name, used):
    """flashattn -> flashattn[used 4096], flashattn[X=1] -> flashattn[X=1;used 4096]."""
    return f"{name[:-1]};used {used}]" if name.endswith("]") else f"{name}[used {used}]"


def used_ours(k_cache, v_cache, used, settings=()):
    """Ours through flash_attn_with_kvcache on the whole cache, `used` (an int: nothing read back)
    of its rows filled."""
    import flashattn
    import bench_gpu as bg

    def run(q, k, v, causal):
        with bg.envs_set(settings):
            return flashattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=used, causal=causal)
    run.env = settings
    return run


def paged_ours(k_pool, v_pool, table, settings=(), graph=False, used=None):
    """Ours through flash_attn_with_kvcache on the pool (settings as bench_gpu.ours_with_env);
    with graph, the call captured into a CUDA graph at its first use and replayed after (as
    serving loops run decode steps: no read-back of the table there, the library trusts it)."""
    import flashattn
    import torch
    import bench_gpu as bg

    def call(q, causal):
        with bg.envs_set(settings):
            return flashattn.flash_attn_with_kvcache(q, k_pool, v_pool, block_table=table, causal=causal,
                                                     cache_seqlens=used)

    captured = {}

    def run(q, k, v, causal):
        if not graph:
            return call(q, causal)
        if "graph" not in captured:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                call(q, causal)  # the first call's one-time work outside the capture
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                captured["out"] = call(q, causal)
            captured["graph"] = g
        captured["graph"].replay()
        return captured["out"]
    run.env = settings
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", default=None, help="comma-separated indices into the protocol's decode rows")
    ap.add_argument("--shape", action="append", default=[], metavar="BATCH,HQ,HKV,KV_LEN",
                    help="also (or, with --rows '', only) a decode row outside the protocol's, e.g. 1,32,32,32768")
    ap.add_argument("--ours-env", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE...]",
                    help="also time ours with these settings (bench_gpu.py's option), e.g. "
                         "'FLASHATTN_SM90_PACK_GQA=0;FLASHATTN_SM90_VARIANT=static;FLASHATTN_SM90_SPLIT_TAIL=always'")
    ap.add_argument("--kv-layout", choices=("bshd", "bhsd"), default="bshd",
                    help="K and V in memory: (batch, seqlen, heads, dim) as the protocol's, or each head's "
                         "rows contiguous (batch, heads, seqlen, dim), passed as the same shape's strided view: "
                         "whether a decode stream's rate depends on how its rows lie in the HBM")
    ap.add_argument("--paged", type=int, default=0, metavar="PAGE",
                    help="ours reads the keys from a paged cache of PAGE-row pages (the peers contiguous)")
    ap.add_argument("--paged-graph", action="store_true",
                    help="with --paged, also ours' paged call replayed from a CUDA graph (flashattn[paged PAGE graph])")
    ap.add_argument("--cache-used", type=int, default=0, metavar="N",
                    help="caches of kv_len rows filled to N: ours also on the whole cache with cache_seqlens N "
                         "(flashattn[used N]), the peers on the N keys")
    add_headdim_option(ap)
    args = ap.parse_args()
    take_headdim(args, ap)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    import bench_gpu as bg

    bg.add_ours_with_env(args.ours_env, ap)

    try:
        extra = [parse_shape(t) for t in args.shape]
    except ValueError as e:
        ap.error(str(e))
    if args.rows is None:
        picked = ROWS
    else:
        picked = [ROWS[int(i)] for i in args.rows.split(",") if i.strip()]
    picked = picked + extra
    if args.paged and any(kv_len % args.paged for _, _, _, kv_len in picked):
        ap.error(f"--paged {args.paged}: every row's kv_len must be a multiple of it")
    if args.cache_used and any(not 0 < args.cache_used < kv_len for _, _, _, kv_len in picked):
        ap.error(f"--cache-used {args.cache_used}: must lie between 0 and every row's kv_len")
    ours_plain = {name: fn for name, fn in bg.IMPLS.items() if name.startswith("flashattn")}
    props = torch.cuda.get_device_properties(0)
    header = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
              "cudnn": torch.backends.cudnn.version(), "dtype": "bf16", "headdim": HEADDIM,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "ceilings": bg.ceilings(), "rounds": args.rounds, "warmup_ms": bg.WARMUP_MS}
    torch.manual_seed(0)
    out_rows = []
    for batch, hq, hkv, kv_len in picked:
        q = torch.randn(batch, 1, hq, HEADDIM, device="cuda", dtype=torch.bfloat16)
        k, v = (kv_tensor(batch, kv_len, hkv, args.kv_layout) for _ in range(2))
        used = args.cache_used or None
        nbytes = kv_bytes(batch, hkv, used or kv_len)
        row = {"batch": batch, "nheads": hq, "nheads_kv": hkv, "kv_len": kv_len, "headdim": HEADDIM,
               "kv_layout": args.kv_layout,
               "rel_error": bg.check_close(q[:1], k[:1], v[:1], False)}
        if args.paged:
            # Ours contiguous stays in the run: paged against contiguous is the reading that says
            # what the page lookups cost (session 77).
            pools = paged_pool(k, v, args.paged)
            for name, fn in ours_plain.items():
                bg.IMPLS[paged_name(name, args.paged)] = paged_ours(*pools, getattr(fn, "env", ()), used=used)
                if args.paged_graph:
                    bg.IMPLS[paged_name(name, args.paged, graph=True)] = paged_ours(
                        *pools, getattr(fn, "env", ()), graph=True, used=used)
            row["paged"] = args.paged
        if used:
            for name, fn in ours_plain.items():
                bg.IMPLS[used_name(name, used)] = used_ours(k, v, used, getattr(fn, "env", ()))
            k, v = k[:, :used].contiguous(), v[:, :used].contiguous()  # the peers' and plain ours' keys
            row["cache_used"] = used
        times, walls = bg.timed_rounds(q, k, v, False, None, args.rounds, row)
        for name, (ms, _) in times.items():
            row[f"{name}_tbps"] = tbps(nbytes, statistics.median(ms)) if ms else None
            row[f"{name}_tbps_rounds"] = [round(tbps(nbytes, t), 3) for t in ms]
            row[f"{name}_walls"] = walls[name]
        row["ratio"] = ratio_to_best_peer(row)
        out_rows.append(row)
        for name in bg.IMPLS:
            if name.startswith("flashattn["):
                row[f"ratio_{name}"] = ratio_to_best_peer(row, ours=name)
        print(f"b={batch} h={hq}/{hkv} kv={kv_len}: " +
              " ".join(f"{name} {bg.fmt(row[name + '_tbps'], '5.2f')}" for name in bg.IMPLS) +
              f" TB/s  x{bg.fmt(row['ratio'], '.2f')}  err={row['rel_error']:.1e}", file=sys.stderr, flush=True)
        del q, k, v
        pools = None
        for name in ours_plain:  # the row's pools (and graphs) go with their closures
            bg.IMPLS.pop(paged_name(name, args.paged), None)
            bg.IMPLS.pop(paged_name(name, args.paged, graph=True), None)
            bg.IMPLS.pop(used_name(name, args.cache_used), None)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "rows": out_rows}, f, indent=1)


if __name__ == "__main__":
    main()
