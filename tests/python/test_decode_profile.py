"""benchmarks/decode_profile.py's busy time: the union of kernel spans, overlaps counted once."""
import pytest

from benchmark_tools import BENCHMARKS, load

decode_profile = load("decode_profile", BENCHMARKS)


def test_busy_time_counts_overlapping_spans_once():
    # A kernel resident early (PDL) inside its predecessor's span, then a gap, then one more.
    spans = [(0.0, 10.0), (4.0, 12.0), (20.0, 25.0)]
    assert decode_profile.busy_us(spans) == pytest.approx(12.0 + 5.0)


def test_busy_time_of_nested_and_unordered_spans():
    assert decode_profile.busy_us([(5.0, 6.0), (0.0, 10.0), (10.0, 11.0)]) == pytest.approx(11.0)
    assert decode_profile.busy_us([]) == 0.0
