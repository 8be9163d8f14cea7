"""flash_attn-compatible functions on CPU tensors against the float64 reference."""

import pytest
import torch

import flashattn
from flashattn import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                       flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                       flash_attn_varlen_qkvpacked_func)
from reference import alibi_slopes, assert_close_to_reference, attention, cu_seqlens, varlen_attention

# Each case changes a few options of a (batch 2, seqlen 45/45, 4 heads, headdim 32) problem.
CASES = {
    "plain": {},
    "causal": dict(causal=True),
    "causal_sq<sk": dict(causal=True, seqlen_q=29, seqlen_k=61),
    "causal_sq>sk_empty_rows": dict(causal=True, seqlen_q=61, seqlen_k=29),
    "window_left": dict(window=(8, 0)),
    "window_both_rect": dict(window=(5, 3), seqlen_q=40, seqlen_k=50),
    "causal_window": dict(causal=True, window=(7, -1)),
    "softcap": dict(softcap=5.0),
    "alibi_heads_causal": dict(alibi="head", causal=True),
    "alibi_batch_heads": dict(alibi="batch"),
    "mqa": dict(nheads_k=1),
    "gqa_everything": dict(nheads_k=2, causal=True, softcap=3.0, window=(10, 2), alibi="head"),
    "headdim128": dict(headdim=128, seqlen_q=20, seqlen_k=24),
    "headdim8": dict(headdim=8),
    "scale": dict(scale=0.3),
    "single_query": dict(seqlen_q=1, seqlen_k=50, causal=True),
}


def make_inputs(seqlen_q=45, seqlen_k=45, nheads=4, nheads_k=4, headdim=32, batch=2, dtype=torch.float32,
                alibi=None, **options):
    q = torch.randn(batch, seqlen_q, nheads, headdim, dtype=dtype, requires_grad=True)
    k = torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, requires_grad=True)
    v = torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, requires_grad=True)
    slopes = {None: None, "head": alibi_slopes(nheads), "batch": alibi_slopes(nheads, batch)}[alibi]
    return q, k, v, slopes, options


def flash_kwargs(options, slopes):
    kw = dict(causal=options.get("causal", False), window_size=options.get("window", (-1, -1)),
              softcap=options.get("softcap", 0.0), softmax_scale=options.get("scale"))
    return dict(kw, alibi_slopes=slopes)


def reference_kwargs(options, slopes):
    return dict(causal=options.get("causal", False), window=options.get("window", (-1, -1)),
                softcap=options.get("softcap", 0.0), scale=options.get("scale"), alibi=slopes)


def grads(out, inputs, dout):
    return torch.autograd.grad(out, inputs, dout)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_forward_backward_matches_reference(case):
    q, k, v, slopes, options = make_inputs(**case)
    out, lse, probs = flash_attn_func(q, k, v, return_attn_probs=True, **flash_kwargs(options, slopes))
    assert probs is None and out.shape == q.shape and out.dtype == q.dtype
    ref_out, ref_lse = attention(q, k, v, **reference_kwargs(options, slopes))
    assert_close_to_reference(out, ref_out, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    for name, actual, expected in zip("qkv", grads(out, (q, k, v), dout), grads(ref_out, (q, k, v), dout.double())):
        assert_close_to_reference(actual, expected, atol=1e-4, rtol=1e-4, name="d" + name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    q, k, v, slopes, options = make_inputs(dtype=dtype, nheads_k=2, causal=True)
    out = flash_attn_func(q, k, v, causal=True)
    ref_out, _ = attention(q, k, v, causal=True)
    assert out.dtype == dtype
    assert_close_to_reference(out, ref_out, atol=2e-2, rtol=0, name="out")
    dout = torch.randn_like(out)
    for name, actual, expected in zip("qkv", grads(out, (q, k, v), dout), grads(ref_out, (q, k, v), dout.double())):
        assert_close_to_reference(actual, expected, atol=5e-2, rtol=2e-2, name="d" + name)


def test_every_negative_window_side_is_unbounded_as_in_flash_attn():
    q, k, v = (torch.randn(2, 37, 3, 32) for _ in range(3))
    for negative, minus_one in (((-5, 0), (-1, 0)), ((4, -2), (4, -1)), ((-3, -7), (-1, -1))):
        out = flash_attn_func(q, k, v, window_size=negative)
        assert torch.equal(out, flash_attn_func(q, k, v, window_size=minus_one)), negative
    # The mask is really there: a bounded side changes the output.
    assert not torch.equal(flash_attn_func(q, k, v, window_size=(4, -1)), flash_attn_func(q, k, v))


def test_strided_views_are_accepted_without_copies_changing_results():
    base = torch.randn(2, 4, 45, 32, requires_grad=True)  # (B, H, S, D), as SDPA users hold them
    q = k = v = base.transpose(1, 2)
    out = flash_attn_func(q, k, v, causal=True)
    ref, _ = attention(q, k, v, causal=True)
    assert_close_to_reference(out, ref, name="out")
    (g,) = torch.autograd.grad(out.sum(), base)  # expanded dout: stride 0 everywhere
    (g_ref,) = torch.autograd.grad(ref.sum(), base)
    assert_close_to_reference(g, g_ref, atol=1e-4, name="dbase")


def test_negative_bit_views_read_with_their_sign():
    # torch._neg_view keeps its values un-negated in memory (as x.conj().imag does); DLPack has no
    # such bit, so the library once read such a k with the wrong sign.
    q, k, v = (torch.randn(2, 24, 4, 32, requires_grad=True) for _ in range(3))
    k_neg = torch._neg_view(k)
    assert k_neg.is_neg()
    out = flash_attn_func(q, k_neg, v, causal=True)
    ref, _ = attention(q, -k, v, causal=True)
    assert_close_to_reference(out, ref, name="out")
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    grads_ref = torch.autograd.grad(ref, (q, k, v), dout)
    for g, g_ref, name in zip(grads, grads_ref, ("dq", "dk", "dv")):
        assert_close_to_reference(g, g_ref, atol=1e-4, name=name)


def test_qkvpacked_matches_unpacked():
    qkv = torch.randn(2, 33, 3, 4, 32, requires_grad=True)
    out = flash_attn_qkvpacked_func(qkv, causal=True, window_size=(6, 0))
    ref, _ = attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal=True, window=(6, 0))
    assert_close_to_reference(out, ref, name="out")
    dout = torch.randn_like(out)
    assert_close_to_reference(grads(out, qkv, dout)[0], grads(ref, qkv, dout.double())[0], atol=1e-4, name="dqkv")


def test_kvpacked_gqa():
    q = torch.randn(2, 20, 6, 64, requires_grad=True)
    kv = torch.randn(2, 28, 2, 3, 64, requires_grad=True)
    out, lse, _ = flash_attn_kvpacked_func(q, kv, causal=True, softcap=4.0, return_attn_probs=True)
    ref, ref_lse = attention(q, kv[:, :, 0], kv[:, :, 1], causal=True, softcap=4.0)
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    for actual, expected in zip(grads(out, (q, kv), dout), grads(ref, (q, kv), dout.double())):
        assert_close_to_reference(actual, expected, atol=1e-4)


class _AtenOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the aten operators that run while it is active."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func._schema.name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layout", ["qkv", "kv", "varlen_qkv", "varlen_kv"])
def test_packed_backward_writes_one_gradient_buffer(layout):
    lengths = [7, 30, 12]
    cu = cu_seqlens(lengths)
    varlen = layout.startswith("varlen")
    shape = (sum(lengths),) if varlen else (2, 29)
    packed = torch.randn(*shape, 3 if layout.endswith("qkv") else 2, 4, 32, requires_grad=True)
    q = None if layout.endswith("qkv") else torch.randn(*shape, 4, 32, requires_grad=True)
    if layout == "qkv":
        out = flash_attn_qkvpacked_func(packed, causal=True)
    elif layout == "kv":
        out = flash_attn_kvpacked_func(q, packed, causal=True)
    elif layout == "varlen_qkv":
        out = flash_attn_varlen_qkvpacked_func(packed, cu, max(lengths), causal=True)
    else:
        out = flash_attn_varlen_kvpacked_func(q, packed, cu, cu, max(lengths), max(lengths), causal=True)
    # The attention node feeds packed's gradient accumulator directly (no unbind/stack in between).
    leaves = [next_fn for next_fn, _ in out.grad_fn.next_functions if next_fn is not None]
    assert any(getattr(node, "variable", None) is packed for node in leaves), out.grad_fn.next_functions
    dout = torch.randn_like(out)
    recorder = _AtenOps()
    with recorder:
        grads_packed = torch.autograd.grad(out, [packed] + ([] if q is None else [q]), dout)
    assert not {"aten::stack", "aten::cat", "aten::copy_"} & set(recorder.names), recorder.names
    assert grads_packed[0].is_contiguous() and grads_packed[0].shape == packed.shape

    views = packed.unbind(-3)
    qv, kv_ = (views[0], views[1:]) if q is None else (q, views)
    if varlen:
        ref, _ = varlen_attention(qv, kv_[0], kv_[1], cu, cu, causal=True)
    else:
        ref, _ = attention(qv, kv_[0], kv_[1], causal=True)
    expected = torch.autograd.grad(ref, [packed] + ([] if q is None else [q]), dout.double())
    for actual, exp in zip(grads_packed, expected):
        assert_close_to_reference(actual, exp, atol=1e-4)


VARLEN_CASES = {
    "plain": {},
    "causal": dict(causal=True),
    "window_softcap": dict(window=(4, 2), softcap=2.0),
    "alibi_batch_causal": dict(causal=True, alibi="batch"),
}


@pytest.mark.parametrize("case", VARLEN_CASES.values(), ids=VARLEN_CASES.keys())
def test_varlen_matches_per_sequence_reference(case):
    case = dict(case)
    lengths_q, lengths_k = [5, 0, 17, 33], [9, 4, 17, 20]
    nheads, nheads_k, headdim = 4, 2, 32
    q = torch.randn(sum(lengths_q), nheads, headdim, requires_grad=True)
    k = torch.randn(sum(lengths_k), nheads_k, headdim, requires_grad=True)
    v = torch.randn(sum(lengths_k), nheads_k, headdim, requires_grad=True)
    cu_q, cu_k = cu_seqlens(lengths_q), cu_seqlens(lengths_k)
    alibi = case.pop("alibi", None)
    slopes = alibi_slopes(nheads, len(lengths_q)) if alibi == "batch" else None
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                         return_attn_probs=True, **flash_kwargs(case, slopes))
    ref, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, **reference_kwargs(case, slopes))
    assert lse.shape == (nheads, sum(lengths_q))
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    for name, actual, expected in zip("qkv", grads(out, (q, k, v), dout), grads(ref, (q, k, v), dout.double())):
        assert_close_to_reference(actual, expected, atol=1e-4, name="d" + name)


SEQUSED_CASES = {
    "both_causal": dict(seqused_q=[3, 0, 17, 20], seqused_k=[9, 2, 10, 0], causal=True),
    "q_only_window": dict(seqused_q=[5, 0, 1, 30], window=(3, 1)),
    "k_only_softcap": dict(seqused_k=[1, 4, 16, 7], softcap=2.0),
}


@pytest.mark.parametrize("case", SEQUSED_CASES.values(), ids=SEQUSED_CASES.keys())
def test_varlen_seqused_matches_reference_and_leaves_unused_rows(case):
    case = dict(case)
    lengths_q, lengths_k = [5, 0, 17, 33], [9, 4, 17, 20]
    used = {name: None if case.get(name) is None else torch.tensor(case.pop(name), dtype=torch.int32)
            for name in ("seqused_q", "seqused_k")}
    q = torch.randn(sum(lengths_q), 4, 32)
    k = torch.randn(sum(lengths_k), 2, 32)
    v = torch.randn(sum(lengths_k), 2, 32)
    cu_q, cu_k = cu_seqlens(lengths_q), cu_seqlens(lengths_k)
    # Rows past seqused are poisoned: neither the forward nor the backward may read them.
    unused_q = torch.ones(len(q), dtype=torch.bool)
    unused_k = torch.ones(len(k), dtype=torch.bool)
    for b in range(len(lengths_q)):
        unused_q[cu_q[b]:cu_q[b] + (lengths_q[b] if used["seqused_q"] is None else used["seqused_q"][b])] = False
        unused_k[cu_k[b]:cu_k[b] + (lengths_k[b] if used["seqused_k"] is None else used["seqused_k"][b])] = False
    q[unused_q], k[unused_k], v[unused_k] = float("nan"), float("nan"), float("nan")
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out, lse, _ = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k),
                                         return_attn_probs=True, **flash_kwargs(case, None), **used)
    ref, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, **reference_kwargs(case, None), **used)
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    assert torch.all(out[unused_q] == 0) and torch.all(lse[:, unused_q] == float("-inf"))
    dout = torch.randn_like(out)
    dout[unused_q] = float("nan")  # not read either
    got = grads(out, (q, k, v), dout)
    expected = grads(ref, (q, k, v), torch.nan_to_num(dout.double()))
    for name, actual, exp in zip("qkv", got, expected):
        assert_close_to_reference(actual, exp, atol=1e-4, name="d" + name)
    assert torch.all(got[0][unused_q] == 0) and torch.all(got[1][unused_k] == 0) and torch.all(got[2][unused_k] == 0)


def test_varlen_qkvpacked_and_kvpacked():
    lengths = [7, 30, 12]
    cu = cu_seqlens(lengths)
    qkv = torch.randn(sum(lengths), 3, 4, 32, requires_grad=True)
    out = flash_attn_varlen_qkvpacked_func(qkv, cu, max(lengths), causal=True)
    ref, _ = varlen_attention(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu, cu, causal=True)
    assert_close_to_reference(out, ref, name="qkvpacked out")
    dout = torch.randn_like(out)
    assert_close_to_reference(grads(out, qkv, dout)[0], grads(ref, qkv, dout.double())[0], atol=1e-4, name="dqkv")

    q = qkv[:, 0].detach().clone().requires_grad_()
    kv = qkv[:, 1:].detach().clone().requires_grad_()
    out = flash_attn_varlen_kvpacked_func(q, kv, cu, cu, max(lengths), max(lengths), causal=True)
    assert_close_to_reference(out, ref, name="kvpacked out")


def test_varlen_rows_outside_every_sequence_are_zero():
    # A padded tail past cu_seqlens[-1] and rows before cu_seqlens[0]: output and gradient 0 there,
    # whatever the allocator's memory held (NaN here), so nothing reaches the layers before.
    cu = torch.tensor([2, 5, 10], dtype=torch.int32)
    for fill in range(2):
        junk = [torch.full((13, 2, 32), float("nan")) for _ in range(8)]
        del junk
        q, k, v = (torch.randn(13, 2, 32, requires_grad=True) for _ in range(3))
        out = flash_attn_varlen_func(q, k, v, cu, cu, 5, 5)
        junk = [torch.full((13, 2, 32), float("nan")) for _ in range(8)]
        del junk
        dq, dk, dv = torch.autograd.grad(out[2:10].sum(), (q, k, v))
        outside = torch.tensor([0, 1, 10, 11, 12])
        for name, t in (("out", out), ("dq", dq), ("dk", dk), ("dv", dv)):
            assert torch.all(t[outside] == 0), name
        qkv = torch.stack([q, k, v], dim=1).detach().requires_grad_()
        out = flash_attn_varlen_qkvpacked_func(qkv, cu, 5)
        (dqkv,) = torch.autograd.grad(out[2:10].sum(), (qkv,))
        assert torch.all(out[outside] == 0) and torch.all(dqkv[outside] == 0), "qkvpacked"


def test_deterministic_backward_is_bitwise_reproducible():
    q, k, v, _, _ = make_inputs(nheads_k=2)
    dout = torch.randn_like(q)
    first = grads(flash_attn_func(q, k, v, causal=True, deterministic=True), (q, k, v), dout)
    second = grads(flash_attn_func(q, k, v, causal=True, deterministic=True), (q, k, v), dout)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_gradcheck_against_finite_differences():
    # The library computes in float32 at most; gradcheck runs in float64 through a casting wrapper,
    # with tolerances that float32 rounding of the finite differences allows.
    q, k, v = (torch.randn(1, 6, 2, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))

    def fn(q, k, v):
        return flash_attn_func(q.float(), k.float(), v.float(), causal=True, softcap=2.0).double()

    assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-2, atol=5e-3, rtol=5e-3)


def test_module_alias_and_exports():
    from flashattn.flash_attn_interface import flash_attn_func as aliased

    assert aliased is flashattn.flash_attn_func
    assert flashattn.cuda_available() in (True, False)


@pytest.mark.parametrize("batch,seqlen_q,seqlen_k", [(0, 5, 7), (2, 0, 7), (2, 5, 0)])
def test_empty_inputs(batch, seqlen_q, seqlen_k):
    q = torch.randn(batch, seqlen_q, 2, 16, requires_grad=True)
    k = torch.randn(batch, seqlen_k, 2, 16, requires_grad=True)
    v = torch.randn(batch, seqlen_k, 2, 16, requires_grad=True)
    out, lse, _ = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (batch, 2, seqlen_q)
    assert torch.all(out == 0) and torch.all(lse == float("-inf"))
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert torch.all(dq == 0) and torch.all(dk == 0) and torch.all(dv == 0)


def test_eager_path_matches_custom_op():
    # Eager calls skip the dispatcher (ops._EagerAttention, less host time per call); they must
    # compute exactly what the flashattn::fwd / bwd custom ops compute, gradients included.
    from flashattn import ops
    q = torch.randn(2, 37, 4, 64, requires_grad=True)
    k = torch.randn(2, 50, 2, 64, requires_grad=True)
    v = torch.randn(2, 50, 2, 64, requires_grad=True)
    dout = torch.randn(2, 37, 4, 64)
    out = flash_attn_func(q, k, v, causal=True, window_size=(20, 0), softcap=5.0)
    assert type(out.grad_fn).__name__ == "_EagerAttentionBackward"
    grads = torch.autograd.grad(out, (q, k, v), dout)
    op_out, _ = ops.fwd(q, k, v, None, None, 0, 0, 64 ** -0.5, True, 20, 0, 5.0, None, False, None, None)
    assert "flashattn_fwd" in type(op_out.grad_fn).__name__
    op_grads = torch.autograd.grad(op_out, (q, k, v), dout)
    assert torch.equal(out, op_out)
    for name, g, e in zip("qkv", grads, op_grads):
        assert torch.equal(g, e), f"d{name} differs between the eager path and the custom op"


def test_eager_packed_path_matches_custom_op():
    from flashattn import ops
    qkv = torch.randn(2, 41, 3, 4, 32, requires_grad=True)
    dout = torch.randn(2, 41, 4, 32)
    out = flash_attn_qkvpacked_func(qkv, causal=True)
    assert type(out.grad_fn).__name__ == "_EagerPackedAttentionBackward"
    (grad,) = torch.autograd.grad(out, (qkv,), dout)
    op_out, _ = ops.fwd_packed(qkv, None, None, None, 0, 0, 32 ** -0.5, True, -1, 0, 0.0, None, False)
    assert "flashattn_fwd_packed" in type(op_out.grad_fn).__name__
    (op_grad,) = torch.autograd.grad(op_out, (qkv,), dout)
    assert torch.equal(out, op_out)
    assert torch.equal(grad, op_grad)


@pytest.mark.parametrize("mode", ["no_grad", "inputs_without_grad", "inference_mode"])
def test_calls_autograd_does_not_record_skip_the_function(mode, monkeypatch):
    # Where autograd would record nothing, the eager paths call the forward without
    # autograd.Function (ops._records_grad): the same outputs, no graph, and a call whose inputs
    # require grad under grad mode still gets its backward node.
    from flashattn import ops
    torch.manual_seed(3)
    q = torch.randn(2, 37, 4, 64, requires_grad=True)
    k = torch.randn(2, 50, 2, 64, requires_grad=True)
    v = torch.randn(2, 50, 2, 64, requires_grad=True)
    qkv = torch.randn(2, 41, 3, 4, 32, requires_grad=True)
    kw = dict(causal=True, window_size=(20, 0), softcap=5.0, return_attn_probs=True)
    out, lse, _ = flash_attn_func(q, k, v, **kw)
    packed_out = flash_attn_qkvpacked_func(qkv, causal=True)
    assert out.grad_fn is not None and packed_out.grad_fn is not None

    def refuse(*args):
        raise AssertionError("autograd.Function applied where autograd records nothing")
    monkeypatch.setattr(ops._EagerAttention, "apply", refuse)
    monkeypatch.setattr(ops._EagerPackedAttention, "apply", refuse)
    if mode == "no_grad":
        with torch.no_grad():
            out2, lse2, _ = flash_attn_func(q, k, v, **kw)
            packed_out2 = flash_attn_qkvpacked_func(qkv, causal=True)
    elif mode == "inference_mode":
        with torch.inference_mode():
            out2, lse2, _ = flash_attn_func(q, k, v, **kw)
            packed_out2 = flash_attn_qkvpacked_func(qkv, causal=True)
    else:
        out2, lse2, _ = flash_attn_func(q.detach(), k.detach(), v.detach(), **kw)
        packed_out2 = flash_attn_qkvpacked_func(qkv.detach(), causal=True)
    for t in (out2, lse2, packed_out2):
        assert t.grad_fn is None and not t.requires_grad
    assert torch.equal(out2, out.detach()) and torch.equal(lse2, lse)
    assert torch.equal(packed_out2, packed_out.detach())


def test_forward_mode_ad_is_refused_not_dropped():
    # No jvp is defined: a dual input must meet autograd.Function's refusal, not lose its tangent
    # on the path that skips the Function (ops._records_grad).
    import torch.autograd.forward_ad as fwAD
    q, k, v = (torch.randn(1, 5, 2, 32) for _ in range(3))
    with fwAD.dual_level():
        dual_q = fwAD.make_dual(q, torch.randn_like(q))
        with pytest.raises(NotImplementedError, match="jvp"):
            flash_attn_func(dual_q, k, v)
        dual_qkv = fwAD.make_dual(torch.stack((q, k, v), 2), torch.randn(1, 5, 3, 2, 32))
        with pytest.raises(NotImplementedError, match="jvp"):
            flash_attn_qkvpacked_func(dual_qkv)


def test_functorch_transforms_meet_the_functions_refusal():
    # Under vmap the inputs are batched wrappers without storage: the Function's clear refusal,
    # not the library's view of a tensor it cannot read (ops._records_grad).
    q, k, v = (torch.randn(3, 1, 5, 2, 32) for _ in range(3))
    with pytest.raises(RuntimeError, match="functorch transforms"):
        torch.vmap(lambda q, k, v: flash_attn_func(q, k, v))(q, k, v)


def test_jit_trace_without_grad_records_the_call():
    # The library writes into its output where the tracer cannot see it: the trace must record
    # the Function (ops._records_grad), or its graph returns the empty output.
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 192)

        def forward(self, x):
            q, k, v = self.proj(x).view(1, 5, 3, 2, 32).unbind(2)
            return flash_attn_func(q, k, v, causal=True)

    torch.manual_seed(5)
    module = Attention().eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, (torch.randn(1, 5, 64),), check_trace=False)
        x = torch.randn(1, 5, 64)
        assert torch.equal(traced(x), module(x))


def test_slopes_that_require_grad_keep_the_graph():
    # As autograd.Function counts every tensor input: an output built from slopes that require
    # grad has a backward node (no gradient reaches the slopes themselves).
    q, k, v = (torch.randn(1, 6, 2, 32) for _ in range(3))
    slopes = torch.rand(2, requires_grad=True)
    out = flash_attn_func(q, k, v, alibi_slopes=slopes)
    assert out.grad_fn is not None
    out.sum().backward()
    assert slopes.grad is None
