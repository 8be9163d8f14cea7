"""The custom ops under torch.compile(fullgraph=True) and torch.library.opcheck."""

import pytest
import torch

import flashattn
from flashattn import ops
from reference import alibi_slopes, cu_seqlens


def _fixed_args(device="cpu", dtype=torch.float32, requires_grad=False):
    # On the CPU every option at once; on GPUs the options the CUDA kernels surely have.
    headdim = 32 if device == "cpu" else 64
    q = torch.randn(2, 19, 4, headdim, device=device, dtype=dtype, requires_grad=requires_grad)
    k = torch.randn(2, 23, 2, headdim, device=device, dtype=dtype, requires_grad=requires_grad)
    v = torch.randn(2, 23, 2, headdim, device=device, dtype=dtype, requires_grad=requires_grad)
    if device != "cpu":
        return (q, k, v, None, None, 0, 0, 0.2, True, 5, -1, 0.0, None, False)
    return (q, k, v, None, None, 0, 0, 0.2, True, 5, -1, 2.0, alibi_slopes(4, device=device), False)


def _varlen_args(device="cpu", dtype=torch.float32, requires_grad=False):
    lengths = [3, 11, 7]
    q = torch.randn(sum(lengths), 4, 64, device=device, dtype=dtype, requires_grad=requires_grad)
    k = torch.randn(sum(lengths), 4, 64, device=device, dtype=dtype, requires_grad=requires_grad)
    v = torch.randn(sum(lengths), 4, 64, device=device, dtype=dtype, requires_grad=requires_grad)
    cu = cu_seqlens(lengths, device=device)
    return (q, k, v, cu, cu, max(lengths), max(lengths), 0.25, True, -1, -1, 0.0, None, True)


def _seqused_args(device="cpu", dtype=torch.float32, requires_grad=False):
    args = _varlen_args(device, dtype, requires_grad)
    used = torch.tensor([2, 11, 0], dtype=torch.int32, device=device)
    return (*args, used, torch.tensor([3, 5, 7], dtype=torch.int32, device=device))


def run_opcheck(device="cpu", dtype=torch.float32):
    for make in (_fixed_args, _varlen_args, _seqused_args):
        args = make(device, dtype, requires_grad=True)
        torch.library.opcheck(ops.fwd, args)
        plain = make(device, dtype)
        out, lse = ops.fwd(*plain)
        dout = torch.randn_like(out)
        bwd_args = (dout, *plain[:3], out, lse, *plain[3:])
        torch.library.opcheck(ops.bwd, bwd_args)


def run_opcheck_packed(device="cpu", dtype=torch.float32):
    headdim = 64
    varlen_cu = cu_seqlens([3, 11, 7], device)
    for q_shape, pack_shape, cu, max_len in (((2, 19, 4, headdim), (2, 19, 3, 4, headdim), None, 0),
                                             ((2, 19, 4, headdim), (2, 23, 2, 2, headdim), None, 0),
                                             ((21, 4, headdim), (21, 2, 4, headdim), varlen_cu, 11)):
        packed = torch.randn(pack_shape, device=device, dtype=dtype)
        q = None if pack_shape[-3] == 3 else torch.randn(q_shape, device=device, dtype=dtype)
        options = (cu, cu, max_len, max_len, 0.2, True, -1, -1, 0.0, None, False)
        grad_args = (packed.clone().requires_grad_(), None if q is None else q.clone().requires_grad_())
        torch.library.opcheck(ops.fwd_packed, (*grad_args, *options))
        out, lse = ops.fwd_packed(packed, q, *options)
        torch.library.opcheck(ops.bwd_packed, (torch.randn_like(out), packed, q, out, lse, *options))


def run_compiled_matches_eager(device="cpu", dtype=torch.float32, backend="inductor"):
    def step(q, k, v):
        out = flashattn.flash_attn_func(q, k, v, causal=True, window_size=(8, 0))
        return out.float().square().sum()

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    args = _fixed_args(device, dtype, requires_grad=True)[:3]
    loss = compiled(*args)
    got = torch.autograd.grad(loss, args)
    loss_ref = step(*args)
    expected = torch.autograd.grad(loss_ref, args)
    # Inductor may fuse the reduction differently; the attention op itself is the same call.
    torch.testing.assert_close(loss, loss_ref, rtol=1e-4, atol=1e-4)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_opcheck_cpu():
    run_opcheck()


def test_opcheck_packed_cpu():
    run_opcheck_packed()


def test_compile_packed_fullgraph_cpu():
    def step(qkv):
        return flashattn.flash_attn_qkvpacked_func(qkv, causal=True).float().square().sum()

    qkv = torch.randn(2, 17, 3, 4, 32, requires_grad=True)
    loss = torch.compile(step, fullgraph=True, backend="aot_eager")(qkv)
    (got,) = torch.autograd.grad(loss, qkv)
    (expected,) = torch.autograd.grad(step(qkv), qkv)
    torch.testing.assert_close(got, expected)


def test_compile_fullgraph_cpu_aot_eager():
    run_compiled_matches_eager(backend="aot_eager")


@pytest.mark.slow
def test_compile_fullgraph_cpu_inductor():
    # About 40 s on two cores: inductor compiles the surrounding graph to C++.
    run_compiled_matches_eager(backend="inductor")


def test_compile_varlen_fullgraph_cpu():
    def step(q, k, v, cu):
        return flashattn.flash_attn_varlen_func(q, k, v, cu, cu, 11, 11, causal=True).sum()

    q, k, v, cu = (*_varlen_args(requires_grad=True)[:3], cu_seqlens([3, 11, 7]))
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(q, k, v, cu), step(q, k, v, cu))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_opcheck_gpu(dtype):
    run_opcheck("cuda", dtype)
    run_opcheck_packed("cuda", dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compile_fullgraph_gpu(dtype):
    run_compiled_matches_eager("cuda", dtype)
