"""benchmarks/round_clocks.py: bench_gpu.py's rounds lined up with nvidia-smi's samples."""
import json

from benchmark_tools import BENCHMARKS, load

round_clocks = load("round_clocks", BENCHMARKS)

SMI = """2026/12/05 06:03:11.000, 1980, 400.5, 40, 0x0000000000000000
2026/12/05 06:03:11.100, 1755, 690.0, 41, 0x0000000000000004
2026/12/05 06:03:11.200, 1740, 700.0, 41, 0x0000000000000004
2026/12/05 06:03:11.300, 1980, 300.0, 40, 0x0000000000000000
2026/12/05 06:03:11.400, [N/A], 300.0, 40, 0x0000000000000000
"""


def test_rounds_take_the_samples_inside_their_spans(tmp_path):
    smi = tmp_path / "smi.csv"
    smi.write_text(SMI)
    t0 = round_clocks.read_samples(smi)[0][0]
    row = {"headdim": 128, "seqlen": 512, "causal": True, "dtype": "bf16",
           "flashattn_fwd_tflops_rounds": [300.0, 250.0], "flashattn_walls": [[t0 + 0.05, t0 + 0.25], [t0 + 0.25, t0 + 0.35]],
           "cudnn_fwd_tflops_rounds": [310.0], "cudnn_walls": [[t0 + 0.5, t0 + 0.6]]}
    samples = round_clocks.read_samples(smi)
    assert len(samples) == 4  # the [N/A] clock is left out
    lines = list(round_clocks.round_lines(row, samples))
    assert len(lines) == 3
    cudnn, ours0, ours1 = lines  # implementations in name order
    assert "no samples" in cudnn
    assert "300.0 TFLOP/s" in ours0 and "SM   1748 MHz (min 1740)" in ours0 and "max  700" in ours0
    assert "0x0000000000000004" in ours0 and "2 samples" in ours0
    assert "250.0 TFLOP/s" in ours1 and "SM   1980 MHz" in ours1 and "1 samples" in ours1


def test_main_prints_every_row(tmp_path, capsys, monkeypatch):
    smi = tmp_path / "smi.csv"
    smi.write_text(SMI)
    t0 = round_clocks.read_samples(smi)[0][0]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"rows": [
        {"headdim": 192, "seqlen": 1024, "causal": False, "dtype": "fp16",
         "flashattn_fwd_tflops_rounds": [500.0], "flashattn_walls": [[t0, t0 + 0.1]]}]}))
    monkeypatch.setattr("sys.argv", ["round_clocks.py", str(run), str(smi)])
    round_clocks.main()
    out = capsys.readouterr().out
    assert out.startswith("d192 n1024 unmasked fp16")
    assert "500.0 TFLOP/s" in out and "2 samples" in out


def test_a_csv_without_the_reasons_column_reads_them_as_unknown(tmp_path):
    # Drivers whose nvidia-smi has neither reasons field (bench_gpu.smi_fields falls back to the
    # first four columns): the temperature must not be taken for the reasons.
    smi = tmp_path / "smi.csv"
    smi.write_text("2026/12/05 06:03:11.000, 1980, 400.5, 40\n")
    (sample,) = round_clocks.read_samples(smi)
    assert sample[1:] == (1980.0, 400.5, "?")


def test_rounds_show_the_host_time_a_call_where_the_run_has_it(tmp_path):
    smi = tmp_path / "smi.csv"
    smi.write_text(SMI)
    samples = round_clocks.read_samples(smi)
    t0 = samples[0][0]
    row = {"flashattn_fwd_tflops_rounds": [300.0, 250.0], "flashattn_walls": [[t0 + 0.05, t0 + 0.25], [t0 + 5, t0 + 6]],
           "flashattn_fwd_host_us_rounds": [55.0, 97.5],
           "cudnn_fwd_tflops_rounds": [310.0], "cudnn_walls": [[t0 + 0.05, t0 + 0.25]], "cudnn_fwd_host_us_rounds": [None]}
    cudnn, ours0, ours1 = round_clocks.round_lines(row, samples)
    assert "300.0 TFLOP/s, host   55.0 us/call, SM" in ours0
    assert "250.0 TFLOP/s, host   97.5 us/call, no samples" in ours1
    assert "host" not in cudnn  # a round not probed (a forward past bench_gpu.HOST_PROBE_MAX_MS) prints none
