"""The forward inside a stream of kernels, as a model runs it: a step is an elementwise kernel
writing q (the op before attention) and then the forward on it, repeated with nothing between
the steps; CUDA events bracket the whole loop, queued behind a sleeping kernel so that the host's
time a step is not what is timed, and the gaps between kernels are in the time (the protocol's
do_bench times one call between an L2 clear and two events). Each setting of
--ours-env (e.g. FLASHATTN_SM90_PDL=0, the forward launched as an ordinary kernel rather than as a
programmatic dependent of the op before it) runs in the same process, in turns.

    python3 benchmarks/back_to_back.py [--steps 100] [--rounds 5] [--ours-env FLASHATTN_SM90_PDL=0]
"""
import argparse
import os
import statistics
import sys

import torch

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpu as bg  # noqa: E402

# (name, batch, seqlen_q, seqlen_k, heads_q, heads_kv, headdim, causal): a decode step over a short
# and a long cache, and the protocol's shortest rows.
SHAPES = [
    ("decode gqa 32/8 2k", 1, 1, 2048, 32, 8, 128, False),
    ("decode gqa 32/8 32k", 1, 1, 32768, 32, 8, 128, False),
    ("d64 causal 512", 32, 512, 512, 32, 32, 64, True),
    ("d128 512", 32, 512, 512, 16, 16, 128, False),
    ("d128 causal 512", 32, 512, 512, 16, 16, 128, True),
]


# GPU cycles the stream sleeps a timed step before the steps (~0.5 ms at 2 GHz), so that the host
# has queued them all before the first runs (its ~50-200 us a step would otherwise be what is timed).
SLEEP_CYCLES_A_STEP = 1_000_000


def step_time_us(q_src, q, k, v, causal, steps):
    """Microseconds a step: torch.mul writing q, then the forward on q."""
    def run():
        for _ in range(steps):
            torch.mul(q_src, 1.0, out=q)
            flashattn.flash_attn_func(q, k, v, causal=causal)
    run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(SLEEP_CYCLES_A_STEP * steps)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ours-env", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE...]")
    args = ap.parse_args()
    settings = [("default", [])] + [(setting, bg.ours_env_pairs(setting, ap)) for setting in args.ours_env]
    print(f"{torch.cuda.get_device_name()}: us a step (elementwise op + forward), median of {args.rounds} rounds")
    for name, b, sq, sk, hq, hkv, d, causal in SHAPES:
        q_src = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
        q = torch.empty_like(q_src)
        k, v = (torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        times = {label: [] for label, _ in settings}
        for r in range(args.rounds):
            order = settings if r % 2 == 0 else settings[::-1]
            for label, env in order:
                with bg.envs_set(env):
                    times[label].append(step_time_us(q_src, q, k, v, causal, args.steps))
        base = statistics.median(times["default"])
        cells = [f"default {base:8.2f}"]
        for label, _ in settings[1:]:
            t = statistics.median(times[label])
            cells.append(f"{label} {t:8.2f} ({(t / base - 1) * 100:+.1f}%)")
        print(f"{name:22s} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
