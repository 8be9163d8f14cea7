"""Every invalid call raises a Python exception carrying the library's message; none crashes."""

import pytest
import torch

from flashattn import flash_attn_func, flash_attn_varlen_func
from reference import cu_seqlens


def qkv(batch=2, seqlen=16, nheads=4, headdim=32, dtype=torch.float32):
    return tuple(torch.randn(batch, seqlen, nheads, headdim, dtype=dtype) for _ in range(3))


def test_float64_is_a_type_error():
    q, k, v = qkv(dtype=torch.float64)
    with pytest.raises(TypeError, match="argument 'q': dtype float64 is not supported"):
        flash_attn_func(q, k, v)


def test_dtypes_with_no_library_type_name_what_the_argument_takes():
    # int64 prefix sums (what torch's cumsum gives) once read "expected float32, float16, bfloat16".
    q, k, v = qkv()
    rows = q.reshape(-1, 4, 32)
    cu = cu_seqlens([16, 16])
    with pytest.raises(TypeError, match="argument 'cu_seqlens_k': dtype int64 is not supported; expected int32"):
        flash_attn_varlen_func(rows, rows, rows, cu, cu.long(), 16, 16)
    with pytest.raises(TypeError, match="argument 'seqused_q': dtype int64 is not supported; expected int32"):
        flash_attn_varlen_func(rows, rows, rows, cu, cu, 16, 16, seqused_q=torch.tensor([3, 4]))
    with pytest.raises(TypeError, match="argument 'alibi_slopes': dtype float64 is not supported; expected float32$"):
        flash_attn_func(q, k, v, alibi_slopes=torch.ones(4, dtype=torch.float64))
    with pytest.raises(TypeError, match="argument 'v': dtype float64 is not supported; expected float16, bfloat16"):
        flash_attn_func(q, k, v.double())


def test_mismatched_dtypes_are_a_type_error():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="argument 'k': dtype is float16; expected float32"):
        flash_attn_func(q, k.half(), v)


def test_headdim_12_is_refused_not_padded():
    q, k, v = qkv(headdim=12)
    with pytest.raises(ValueError, match="head dimension 12 is not allowed"):
        flash_attn_func(q, k, v)


def test_headdim_above_256():
    q, k, v = qkv(headdim=264, seqlen=4)
    with pytest.raises(ValueError, match="head dimension 264"):
        flash_attn_func(q, k, v)


def test_bad_window():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="window_size"):
        flash_attn_func(q, k, v, window_size=3)


def test_dropout_is_refused():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="dropout_p"):
        flash_attn_func(q, k, v, dropout_p=0.1)


def test_gqa_heads_must_divide():
    q, _, _ = qkv(nheads=6)
    _, k, v = qkv(nheads=4)
    with pytest.raises(ValueError, match="does not divide"):
        flash_attn_func(q, k, v)


def test_wrong_rank():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'q': has 3 dimensions"):
        flash_attn_func(q[0], k, v)


def test_batch_mismatch():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'k': batch 1"):
        flash_attn_func(q, k[:1], v[:1])


def test_softcap_negative():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'softcap'"):
        flash_attn_func(q, k, v, softcap=-1.0)


def test_alibi_shape_and_dtype():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'alibi_slopes': shape"):
        flash_attn_func(q, k, v, alibi_slopes=torch.ones(3))
    with pytest.raises(TypeError, match="alibi_slopes"):
        flash_attn_func(q, k, v, alibi_slopes=torch.ones(4, dtype=torch.float16))


def test_varlen_errors():
    q = torch.randn(10, 4, 32)
    with pytest.raises(TypeError, match="cu_seqlens_q"):
        flash_attn_varlen_func(q, q, q, cu_seqlens([4, 6]).long(), cu_seqlens([4, 6]), 6, 6)
    with pytest.raises(ValueError, match="argument 'cu_seqlens_q': last entry 12 is past the tensor"):
        flash_attn_varlen_func(q, q, q, cu_seqlens([6, 6]), cu_seqlens([4, 6]), 6, 6)
    with pytest.raises(ValueError, match="argument 'cu_seqlens_k': is not non-decreasing"):
        flash_attn_varlen_func(q, q, q, cu_seqlens([4, 6]), torch.tensor([0, 6, 4], dtype=torch.int32), 6, 6)
    with pytest.raises(ValueError, match="argument 'max_seqlen_q': is 3"):
        flash_attn_varlen_func(q, q, q, cu_seqlens([4, 6]), cu_seqlens([4, 6]), 3, 6)
    # With block_table k and v are pages, 4-D; the table is int32; no gradient flows through pages.
    table = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match="argument 'k': has shape .* pages"):
        flash_attn_varlen_func(q, q, q, cu_seqlens([4, 6]), cu_seqlens([4, 6]), 6, 6, block_table=table)
    pages = torch.randn(3, 4, q.shape[1], q.shape[2])
    with pytest.raises(TypeError, match="argument 'block_table': dtype is float32; expected int32"):
        flash_attn_varlen_func(q, pages, pages, cu_seqlens([4, 6]), cu_seqlens([4, 6]), 6, 6,
                               block_table=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="argument 'cu_seqlens_k': holds a sequence of 6 keys; block_table reaches 4"):
        flash_attn_varlen_func(q, pages, pages, cu_seqlens([4, 6]), cu_seqlens([2, 6]), 6, 6,
                               block_table=torch.zeros(2, 1, dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="argument 'block_table': paged k / v are for the forward only"):
        flash_attn_varlen_func(q.requires_grad_(), pages, pages, cu_seqlens([4, 6]), cu_seqlens([4, 6]), 6, 6,
                               block_table=table)


def test_bad_scale():
    q, k, v = qkv()
    for scale in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="argument 'softmax_scale'"):
            flash_attn_func(q, k, v, softmax_scale=scale)


def test_softmax_scale_zero_is_refused_not_replaced():
    # The library reads 0 as "the default" (1 / sqrt(headdim)); a caller's 0 must not become that.
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'softmax_scale': 0 is not supported"):
        flash_attn_func(q, k, v, softmax_scale=0.0)
    from flashattn import array
    with pytest.raises(ValueError, match="argument 'softmax_scale': 0 is not supported"):
        array.forward(q.numpy(), k.numpy(), v.numpy(), softmax_scale=0.0)


@pytest.mark.parametrize("packed", [False, True])
def test_double_backward_raises(packed):
    # A gradient penalty through attention needs its second derivative, which the backward does not
    # have: an error, not a silently incomplete gradient.
    from flashattn import flash_attn_qkvpacked_func
    w = torch.randn(32, 32, requires_grad=True)
    x = torch.randn(1, 4, 2, 32, requires_grad=True)
    k, v = torch.randn(1, 4, 2, 32), torch.randn(1, 4, 2, 32)
    if packed:
        out = flash_attn_qkvpacked_func(torch.stack([x @ w, k, v], dim=2))
    else:
        out = flash_attn_func(x @ w, k, v)
    (g,) = torch.autograd.grad((out ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        (g ** 2).sum().backward()


def test_seqused_errors():
    q = torch.randn(10, 4, 32)
    cu = cu_seqlens([4, 6])
    call = lambda **kw: flash_attn_varlen_func(q, q, q, cu, cu, 6, 6, **kw)  # noqa: E731
    with pytest.raises(ValueError, match="argument 'seqused_k': entry 1 is 7 but sequence 1 has 6 rows"):
        call(seqused_k=torch.tensor([4, 7], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'seqused_q': entry 0 is -1"):
        call(seqused_q=torch.tensor([-1, 6], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'seqused_q': has 3 entries"):
        call(seqused_q=torch.tensor([1, 2, 3], dtype=torch.int32))
    with pytest.raises(TypeError, match="seqused_k"):
        call(seqused_k=torch.tensor([4, 6], dtype=torch.int64))


def test_not_a_tensor():
    _, k, v = qkv()
    with pytest.raises(TypeError, match="argument 'q'"):
        flash_attn_func([[1.0]], k, v)


@pytest.mark.gpu
def test_mismatched_devices():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="all tensors must be on one device"):
        flash_attn_func(q.cuda().half(), k.half(), v.half())


@pytest.mark.gpu
def test_length_vectors_on_another_device():
    q = torch.randn(10, 4, 32, device="cuda", dtype=torch.bfloat16)
    cu = cu_seqlens([4, 6])
    with pytest.raises(ValueError, match="argument 'cu_seqlens_q'.*all tensors must be on one device"):
        flash_attn_varlen_func(q, q, q, cu, cu.cuda(), 6, 6)
    with pytest.raises(ValueError, match="argument 'seqused_k'.*all tensors must be on one device"):
        flash_attn_varlen_func(q, q, q, cu.cuda(), cu.cuda(), 6, 6, seqused_k=torch.tensor([4, 6], dtype=torch.int32))


@pytest.mark.gpu
def test_output_buffers_on_the_gpu_are_checked_too():
    from flashattn import array
    q = torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="argument 'out': shares memory with input 'q'"):
        array.forward(q, q, q, out=q)


def test_errors_inside_compiled_graph_are_python_exceptions():
    q, k, v = qkv(headdim=12)
    with pytest.raises(Exception, match="head dimension 12"):
        torch.compile(flash_attn_func, fullgraph=True, backend="aot_eager")(q, k, v)


def test_softmax_scale_that_float32_cannot_hold():
    # The library takes a float32: 1e-300 became 0 there, which it reads as 1 / sqrt(headdim).
    q, k, v = qkv()
    for scale in (1e-300, 1e-46, -1e-300, 1e300):
        with pytest.raises(ValueError, match="argument 'softmax_scale'.*float32"):
            flash_attn_func(q, k, v, softmax_scale=scale)
    from flashattn import array
    with pytest.raises(ValueError, match="argument 'softmax_scale'"):
        array.forward(q.numpy(), k.numpy(), v.numpy(), softmax_scale=1e-300)
    # A denormal float32 scale is a scale like any other.
    assert torch.isfinite(flash_attn_func(q, k, v, softmax_scale=1e-40)).all()


def test_softcap_below_the_normal_float32s():
    # 1e-300 became 0 in float32 (the cap silently off); a denormal cap has no float reciprocal,
    # which made the backward's gradients NaN.
    from flashattn import flash_attn_with_kvcache
    q, k, v = qkv()
    for cap in (1e-300, 1e-40, 1e300):
        with pytest.raises(ValueError, match="argument 'softcap'"):
            flash_attn_func(q, k, v, softcap=cap)
    with pytest.raises(ValueError, match="argument 'softcap'"):
        flash_attn_with_kvcache(q[:, :1], k, v, cache_seqlens=4, softcap=1e-300)
    q.requires_grad_()
    flash_attn_func(q, k, v, softcap=1.2e-38).sum().backward()
    assert torch.isfinite(q.grad).all()


def test_alibi_slopes_not_finite():
    q, k, v = qkv()
    for bad in (float("nan"), float("inf"), float("-inf")):
        slopes = torch.full((4,), 0.5)
        slopes[2] = bad
        with pytest.raises(ValueError, match="argument 'alibi_slopes': slope .* of head 2 is not finite"):
            flash_attn_func(q, k, v, alibi_slopes=slopes)


def test_kvcache_pages_of_zero_rows():
    from flashattn import flash_attn_with_kvcache
    q = torch.randn(2, 1, 2, 32)
    pages = torch.randn(4, 0, 2, 32)
    table = torch.zeros(2, 2, dtype=torch.int32)
    for lengths in (0, torch.zeros(2, dtype=torch.int32)):
        with pytest.raises(ValueError, match="argument 'k_cache': pages of 0 rows"):
            flash_attn_with_kvcache(q, pages, pages, cache_seqlens=lengths, block_table=table)


def test_q_without_a_head_dimension():
    from flashattn import flash_attn_qkvpacked_func
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'q': head dimension 0"):
        flash_attn_func(q[..., :0], k[..., :0], v[..., :0])
    with pytest.raises(ValueError, match="argument 'q': is 0-dimensional"):
        flash_attn_func(torch.tensor(1.0), k, v)
    with pytest.raises(ValueError, match="argument 'qkv': is 0-dimensional"):
        flash_attn_qkvpacked_func(torch.tensor(1.0))


def test_kv_packed_calls_without_q_name_q():
    # A kv-packed call's q of None was once taken for a qkv-packed call (the error named 'qkv').
    from flashattn import flash_attn_kvpacked_func, flash_attn_varlen_kvpacked_func
    q, k, v = qkv()
    kv = torch.stack([k, v], dim=2)
    with pytest.raises(TypeError, match="argument 'q': expected a torch.Tensor, got NoneType"):
        flash_attn_kvpacked_func(None, kv)
    rows = kv.reshape(-1, *kv.shape[2:])
    cu = cu_seqlens([16, 16])
    with pytest.raises(TypeError, match="argument 'q': expected a torch.Tensor, got NoneType"):
        flash_attn_varlen_kvpacked_func(None, rows, cu, cu, 16, 16)


def test_integer_arguments_out_of_range_or_fractional():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="argument 'window_size': is 1099511627776"):
        flash_attn_func(q, k, v, window_size=(2**40, 0))
    with pytest.raises(TypeError, match="argument 'window_size': is 1.5"):
        flash_attn_func(q, k, v, window_size=(1.5, 0))
    # Every negative side is unbounded, as in flash_attn, however far below -1.
    assert torch.equal(flash_attn_func(q, k, v, window_size=(-2**40, 0)), flash_attn_func(q, k, v, window_size=(-1, 0)))
    rows = q.reshape(-1, 4, 32)
    cu = cu_seqlens([16, 16])
    with pytest.raises(ValueError, match="argument 'max_seqlen_q': is 1099511627776"):
        flash_attn_varlen_func(rows, rows, rows, cu, cu, 2**40, 16)
    with pytest.raises(TypeError, match="argument 'max_seqlen_k': is 16.5"):
        flash_attn_varlen_func(rows, rows, rows, cu, cu, 16, 16.5)
    with pytest.raises(TypeError, match="argument 'max_seqlen_k': is True; expected an integer"):
        flash_attn_varlen_func(rows, rows, rows, cu, cu, 16, True)
    with pytest.raises(TypeError, match="argument 'window_size': is False; expected an integer"):
        flash_attn_func(q, k, v, window_size=(False, 0))


def test_strings_are_not_flags_or_numbers():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="'softmax_scale'"):
        flash_attn_func(q, k, v, softmax_scale="0.5")
    with pytest.raises(TypeError, match="'softcap'"):
        flash_attn_func(q, k, v, softcap="a")
    with pytest.raises(TypeError, match="'softcap'"):
        flash_attn_func(q, k, v, softcap=None)
    with pytest.raises(TypeError, match="'causal'"):
        flash_attn_func(q, k, v, causal="no")
    with pytest.raises(TypeError, match="'deterministic'"):
        flash_attn_func(q, k, v, deterministic="yes")
    import numpy as np

    flash_attn_func(q, k, v, causal=np.bool_(True), deterministic=1)


def test_kvcache_appends_into_rows_of_their_own():
    # Two sequences appending into one cache row (or page slot, or an expanded cache) race, and
    # one attends to the other's new keys: refused by name. Reads of shared rows stay allowed.
    from flashattn import flash_attn_with_kvcache

    q = torch.randn(2, 1, 4, 32)
    k_cache, v_cache = torch.randn(4, 16, 2, 32), torch.randn(4, 16, 2, 32)
    k, v = torch.randn(2, 1, 2, 32), torch.randn(2, 1, 2, 32)
    lengths = torch.tensor([5, 5], dtype=torch.int32)
    same_row = torch.tensor([2, 2], dtype=torch.int32)
    with pytest.raises(ValueError, match="'cache_batch_idx'.*sequences 0 and 1"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=lengths, cache_batch_idx=same_row)
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, cache_batch_idx=same_row)  # reading only
    with pytest.raises(ValueError, match="'k_cache'"):
        flash_attn_with_kvcache(q, k_cache[:1].expand(2, -1, -1, -1), v_cache[:2].clone(), k=k, v=v,
                                cache_seqlens=lengths)
    with pytest.raises(ValueError, match="'v_cache'"):
        flash_attn_with_kvcache(q, k_cache[:2], k_cache[:2], k=k, v=v, cache_seqlens=lengths)
    pages_k, pages_v = torch.randn(6, 4, 2, 32), torch.randn(6, 4, 2, 32)  # pages of 4 rows
    shared_last = torch.tensor([[0, 1], [2, 1]], dtype=torch.int32)
    with pytest.raises(ValueError, match="'block_table'.*page 1"):
        flash_attn_with_kvcache(q, pages_k, pages_v, k=k, v=v, cache_seqlens=lengths, block_table=shared_last)
    # sequence 0 appends row 5 (page 1's row 1), which sequence 1 (6 keys) holds as its key 5
    with pytest.raises(ValueError, match="'block_table'.*sequence 0 .*page 1.*sequence 1"):
        flash_attn_with_kvcache(q, pages_k, pages_v, k=k, v=v, block_table=shared_last,
                                cache_seqlens=torch.tensor([5, 6], dtype=torch.int32))
    # one table naming page 1 twice: the append lands in rows its own first entry holds
    with pytest.raises(ValueError, match="'block_table'.*its own"):
        flash_attn_with_kvcache(q, pages_k, pages_v, k=k, v=v, cache_seqlens=lengths,
                                block_table=torch.tensor([[1, 1], [2, 3]], dtype=torch.int32))
    # a full first page (a common prefix) read by both, each appending into a page of its own
    flash_attn_with_kvcache(q, pages_k.clone(), pages_v.clone(), k=k, v=v, cache_seqlens=lengths,
                            block_table=torch.tensor([[0, 1], [0, 3]], dtype=torch.int32))
    # four new rows each: sequence 0's rows 3..6 reach into page 1, where sequence 1 writes rows 0..3
    q4, k4 = torch.randn(2, 4, 4, 32), torch.randn(2, 4, 2, 32)
    with pytest.raises(ValueError, match="'block_table'"):
        flash_attn_with_kvcache(q4, pages_k, pages_v, k=k4, v=k4, cache_seqlens=torch.tensor([3, 0], dtype=torch.int32),
                                block_table=torch.tensor([[0, 1], [1, 2]], dtype=torch.int32))


def test_kvcache_rotary_tables_real_and_on_q_device():
    from flashattn import flash_attn_with_kvcache

    q, cache = torch.randn(1, 1, 2, 32), torch.randn(1, 8, 2, 32)
    cos = sin = torch.randn(8, 8)
    for name, bad in (("rotary_cos", dict(rotary_cos=cos.to(torch.complex64), rotary_sin=sin)),
                      ("rotary_sin", dict(rotary_cos=cos, rotary_sin=sin.to(torch.int32))),
                      ("rotary_cos", dict(rotary_cos=cos.to("meta"), rotary_sin=sin))):
        with pytest.raises(ValueError, match=f"'{name}'"):
            flash_attn_with_kvcache(q, cache, cache.clone(), cache_seqlens=4, **bad)
