"""Side-by-side GPU benchmark (../shared/docs/benchmark-protocol.md).

Times flashattn and the peers (PyTorch SDPA with its FLASH and CUDNN backends) on the same inputs in
one process, and reports TFLOP/s and the ratio ours / best peer. Also measures the two ceilings
(a large bf16 matmul and a device copy) in the same run.

    python3 benchmarks/bench_gpu.py --out results.json [--dtype bf16] [--quick] [--png-dir DIR]

The card runs under its power limit at these shapes, and the limiter needs longer than
triton's 25 ms default warm-up to settle: whichever implementation ran before set the clock the
next one was timed at (the same kernel read 534-603 TFLOP/s within one shape in session 8). So
each implementation runs WARMUP_MS untimed right before it is timed, and the shape is timed in
ROUNDS rounds with the order of the implementations rotated by one each round, so that each
comes first (after the shape's setup, when the card has had a short rest) as often as the others
when ROUNDS is a multiple of their number, and reversed in every other cycle of rotations, so
that each also follows more than one other (round_order); a figure is the median over the
rounds of the per-round medians. (With the order only reversed, a peer timed last follows itself
into the next round and never gets the rested slot: session 8's sweep. With the rotation alone,
each follows the same one every time, which read ~1% apart: session 42.) Rows of up to 1k keys
take at least SHORT_ROUNDS rounds (rounds_for).
"""
import argparse
import contextlib
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

import flashattn

TOKENS = 16384
WIDTH = 2048
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
HEADDIMS = [64, 128, 256]


def attention_flops(batch, nheads, seqlen_q, seqlen_k, headdim, causal):
    """Forward FLOPs, counting only unmasked entries for causal (bottom-right aligned)."""
    if not causal:
        pairs = seqlen_q * seqlen_k
    else:
        offset = seqlen_k - seqlen_q
        pairs = sum(max(0, min(seqlen_k, i + offset + 1)) for i in range(seqlen_q))
    return 4.0 * batch * nheads * pairs * headdim


WARMUP_MS = 200
ROUNDS = 3
# Rows up to SHORT_MAX_SEQLEN keys get at least SHORT_ROUNDS rounds (--short-rounds): their
# kernels take 30-100 us, about do_bench's L2 clear and the host's call, so a round there moves
# with the clock the previous implementation left and with the host (sessions 60 and 72: d128
# 512 read 1.00-1.02 in three sweeps and 0.92 in one, from two low rounds of ours at 1593 MHz and
# at low power). Six is two cycles of three implementations' rotations, each order both ways.
SHORT_ROUNDS = 6
SHORT_MAX_SEQLEN = 1024


def rounds_for(seqlen, rounds, short_rounds=SHORT_ROUNDS):
    """The rounds a row of `seqlen` keys is timed in: `rounds`, at least `short_rounds` for the short rows."""
    return max(rounds, short_rounds) if seqlen <= SHORT_MAX_SEQLEN else rounds


def median_ms(fn):
    return do_bench(fn, warmup=WARMUP_MS, rep=100, return_mode="median")


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm_ms = median_ms(lambda: a @ b)
    src = torch.randn(1 << 30, device="cuda", dtype=torch.bfloat16)  # 2 GiB
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda: dst.copy_(src))
    return {
        "bf16_mm_tflops": 2 * 8192**3 / mm_ms / 1e9,
        "copy_TBps": 2 * src.numel() * src.element_size() / copy_ms / 1e9,
    }


def ours_fwd(q, k, v, causal):
    return flashattn.flash_attn_func(q, k, v, causal=causal)


def sdpa_fwd(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
                enable_gqa=q.shape[2] != k.shape[2])
        return out.transpose(1, 2)
    return run


IMPLS = {
    "flashattn": ours_fwd,
    "fa2": sdpa_fwd(SDPBackend.FLASH_ATTENTION),
    "cudnn": sdpa_fwd(SDPBackend.CUDNN_ATTENTION),
}


@contextlib.contextmanager
def env_set(name, value):
    """name=value in the environment inside the block; the previous value (or its absence) comes
    back after it, so the blocks nest."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


# The library's overrides read at every call (the rest, such as FLASHATTN_CUDA_KERNELS, once);
# FLASHATTN_PAGED_GATHER is the package's (flash_attn_with_kvcache).
PER_CALL_ENV = ("FLASHATTN_SM90_VARIANT", "FLASHATTN_SM90_CAUSAL_GROUPS", "FLASHATTN_SM90_BACKWARD",
                "FLASHATTN_SM90_SPLIT_TAIL", "FLASHATTN_SM90_PACK_GQA", "FLASHATTN_SM90_PACK_GQA_ONE_WG", "FLASHATTN_SM90_SLICED_DECODE",
                "FLASHATTN_SM90_KEY_SPLITS", "FLASHATTN_SM90_SPLIT_COMBINE", "FLASHATTN_SM90_L2_PROMOTION",
                "FLASHATTN_SM90_PDL", "FLASHATTN_PAGED_GATHER", "FLASHATTN_SM80_KEY_SPLITS",
                "FLASHATTN_SM80_HEADS_AS_ROWS", "FLASHATTN_SM90_CAPTURED_SPLITS")


@contextlib.contextmanager
def envs_set(settings):
    """Every (name, value) of settings in the environment inside the block (env_set each)."""
    with contextlib.ExitStack() as stack:
        for name, value in settings:
            stack.enter_context(env_set(name, value))
        yield


def ours_env_pairs(setting, ap):
    """[(name, value)] of one --ours-env setting ("NAME=VALUE[;NAME=VALUE...]"), every name one the
    library reads at every call (else ap.error)."""
    pairs = [part.partition("=") for part in setting.split(";")]
    for name, _, _ in pairs:
        if name not in PER_CALL_ENV:
            # FLASHATTN_CUDA_KERNELS is read once per process: set around a call it changes nothing
            # (session 9 timed the sm90 forward twice that way, thinking one was the sm80 one).
            ap.error(f"--ours-env {name}: the library reads only {', '.join(PER_CALL_ENV)} at every "
                     f"call; set {name} for the whole run instead")
    return [(name, value) for name, _, value in pairs]


def add_ours_with_env(settings, ap):
    """Ours once more per --ours-env setting, as flashattn[setting]."""
    for setting in settings:
        IMPLS[f"flashattn[{setting}]"] = ours_with_env(ours_env_pairs(setting, ap))


def ours_with_env(settings):
    """Ours with environment variables set around each call (each one of PER_CALL_ENV, which the
    library reads at every call): an A/B in one run. time_impl also sets them around the backward
    (run.env)."""
    def run(q, k, v, causal):
        with envs_set(settings):
            return ours_fwd(q, k, v, causal)
    run.env = settings
    return run


def round_order(names, r):
    """The implementations' order in round r: rotated by one each round, so each comes first as
    often as the others over len(names) rounds, and reversed in every other cycle of len(names)
    rounds, so each follows a different implementation too (from 2 x len(names) rounds on; the
    default 3 rounds of 3 implementations keep the plain rotation). With the rotation alone an
    implementation always runs after the same one, and session 42 found a slot's reading
    depending on it: timing one setting against another with each in turn in the `--ours-env`
    slot (right after cuDNN in most rounds) and in the plain one, the `--ours-env` slot led by 1.1%
    on average over 26 rows (21 ahead) whichever setting it held. That the predecessor is the
    cause is a reading, not isolated; swap the settings between slots before deciding."""
    if (r // len(names)) % 2 == 1:
        names = names[::-1]
    shift = r % len(names)
    return names[shift:] + names[:shift]


def time_impl(fn, q, k, v, causal, do):
    """Returns (forward ms, backward ms); backward = (forward + backward) - forward."""
    try:
        fn(q, k, v, causal)
    except Exception as e:  # a peer may not support a shape (e.g. FA2 at head dim 256 backward)
        return None, None, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    fwd = median_ms(lambda: fn(q, k, v, causal))
    if do is None:
        return fwd, None, None
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

    def fwd_bwd():
        with envs_set(getattr(fn, "env", ())):
            out = fn(qg, kg, vg, causal)
            out.backward(do)
        qg.grad = kg.grad = vg.grad = None
    try:
        total = median_ms(fwd_bwd)
        return fwd, total - fwd, None
    except Exception as e:
        return fwd, None, f"backward: {type(e).__name__}: {str(e).splitlines()[0][:120]}"


HOST_REPS = 30
# Rows whose forward takes longer than this are not probed for host time: no host call comes near
# it (the package's is ~60-100 us on the device's host), and 30 calls of a 16k row cost seconds.
HOST_PROBE_MAX_MS = 1.0


def host_us(fn, reps=HOST_REPS):
    """The host's time a call, microseconds, over `reps` calls enqueued back to back after the
    device has drained (no call waits on the GPU while the queue has room). Beside a row's GPU
    time a repetition (do_bench's L2 clear, ~60-90 us, plus the kernel), it tells whether a round
    could have been bound by the host's call rate rather than by the device (session 72: d128
    512 read 0.92 from two low rounds, one of them at low power)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    host = (time.perf_counter() - start) / reps * 1e6
    torch.cuda.synchronize()
    return host


def timed_rounds(q, k, v, causal, do, rounds, row):
    """Every implementation timed once a round in round_order's order: ({name: (forward ms list,
    backward ms list)}, {name: wall-clock span of each round's timing}), the latter in Unix
    seconds, to line the rounds up with nvidia-smi's samples of the clock (session 60: low rounds
    of ours). An implementation's error goes into row as <name>_error, its forward's host time
    a call each round (host_us, after the timing; rows of forwards up to HOST_PROBE_MAX_MS) as
    <name>_fwd_host_us_rounds."""
    times = {name: ([], []) for name in IMPLS}
    walls = {name: [] for name in IMPLS}
    for r in range(rounds):
        for name in round_order(list(IMPLS), r):
            start = time.time()
            fwd, bwd, err = time_impl(IMPLS[name], q, k, v, causal, do)
            walls[name].append((round(start, 3), round(time.time(), 3)))
            if fwd:
                times[name][0].append(fwd)
                # One entry a timed round (None past HOST_PROBE_MAX_MS), in step with the rates.
                host = host_us(lambda: IMPLS[name](q, k, v, causal)) if fwd <= HOST_PROBE_MAX_MS else None
                row.setdefault(f"{name}_fwd_host_us_rounds", []).append(host and round(host, 1))
            if bwd:
                times[name][1].append(bwd)
            if err:
                row[f"{name}_error"] = err
    return times, walls


def shapes(quick, only_seqlens=None, masks="both"):
    seqlens = only_seqlens or ([512, 2048, 8192] if quick else SEQLENS)
    causals = {"both": (False, True), "unmasked": (False,), "causal": (True,)}[masks]
    for headdim in HEADDIMS:
        for seqlen in seqlens:
            for causal in causals:
                nheads = WIDTH // headdim
                yield dict(batch=TOKENS // seqlen, nheads=nheads, nheads_kv=nheads, seqlen=seqlen,
                           headdim=headdim, causal=causal)
    for seqlen in (2048, 8192):  # GQA rows of the protocol
        if 128 not in HEADDIMS or seqlen not in seqlens or True not in causals:
            continue
        yield dict(batch=TOKENS // seqlen, nheads=32, nheads_kv=8, seqlen=seqlen, headdim=128, causal=True)


def check_close(q, k, v, causal):
    """Ours vs SDPA's math backend in fp32 on the same inputs: a guard that we time a correct kernel."""
    ref = F.scaled_dot_product_attention(q.float().transpose(1, 2), k.float().transpose(1, 2),
                                         v.float().transpose(1, 2), is_causal=causal,
                                         enable_gqa=q.shape[2] != k.shape[2]).transpose(1, 2)
    out = ours_fwd(q, k, v, causal).float()
    return ((out - ref).norm() / ref.norm()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--png-dir", default=None)
    ap.add_argument("--headdims", default="64,128,256")
    ap.add_argument("--seqlens", default=None, help="comma-separated; default: the protocol's (--quick: 512,2k,8k)")
    ap.add_argument("--fwd-only", action="store_true", help="time the forward only")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help="rounds per shape, the implementations' order rotated by one each round and "
                         "reversed every other cycle of rotations (round_order)")
    ap.add_argument("--short-rounds", type=int, default=SHORT_ROUNDS,
                    help=f"at least this many rounds for rows of up to {SHORT_MAX_SEQLEN} keys (rounds_for; "
                         "0 or --rounds' value: the same rounds everywhere)")
    ap.add_argument("--warmup-ms", type=float, default=WARMUP_MS,
                    help="untimed run of an implementation right before it is timed")
    ap.add_argument("--ours-env", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE...]",
                    help="also time ours with these environment variables set (repeatable); rows get "
                         "'flashattn[NAME=VALUE]_fwd_tflops' and the like, the log a line each")
    ap.add_argument("--masks", default="both", choices=["both", "unmasked", "causal"],
                    help="which of the protocol's non-causal and causal rows to time (GQA rows are causal)")
    ap.add_argument("--smi-out", default=None, metavar="CSV",
                    help="nvidia-smi's SM clock, power and clock-event reasons every 50 ms of the run into CSV "
                         "(benchmarks/round_clocks.py lines them up with the rounds' wall-clock spans)")
    args = ap.parse_args()
    smi = None
    if args.smi_out:
        try:
            smi = start_smi(args.smi_out, "timestamp," + smi_fields())
        except OSError as e:
            print(f"--smi-out: no nvidia-smi ({e}); timing without it", file=sys.stderr)
    try:
        run(args, ap)
    finally:
        if smi:
            smi.terminate()


def smi_fields():
    """The query fields this driver's nvidia-smi accepts (the reasons field was renamed in 535)."""
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        fields = f"clocks.sm,power.draw,temperature.gpu,{reasons}"
        if subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                          capture_output=True).returncode == 0:
            return fields
    return "clocks.sm,power.draw,temperature.gpu"


def start_smi(path, fields):
    """nvidia-smi sampling `fields` every 50 ms into the CSV at path, in the background (it only
    reads the card's state); the caller terminates it."""
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "50",
                             "-f", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(args, ap):
    global WARMUP_MS  # median_ms reads it; --warmup-ms sets it
    WARMUP_MS = args.warmup_ms
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    add_ours_with_env(args.ours_env, ap)
    HEADDIMS[:] = [int(d) for d in args.headdims.split(",")]
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    header = {
        "gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(), "dtype": args.dtype,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "ceilings": ceilings(), "rounds": args.rounds,
        "short_rounds": rounds_for(SHORT_MAX_SEQLEN, args.rounds, args.short_rounds), "warmup_ms": args.warmup_ms,
    }
    rows = []
    for s in shapes(args.quick, [int(n) for n in args.seqlens.split(",")] if args.seqlens else None, args.masks):
        b, h, hk, n, d, causal = s["batch"], s["nheads"], s["nheads_kv"], s["seqlen"], s["headdim"], s["causal"]
        q = torch.randn(b, n, h, d, device="cuda", dtype=dtype)
        k = torch.randn(b, n, hk, d, device="cuda", dtype=dtype)
        v = torch.randn(b, n, hk, d, device="cuda", dtype=dtype)
        do = torch.randn(b, n, h, d, device="cuda", dtype=dtype)
        flops = attention_flops(b, h, n, n, d, causal)
        row = dict(s, dtype=args.dtype, rel_error=check_close(q[:1], k[:1], v[:1], causal))
        times, walls = timed_rounds(q, k, v, causal, None if args.fwd_only else do,
                                    rounds_for(n, args.rounds, args.short_rounds), row)
        for name, (fwds, bwds) in times.items():
            row[f"{name}_fwd_tflops"] = flops / statistics.median(fwds) / 1e9 if fwds else None
            row[f"{name}_bwd_tflops"] = 2.5 * flops / statistics.median(bwds) / 1e9 if bwds else None
            row[f"{name}_fwd_tflops_rounds"] = [round(flops / t / 1e9, 1) for t in fwds]
            row[f"{name}_bwd_tflops_rounds"] = [round(2.5 * flops / t / 1e9, 1) for t in bwds]
            row[f"{name}_walls"] = walls[name]
        for direction in ("fwd", "bwd"):
            peers = [row[f"{p}_{direction}_tflops"] for p in ("fa2", "cudnn") if row.get(f"{p}_{direction}_tflops")]
            ours = row[f"flashattn_{direction}_tflops"]
            row[f"ratio_{direction}"] = ours / max(peers) if ours and peers else None
            row[f"ratio_{direction}_vs_fa2"] = (ours / row["fa2_" + direction + "_tflops"]
                                                if ours and row.get(f"fa2_{direction}_tflops") else None)
        rows.append(row)
        print(format_row(row), file=sys.stderr, flush=True)
        for name in IMPLS:
            if name.startswith("flashattn["):
                print(f"    {name}: fwd {fmt(row[name + '_fwd_tflops'])} bwd {fmt(row[name + '_bwd_tflops'])}",
                      file=sys.stderr, flush=True)
        del q, k, v, do
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)
    if args.png_dir:
        plot(rows, args.png_dir, args.dtype)
    print(json.dumps(header["ceilings"]))
    print(table(rows))
    if any(name.startswith("flashattn[") for name in IMPLS):
        print(ab_table(rows))


def fmt(x, spec="6.1f"):
    return format(x, spec) if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "   -  "


def format_row(r):
    return (f"d={r['headdim']:3d} n={r['seqlen']:5d} h={r['nheads']}/{r['nheads_kv']} causal={int(r['causal'])} "
            f"err={r['rel_error']:.1e} fwd: ours {fmt(r['flashattn_fwd_tflops'])} fa2 {fmt(r['fa2_fwd_tflops'])} "
            f"cudnn {fmt(r['cudnn_fwd_tflops'])} x{fmt(r['ratio_fwd'], '.2f')} | bwd: ours {fmt(r['flashattn_bwd_tflops'])} "
            f"fa2 {fmt(r['fa2_bwd_tflops'])} cudnn {fmt(r['cudnn_bwd_tflops'])} x{fmt(r['ratio_bwd'], '.2f')}")


def table(rows):
    lines = ["TFLOP/s (ratio = ours / best peer; vs fa2 in brackets)",
             f"{'hdim':>4} {'seqlen':>6} {'heads':>6} {'causal':>6} | {'ours':>6} {'fa2':>6} {'cudnn':>6} {'ratio':>12} |"
             f" {'ours':>6} {'fa2':>6} {'cudnn':>6} {'ratio':>12}",
             f"{'':>27} | {'forward':^35} | {'backward':^35}"]
    for r in rows:
        lines.append(
            f"{r['headdim']:>4} {r['seqlen']:>6} {str(r['nheads']) + '/' + str(r['nheads_kv']):>6} {str(r['causal']):>6} | "
            f"{fmt(r['flashattn_fwd_tflops'])} {fmt(r['fa2_fwd_tflops'])} {fmt(r['cudnn_fwd_tflops'])} "
            f"{fmt(r['ratio_fwd'], '5.2f')} [{fmt(r['ratio_fwd_vs_fa2'], '4.2f')}] | "
            f"{fmt(r['flashattn_bwd_tflops'])} {fmt(r['fa2_bwd_tflops'])} {fmt(r['cudnn_bwd_tflops'])} "
            f"{fmt(r['ratio_bwd'], '5.2f')} [{fmt(r['ratio_bwd_vs_fa2'], '4.2f')}]")
    return "\n".join(lines)


def ab_table(rows):
    """Each --ours-env setting (flashattn[SETTING]) against plain ours, forward, row by row: its
    TFLOP/s and the change of the medians in %, for reading an A/B at a glance."""
    settings = sorted({key[:-len("_fwd_tflops")] for r in rows for key in r
                       if key.startswith("flashattn[") and key.endswith("_fwd_tflops")})
    lines = ["forward, each --ours-env setting against ours (TFLOP/s, change of the medians)"]
    for r in rows:
        base = r.get("flashattn_fwd_tflops")
        cells = []
        for name in settings:
            ours_set = r.get(f"{name}_fwd_tflops")
            change = f" ({(ours_set / base - 1) * 100:+.1f}%)" if ours_set and base else ""
            cells.append(f"{name[len('flashattn['):-1]} {fmt(ours_set)}{change}")
        lines.append(f"d={r['headdim']:3d} n={r['seqlen']:5d} h={r['nheads']}/{r['nheads_kv']} causal={int(r['causal'])} "
                     f"ours {fmt(base)} | " + " | ".join(cells))
    return "\n".join(lines)


def plot(rows, out_dir, dtype):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for d in HEADDIMS:
        fig, axes = plt.subplots(2, 2, figsize=(12, 8))
        for row_axes, direction in zip(axes, ("fwd", "bwd")):
            for ax, causal in zip(row_axes, (False, True)):
                sel = [r for r in rows if r["headdim"] == d and r["causal"] == causal and r["nheads"] == r["nheads_kv"]]
                xs = range(len(sel))
                for i, name in enumerate(IMPLS):
                    vals = [r.get(f"{name}_{direction}_tflops") or 0 for r in sel]
                    bars = ax.bar([x + (i - 1) * 0.27 for x in xs], vals, 0.27, label=name)
                    ax.bar_label(bars, fmt="%.0f", fontsize=7)
                ax.set_xticks(list(xs), [f"{r['seqlen'] // 1024}k" if r["seqlen"] >= 1024 else str(r["seqlen"]) for r in sel])
                ax.set_title(f"{'backward' if direction == 'bwd' else 'forward'}, {'causal' if causal else 'non-causal'}, "
                             f"head dim {d}, {dtype}")
                ax.set_xlabel("sequence length")
                ax.set_ylabel("TFLOP/s")
                ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{out_dir}/hdim{d}_{dtype}.png", dpi=80)
        plt.close(fig)

if __name__ == "__main__":
    main()
