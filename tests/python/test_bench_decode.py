"""benchmarks/bench_decode.py's arithmetic: the bytes a decode step reads and the ratio to the best peer."""
import pytest

from benchmark_tools import BENCHMARKS, load

bench_decode = load("bench_decode", BENCHMARKS)


def test_kv_bytes_counts_k_and_v_of_every_kv_head():
    # 1 x 131072 keys x 8 heads x 128 columns x 2 bytes, for K and for V: 512 MiB.
    assert bench_decode.kv_bytes(1, 8, 131072) == 2 * 131072 * 8 * 128 * 2 == 512 << 20
    assert bench_decode.kv_bytes(8, 32, 32768) == 8 * bench_decode.kv_bytes(1, 32, 32768)


def test_tbps():
    assert bench_decode.tbps(4e12, 1000.0) == pytest.approx(4.0)
    assert bench_decode.tbps(1e9, 0.5) == pytest.approx(2.0)  # 1 GB in half a millisecond


def test_ratio_to_the_fastest_peer_that_ran():
    assert bench_decode.ratio_to_best_peer({"flashattn_tbps": 3.0, "fa2_tbps": 2.0, "cudnn_tbps": 2.5}) == 1.2
    assert bench_decode.ratio_to_best_peer({"flashattn_tbps": 3.0, "fa2_tbps": None, "cudnn_tbps": 1.5}) == 2.0
    assert bench_decode.ratio_to_best_peer({"flashattn_tbps": 3.0, "fa2_tbps": None, "cudnn_tbps": None}) is None
    assert bench_decode.ratio_to_best_peer({"flashattn_tbps": None, "fa2_tbps": 1.0}) is None


def test_the_protocol_rows():
    assert bench_decode.ROWS == [(1, 32, 8, 131072), (16, 32, 8, 8192), (64, 32, 8, 4096), (8, 32, 32, 32768)]


def test_ratio_of_ours_with_settings():
    row = {"flashattn_tbps": 1.0, "flashattn[FLASHATTN_SM90_PACK_GQA=0]_tbps": 3.0, "fa2_tbps": 2.0, "cudnn_tbps": None}
    assert bench_decode.ratio_to_best_peer(row, ours="flashattn[FLASHATTN_SM90_PACK_GQA=0]") == 1.5
    assert bench_decode.ratio_to_best_peer(row) == 0.5


def test_shapes_outside_the_protocol():
    assert bench_decode.parse_shape("1,32,32,32768") == (1, 32, 32, 32768)
    assert bench_decode.parse_shape("2, 32, 8, 4096") == (2, 32, 8, 4096)
    for bad in ("1,32,32", "1,32,0,100", "1,32,12,100", "a,1,1,1", "1,32,32,-5"):
        with pytest.raises(ValueError, match="--shape"):
            bench_decode.parse_shape(bad)


def test_names_of_ours_on_a_partly_filled_or_paged_cache():
    assert bench_decode.used_name("flashattn", 4096) == "flashattn[used 4096]"
    assert bench_decode.used_name("flashattn[X=1]", 4096) == "flashattn[X=1;used 4096]"
    assert bench_decode.paged_name("flashattn", 256) == "flashattn[paged 256]"
    assert bench_decode.paged_name("flashattn[X=1]", 256, graph=True) == "flashattn[X=1;paged 256 graph]"


@pytest.mark.parametrize("script", ["bench_decode.py", "decode_profile.py", "ncu_decode.py"])
def test_decode_scripts_refuse_a_negative_head_dim_before_touching_the_gpu(script):
    import subprocess
    import sys
    run = subprocess.run([sys.executable, str(BENCHMARKS / script), "--headdim", "-8"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--headdim: -8 is negative" in run.stderr


def test_take_headdim_sets_what_kv_bytes_reads():
    import argparse
    ap = argparse.ArgumentParser()
    bench_decode.add_headdim_option(ap)
    try:
        bench_decode.take_headdim(ap.parse_args(["--headdim", "64"]), ap)
        assert bench_decode.kv_bytes(1, 8, 1024) == 2 * 1024 * 8 * 64 * 2
        bench_decode.take_headdim(ap.parse_args([]), ap)  # 0 keeps the head dim as it is
        assert bench_decode.HEADDIM == 64
    finally:
        bench_decode.HEADDIM = 128
