#!/usr/bin/env python3
"""How evenly the sm90 forward's persistent schedules share causal tiles among the CTAs (a model).

Numbers the protocol's causal tiles as the kernel does (tile_scheduler.h: groups of G (batch,
head) pairs, longest tile first within a group) and hands them out as each schedule does: the
static snake (wave w: CTA c takes tile w * grid + c, or w * grid + grid - 1 - c in odd waves) or
the dynamic counter (CTA c starts with tile c; then whichever CTA frees first takes the next).
A tile costs its key blocks plus `--tile-cost` blocks (Q load, first S, epilogue). Prints the
busiest CTA's work over the mean (1.000: no CTA waits at the end) under the library's rule and
under other group sizes, so that a device session can time the ones the model favours
(FLASHATTN_SM90_CAUSAL_GROUPS=N with FLASHATTN_SM90_VARIANT=static|default, bench_gpu.py
--ours-env). It knows nothing of the L2: a group's K and V must still fit there (the column
`group MB`), which is why the library groups at all. Nor of the clock: on a power-bound card
the SMs still busy at the end run faster as others idle, so it overstates what an uneven
schedule costs, several-fold against the readings docs/perf.md (session 68) checks it on.

    python3 benchmarks/causal_schedule_model.py [--sms 132] [--tile-cost 1] [--l2-mb 50] [--h100]
"""

import argparse
import heapq
import math

TOKENS, WIDTH = 16384, 2048  # the protocol: batch * seqlen, nheads * headdim


def tile_costs(seqlen: int, block_m: int, block_n: int, tile_cost: float) -> list:
    """Cost of query tile m (m = 0 .. tiles - 1) of a causal square problem: its key blocks + overhead."""
    tiles = math.ceil(seqlen / block_m)
    return [math.ceil(min(seqlen, (m + 1) * block_m) / block_n) + tile_cost for m in range(tiles)]


def numbering(pairs: int, costs: list, group: int) -> list:
    """Tile costs in the kernel's order (longest_first_in_l2_group): groups of `group` pairs, the
    last one smaller; within a group every pair's longest tile, then every pair's next, ..."""
    out = []
    for first in range(0, pairs, group):
        size = min(group, pairs - first)
        for step in range(len(costs)):
            out.extend([costs[len(costs) - 1 - step]] * size)
    return out


def busiest_over_mean(work: list, grid: int, dynamic: bool) -> float:
    grid = min(grid, len(work))
    if dynamic:
        free = [(0.0, c) for c in range(grid)]  # first wave: tile c to CTA c, then first free
        for w in work:
            t, c = heapq.heappop(free)
            heapq.heappush(free, (t + w, c))
        busiest = max(t for t, _ in free)
    else:
        load = [0.0] * grid
        for i, w in enumerate(work):
            wave, c = divmod(i, grid)
            load[grid - 1 - c if wave & 1 else c] += w
        busiest = max(load)
    return busiest / (sum(work) / grid)


def rule(d: int, seqlen: int, h100: bool, l2_mb: float, pairs: int):
    """(kernel shape (block_m, block_n), dynamic?, group) the library runs a protocol causal row with
    (kernel_choice.h, launch.h causal_group_heads), bf16, fixed length."""
    head_mb = 2 * seqlen * d * 2 / 2**20
    l2_group = max(1, min(pairs, int(l2_mb / 2 / head_mb)))
    if d == 64:
        if seqlen <= 1024:
            return (256, 64), False, 1, "tall"
        dynamic = h100 or seqlen > 4096  # kSm90StaticCausalHdim64MinTBps / ...MaxKeysHdim64
        return (192, 128), dynamic, l2_group, "dynamic" if dynamic else "static"
    if d == 128:
        if seqlen > 8192:
            return (192, 64), False, pairs, "tall"
        return (128, 128), False, 1, "static"
    return (128, 64), False, 1 if seqlen <= 4096 else pairs, "static"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--tile-cost", type=float, default=1.0, help="a tile's fixed cost, in key blocks")
    ap.add_argument("--l2-mb", type=float, default=50.0)
    ap.add_argument("--h100", action="store_true", help="the H100's rule for d64 (dynamic from 2k)")
    ap.add_argument("--groups", default="1,2,4,8,16,32,64")
    ap.add_argument("--compare", default=None, metavar="static:N,dynamic:N,...",
                    help="instead of the table: each setting's predicted speed over the rule's, per row "
                         "(the rule's busiest / the setting's busiest; above 1: the model favours it)")
    args = ap.parse_args()
    candidates = [int(g) for g in args.groups.split(",")]
    settings = []
    for item in (args.compare.split(",") if args.compare else []):
        schedule, _, g = item.partition(":")
        if schedule not in ("static", "dynamic") or not g.isdigit() or int(g) < 1:
            ap.error(f"--compare {item!r}: expected static:N or dynamic:N, N >= 1")
        settings.append((schedule == "dynamic", int(g), item))
    print(f"busiest CTA / mean, {args.sms} CTAs, a tile's fixed cost {args.tile_cost} key blocks "
          f"({'H100' if args.h100 else 'H200'} rules); s = static snake, d = dynamic counter")
    rows = [(d, n, WIDTH // d) for d in (64, 128, 256) for n in (512, 1024, 2048, 4096, 8192, 16384)]
    rows += [("gqa", n, 32) for n in (2048, 8192)]  # hq 32 / hkv 8, d128: unpacked (seqlen_q > 64)
    for d, seqlen, heads in rows:
        hd = 128 if d == "gqa" else d
        pairs = TOKENS // seqlen * heads
        (bm, bn), dynamic, group, kernel = rule(hd, seqlen, args.h100, args.l2_mb, pairs)
        costs = tile_costs(seqlen, bm, bn, args.tile_cost)
        now = busiest_over_mean(numbering(pairs, costs, group), args.sms, dynamic)
        head_mb = 2 * seqlen * hd * 2 / 2**20 / (4 if d == "gqa" else 1)
        if settings:
            if kernel == "tall":
                continue  # other tile shapes: FLASHATTN_SM90_VARIANT=static|default would leave them
            cells = [f"{name} {now / busiest_over_mean(numbering(pairs, costs, min(g, pairs)), args.sms, dyn):.3f}"
                     for dyn, g, name in settings]
            print(f"d{d} causal {seqlen}: rule {kernel} G{group} {now:.3f} | " + " | ".join(cells))
            continue
        cells = []
        for g in candidates:
            if g > pairs:
                continue
            work = numbering(pairs, costs, g)
            cells.append(f"G{g} s{busiest_over_mean(work, args.sms, False):.3f} "
                         f"d{busiest_over_mean(work, args.sms, True):.3f} ({g * head_mb:.0f} MB)")
        print(f"d{d} causal {seqlen}: {kernel} {bm}x{bn} G{group} -> {now:.3f} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
