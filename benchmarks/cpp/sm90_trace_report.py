#!/usr/bin/env python3
"""Where a tile's time goes in the sm90 forward kernel, from the harness's event traces.

    python3 benchmarks/cpp/sm90_trace_report.py FILE.bin [FILE.bin ...] [--cta N] [--tiles N]

FILE.bin: written by flashattn_sm90_variants for a `_trace` variant (KernelConfig::kTrace,
src/cuda/sm90/trace.h). Prints per file (a) CTA N's first tiles as a timeline, one line per role,
in cycles from consumer warpgroup 0's tile start, and (b) means over every traced CTA and tile.

A consumer's time is cut at its events: each interval is charged to the event that ends it
("->K" is the wait for K to land plus whatever ran since the previous event), so the intervals
of a tile add up to the tile. Cycles are SM clocks (clock64); the header's clock is the card's
peak, not necessarily the one it ran at.
"""
import argparse
import statistics
import struct
import sys
import textwrap
from collections import defaultdict

HEADER = struct.Struct("<8s10i64s")
RECORD = struct.Struct("<QHHI")

# trace.h's TraceEvent, in order from 1: (short label, meaning).
EVENTS = [
    ("tile", "producer: the tile's loads begin"),
    ("qw", "producer: waits for Q free"),
    ("Q", "producer: Q load issued"),
    ("kw", "producer: waits for K stage free"),
    ("K", "producer: K load issued"),
    ("vw", "producer: waits for V stage free"),
    ("V", "producer: V load issued"),
    ("pub", "scheduler: index published"),
    ("claim", "scheduler: atomic returned"),
    ("start", "tile start"),
    ("Q", "Q landed"),
    ("K", "K landed"),
    ("V", "V landed"),
    ("turn", "GEMM turn"),
    ("S>", "first S issued"),
    ("SPV>", "S + P V issued"),
    ("PV>", "last P V issued"),
    ("S<", "S retired"),
    ("max", "mask + row max"),
    ("exp", "exp2 turn"),
    ("P", "softmax done"),
    ("PV<", "P V retired"),
    ("end", "last P V retired"),
    ("epi", "epilogue start"),
    ("epi<", "epilogue end"),
    ("Kw", "waits for K"),
    ("Vw", "waits for V"),
    ("tw", "waits for the GEMM turn"),
    ("fin", "O normalised"),
    ("es", "epilogue: previous store read, first barrier passed"),
    ("est", "epilogue: O staged (stmatrix)"),
    ("ef", "epilogue: fenced, second barrier passed"),
]
LABEL = {i + 1: e[0] for i, e in enumerate(EVENTS)}
MEANING = {i + 1: e[1] for i, e in enumerate(EVENTS)}
# Event numbers the report looks for (trace.h).
P_TILE, P_QW, P_Q, P_KW, P_K, P_VW, P_V, S_PUB, S_CLAIM = range(1, 10)
C_START, C_Q, C_K, C_V, C_TURN, C_S_ISSUED, C_SPV_ISSUED, C_PV_ISSUED, C_S_READY = range(10, 19)
C_MAX, C_EXP, C_P, C_PV_DONE, C_END, C_EPI, C_EPI_END, C_K_WAIT, C_V_WAIT = range(19, 28)
C_TURN_WAIT, C_FINALIZED = range(28, 30)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    h = HEADER.unpack_from(data)
    if h[0] != b"SM90TRC1":
        sys.exit(f"{path}: not a trace file")
    ctas, roles, cap, rec_bytes, consumers, clock_khz, hdim, seqlen, causal, dynamic = h[1:11]
    meta = dict(ctas=ctas, roles=roles, cap=cap, consumers=consumers, clock_khz=clock_khz, hdim=hdim, seqlen=seqlen,
                causal=causal, dynamic=dynamic, variant=h[11].split(b"\0")[0].decode())
    assert rec_bytes == RECORD.size
    traces = []  # [cta][role] -> [(clock, event, arg0, arg1)]
    off = HEADER.size
    for _ in range(ctas):
        per_role = []
        for _ in range(roles):
            recs = []
            for i in range(cap):
                r = RECORD.unpack_from(data, off + i * RECORD.size)
                if r[1] == 0:
                    break
                recs.append(r)
            per_role.append(recs)
            off += cap * RECORD.size
        traces.append(per_role)
    return meta, traces


def consumer_tiles(recs):
    """Splits a consumer's records at its tile starts: [(index, m_block, [records])]."""
    tiles = []
    for r in recs:
        if r[1] == C_START:
            tiles.append((r[3], r[2], [r]))
        elif tiles:
            tiles[-1][2].append(r)
    return tiles


def producer_tiles(recs):
    tiles = {}
    cur = None
    for r in recs:
        if r[1] == P_TILE:
            cur = tiles.setdefault(r[3], [])
        if cur is not None:
            cur.append(r)
    return tiles


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def fmt_events(recs, t0):
    return " ".join(f"{LABEL[e]}{c - t0:+d}" for c, e, _, _ in recs)


def timeline(meta, traces, cta, n_tiles):
    roles = traces[cta]
    wg0 = consumer_tiles(roles[2])
    loads = producer_tiles(roles[0])
    pubs = {r[3]: r[0] for r in roles[1] if r[1] == S_PUB}
    others = [dict((t[0], t) for t in consumer_tiles(roles[2 + w])) for w in range(meta["consumers"])]
    print(f"(a) CTA {cta}: its first {min(n_tiles, len(wg0))} of {len(wg0)} tiles, cycles from warpgroup 0's tile start")
    for index, m_block, recs in wg0[:n_tiles]:
        t0 = recs[0][0]
        end = next((c for c, e, _, _ in recs if e == C_END), recs[-1][0])
        print(f" tile {index} (m_block {m_block}), start to last P V: {end - t0} cycles")
        if index in pubs:
            print(f"   sched: published {pubs[index] - t0:+d}")
        if index in loads:
            print(f"   load : {fmt_events(loads[index], t0)}")
        for w in range(meta["consumers"]):
            t = others[w].get(index)
            if t:
                print(f"   wg{w}  : {fmt_events(t[2], t0)}")


def nth_pairs(issued, landed):
    """Issue-to-landed gaps, pairing the k-th load with the k-th wait (loads and waits run in
    the same order; a trace cut by its capacity pairs only the common prefix)."""
    return [b - a for a, b in zip(issued, landed)]


def aggregates(meta, traces):
    khz = meta["clock_khz"] or 1
    print(f"(b) all {meta['ctas']} traced CTAs (cycles; 1000 cycles = {1e6 / khz:.2f} us at the {khz / 1e6:.2f} GHz peak)")
    for w in range(meta["consumers"]):
        per_label, durations, periods, s_flight, tiles = defaultdict(float), [], [], [], 0
        for roles in traces:
            ends = []
            split = consumer_tiles(roles[2 + w])
            # From the first tile start on, every interval (those between tiles included).
            flat = [r for _, _, recs in split for r in recs]
            for (c0, _, _, _), (c1, e1, _, _) in zip(flat, flat[1:]):
                per_label[e1] += c1 - c0
            for _, _, recs in split:
                tiles += 1
                end = next((c for c, e, _, _ in recs if e == C_END), None)
                if end is not None:
                    durations.append(end - recs[0][0])
                    ends.append(end)
                issue = None
                for c, e, _, _ in recs:
                    if e in (C_S_ISSUED, C_SPV_ISSUED):
                        issue = c
                    elif e == C_S_READY and issue is not None:
                        s_flight.append(c - issue)
                        issue = None
            periods += [b - a for a, b in zip(ends, ends[1:])]
        if not tiles:
            continue
        total = sum(per_label.values())
        print(f" consumer warpgroup {w}: {tiles} tiles; start to last P V {mean(durations):.0f}; one tile's last "
              f"P V to the next's {mean(periods):.0f}; S issue to retire {mean(s_flight):.0f} a GEMM (a tile's "
              f"first S: with the previous epilogue under it)")
        # With the wait-begin events (Kw, Vw) the intervals ending at K / V are the time blocked on
        # the loads, and those ending at Kw / Vw the code before the waits (O rescale, loop).
        # With tw / fin (session 18's probes): the GEMM turn's wait alone, and (plain_tiles) O's
        # normalisation apart from the next tile's classification.
        groups = [("Q wait", [C_Q]), ("K / V landed", [C_K, C_V]), ("before K / V waits", [C_K_WAIT, C_V_WAIT]),
                  ("before the GEMM turn", [C_TURN_WAIT]), ("GEMM turn", [C_TURN]),
                  ("GEMM issue", [C_S_ISSUED, C_SPV_ISSUED, C_PV_ISSUED]), ("S wait", [C_S_READY]),
                  ("mask + max", [C_MAX]), ("exp2 turn", [C_EXP]), ("softmax", [C_P]), ("P V wait", [C_PV_DONE, C_END]),
                  ("O normalised", [C_FINALIZED]), ("epilogue", [C_EPI, C_EPI_END]), ("between tiles", [C_START])]
        cells = []
        for name, evs in groups:
            v = sum(per_label.get(e, 0.0) for e in evs)
            if v:
                cells.append(f"{name} {v / tiles:.0f} ({100 * v / total:.0f}%)")
        print("   per tile: " + ", ".join(cells))
    # The producer: its waits for free stages, and each load's issue to the consumers' wait return.
    waits = defaultdict(list)
    latency = defaultdict(list)
    for roles in traces:
        prod = roles[0]
        for (c0, e0, _, _), (c1, e1, _, _) in zip(prod, prod[1:]):
            if (e0, e1) in ((P_QW, P_Q), (P_KW, P_K), (P_VW, P_V)):
                waits[LABEL[e1]].append(c1 - c0)
        issued = {k: [c for c, e, _, _ in prod if e == k] for k in (P_Q, P_K, P_V)}
        for w in range(meta["consumers"]):
            cons = roles[2 + w]
            for k, landed_ev in ((P_Q, C_Q), (P_K, C_K), (P_V, C_V)):
                latency[(LABEL[k], w)] += nth_pairs(issued[k], [c for c, e, _, _ in cons if e == landed_ev])
    print(" producer, wait for a free stage (mean / max): " +
          ", ".join(f"{k} {mean(v):.0f} / {max(v)}" for k, v in sorted(waits.items()) if v))
    print(" load issued to the consumer's wait returning (median / p90): " +
          ", ".join(f"{k} wg{w} {statistics.median(v):.0f} / {sorted(v)[int(0.9 * (len(v) - 1))]}"
                    for (k, w), v in sorted(latency.items()) if v))
    claims = []
    for roles in traces:
        s = roles[1]
        claims += [c1 - c0 for (c0, e0, _, _), (c1, e1, _, _) in zip(s, s[1:]) if e0 == S_PUB and e1 == S_CLAIM]
    if claims:
        print(f" scheduler: publish to the next claim's atomic returning {mean(claims):.0f} (mean)")


def boundary_windows(recs):
    """A consumer's windows from a tile's last P V retired to the next tile's first S issued: the
    stretch in which it gives the tensor cores nothing (normalisation, the loop's top, Q and K)."""
    windows, last_end = [], None
    for clock, event, _, _ in recs:
        if event == C_END:
            last_end = clock
        elif event == C_S_ISSUED and last_end is not None:
            windows.append((last_end, clock))
            last_end = None
    return windows


def boundaries(meta, traces):
    """(c) How much of a CTA's time every consumer warpgroup spends in such a window at once."""
    span = together = alone = count = 0
    for roles in traces:
        per_wg = [boundary_windows(roles[2 + w]) for w in range(meta["consumers"])]
        if not all(per_wg):
            continue
        recs = [r for w in range(meta["consumers"]) for r in roles[2 + w]]
        starts = [r[0] for r in recs if r[1] == C_START]
        ends = [r[0] for r in recs if r[1] == C_END]
        span += max(ends) - min(starts)
        alone += sum(b - a for a, b in per_wg[0])
        count += len(per_wg[0])
        # Intersect the warpgroups' windows pairwise down the list (few windows per CTA).
        common = per_wg[0]
        for other in per_wg[1:]:
            common = [(max(a, c), min(b, d)) for a, b in common for c, d in other if min(b, d) > max(a, c)]
        together += sum(b - a for a, b in common)
    if span:
        print(f"(c) tile boundaries (a tile's last P V retired to the next first S issued): warpgroup 0 "
              f"{alone / count:.0f} cycles each, {alone / span:.1%} of the CTAs' time; every warpgroup at once "
              f"{together / count:.0f} cycles a boundary, {together / span:.1%}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--cta", type=int, default=0, help="the CTA of the timeline")
    ap.add_argument("--tiles", type=int, default=3, help="tiles in the timeline")
    args = ap.parse_args()
    for path in args.files:
        meta, traces = read(path)
        dropped = sum(len(r) == meta["cap"] for roles in traces for r in roles)
        print(f"== {meta['variant']} d{meta['hdim']} seqlen {meta['seqlen']} causal {meta['causal']} "
              f"({'dynamic' if meta['dynamic'] else 'static'}, {meta['consumers']} consumer warpgroups)"
              + (f"; {dropped} roles hit the capacity, later records dropped" if dropped else ""))
        timeline(meta, traces, args.cta, args.tiles)
        aggregates(meta, traces)
        boundaries(meta, traces)
        print()
    print(textwrap.fill("Labels: " + ", ".join(f"{LABEL[e]} {MEANING[e]}" for e in sorted(LABEL)), 100))


if __name__ == "__main__":
    main()
