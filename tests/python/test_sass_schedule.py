"""benchmarks/cpp/sass_schedule.py: control words, sums and placements read from a small listing
written in cuobjdump's -sass form (the tool is run on real listings by hand; see docs/perf.md,
session 45)."""
import pytest

import benchmark_tools


def load_tool():
    return benchmark_tools.load("sass_schedule")


def upper_word(stall, yield_bit=1, wb=7, rb=7, wait=0, reuse=0, low=0x800):
    control = stall | yield_bit << 4 | wb << 5 | rb << 8 | wait << 11 | reuse << 17
    return control << 41 | low


def listing(function, rows):
    """rows: (address, text, upper word) in cuobjdump's two-line layout."""
    lines = [f"\t\tFunction : {function}", "\t.headerflags\t@\"EF_CUDA_SM90\""]
    for address, text, upper in rows:
        lines.append(f"        /*{address:04x}*/                   {text} ;   /* 0x000000000000{address:04x} */")
        lines.append(f"                                                   /* 0x{upper:016x} */")
    return lines


def test_control_word_fields_round_trip():
    tool = load_tool()
    c = tool.decode_control(upper_word(stall=7, yield_bit=0, wb=3, rb=5, wait=0x21, reuse=0x4))
    assert c == tool.Control(stall=7, yield_bit=0, write_scoreboard=3, read_scoreboard=5, wait_mask=0x21, reuse=0x4)


def test_real_words_agree_with_their_text():
    # Upper words of two instructions of the d128 cluster pairs (cuobjdump, session 45): the MUFU,
    # of variable latency, sets a write scoreboard; the FFMA does not, and its .reuse shows in the
    # reuse bits.
    tool = load_tool()
    mufu = tool.decode_control(0x000E700000000800)
    ffma = tool.decode_control(0x100FE20008000812)
    assert mufu.write_scoreboard != tool.NO_SCOREBOARD and mufu.reuse == 0
    assert ffma.write_scoreboard == tool.NO_SCOREBOARD and ffma.reuse != 0 and ffma.stall == 1


def make_step(tool):
    rows = [(0x10, "HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR8], R24, gsb0", upper_word(1)),
            (0x20, "WARPGROUP.DEPBAR.LE gsb0, 0x1", upper_word(2))]
    address = 0x30
    for k in range(10):
        rows.append((address, f"MUFU.EX2 R{40 + k}, R{40 + k}", upper_word(1, wb=1)))
        rows.append((address + 0x10, f"FADD R20, R20, R{40 + k}", upper_word(7)))
        address += 0x20
        if k == 2:
            rows.append((address, "WARPGROUP.DEPBAR.LE gsb0, 0x0", upper_word(2)))
            address += 0x10
    rows.append((address, "@P0 BAR.ARV R9, 0x100", upper_word(6)))
    return tool.parse(listing("_Z6kernelv", rows) + listing("_Z5otherv", [(0x10, "EXIT", upper_word(5))]))


def test_parse_and_sums():
    tool = load_tool()
    instructions = make_step(tool)
    assert len(instructions) == 2 + 20 + 1 + 1 + 1
    assert tool.in_function(instructions, "other")[0].opcode == "EXIT"
    assert instructions[-2].opcode == "BAR.ARV"  # the guard predicate is not the opcode
    n, stalls = tool.stall_sum(tool.in_function(instructions, "kernel"), 0x30, 0x30 + 0x20 * 3 - 0x10)
    assert (n, stalls) == (6, 3 * (1 + 7))


def test_waits_inside_runs():
    tool = load_tool()
    instructions = make_step(tool)
    report = tool.inside_runs(instructions, "MUFU.EX2")
    assert len(report) == 1
    first, last, length, hits = report[0]
    assert length == 10 and first.address == 0x30
    assert [(h.text, before) for h, before in hits] == [("WARPGROUP.DEPBAR.LE gsb0, 0x0", 3)]
    assert tool.inside_runs(instructions, "MUFU.EX2", min_run=11) == []


def test_empty_listing_is_refused(tmp_path):
    tool = load_tool()
    path = tmp_path / "empty.sass"
    path.write_text("no instructions here\n")
    with pytest.raises(SystemExit):
        tool.main([str(path), "--runs", "MUFU.EX2"])
