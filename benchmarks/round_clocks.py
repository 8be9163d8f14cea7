"""Each implementation's rounds of a bench_gpu.py run beside nvidia-smi's samples taken during them:
TFLOP/s of the round, then the SM clock (mean and lowest), the board power (mean and highest) and
the clock-event reasons seen while it ran. For telling a low round that ran at a lower clock from
one that lost its time elsewhere (the host, the schedule).

    python3 benchmarks/bench_gpu.py --fwd-only --rounds 6 --headdims 128 --seqlens 512 \\
        --smi-out smi.csv --out run.json
    python3 benchmarks/round_clocks.py run.json smi.csv

bench_gpu.py records each implementation's wall-clock span a round (`<impl>_walls`, Unix seconds)
and, with --smi-out, samples timestamp, clocks.sm, power.draw, temperature.gpu and the
clock-event reasons (where the driver has them; bench_gpu.smi_fields); the smi timestamps are
read as UTC, the device machine's clock. Where the run recorded it (`<impl>_fwd_host_us_rounds`,
bench_gpu.host_us), each round's host time a call is printed beside its rate.
"""
import argparse
import csv
import datetime
import json
import statistics


def read_samples(path):
    """(unix time, SM MHz, watts, reasons) per line of nvidia-smi's CSV (timestamp, clock, power,
    temperature, reasons; "?" where the driver gave no reasons column)."""
    samples = []
    with open(path) as f:
        for fields in csv.reader(f):
            if len(fields) < 3:
                continue
            try:
                stamp = datetime.datetime.strptime(fields[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
                when = stamp.replace(tzinfo=datetime.timezone.utc).timestamp()
                reasons = fields[4].strip() if len(fields) > 4 else "?"
                samples.append((when, float(fields[1]), float(fields[2]), reasons))
            except ValueError:
                continue  # a header or a field the driver did not report
    return samples


def round_lines(row, samples):
    impls = sorted(key[:-len("_walls")] for key in row if key.endswith("_walls"))
    for impl in impls:
        rates = row.get(f"{impl}_fwd_tflops_rounds") or []
        hosts = row.get(f"{impl}_fwd_host_us_rounds") or []
        for r, (start, end) in enumerate(row[f"{impl}_walls"]):
            inside = [s for s in samples if start <= s[0] <= end]
            rate = f"{rates[r]:7.1f}" if r < len(rates) else "      -"
            host = f", host {hosts[r]:6.1f} us/call" if r < len(hosts) and hosts[r] is not None else ""
            if not inside:
                yield f"  {impl:<40} round {r}: {rate} TFLOP/s{host}, no samples"
                continue
            clocks = [s[1] for s in inside]
            watts = [s[2] for s in inside]
            reasons = sorted({s[3] for s in inside})
            yield (f"  {impl:<40} round {r}: {rate} TFLOP/s{host}, SM {statistics.mean(clocks):6.0f} MHz (min "
                   f"{min(clocks):4.0f}), {statistics.mean(watts):5.0f} W (max {max(watts):4.0f}), "
                   f"reasons {','.join(reasons)}, {len(inside)} samples")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="bench_gpu.py --out JSON")
    ap.add_argument("smi", help="nvidia-smi CSV: timestamp, clocks.sm, power.draw, temperature.gpu[, reasons]")
    args = ap.parse_args()
    samples = read_samples(args.smi)
    for row in json.load(open(args.run))["rows"]:
        print(f"d{row['headdim']} n{row['seqlen']} {'causal' if row['causal'] else 'unmasked'} {row['dtype']}")
        for line in round_lines(row, samples):
            print(line)


if __name__ == "__main__":
    main()
