"""Prints flashattn_sm90_variants' JSON lines as one table per head dim: a row per shape, a column
per variant (TFLOP/s; decode-like shapes in ms; "!n<d": n output words unlike the first variant's, by at most d in O).
The event-trace rows of `_trace` variants (no "seqlen") are left out. Usage: python3 sm90_variants_table.py variants.jsonl"""
import collections
import json
import sys


def main():
    lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
    rows = [r for r in (json.loads(l) for l in lines if "error" not in l) if "seqlen" in r]
    by_hdim = collections.OrderedDict()
    for r in rows:
        sq = r.get("seqlen_q", r["seqlen"])
        square = sq == r["seqlen"]
        key = (r["hq"], r["hkv"], r["causal"], r["seqlen"] if square else f'{sq}/{r["seqlen"]}')
        cell = r["tflops"] if square else f'{r["ms"]}ms'
        if r.get("mismatches_vs_first"):  # output bits unlike the first variant's (a changed result)
            cell = f'{cell} !{r["mismatches_vs_first"]}<{r.get("max_diff_vs_first", "?")}'
        by_hdim.setdefault(r["hdim"], collections.OrderedDict()).setdefault(key, {})[r["variant"]] = cell
    for hdim, shapes in by_hdim.items():
        names = []
        for cells in shapes.values():
            names += [n for n in cells if n not in names]
        print(f"hdim {hdim}: hq/hkv causal seqlen | " + " | ".join(names))
        for (hq, hkv, causal, seqlen), cells in shapes.items():
            print(f"  {hq}/{hkv} {causal} {seqlen:>7} | " + " | ".join(str(cells.get(n, "-")) for n in names))
    for l in [l.strip() for l in lines if "error" in l][:5]:
        print(l)


if __name__ == "__main__":
    main()
