"""flash_attn functions on CUDA tensors (fp16/bf16) against a float32 reference.

The error allowed is twice the error of the same reference computed in the low precision (as
flash_attn's own tests do) plus a small absolute term. Configurations the CUDA backend reports as
unsupported (NotImplementedError) are skipped with the library's message, so the skip list shows
what the kernels do not cover yet.
"""

import pytest
import torch

from flashattn import flash_attn_func, flash_attn_qkvpacked_func, flash_attn_varlen_func
from reference import alibi_slopes, assert_close_to_reference, attention, cu_seqlens, varlen_attention

pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
CASES = {
    "plain": {},
    "causal": dict(causal=True),
    "causal_sq<sk": dict(causal=True, seqlen_q=113, seqlen_k=300),
    "causal_sq>sk": dict(causal=True, seqlen_q=300, seqlen_k=113),
    "window": dict(window=(64, 16)),
    "causal_window": dict(causal=True, window=(100, -1)),
    "softcap": dict(softcap=30.0),
    "alibi": dict(alibi=True, causal=True),
    "gqa": dict(nheads_k=2),
    "mqa_causal": dict(nheads_k=1, causal=True),
}
HEADDIMS = [64, 96, 128, 256]  # 96: the sm90 forward's own instantiation in d128's tiles


def run_or_skip(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as unsupported:
        pytest.skip(f"CUDA backend: {unsupported}")


def check(actual, reference, lowp, name):
    assert_close_to_reference(actual, reference, lowp, atol=1e-3 if actual.dtype == torch.float16 else 8e-3,
                              factor=2.0, name=name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("headdim", HEADDIMS)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_forward_backward(case, headdim, dtype):
    seqlen_q, seqlen_k = case.get("seqlen_q", 257), case.get("seqlen_k", 257)
    nheads, nheads_k = 8, case.get("nheads_k", 8)
    q = torch.randn(2, seqlen_q, nheads, headdim, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(2, seqlen_k, nheads_k, headdim, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(2, seqlen_k, nheads_k, headdim, device="cuda", dtype=dtype, requires_grad=True)
    slopes = alibi_slopes(nheads, device="cuda") if case.get("alibi") else None
    options = dict(causal=case.get("causal", False), window=case.get("window", (-1, -1)),
                   softcap=case.get("softcap", 0.0), alibi=slopes)
    out, lse, _ = run_or_skip(flash_attn_func, q, k, v, causal=options["causal"], window_size=options["window"],
                              softcap=options["softcap"], alibi_slopes=slopes, return_attn_probs=True)
    ref, ref_lse = attention(q, k, v, dtype=torch.float32, **options)
    lowp, _ = attention(q, k, v, dtype=dtype, **options)
    check(out, ref, lowp, "out")
    assert_close_to_reference(lse, ref_lse, atol=1e-3, rtol=1e-3, name="lse")

    dout = torch.randn_like(out)
    got = run_or_skip(torch.autograd.grad, out, (q, k, v), dout)
    expected = torch.autograd.grad(ref, (q, k, v), dout.float())
    expected_lowp = torch.autograd.grad(lowp, (q, k, v), dout)
    for name, g, e, el in zip("qkv", got, expected, expected_lowp):
        check(g, e, el, "d" + name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_varlen(dtype):
    lengths_q, lengths_k = [1, 130, 0, 257, 64], [17, 130, 5, 300, 64]
    q = torch.randn(sum(lengths_q), 8, 128, device="cuda", dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lengths_k), 2, 128, device="cuda", dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lengths_k), 2, 128, device="cuda", dtype=dtype, requires_grad=True)
    cu_q, cu_k = cu_seqlens(lengths_q, "cuda"), cu_seqlens(lengths_k, "cuda")
    out = run_or_skip(flash_attn_varlen_func, q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=True)
    ref, _ = varlen_attention(q, k, v, cu_q, cu_k, causal=True, dtype=torch.float32)
    lowp, _ = varlen_attention(q, k, v, cu_q, cu_k, causal=True, dtype=dtype)
    check(out, ref, lowp, "out")
    dout = torch.randn_like(out)
    got = run_or_skip(torch.autograd.grad, out, (q, k, v), dout)
    for name, g, e, el in zip("qkv", got, torch.autograd.grad(ref, (q, k, v), dout.float()),
                              torch.autograd.grad(lowp, (q, k, v), dout)):
        check(g, e, el, "d" + name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_varlen_seqused(dtype):
    lengths_q, lengths_k = [1, 130, 0, 257, 64], [17, 130, 5, 300, 64]
    used = dict(seqused_q=torch.tensor([1, 70, 0, 200, 0], dtype=torch.int32, device="cuda"),
                seqused_k=torch.tensor([9, 130, 5, 0, 64], dtype=torch.int32, device="cuda"))
    cu_q, cu_k = cu_seqlens(lengths_q, "cuda"), cu_seqlens(lengths_k, "cuda")
    q = torch.randn(sum(lengths_q), 8, 128, device="cuda", dtype=dtype)
    k = torch.randn(sum(lengths_k), 2, 128, device="cuda", dtype=dtype)
    v = torch.randn(sum(lengths_k), 2, 128, device="cuda", dtype=dtype)
    unused_q = torch.ones(len(q), dtype=torch.bool, device="cuda")
    unused_k = torch.ones(len(k), dtype=torch.bool, device="cuda")
    for b in range(len(lengths_q)):
        unused_q[cu_q[b]:cu_q[b] + used["seqused_q"][b]] = False
        unused_k[cu_k[b]:cu_k[b] + used["seqused_k"][b]] = False
    q[unused_q], k[unused_k], v[unused_k] = float("nan"), float("nan"), float("nan")  # never to be read
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, lse, _ = run_or_skip(flash_attn_varlen_func, q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                              causal=True, return_attn_probs=True, **used)
    ref, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, causal=True, dtype=torch.float32, **used)
    lowp, _ = varlen_attention(q, k, v, cu_q, cu_k, causal=True, dtype=dtype, **used)
    check(out, ref, lowp, "out")
    assert_close_to_reference(lse, ref_lse, atol=1e-3, name="lse")
    assert torch.all(out[unused_q] == 0) and torch.all(lse[:, unused_q] == float("-inf"))
    dout = torch.randn_like(out)
    got = run_or_skip(torch.autograd.grad, out, (q, k, v), dout)
    for name, g, e, el in zip("qkv", got, torch.autograd.grad(ref, (q, k, v), dout.float()),
                              torch.autograd.grad(lowp, (q, k, v), dout)):
        check(g, e, el, "d" + name)
    assert torch.all(got[0][unused_q] == 0) and torch.all(got[1][unused_k] == 0) and torch.all(got[2][unused_k] == 0)


def test_qkvpacked_bf16():
    qkv = torch.randn(2, 512, 3, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    out = run_or_skip(flash_attn_qkvpacked_func, qkv, causal=True)
    ref, _ = attention(*qkv.unbind(2), causal=True, dtype=torch.float32)
    lowp, _ = attention(*qkv.unbind(2), causal=True, dtype=torch.bfloat16)
    check(out, ref, lowp, "out")
    dout = torch.randn_like(out)
    (dqkv,) = torch.autograd.grad(out, qkv, dout)
    assert dqkv.is_contiguous()  # one packed gradient written by the kernels
    (expected,) = torch.autograd.grad(ref, qkv, dout.float())
    (expected_lowp,) = torch.autograd.grad(lowp, qkv, dout)
    for i, name in enumerate(("dq", "dk", "dv")):
        check(dqkv[:, :, i], expected[:, :, i], expected_lowp[:, :, i], name)


def test_runs_on_the_current_stream():
    q, k, v = (torch.randn(4, 1024, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    expected = run_or_skip(flash_attn_func, q, k, v, causal=True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = flash_attn_func(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)


def test_deterministic_backward():
    q, k, v = (torch.randn(2, 300, 8, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    first = run_or_skip(lambda: torch.autograd.grad(flash_attn_func(q, k, v, deterministic=True), (q, k, v), dout))
    second = torch.autograd.grad(flash_attn_func(q, k, v, deterministic=True), (q, k, v), dout)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize("causal", [False, True])
def test_cuda_graph_capture_and_replay(causal):
    # torch.cuda.graph captures forward and backward once; each replay must compute on the values
    # then in the static inputs (new ones are copied in), matching an eager call on those values.
    shape_q, shape_kv = (2, 300, 8, 128), (2, 517, 2, 128)
    static = [torch.randn(s, device="cuda", dtype=torch.bfloat16, requires_grad=True)
              for s in (shape_q, shape_kv, shape_kv)]
    static_dout = torch.randn(shape_q, device="cuda", dtype=torch.bfloat16)

    def step():
        out = flash_attn_func(*static, causal=causal)
        grads = torch.autograd.grad(out, static, static_dout)
        return out, grads

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run_or_skip(step)  # warm-up outside the capture, as torch.cuda.graph asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_out, graph_grads = step()

    for _ in range(2):
        fresh = [torch.randn_like(t) for t in static]
        fresh_dout = torch.randn_like(static_dout)
        with torch.no_grad():
            for s, f in zip(static, fresh):
                s.copy_(f)
            static_dout.copy_(fresh_dout)
            graph_out.fill_(float("nan"))
            for g in graph_grads:
                g.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager = [f.detach().clone().requires_grad_(True) for f in fresh]
        out = flash_attn_func(*eager, causal=causal)
        grads = torch.autograd.grad(out, eager, fresh_dout)
        ref, _ = attention(*eager, dtype=torch.float32, causal=causal)
        lowp, _ = attention(*eager, dtype=torch.bfloat16, causal=causal)
        check(graph_out, ref, lowp, "out")
        assert torch.equal(graph_out, out), "the replayed forward differs from an eager call on the same values"
        for name, g, e in zip("qkv", graph_grads, grads):
            # The backward sums dQ with atomics, so replay and eager may differ in the last bits.
            torch.testing.assert_close(g, e, atol=2e-2, rtol=2e-2, msg=lambda m: f"d{name}: {m}")
