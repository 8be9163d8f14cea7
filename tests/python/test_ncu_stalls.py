"""benchmarks/cpp/sm90_ncu_stalls.py: the per-line stall report's sums (a tool for the GPU
machine's ncu output, tested here on a small table written in ncu's source-page CSV form)."""
import csv

import pytest

import benchmark_tools


def load_tool():
    return benchmark_tools.load("sm90_ncu_stalls")


def write_table(path, lines):
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
              "stall_wait", "stall_barrier", "stall_mio", "stall_wait (Not Issued)"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "forward_kernel"])
        w.writerow([])
        w.writerow(header)
        for row in lines:
            w.writerow(row)


def test_shares_by_opcode_and_reason(tmp_path, capsys):
    table = tmp_path / "source.csv"
    write_table(table, [
        ["0x10", "MUFU.EX2 R1, R1", "30", "1500000", "25", "0", "5", "99"],
        ["0x20", "@P0 MUFU.EX2 R2, R2", "20", "500000", "20", "0", "0", "99"],
        ["0x30", "WARPGROUP.DEPBAR.LE gsb0, 0x1", "40", "10", "0", "40", "0", "0"],
        ["0x40", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ", "10", "8", "2", "0", "8", "0"],
    ])
    load_tool().report(str(table), top_lines=2)
    out = capsys.readouterr().out
    assert "100 samples" in out
    # Reasons over all lines (the "(Not Issued)" copies left out): wait 47, barrier 40, mio 13.
    assert "wait 47.0%, barrier 40.0%, mio 13.0%" in out
    # Predicated lines count under their opcode; shares are of all samples.
    mufu = next(line for line in out.splitlines() if line.strip().startswith("MUFU"))
    assert "50.0%" in mufu and "2.00 M" in mufu and "[wait 45.0, mio 5.0" in mufu
    depbar = next(line for line in out.splitlines() if line.strip().startswith("WARPGROUP"))
    assert "40.0%" in depbar
    ranked = [line for line in out.splitlines() if "0x" in line and "%" in line and "x " in line]
    assert len(ranked) == 2 and "DEPBAR" in ranked[0] and "MUFU.EX2 R1" in ranked[1]


def test_refuses_a_file_without_the_table(tmp_path):
    bad = tmp_path / "details.csv"
    bad.write_text("Kernel Name,forward_kernel\nDuration,1.5\n")
    with pytest.raises(SystemExit, match="no per-line table"):
        load_tool().report(str(bad), top_lines=0)
