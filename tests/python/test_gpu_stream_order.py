"""A forward whose inputs the stream's previous kernel is still writing.

In Hopper builds with FLASHATTN_SM90_PDL (CMake option) the forward kernel is launched as a
programmatic dependent of the kernel before it (src/cuda/sm90/launch.h): its CTAs may be placed
while that kernel still runs, and must wait for its end before reading anything (other builds
launch ordinarily, and the stream orders the two forwards). The previous kernel here is itself a
forward that lets its dependents start at once (a decode step whose keys are split: the packed
kernel allows the combine kernel to start early), writing into a buffer that held NaN; the
second forward reads that buffer as q, k or v. Read too early, the NaN (or stale rows) reach its
output.
"""

import pytest
import torch

from flashattn import _ext, flash_attn_func
from flashattn._torch_util import kernel_ready, launch_options, output_dlpack
from reference import assert_close_to_reference, attention

pytestmark = pytest.mark.gpu

HEADDIM = 128


def decode_into(out):
    """A GQA decode step (2 sequences, 32 / 8 heads, 8192 keys: 16 packed tiles, split by keys on
    Hopper) written into `out` (2, 1, 32, HEADDIM) through the extension, on the current stream."""
    q = torch.randn(2, 1, 32, HEADDIM, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(2, 8192, 8, HEADDIM, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lse = torch.empty(2, 32, 1, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()  # the inputs are written; only `out` is in flight below
    # The GPU kept busy while the host queues this forward and the test's next: else the host,
    # slower than these kernels, would submit the next only after this one had ended.
    torch.cuda._sleep(20_000_000)
    _ext.forward(kernel_ready(q), kernel_ready(k), kernel_ready(v), output_dlpack(out), output_dlpack(lse),
                 softmax_scale=HEADDIM ** -0.5, causal=False, **launch_options(q))


def second_inputs(first, role):
    """q, k, v of the second forward: `first` (the decode step's output buffer) in the role named,
    the others drawn here."""
    rand = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    if role == "q":  # 64 query rows of one head over 2048 keys
        return first.view(1, 64, 1, HEADDIM), rand(1, 2048, 1, HEADDIM), rand(1, 2048, 1, HEADDIM)
    if role == "k":  # 64 keys of one head, 200 query rows
        return rand(1, 200, 1, HEADDIM), first.view(1, 64, 1, HEADDIM), rand(1, 64, 1, HEADDIM)
    # another decode step, split by keys as the first
    return first, rand(2, 4096, 8, HEADDIM), rand(2, 4096, 8, HEADDIM)


@pytest.mark.parametrize("role", ["q", "k", "decode_q"])
def test_forward_waits_for_the_kernel_writing_its_inputs(role, monkeypatch):
    # The pieces merged in the packed kernel, which then lets the next kernel start at once (with
    # the combine kernel that one would be the dependent, and would wait).
    monkeypatch.setenv("FLASHATTN_SM90_SPLIT_COMBINE", "merge")
    # Both forwards once beforehand: a kernel's first launch loads its module, which may
    # synchronise and so let the sleep below run out before the second forward is queued.
    warm = torch.zeros(2, 1, 32, HEADDIM, device="cuda", dtype=torch.bfloat16)
    decode_into(warm)
    flash_attn_func(*second_inputs(warm, role))
    torch.cuda.synchronize()

    first = torch.full((2, 1, 32, HEADDIM), float("nan"), device="cuda", dtype=torch.bfloat16)
    q, k, v = second_inputs(first, role)  # drawn first: between the two forwards no kernel runs
    decode_into(first)  # synchronises before its own launch, so NaN is what `first` holds then
    out = flash_attn_func(q, k, v)  # the first forward's kernel may still run here
    torch.cuda.synchronize()
    assert not first.isnan().any(), "the first forward left rows unwritten"
    ref, _ = attention(q, k, v, dtype=torch.float32)
    lowp, _ = attention(q, k, v, dtype=torch.bfloat16)
    assert_close_to_reference(out, ref, lowp, atol=8e-3, factor=2.0, name=f"out ({role} from the previous kernel)")
