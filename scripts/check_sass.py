#!/usr/bin/env python3
"""Checks the machine code of the built CUDA kernels (issues 3 and 4: "check the SASS").

    python3 scripts/check_sass.py LIBRARY [--cuobjdump PATH]

Disassembles every kernel of LIBRARY (the static library or an object) for every architecture
it was compiled for, and fails, naming the kernel and architecture, where
  - any kernel touches local memory (LDL / STL: register spills or stack arrays),
  - an sm80 forward or backward main kernel has no HMMA (mma.sync tensor-core products),
  - an sm90 forward or backward kernel has no HGMMA (wgmma),
  - an sm90 forward or backward kernel waits for its wgmmas (WARPGROUP.DEPBAR) at least half as
    often as it issues them: ptxas serialised its wgmmas (its notes C7510-C7516, e.g. registers
    short for the wgmma pipeline), which leaves no GEMM overlapping anything. A healthy kernel
    waits once per group of several (0.1-0.25 of its HGMMAs in session 12).
It also fails when it finds no main kernel at all, so a build without CUDA code cannot pass.
"""
import argparse
import re
import subprocess
import sys

LOCAL_MEMORY = re.compile(r"\b(LDL|STL)(\.[A-Z0-9.]+)?\s")
FUNCTION = re.compile(r"^\s*Function : (\S+)")
ARCH = re.compile(r"^\s*code for (sm_\w+)")

# (pattern on the mangled name, opcode every such kernel must contain)
MAIN_KERNELS = [
    (re.compile(r"flashattn4sm80\d+(forward_kernel|backward_kernel)I"), "HMMA"),
    (re.compile(r"flashattn4sm90\d+(forward_kernel|backward_kernel)I"), "HGMMA"),
    # the sliced decode kernel's 16-row tiles are mma.sync (sliced_decode.h)
    (re.compile(r"flashattn4sm90\d+sliced_decode_kernelI"), "HMMA"),
]


def kernels(sass_text):
    """Yields (architecture, mangled name, body lines) per kernel."""
    arch, name, body = None, None, []
    for line in sass_text.splitlines():
        a = ARCH.match(line)
        f = FUNCTION.match(line)
        if (a or f) and name is not None:
            yield arch, name, body
            name, body = None, []
        if a:
            arch = a.group(1)
        elif f:
            name = f.group(1)
        elif name is not None:
            body.append(line)
    if name is not None:
        yield arch, name, body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("--cuobjdump", default="cuobjdump")
    args = parser.parse_args()
    sass = subprocess.run([args.cuobjdump, "-sass", args.library], check=True, capture_output=True,
                          text=True).stdout
    failures, checked, main_kernels = [], 0, 0
    for arch, name, body in kernels(sass):
        checked += 1
        local = [line.strip() for line in body if LOCAL_MEMORY.search(line)]
        if local:
            failures.append(f"{arch} {name}: {len(local)} local-memory instructions, e.g. {local[0][:80]}")
        for pattern, opcode in MAIN_KERNELS:
            if pattern.search(name):
                main_kernels += 1
                issued = sum(1 for line in body if re.search(rf"\b{opcode}\b", line))
                if not issued:
                    failures.append(f"{arch} {name}: no {opcode}")
                elif opcode == "HGMMA":
                    waits = sum(1 for line in body if "WARPGROUP.DEPBAR" in line)
                    if 2 * waits >= issued:
                        failures.append(f"{arch} {name}: wgmmas serialised ({waits} waits for {issued} HGMMA)")
    print(f"check_sass: {checked} kernels ({main_kernels} main kernels) in {args.library}")
    if main_kernels == 0:
        failures.append("no sm80 / sm90 main kernel found: is this a CUDA build?")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
