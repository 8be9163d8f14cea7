"""benchmarks/causal_schedule_model.py: the causal tiles' numbering and the two schedules' shares,
against small cases worked out by hand."""
import sys

import pytest

from benchmark_tools import BENCHMARKS, load

model = load("causal_schedule_model", BENCHMARKS)


def test_tile_costs_are_the_key_blocks_a_causal_tile_sees():
    # 300 rows in 128-row tiles: rows 0-127 see 1 block of 128 keys, 128-255 two, 256-299 three.
    assert model.tile_costs(300, 128, 128, 0.0) == [1, 2, 3]
    assert model.tile_costs(256, 128, 64, 0.5) == [2.5, 4.5]


def test_numbering_goes_longest_first_within_each_group():
    # Three (batch, head) pairs, groups of two: the first group's longest tiles, then its shorter
    # ones, then the last group (one pair) the same way.
    assert model.numbering(3, [1, 2], 2) == [2, 2, 1, 1, 2, 1]
    assert model.numbering(2, [1, 2, 3], 1) == [3, 2, 1, 3, 2, 1]


def test_static_snake_and_dynamic_counter_shares():
    # Two CTAs. Static: wave 0 gives CTA 0 tile 0 (3) and CTA 1 tile 1 (1); wave 1 runs backwards,
    # CTA 1 tile 2 (1) and CTA 0 tile 3 (3): 6 against a mean of 4.
    assert model.busiest_over_mean([3, 1, 1, 3], 2, dynamic=False) == pytest.approx(1.5)
    # Dynamic: CTA 1 frees first (at 1) and takes tile 2, frees at 2 and takes tile 3: ends at 5.
    assert model.busiest_over_mean([3, 1, 1, 3], 2, dynamic=True) == pytest.approx(1.25)
    # Equal tiles, as many as CTAs: nobody waits either way.
    assert model.busiest_over_mean([2] * 8, 8, dynamic=False) == pytest.approx(1.0)
    assert model.busiest_over_mean([2] * 8, 8, dynamic=True) == pytest.approx(1.0)


def test_rule_names_the_librarys_causal_kernels():
    # d128 up to 8k: static, one head a group; past it tall tiles over all heads.
    assert model.rule(128, 2048, False, 50.0, 128)[1:] == (False, 1, "static")
    assert model.rule(128, 16384, False, 50.0, 16)[1:] == (False, 16, "tall")
    # d64 2k: 192-row tiles, groups of the heads whose K and V (0.5 MB each) fill half of 50 MB;
    # static on the H200's bandwidth, dynamic on the H100's.
    assert model.rule(64, 2048, False, 50.0, 256) == ((192, 128), False, 50, "static")
    assert model.rule(64, 2048, True, 50.0, 256) == ((192, 128), True, 50, "dynamic")


def test_compare_prints_each_row_and_refuses_bad_settings(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["causal_schedule_model.py", "--compare", "dynamic:8,static:1"])
    model.main()
    out = capsys.readouterr().out
    assert "d128 causal 2048: rule static G1" in out and "dynamic:8" in out and "static:1 1.000" in out
    monkeypatch.setattr(sys, "argv", ["causal_schedule_model.py", "--compare", "sideways:8"])
    with pytest.raises(SystemExit):
        model.main()
