"""benchmarks/sweep_history.py: each protocol row's ratio across runs, against issue 4's targets."""
import json

from benchmark_tools import BENCHMARKS, load

sweep_history = load("sweep_history", BENCHMARKS)


def run_file(tmp_path, name, dtype, rows, matmul=700.0):
    path = tmp_path / name
    path.write_text(json.dumps({"header": {"gpu": "card", "dtype": dtype, "ceilings": {"bf16_mm_tflops": matmul}},
                                "rows": rows}))
    return str(path)


def row(headdim, seqlen, causal, ratio, heads=(16, 16)):
    return {"headdim": headdim, "seqlen": seqlen, "causal": causal, "nheads": heads[0], "nheads_kv": heads[1],
            "ratio_fwd": ratio}


def test_rows_are_collected_across_runs_of_the_dtype(tmp_path):
    a = run_file(tmp_path, "a.json", "bf16", [row(128, 2048, False, 1.12), row(128, 512, True, 0.98),
                                              row(128, 2048, True, 1.2, heads=(32, 8))])
    b = run_file(tmp_path, "b.json", "bf16", [row(128, 2048, False, 1.05), row(128, 512, True, None)])
    c = run_file(tmp_path, "c.json", "fp16", [row(128, 2048, False, 2.0)])
    ratios, runs = sweep_history.collect([a, b, c], "bf16")
    assert [r[0] for r in runs] == [a, b]  # the fp16 run is left out
    assert ratios[(128, 2048, False, False)] == [1.12, 1.05]
    assert ratios[(128, 512, True, False)] == [0.98]  # a row without a ratio is left out
    assert ratios[(128, 2048, True, True)] == [1.2]  # GQA rows apart from the MHA ones


def test_lines_count_the_runs_that_met_each_target():
    ratios = {(128, 2048, False, False): [1.12, 1.05, 1.10], (64, 512, True, False): [1.01, 1.0]}
    out = list(sweep_history.lines(ratios))
    assert out[0].startswith("hdim seqlen")
    short, long = out[1], out[2]  # sorted: head dim 64 first
    assert short.startswith("  64    512 True") and "2/2 at 1.00" in short and not short.endswith("<")
    assert "1.050  1.100 1.120" in long and "2/3 at 1.10" in long and long.endswith("<")
