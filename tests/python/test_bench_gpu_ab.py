"""benchmarks/bench_gpu.py's A/B table: each --ours-env setting against plain ours, row by row."""
import pathlib
import re

from benchmark_tools import BENCHMARKS, load

bench_gpu = load("bench_gpu", BENCHMARKS)


def test_ab_table_gives_each_setting_and_its_change():
    rows = [{"headdim": 128, "seqlen": 2048, "nheads": 16, "nheads_kv": 16, "causal": True,
             "flashattn_fwd_tflops": 400.0, "flashattn[A=1]_fwd_tflops": 410.0, "flashattn[A=1]_bwd_tflops": None,
             "flashattn[B=x;C=2]_fwd_tflops": 380.0},
            {"headdim": 64, "seqlen": 512, "nheads": 32, "nheads_kv": 32, "causal": False,
             "flashattn_fwd_tflops": 200.0, "flashattn[A=1]_fwd_tflops": None, "flashattn[B=x;C=2]_fwd_tflops": 200.0}]
    lines = bench_gpu.ab_table(rows).splitlines()
    assert len(lines) == 3
    # Settings in name order; 410 / 400 is +2.5%, 380 / 400 -5.0%.
    assert "ours  400.0 | A=1  410.0 (+2.5%) | B=x;C=2  380.0 (-5.0%)" in lines[1]
    assert lines[1].startswith("d=128 n= 2048 h=16/16 causal=1")
    # A setting without a reading shows none and no change.
    assert "A=1    -   | B=x;C=2  200.0 (+0.0%)" in lines[2]


def test_host_us_times_the_calls_between_two_drains(monkeypatch):
    drains, calls = [], []
    monkeypatch.setattr(bench_gpu.torch.cuda, "synchronize", lambda: drains.append(len(calls)))
    host = bench_gpu.host_us(lambda: calls.append(1), reps=7)
    assert len(calls) == 7
    assert drains == [0, 7]  # the queue drained before the first call and after the last
    assert 0 < host < 1e5


def test_short_rows_take_at_least_the_short_rounds():
    assert bench_gpu.rounds_for(512, 3) == bench_gpu.SHORT_ROUNDS == 6
    assert bench_gpu.rounds_for(1024, 3) == 6
    assert bench_gpu.rounds_for(2048, 3) == 3  # from 2k the rows keep --rounds
    assert bench_gpu.rounds_for(512, 8) == 8  # never fewer than asked
    assert bench_gpu.rounds_for(512, 3, short_rounds=0) == 3  # --short-rounds 0: the same everywhere


def test_every_kernel_switch_the_library_reads_is_settable_per_call():
    # --ours-env refuses a name missing from PER_CALL_ENV; session 95's decode timings of
    # FLASHATTN_SM90_SLICED_DECODE failed so. Every sm80 / sm90 switch the sources read (each is
    # read at every call) must be there.
    src = pathlib.Path(BENCHMARKS).parent / "src"
    read = set()
    for path in src.rglob("*"):
        if path.suffix in (".h", ".cu", ".cpp"):
            read |= set(re.findall(r'(?:getenv|env_setting|env_switch_on)\("(FLASHATTN_SM[0-9]+_[A-Z0-9_]+)"',
                                   path.read_text()))
    assert "FLASHATTN_SM90_SLICED_DECODE" in read  # the scan finds what it is meant to
    assert read - set(bench_gpu.PER_CALL_ENV) == set()
