#!/usr/bin/env python3
"""How ptxas laid out a kernel's instructions: the stall counts and scoreboards of each
instruction's control word, read from `cuobjdump -sass` output, with the sums and placements
session 45 needed (docs/perf.md).

On Volta and later each 128-bit instruction's upper word carries, from bit 41: the stall count (4
bits: cycles before the warp's next instruction may issue), the yield bit, the write and read
scoreboard indices (3 bits each, 7 = none), the mask of scoreboards waited on (6 bits) and the
operand-reuse flags (4 bits). cuobjdump prints the upper word on the line after the instruction.

  cuobjdump -sass kernel.o > k.sass
  sass_schedule.py k.sass --function ClusterPairs --listing          # every instruction, decoded
  sass_schedule.py k.sass --sum 1cdf0-1d3f0 --sum 227a0-234f0        # instructions and stall cycles
  sass_schedule.py k.sass --runs MUFU.EX2                            # waits and barriers among the runs

The last form is the check to make before reading any experiment with turns or waits: ptxas moves
register-only work across a `bar.sync`, a `bar.arrive` or a `wgmma.wait_group` that its inputs do
not depend on (session 45: 53-65 of a step's 66 MUFU.EX2 outside the exp2 turn meant to hold them).
"""
import argparse
import pathlib
import re
import sys
from typing import List, NamedTuple

# A SASS line's instruction name is read as sm80_ncu_classes.py reads ncu's source view.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sm80_ncu_classes import instruction_name  # noqa: E402

CONTROL_SHIFT = 41
NO_SCOREBOARD = 7
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
UPPER_WORD = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
FUNCTION = re.compile(r"Function : (\S+)")
DEFAULT_INSIDE = r"BAR\.SYNC|BAR\.ARV|WARPGROUP\.DEPBAR"


class Control(NamedTuple):
    stall: int
    yield_bit: int
    write_scoreboard: int  # NO_SCOREBOARD: none
    read_scoreboard: int
    wait_mask: int
    reuse: int


class Instruction(NamedTuple):
    function: str
    address: int
    text: str
    control: Control

    @property
    def opcode(self) -> str:
        return instruction_name(self.text)


def decode_control(upper: int) -> Control:
    bits = upper >> CONTROL_SHIFT
    return Control(stall=bits & 0xF, yield_bit=(bits >> 4) & 1, write_scoreboard=(bits >> 5) & 7,
                   read_scoreboard=(bits >> 8) & 7, wait_mask=(bits >> 11) & 0x3F, reuse=(bits >> 17) & 0xF)


def parse(lines) -> List[Instruction]:
    """The instructions of a `cuobjdump -sass` listing, each with its function and control word."""
    out, function, pending = [], "", None
    for line in lines:
        m = FUNCTION.search(line)
        if m:
            function = m.group(1)
            continue
        m = INSTRUCTION.search(line)
        if m:
            pending = (function, int(m.group(1), 16), m.group(2).strip())
            continue
        m = UPPER_WORD.match(line)
        if m and pending is not None:
            out.append(Instruction(*pending, decode_control(int(m.group(1), 16))))
            pending = None
    return out


def in_function(instructions, name_part: str) -> List[Instruction]:
    return [i for i in instructions if name_part in i.function]


def stall_sum(instructions, lo: int, hi: int):
    """Instructions and stall cycles over addresses [lo, hi] (a lower bound on the issue time of
    that stretch for one warp: scoreboard and barrier waits come on top)."""
    span = [i for i in instructions if lo <= i.address <= hi]
    return len(span), sum(i.control.stall for i in span)


def runs(instructions, opcode: str, gap: int = 40):
    """Stretches of one function where `opcode` recurs with at most `gap` other instructions
    between two of them: lists of indices into `instructions`."""
    found = []
    for k, ins in enumerate(instructions):
        if ins.opcode != opcode:
            continue
        if found and instructions[found[-1][-1]].function == ins.function and k - found[-1][-1] <= gap + 1:
            found[-1].append(k)
        else:
            found.append([k])
    return found


def inside_runs(instructions, opcode: str, inside: str = DEFAULT_INSIDE, gap: int = 40, min_run: int = 8):
    """For each run of `opcode` (at least `min_run` long): the instructions matching `inside`
    between its first and last member, each with how many of the run come before it."""
    pattern = re.compile(inside)
    report = []
    for run in runs(instructions, opcode, gap):
        if len(run) < min_run:
            continue
        hits = [(instructions[k], sum(1 for r in run if r < k))
                for k in range(run[0], run[-1] + 1) if pattern.search(instructions[k].text)]
        report.append((instructions[run[0]], instructions[run[-1]], len(run), hits))
    return report


def format_instruction(ins: Instruction) -> str:
    c = ins.control
    wb = "-" if c.write_scoreboard == NO_SCOREBOARD else str(c.write_scoreboard)
    rb = "-" if c.read_scoreboard == NO_SCOREBOARD else str(c.read_scoreboard)
    return f"{ins.address:05x} S{c.stall:02d} y{c.yield_bit} wb{wb} rb{rb} wait{c.wait_mask:02x} {ins.text}"


def address_range(text: str):
    lo, hi = text.split("-")
    return int(lo, 16), int(hi, 16)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sass", help="cuobjdump -sass output")
    ap.add_argument("--function", default="", help="only functions whose mangled name contains this")
    ap.add_argument("--listing", action="store_true", help="print every instruction with its control word")
    ap.add_argument("--sum", action="append", default=[], metavar="LO-HI", help="hex address range")
    ap.add_argument("--runs", metavar="OPCODE", help="report waits and barriers among runs of OPCODE")
    ap.add_argument("--inside", default=DEFAULT_INSIDE, help="regex of what --runs looks for")
    args = ap.parse_args(argv)
    with open(args.sass) as f:
        instructions = in_function(parse(f), args.function)
    if not instructions:
        sys.exit(f"{args.sass}: no instructions (is it cuobjdump -sass output? --function matched nothing?)")
    if args.listing:
        current = None
        for ins in instructions:
            if ins.function != current:
                current = ins.function
                print(f"== {current}")
            print(format_instruction(ins))
    total_n = total_s = 0
    for text in args.sum:
        n, s = stall_sum(instructions, *address_range(text))
        total_n, total_s = total_n + n, total_s + s
        print(f"{text}: {n} instructions, {s} stall cycles")
    if len(args.sum) > 1:
        print(f"total: {total_n} instructions, {total_s} stall cycles")
    if args.runs:
        for first, last, length, hits in inside_runs(instructions, args.runs, args.inside):
            where = ", ".join(f"{h.opcode} at {h.address:05x} after {before}" for h, before in hits) or "none"
            print(f"{first.address:05x}-{last.address:05x}: {length} x {args.runs}; inside: {where}")


if __name__ == "__main__":
    main()
