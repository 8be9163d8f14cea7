"""FlashAttention-3's functional API (flashattn.fa3_interface) against the float64 reference.

CPU tensors throughout, except the tests marked gpu (bf16 on CUDA, against a float32 reference).
Every call goes through FlashAttention-3's argument order: positions are used where they differ
from flash_attn 2.x's (softmax_scale fourth, seqused_q / seqused_k after max_seqlen_k).
"""

import pytest
import torch

import flashattn.fa3_interface as fa3
from flashattn.attention_chunk import chunk_layout
from flashattn.kvcache_varlen import ops as fa3_ops
from reference import assert_close_to_reference, attention, cu_seqlens, varlen_attention


def _grads(out, inputs, dout):
    return torch.autograd.grad(out, inputs, dout)


def _check_with_grads(inputs, got, reference):
    """(out, lse) against the reference's, then the gradients of out for one random dout."""
    (out, lse), (ref, ref_lse) = got, reference
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    expected = _grads(ref, inputs, dout.double())
    for name, g, e in zip("qkv", _grads(out, inputs, dout), expected):
        assert_close_to_reference(g, e, atol=1e-4, name="d" + name)


def _inputs(batch=2, seqlen_q=37, seqlen_k=53, nheads=4, nheads_k=2, headdim=32, dtype=torch.float32,
            device="cpu"):
    shape_q, shape_k = (batch, seqlen_q, nheads, headdim), (batch, seqlen_k, nheads_k, headdim)
    return (torch.randn(shape_q, dtype=dtype, device=device, requires_grad=True),
            torch.randn(shape_k, dtype=dtype, device=device, requires_grad=True),
            torch.randn(shape_k, dtype=dtype, device=device, requires_grad=True))


CASES = {
    "plain": dict(),
    "causal_gqa": dict(causal=True),
    "window_softcap": dict(window=(9, 4), softcap=3.0),
    "causal_window_scale": dict(causal=True, window=(12, -1), scale=0.21),
    "mqa_rect": dict(nheads_k=1, seqlen_q=61, seqlen_k=29, causal=True),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_flash_attn_func_matches_reference(case):
    case = dict(case)
    q, k, v = _inputs(nheads_k=case.pop("nheads_k", 2), seqlen_q=case.pop("seqlen_q", 37),
                      seqlen_k=case.pop("seqlen_k", 53))
    causal, window, softcap, scale = (case.get("causal", False), case.get("window", (-1, -1)),
                                      case.get("softcap", 0.0), case.get("scale"))
    # FlashAttention-3's positions: softmax_scale and causal right after v.
    out, lse = fa3.flash_attn_func(q, k, v, scale, causal, window_size=window, softcap=softcap,
                                   return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    _check_with_grads((q, k, v), (out, lse),
                      attention(q, k, v, causal=causal, window=window, softcap=softcap, scale=scale))


def test_flash_attn_func_returns_out_alone_by_default():
    q, k, v = _inputs()
    out = fa3.flash_attn_func(q, k, v, causal=True, pack_gqa=True, deterministic=True)
    assert isinstance(out, torch.Tensor)
    assert_close_to_reference(out, attention(q, k, v, causal=True)[0], name="out")


def test_num_splits_and_deterministic_reach_the_library(monkeypatch):
    # On the CPU neither changes a result, so what the library is asked is checked: FlashAttention-3's
    # num_splits default of 1 (keys never cut) on every entry point, 0 where passed, and the flag.
    asked = []
    attention_op, packed_op = fa3_ops.attention, fa3_ops.attention_packed
    monkeypatch.setattr(fa3_ops, "attention", lambda *a: asked.append((a[13], a[16])) or attention_op(*a))
    monkeypatch.setattr(fa3_ops, "attention_packed", lambda *a: asked.append((a[12], a[13])) or packed_op(*a))
    q, k, v = _inputs()
    fa3.flash_attn_func(q, k, v)
    fa3.flash_attn_func(q, k, v, num_splits=0, deterministic=True)
    fa3.flash_attn_varlen_func(q, k, v, None, None, None, None, deterministic=True)
    fa3.flash_attn_qkvpacked_func(torch.randn(1, 9, 3, 2, 16), deterministic=True)
    fa3.flash_attn_qkvpacked_func(torch.randn(1, 9, 4, 16), num_heads_q=2)
    assert asked == [(False, 1), (True, 0), (True, 1), (True, 1), (False, 1)]


def test_deterministic_backward_is_bitwise_reproducible():
    q, k, v = _inputs(seqlen_q=70, seqlen_k=70)
    dout = torch.randn(q.shape)
    first = _grads(fa3.flash_attn_func(q, k, v, causal=True, deterministic=True), (q, k, v), dout)
    again = _grads(fa3.flash_attn_func(q, k, v, causal=True, deterministic=True), (q, k, v), dout)
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_varlen_with_seqused_in_position():
    lengths_q, lengths_k = [6, 0, 19, 31], [11, 5, 19, 23]
    used_q = torch.tensor([4, 0, 19, 12], dtype=torch.int32)
    used_k = torch.tensor([11, 2, 7, 0], dtype=torch.int32)
    q = torch.randn(sum(lengths_q), 4, 32, requires_grad=True)
    k = torch.randn(sum(lengths_k), 2, 32, requires_grad=True)
    v = torch.randn(sum(lengths_k), 2, 32, requires_grad=True)
    cu_q, cu_k = cu_seqlens(lengths_q), cu_seqlens(lengths_k)
    # seqused_q, seqused_k, softmax_scale, causal: positions 8-11, as in FlashAttention-3.
    out, lse = fa3.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), used_q, used_k,
                                          None, True, return_attn_probs=True)
    assert lse.shape == (4, sum(lengths_q))
    _check_with_grads((q, k, v), (out, lse),
                      varlen_attention(q, k, v, cu_q, cu_k, causal=True, seqused_q=used_q, seqused_k=used_k))


def test_seqused_on_fixed_length_batches():
    # FlashAttention-3 takes seqused without cu_seqlens: 4-D batches whose sequences use their
    # first rows only; the rows past them are 0 with lse -inf.
    q, k, v = _inputs(seqlen_q=20, seqlen_k=30)
    used_q, used_k = torch.tensor([20, 7], dtype=torch.int32), torch.tensor([13, 30], dtype=torch.int32)
    out, lse = fa3.flash_attn_varlen_func(q, k, v, None, None, None, None, used_q, used_k, causal=True,
                                          return_attn_probs=True)
    for b in range(2):
        nq, nk = int(used_q[b]), int(used_k[b])
        ref, ref_lse = attention(q[b:b + 1, :nq], k[b:b + 1, :nk], v[b:b + 1, :nk], causal=True)
        assert_close_to_reference(out[b:b + 1, :nq], ref, name=f"out[{b}]")
        assert_close_to_reference(lse[b:b + 1, :, :nq], ref_lse, name=f"lse[{b}]")
        assert torch.all(out[b, nq:] == 0) and torch.all(lse[b, :, nq:] == float("-inf"))


def test_qkvpacked_five_dims_matches_unpacked():
    qkv = torch.randn(2, 41, 3, 4, 32, requires_grad=True)
    out, lse = fa3.flash_attn_qkvpacked_func(qkv, None, True, return_attn_probs=True)
    q, k, v = qkv.unbind(2)
    ref, ref_lse = attention(q, k, v, causal=True)
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    dout = torch.randn_like(out)
    (dqkv,) = _grads(out, (qkv,), dout)
    (expected,) = _grads(ref, (qkv,), dout.double())
    assert dqkv.shape == qkv.shape
    assert_close_to_reference(dqkv, expected, atol=1e-4, name="dqkv")


def test_qkvpacked_four_dims_with_num_heads_q_gqa():
    heads_q, heads_k = 6, 2
    qkv = torch.randn(2, 29, heads_q + 2 * heads_k, 16, requires_grad=True)
    out = fa3.flash_attn_qkvpacked_func(qkv, causal=True, window_size=(5, 0), num_heads_q=heads_q)
    q, k, v = qkv.split([heads_q, heads_k, heads_k], dim=2)
    ref, _ = attention(q, k, v, causal=True, window=(5, 0))
    assert_close_to_reference(out, ref, name="out")
    dout = torch.randn_like(out)
    (dqkv,) = _grads(out, (qkv,), dout)
    (expected,) = _grads(ref, (qkv,), dout.double())
    assert_close_to_reference(dqkv, expected, atol=1e-4, name="dqkv")


def test_with_kvcache_pages_append_and_lse():
    batch, heads, heads_k, dim, page = 3, 4, 2, 32, 16
    pages = 12
    k_cache = torch.randn(pages, page, heads_k, dim)
    v_cache = torch.randn(pages, page, heads_k, dim)
    table = torch.randperm(pages, dtype=torch.int32)[:batch * 4].reshape(batch, 4)
    lengths = torch.tensor([5, 40, 17], dtype=torch.int32)
    q = torch.randn(batch, 2, heads, dim)
    k_new, v_new = torch.randn(batch, 2, heads_k, dim), torch.randn(batch, 2, heads_k, dim)
    keys_before, values_before = k_cache.clone(), v_cache.clone()
    out, lse = fa3.flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=lengths,
                                           page_table=table, causal=True, return_softmax_lse=True)
    for b in range(batch):
        n = int(lengths[b]) + 2
        rows = [(int(table[b, j // page]), j % page) for j in range(n)]
        keys = torch.stack([keys_before[p, r] for p, r in rows[:-2]] + [k_new[b, 0], k_new[b, 1]])
        values = torch.stack([values_before[p, r] for p, r in rows[:-2]] + [v_new[b, 0], v_new[b, 1]])
        ref, ref_lse = attention(q[b:b + 1], keys.unsqueeze(0), values.unsqueeze(0), causal=True)
        assert_close_to_reference(out[b:b + 1], ref, name=f"out[{b}]")
        assert_close_to_reference(lse[b:b + 1], ref_lse, name=f"lse[{b}]")
        # The new rows went into the cache's pages in place.
        assert torch.equal(k_cache[rows[-1][0], rows[-1][1]], k_new[b, 1])


def _pieces(q, k, v, cuts, causal):
    """flash_attn_func over key ranges [cuts[i], cuts[i + 1]) as (out_partial, lse_partial) in
    flash_attn_combine's layout; causal pieces align to the whole key range's bottom-right corner
    (a window's bounds shifted by the piece's start and end)."""
    outs, lses = [], []
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        # Query i sees key j <= i + seqlen_k - seqlen_q; within the piece (j' = j - lo, piece of
        # hi - lo keys) that is j' <= i + (hi - lo) - seqlen_q + (seqlen_k - hi).
        window = (-1, seqlen_k - hi) if causal else (-1, -1)
        out, lse = fa3.flash_attn_func(q, k[:, lo:hi], v[:, lo:hi], window_size=window, return_attn_probs=True)
        outs.append(out.float())
        lses.append(lse.transpose(1, 2).float())  # (batch, seqlen, nheads)
    return torch.stack(outs), torch.stack(lses)


@pytest.mark.parametrize("causal", [False, True])
def test_combine_of_key_pieces_is_the_whole_attention(causal):
    q, k, v = _inputs(seqlen_q=23, seqlen_k=90)
    out_partial, lse_partial = _pieces(q, k, v, [0, 17, 18, 60, 90], causal)
    out, lse = fa3.flash_attn_combine(out_partial, lse_partial)
    ref, ref_lse = attention(q, k, v, causal=causal)
    assert out.dtype == torch.float32 and lse.shape == (2, 23, 4)
    assert_close_to_reference(out, ref, name="out")
    assert_close_to_reference(lse, ref_lse.transpose(1, 2), name="lse")


def test_combine_is_differentiable():
    # PyTorch operations, so gradients reach both inputs (an attention call's lse carries none:
    # flash_attn marks it non-differentiable); against softmax over the pieces in float64.
    out_partial = torch.randn(4, 2, 7, 3, 8, requires_grad=True)
    lse_partial = (3 * torch.randn(4, 2, 7, 3)).requires_grad_()
    out, lse = fa3.flash_attn_combine(out_partial, lse_partial)
    weights = torch.softmax(lse_partial.double(), dim=0)
    ref = (weights.unsqueeze(-1) * out_partial.double()).sum(0)
    ref_lse = torch.logsumexp(lse_partial.double(), dim=0)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    got = torch.autograd.grad((out, lse), (out_partial, lse_partial), (dout, dlse))
    expected = torch.autograd.grad((ref, ref_lse), (out_partial, lse_partial), (dout.double(), dlse.double()))
    for name, g, e in zip(("out_partial", "lse_partial"), got, expected):
        assert_close_to_reference(g, e, name="d" + name)


def test_combine_rows_without_keys_and_out_dtype():
    out_partial = torch.randn(3, 2, 5, 4, 16)
    lse_partial = torch.randn(3, 2, 5, 4)
    lse_partial[:, 1, 2, 3] = float("-inf")  # no key in any piece
    lse_partial[0, 0, 0, 0] = float("-inf")  # no key in one piece
    # Pieces without a key are never read (buffers nobody wrote): NaN and inf there change nothing.
    out_partial[:, 1, 2, 3] = float("inf")
    out_partial[0, 0, 0, 0] = float("nan")
    out = torch.full((2, 5, 4, 16), float("nan"), dtype=torch.bfloat16)
    merged, lse = fa3.flash_attn_combine(out_partial, lse_partial, out=out, out_dtype=torch.bfloat16)
    assert merged is out
    w = torch.softmax(lse_partial.double(), dim=0).nan_to_num(0.0)
    expected = (w.unsqueeze(-1) * out_partial.double().nan_to_num(0.0, 0.0, 0.0)).sum(0)
    assert_close_to_reference(out, expected, atol=1e-2, rtol=1e-2, name="out")
    assert torch.all(out[1, 2, 3] == 0) and lse[1, 2, 3] == float("-inf")
    assert_close_to_reference(lse, torch.logsumexp(lse_partial.double(), dim=0), name="lse")


REFUSED = {
    "qv": dict(qv=torch.zeros(1)),
    "q_descale": dict(q_descale=torch.ones(1)),
    "v_descale": dict(v_descale=torch.ones(1)),
    "sm_margin": dict(sm_margin=8),
}


@pytest.mark.parametrize("argument", REFUSED.keys())
def test_unimplemented_arguments_are_refused_by_name(argument):
    q, k, v = _inputs()
    with pytest.raises(NotImplementedError, match=f"argument '{argument}'"):
        fa3.flash_attn_func(q, k, v, **REFUSED[argument])
    with pytest.raises(NotImplementedError, match=f"argument '{argument}'"):
        fa3.flash_attn_varlen_func(q[0], k[0], v[0], cu_seqlens([37]), cu_seqlens([53]), 37, 53,
                                   **REFUSED[argument])


@pytest.mark.parametrize("argument", ["cu_seqlens_k_new", "rotary_seqlens", "scheduler_metadata", "qv", "k_descale"])
def test_kvcache_refuses_what_it_does_not_implement(argument):
    q = torch.randn(2, 1, 4, 32)
    cache = torch.randn(2, 16, 2, 32)
    new = torch.randn(2, 1, 2, 32)  # appended: cu_seqlens_k_new is read (and refused) only with k and v
    with pytest.raises(NotImplementedError, match=f"argument '{argument}'"):
        fa3.flash_attn_with_kvcache(q, cache, cache.clone(), new, new.clone(), cache_seqlens=4,
                                    **{argument: torch.zeros(3, dtype=torch.int32)})
    with pytest.raises(NotImplementedError, match="get_scheduler_metadata"):
        fa3.get_scheduler_metadata(2, 1, 16, 4, 2, 32, torch.tensor([4, 4], dtype=torch.int32))


def _cache_rows(k_cache, v_cache, table, b, n):
    """Sequence b's first n keys and values of a contiguous cache (table None) or a paged one."""
    if table is None:
        return k_cache[b, :n], v_cache[b, :n]
    page = k_cache.shape[1]
    rows = [(int(table[b, j // page]), j % page) for j in range(n)]
    return (torch.stack([k_cache[p, r] for p, r in rows]) if rows else k_cache[:0, 0],
            torch.stack([v_cache[p, r] for p, r in rows]) if rows else v_cache[:0, 0])


def _check_varlen_step(q, cu_q, k_cache, v_cache, table, lengths, out, lse, **options):
    for b in range(len(lengths)):
        lo, hi = int(cu_q[b]), int(cu_q[b + 1])
        keys, values = _cache_rows(k_cache, v_cache, table, b, int(lengths[b]))
        if len(keys) == 0:  # no key: output 0, lse -inf
            assert torch.all(out[lo:hi] == 0) and torch.all(lse[:, lo:hi] == float("-inf"))
            continue
        ref, ref_lse = attention(q[lo:hi].unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), **options)
        assert_close_to_reference(out[lo:hi], ref[0], name=f"out of sequence {b}")
        assert_close_to_reference(lse[:, lo:hi], ref_lse[0], name=f"lse of sequence {b}")


VARLEN_KVCACHE = {
    "paged_causal": dict(paged=True, causal=True),
    "paged_window_softcap": dict(paged=True, window=(6, 2), softcap=4.0),
    "contiguous_causal": dict(paged=False, causal=True),
    "contiguous_int_lengths": dict(paged=False, lengths=19),
}


@pytest.mark.parametrize("case", VARLEN_KVCACHE.values(), ids=VARLEN_KVCACHE.keys())
def test_kvcache_with_variable_length_queries(case):
    lengths_q = [3, 1, 7, 0, 2]
    lengths = case.get("lengths", torch.tensor([20, 0, 33, 9, 48], dtype=torch.int32))
    batch, heads, heads_k, dim, page = len(lengths_q), 4, 2, 32, 16
    cu_q = cu_seqlens(lengths_q)
    q = torch.randn(sum(lengths_q), heads, dim)
    if case["paged"]:
        k_cache, v_cache = torch.randn(17, page, heads_k, dim), torch.randn(17, page, heads_k, dim)
        table = torch.randperm(17, dtype=torch.int32)[:batch * 3].reshape(batch, 3)
        table[1, 1:] = -1  # padding past a sequence's used pages is never read
    else:
        k_cache, v_cache, table = torch.randn(batch, 48, heads_k, dim), torch.randn(batch, 48, heads_k, dim), None
    options = dict(causal=case.get("causal", False), window=case.get("window", (-1, -1)),
                   softcap=case.get("softcap", 0.0))
    out, lse = fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, page_table=table,
                                           cu_seqlens_q=cu_q, max_seqlen_q=max(lengths_q),
                                           cu_seqlens_k_new=torch.zeros(batch + 1, dtype=torch.int32),
                                           causal=options["causal"], window_size=options["window"],
                                           softcap=options["softcap"], return_softmax_lse=True)
    assert out.shape == q.shape and lse.shape == (heads, q.shape[0])
    per_sequence = [lengths] * batch if isinstance(lengths, int) else lengths.tolist()
    _check_varlen_step(q, cu_q, k_cache, v_cache, table, per_sequence, out, lse, **options)


def test_kvcache_varlen_gathers_pages_the_kernels_cannot_read(monkeypatch):
    # Where the library refuses a page size in place (CUDA kernels' key tiles cross pages), the
    # used pages are gathered into a contiguous copy: forced here by refusing every paged call.
    run_forward = fa3_ops._run_forward

    def without_pages(*args):
        if len(args) > 16 and args[16] is not None:
            raise NotImplementedError("no paged kernel for this page size (test)")
        return run_forward(*args)

    monkeypatch.setattr(fa3_ops, "_run_forward", without_pages)
    lengths_q, lengths = [2, 5, 1], torch.tensor([7, 28, 0], dtype=torch.int32)
    cu_q = cu_seqlens(lengths_q)
    q = torch.randn(sum(lengths_q), 4, 32)
    k_cache, v_cache = torch.randn(9, 5, 2, 32), torch.randn(9, 5, 2, 32)
    table = torch.tensor([[4, 2, -1, -1, -1, -1], [8, 0, 1, 3, 5, 6], [-1, -1, -1, -1, -1, -1]], dtype=torch.int32)
    out, lse = fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, page_table=table,
                                           cu_seqlens_q=cu_q, causal=True, return_softmax_lse=True)
    _check_varlen_step(q, cu_q, k_cache, v_cache, table, lengths.tolist(), out, lse, causal=True)
    empty = fa3.flash_attn_with_kvcache(q[:0], k_cache, v_cache, cache_seqlens=lengths[:0], page_table=table[:0],
                                        cu_seqlens_q=cu_q[:1])
    assert empty.shape == (0, 4, 32)
    table[1, 5] = 9  # holds sequence 1's last three keys (of 28, pages of 5)
    with pytest.raises(ValueError, match="argument 'page_table': row 1"):
        fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, page_table=table, cu_seqlens_q=cu_q)


def test_kvcache_varlen_bad_arguments_name_themselves():
    cu_q = cu_seqlens([2, 3])
    q = torch.randn(5, 4, 32)
    k_cache = torch.randn(6, 16, 2, 32)
    table = torch.tensor([[0, 1], [2, 3]], dtype=torch.int32)
    lengths = torch.tensor([4, 33], dtype=torch.int32)  # 33 > 2 pages of 16
    with pytest.raises(ValueError, match="argument 'cache_seqlens'"):  # a bool is not a length
        fa3.flash_attn_with_kvcache(q, k_cache, k_cache.clone(), cache_seqlens=True, page_table=table,
                                    cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="argument 'cache_seqlens': entry 1 is 33"):
        fa3.flash_attn_with_kvcache(q, k_cache, k_cache.clone(), cache_seqlens=lengths, page_table=table,
                                    cu_seqlens_q=cu_q)
    table[1, 1] = 6  # names a page past k_cache's 6: the library's check, in the caller's names
    with pytest.raises(ValueError, match="argument 'page_table'"):
        fa3.flash_attn_with_kvcache(q, k_cache, k_cache.clone(), cache_seqlens=20, page_table=table,
                                    cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="argument 'k_cache'"):
        fa3.flash_attn_with_kvcache(q, k_cache, k_cache.clone(), cache_seqlens=3, cu_seqlens_q=cu_q)
    with pytest.raises(ValueError, match="argument 'q'"):
        fa3.flash_attn_with_kvcache(q.unsqueeze(0), k_cache, k_cache.clone(), cache_seqlens=3, page_table=table,
                                    cu_seqlens_q=cu_q)
    new = torch.randn(2, 1, 2, 32)
    for name, value in (("k", new), ("rotary_cos", torch.ones(40, 8)), ("cache_leftpad", torch.zeros(2)),
                        ("cache_batch_idx", torch.zeros(2))):
        extra = dict(v=new.clone()) if name == "k" else dict(rotary_sin=torch.zeros(40, 8)) if name == "rotary_cos" \
            else {}
        with pytest.raises(NotImplementedError, match=f"argument '{name}'"):
            fa3.flash_attn_with_kvcache(q, k_cache, k_cache.clone(), cache_seqlens=3, page_table=table,
                                        cu_seqlens_q=cu_q, **{name: value}, **extra)


def test_bad_arguments_name_themselves():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="argument 'num_splits'"):
        fa3.flash_attn_func(q, k, v, num_splits=-1)
    with pytest.raises(TypeError, match="argument 'pack_gqa'"):
        fa3.flash_attn_func(q, k, v, pack_gqa="yes")
    with pytest.raises(ValueError, match="argument 'num_heads_q'"):
        fa3.flash_attn_qkvpacked_func(torch.randn(1, 8, 7, 16))
    with pytest.raises(ValueError, match="argument 'num_heads_q'"):
        fa3.flash_attn_qkvpacked_func(torch.randn(1, 8, 7, 16), num_heads_q=2)
    with pytest.raises(ValueError, match="argument 'lse_partial'"):
        fa3.flash_attn_combine(torch.randn(2, 1, 3, 4, 8), torch.randn(2, 1, 4, 3))
    with pytest.raises(TypeError, match="argument 'out_partial'"):
        fa3.flash_attn_combine(torch.randn(2, 1, 3, 4, 8).half(), torch.randn(2, 1, 3, 4))
    with pytest.raises(ValueError, match="argument 'out'"):
        fa3.flash_attn_combine(torch.randn(2, 1, 3, 4, 8), torch.randn(2, 1, 3, 4), out=torch.empty(1, 3, 4, 9))


@pytest.mark.gpu
@pytest.mark.parametrize("headdim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_flash_attn_func_and_combine(headdim, causal):
    q, k, v = _inputs(seqlen_q=300, seqlen_k=700, nheads=8, nheads_k=2, headdim=headdim, dtype=torch.bfloat16,
                      device="cuda")
    out, lse = fa3.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    ref, ref_lse = attention(q, k, v, causal=causal, dtype=torch.float32)
    lowp, _ = attention(q, k, v, causal=causal, dtype=torch.bfloat16)
    assert_close_to_reference(out, ref, lowp, atol=8e-3, name="out")
    assert_close_to_reference(lse, ref_lse, atol=1e-3, rtol=1e-3, name="lse")
    combined, _ = fa3.flash_attn_combine(*_pieces(q, k, v, [0, 256, 300, 700], causal), out_dtype=torch.bfloat16)
    assert_close_to_reference(combined, ref, lowp, atol=1.6e-2, name="combined")
    dout = torch.randn_like(out)
    got = _grads(out, (q, k, v), dout)
    expected = _grads(ref, (q, k, v), dout.float())
    lowp_grads = _grads(lowp, (q, k, v), dout)
    for name, g, e, low in zip("qkv", got, expected, lowp_grads):
        assert_close_to_reference(g, e, low, atol=8e-3, name="d" + name)


@pytest.mark.gpu
def test_gpu_varlen_seqused_and_kvcache_decode():
    lengths = [100, 1, 513]
    cu = cu_seqlens(lengths, device="cuda")
    used = torch.tensor([64, 1, 300], dtype=torch.int32, device="cuda")
    q = torch.randn(sum(lengths), 8, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(sum(lengths), 2, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(lengths), 2, 128, device="cuda", dtype=torch.bfloat16)
    out = fa3.flash_attn_varlen_func(q, k, v, cu, cu, max(lengths), max(lengths), used, used, causal=True)
    ref, _ = varlen_attention(q, k, v, cu, cu, causal=True, seqused_q=used, seqused_k=used, dtype=torch.float32)
    lowp, _ = varlen_attention(q, k, v, cu, cu, causal=True, seqused_q=used, seqused_k=used, dtype=torch.bfloat16)
    assert_close_to_reference(out, ref, lowp, atol=8e-3, name="varlen out")
    # One decode step against a paged cache (128-row pages: read in place on the GPU).
    k_cache = torch.randn(8, 128, 2, 128, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    table = torch.tensor([[3, 1, 6], [0, 7, 2]], dtype=torch.int32, device="cuda")
    seqlens = torch.tensor([300, 129], dtype=torch.int32, device="cuda")
    step_q = torch.randn(2, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
    out = fa3.flash_attn_with_kvcache(step_q, k_cache, v_cache, cache_seqlens=seqlens, page_table=table)
    for b in range(2):
        n = int(seqlens[b])
        keys = torch.cat([k_cache[int(p)] for p in table[b]])[:n].unsqueeze(0)
        values = torch.cat([v_cache[int(p)] for p in table[b]])[:n].unsqueeze(0)
        ref, _ = attention(step_q[b:b + 1], keys, values, dtype=torch.float32)
        lowp, _ = attention(step_q[b:b + 1], keys, values, dtype=torch.bfloat16)
        assert_close_to_reference(out[b:b + 1], ref, lowp, atol=8e-3, name=f"decode out[{b}]")


def test_compiles_with_fullgraph():
    # The FlashAttention-3 entry points reach the custom ops, so torch.compile traces through them.
    q, k, v = _inputs(seqlen_q=19, seqlen_k=23)
    used = torch.tensor([19, 11], dtype=torch.int32)

    def step(q, k, v):
        out, lse = fa3.flash_attn_func(q, k, v, 0.2, True, window_size=(5, -1), return_attn_probs=True)
        fixed = fa3.flash_attn_varlen_func(q, k, v, None, None, None, None, used, used, causal=True)
        merged, _ = fa3.flash_attn_combine(out.unsqueeze(0), lse.transpose(1, 2).unsqueeze(0))
        return (merged * fixed).sum()

    expected = torch.autograd.grad(step(q, k, v), (q, k, v))
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(q, k, v), (q, k, v))
    for name, g, e in zip("qkv", got, expected):
        assert_close_to_reference(g, e, name="d" + name)


@pytest.mark.gpu
@pytest.mark.parametrize("page", [128, 1])  # 128: read in place; 1 (SGLang's default): gathered
def test_gpu_kvcache_variable_length_queries(page):
    lengths_q, lengths = [1, 37, 130, 5], [300, 37, 700, 1000]
    heads, heads_k, dim = 16, 4, 128
    cu_q = cu_seqlens(lengths_q, device="cuda")
    blocks = (max(lengths) + page - 1) // page
    pages = len(lengths) * blocks + 3
    k_cache = torch.randn(pages, page, heads_k, dim, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device="cuda", dtype=torch.int32)[:len(lengths) * blocks].reshape(len(lengths),
                                                                                                    blocks)
    q = torch.randn(sum(lengths_q), heads, dim, device="cuda", dtype=torch.bfloat16)
    out, lse = fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor(lengths, dtype=torch.int32,
                                                                                           device="cuda"),
                                           page_table=table, cu_seqlens_q=cu_q, max_seqlen_q=max(lengths_q),
                                           causal=True, return_softmax_lse=True)
    flat_k, flat_v = k_cache[table.long()].flatten(1, 2), v_cache[table.long()].flatten(1, 2)
    for b, n in enumerate(lengths):
        lo, hi = int(cu_q[b]), int(cu_q[b + 1])
        args = (q[lo:hi].unsqueeze(0), flat_k[b:b + 1, :n], flat_v[b:b + 1, :n])
        ref, ref_lse = attention(*args, causal=True, dtype=torch.float32)
        lowp, _ = attention(*args, causal=True, dtype=torch.bfloat16)
        assert_close_to_reference(out[lo:hi], ref[0], lowp[0], atol=8e-3, name=f"out of sequence {b}")
        assert_close_to_reference(lse[:, lo:hi], ref_lse[0], atol=1e-3, rtol=1e-3, name=f"lse of sequence {b}")


@pytest.mark.gpu
@pytest.mark.parametrize("page", [128, 1])
def test_gpu_kvcache_variable_length_queries_under_cuda_graph_capture(page):
    # A captured extend step (SGLang captures its steps) replayed after the lengths, the queries'
    # split (cu_seqlens_q, same total) and the table changed gives what an eager call on the new
    # ones gives, bit for bit: nothing is read back or baked in at capture.
    torch.manual_seed(12)
    heads, heads_k, dim, blocks = 16, 4, 128, (512 + page - 1) // page
    pages = 2 * blocks + 2
    k_cache = torch.randn(pages, page, heads_k, dim, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(pages, device="cuda")[:2 * blocks].view(2, blocks).to(torch.int32)
    lengths = torch.tensor([40, 300], dtype=torch.int32, device="cuda")
    cu_q = cu_seqlens([3, 9], device="cuda")
    q = torch.randn(12, heads, dim, device="cuda", dtype=torch.bfloat16)

    def step():
        return fa3.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, page_table=table,
                                           cu_seqlens_q=cu_q, max_seqlen_q=12, causal=True)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    lengths.copy_(torch.tensor([512, 7], dtype=torch.int32))
    cu_q.copy_(cu_seqlens([10, 2]))
    table.copy_(table.flip(0))
    graph.replay()
    expected = step()
    torch.cuda.synchronize()
    assert torch.equal(out, expected)


CHUNKS = {
    # (seqlen_q, seqlen_k, chunk, causal, window)
    "causal_self": (70, 70, 16, True, (-1, -1)),
    "causal_extend": (9, 75, 32, True, (-1, -1)),       # the queries at the end of the keys
    "causal_q_before_keys": (50, 20, 8, True, (-1, -1)),  # 30 queries before every key: 0, -inf
    "causal_left_window": (64, 80, 24, True, (5, -1)),
    "right_bound_zero": (40, 40, 12, False, (7, 0)),
    "no_mask": (33, 50, 16, False, (-1, -1)),
    "window_both_sides": (45, 60, 16, False, (4, 3)),
    "window_left_alone_q_before_keys": (50, 30, 9, False, (6, -1)),
    "chunk_past_keys": (20, 30, 64, True, (-1, -1)),
}


@pytest.mark.parametrize("case", CHUNKS.values(), ids=CHUNKS.keys())
def test_attention_chunk_matches_reference(case):
    seqlen_q, seqlen_k, chunk, causal, window = case
    q, k, v = _inputs(seqlen_q=seqlen_q, seqlen_k=seqlen_k)
    out, lse = fa3.flash_attn_func(q, k, v, causal=causal, window_size=window, attention_chunk=chunk, softcap=2.0,
                                   return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (2, 4, seqlen_q)
    _check_with_grads((q, k, v), (out, lse),
                      attention(q, k, v, causal=causal, window=window, chunk=chunk, softcap=2.0))


def test_attention_chunk_varlen_with_seqused():
    lengths_q, lengths_k = [5, 40, 0, 21], [9, 40, 6, 30]
    used_q = torch.tensor([5, 33, 0, 12], dtype=torch.int32)
    used_k = torch.tensor([0, 40, 6, 25], dtype=torch.int32)
    q = torch.randn(sum(lengths_q) + 3, 4, 32, requires_grad=True)  # 3 rows past the last sequence
    k = torch.randn(sum(lengths_k), 2, 32, requires_grad=True)
    v = torch.randn(sum(lengths_k), 2, 32, requires_grad=True)
    cu_q, cu_k = cu_seqlens(lengths_q), cu_seqlens(lengths_k)
    out, lse = fa3.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 40, 40, used_q, used_k, causal=True,
                                          attention_chunk=16, return_attn_probs=True)
    # The reference per used sequence; every other row 0 (lse -inf), and no gradient reaches it.
    rows, lses = [], []
    for b in range(len(lengths_q)):
        nq, nk, q0, k0 = int(used_q[b]), int(used_k[b]), int(cu_q[b]), int(cu_k[b])
        o = torch.zeros(1, nq, 4, 32, dtype=torch.float64)
        l = torch.full((1, 4, nq), float("-inf"), dtype=torch.float64)
        if nq and nk:
            o, l = attention(q[q0:q0 + nq].unsqueeze(0), k[k0:k0 + nk].unsqueeze(0), v[k0:k0 + nk].unsqueeze(0),
                             causal=True, chunk=16)
        unused = lengths_q[b] - nq
        rows += [o[0], torch.zeros(unused, 4, 32, dtype=torch.float64)]
        lses += [l[0], torch.full((4, unused), float("-inf"), dtype=torch.float64)]
    rows.append(torch.zeros(3, 4, 32, dtype=torch.float64))
    lses.append(torch.full((4, 3), float("-inf"), dtype=torch.float64))
    _check_with_grads((q, k, v), (out, lse), (torch.cat(rows), torch.cat(lses, dim=1)))


def test_attention_chunk_qkvpacked_both_forms():
    qkv = torch.randn(2, 45, 3, 4, 16, requires_grad=True)
    out = fa3.flash_attn_qkvpacked_func(qkv, causal=True, attention_chunk=10)
    ref, _ = attention(*qkv.unbind(2), causal=True, chunk=10)
    assert_close_to_reference(out, ref, name="out (5-D)")
    dout = torch.randn_like(out)
    (got,) = _grads(out, (qkv,), dout)
    (expected,) = _grads(ref, (qkv,), dout.double())
    assert_close_to_reference(got, expected, atol=1e-4, name="dqkv (5-D)")
    packed = torch.randn(1, 30, 8, 16)
    out = fa3.flash_attn_qkvpacked_func(packed, causal=True, attention_chunk=7, num_heads_q=4)
    ref, _ = attention(*packed.split([4, 2, 2], dim=2), causal=True, chunk=7)
    assert_close_to_reference(out, ref, name="out (4-D)")


def test_attention_chunk_refusals_name_it():
    q, k, v = _inputs()
    with pytest.raises(ValueError, match="argument 'attention_chunk'"):
        fa3.flash_attn_func(q, k, v, causal=True, attention_chunk=-8)
    with pytest.raises(NotImplementedError, match="argument 'attention_chunk'"):
        fa3.flash_attn_with_kvcache(q, k, v, cache_seqlens=10, attention_chunk=16)


@pytest.mark.gpu
@pytest.mark.parametrize("headdim", [64, 128])
def test_gpu_attention_chunk(headdim):
    q, k, v = _inputs(seqlen_q=1000, seqlen_k=1200, nheads=8, nheads_k=2, headdim=headdim, dtype=torch.bfloat16,
                      device="cuda")
    out = fa3.flash_attn_func(q, k, v, causal=True, window_size=(300, -1), attention_chunk=256)
    ref, _ = attention(q, k, v, causal=True, window=(300, -1), chunk=256, dtype=torch.float32)
    lowp, _ = attention(q, k, v, causal=True, window=(300, -1), chunk=256, dtype=torch.bfloat16)
    assert_close_to_reference(out, ref, lowp, atol=8e-3, name="out")
    dout = torch.randn_like(out)
    for name, g, e, low in zip("qkv", _grads(out, (q, k, v), dout), _grads(ref, (q, k, v), dout.float()),
                               _grads(lowp, (q, k, v), dout)):
        assert_close_to_reference(g, e, low, atol=8e-3, name="d" + name)


def test_attention_chunk_layout_and_shape_checks():
    # One query against a long cache in chunks of 16: the chunks before the query's form one
    # sub-sequence, not 65,535 (the kernels take at most 65,535 sequences a call).
    cu_q, cu_k, seqused, longest_q, longest_k = chunk_layout(0, [1], [1], 0, [1 << 20], [1 << 20], 16)
    assert (cu_q, cu_k, seqused) == ([0, 0, 1], [0, (1 << 20) - 16, 1 << 20], [0, 16])
    assert (longest_q, longest_k) == (1, (1 << 20) - 16)
    # q, k and v are cut into rows, so their batch and lengths are checked first, by name.
    q, k, v = _inputs(seqlen_q=10, seqlen_k=12)
    with pytest.raises(ValueError, match="argument 'k': batch 3"):
        fa3.flash_attn_func(q, torch.randn(3, 12, 2, 32), torch.randn(3, 12, 2, 32), attention_chunk=4)
    with pytest.raises(ValueError, match="argument 'v'"):
        fa3.flash_attn_func(q, k, torch.randn(2, 11, 2, 32), attention_chunk=4)
    with pytest.raises(ValueError, match="argument 'k'"):
        fa3.flash_attn_func(q, k[0], v, attention_chunk=4)
    lse = fa3.flash_attn_func(q[:1], k[:1], v[:1], attention_chunk=4, return_attn_probs=True)[1]
    assert lse.stride() == (4 * 10, 10, 1)  # the strides of the call without chunks
