"""Drop-in replacements for FlashAttention-3's functional API (its `flash_attn_interface` module).

A program written against FlashAttention-3 (`import flash_attn_interface`, hopper/ of
flash-attention) runs on flashattn after changing only that import:

    import flashattn.fa3_interface as flash_attn_interface

Names, argument order, defaults, shapes and return conventions follow FlashAttention-3, which
differ from flash_attn 2.x's (flashattn.flash_attn_interface): no dropout_p, softmax_scale fourth,
`return_attn_probs=True` returns (out, softmax_lse), varlen takes seqused_q / seqused_k in
position, the KV cache's pages are `page_table`, and `num_splits` defaults to 1 (keys never cut:
each output's bits independent of how the batch is cut; 0 lets flashattn choose, which is faster
where its split tail or key pieces pay).

Differences from FlashAttention-3:
  * attention_chunk runs as the library's varlen form, one sub-sequence a (sequence, chunk)
    (flashattn.attention_chunk), laid out on the host: cu_seqlens and seqused on a GPU are read
    back (one wait a call) and it is refused under CUDA graph capture and in flash_attn_with_kvcache;
  * qv (a second query part), FP8 (q_descale / k_descale / v_descale), sm_margin != 0,
    scheduler_metadata, and in flash_attn_with_kvcache attention_chunk, rotary_seqlens, appended
    keys of variable length (cu_seqlens_k_new with k, v) and, with variable-length queries
    (cu_seqlens_q), appending, rotary tables, cache_batch_idx and cache_leftpad raise
    NotImplementedError naming the argument; get_scheduler_metadata raises it too (flashattn
    schedules inside each call);
  * pack_gqa is taken as FlashAttention-3 documents it, a hint for speed alone: flashattn's rules
    decide where query heads are packed, with the same result either way;
  * v's head dimension must be q's; head dimensions are multiples of 8 up to 256;
  * flash_attn_combine is PyTorch operations (differentiable, any device), not a fused kernel,
    and a row whose pieces all have lse -inf gets output 0 and lse -inf;
  * with return_softmax_lse, flash_attn_with_kvcache returns (out, softmax_lse) only (no split
    accumulators);
  * tensors may live on the CPU (CPU backend) as well as on CUDA devices.
The backward passes are flashattn's, deterministic where asked (deterministic=True).
"""

from typing import Optional

import torch
from torch import Tensor

from flashattn import _ext, ops
from flashattn.attention_chunk import chunked_attention
from flashattn.kvcache import flash_attn_with_kvcache as _flash_attn2_with_kvcache
from flashattn.kvcache_varlen import varlen_queries_with_kvcache

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "flash_attn_combine",
    "get_scheduler_metadata",
]

_FP8 = "FP8 descaling; flashattn has no FP8 kernel yet, so inputs are bf16 / fp16 / fp32 and this is None"


def _refuse_unless(name: str, value, accepted, what: str) -> None:
    """NotImplementedError naming `name` unless value is `accepted` (None, or a default)."""
    if value is accepted or (accepted is not None and value is not None and not isinstance(value, Tensor)
                             and value == accepted):
        return
    raise NotImplementedError(f"argument '{name}': {what} (got {value!r})")


def _refuse_fa3_only(qv=None, q_descale=None, k_descale=None, v_descale=None, attention_chunk=0, sm_margin=0,
                     pack_gqa=None) -> None:
    """The FlashAttention-3 arguments flashattn does not implement, each refused by name (the
    attention calls pass attention_chunk 0 here and take it themselves); pack_gqa, a hint for
    speed, only type-checked."""
    _refuse_unless("qv", qv, None, "a second query part (scores q.k + qv.v) is not implemented; pass None")
    for name, value in (("q_descale", q_descale), ("k_descale", k_descale), ("v_descale", v_descale)):
        _refuse_unless(name, value, None, _FP8)
    _refuse_unless("attention_chunk", _ext.integer("attention_chunk", attention_chunk), 0,
                   "chunked attention is not implemented against a KV cache; pass 0")
    _refuse_unless("sm_margin", _ext.integer("sm_margin", sm_margin), 0,
                   "SMs left free for other kernels are not implemented (flashattn's persistent kernels "
                   "size their grids to every SM); pass 0")
    if pack_gqa is not None:
        _ext.flag("pack_gqa", pack_gqa)


def _splits(num_splits) -> int:
    n = _ext.integer("num_splits", num_splits)
    if not 0 <= n <= _ext.max_num_splits:
        raise ValueError(f"argument 'num_splits': is {n}; expected 0 (flashattn chooses) to {_ext.max_num_splits}")
    return n


def _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
               softmax_scale, causal, window_size, softcap, num_splits, deterministic, return_attn_probs,
               attention_chunk=0):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
    left, right = _ext.flash_attn_window(window_size)
    scale = _ext.softmax_scale(softmax_scale, _ext.head_dim("q", q))
    chunk = _ext.integer("attention_chunk", attention_chunk)
    if chunk < 0:
        raise ValueError(f"argument 'attention_chunk': is {chunk}; expected 0 (no chunks) or a chunk's keys")
    causal, softcap = _ext.flag("causal", causal), _ext.softcap(softcap)
    deterministic, splits = _ext.flag("deterministic", deterministic), _splits(num_splits)
    if chunk > 0:
        out, lse = chunked_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, chunk, scale, causal,
                                     (left, right), softcap, deterministic, splits)
    else:
        out, lse = ops.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, _ext.integer("max_seqlen_q", max_seqlen_q),
                                 _ext.integer("max_seqlen_k", max_seqlen_k), scale, causal, left, right, softcap,
                                 None, deterministic, seqused_q, seqused_k, splits)
    return (out, lse) if _ext.flag("return_attn_probs", return_attn_probs) else out


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    """Attention over fixed-length batches, as FlashAttention-3's flash_attn_func.

    Arguments:
        q: (batch_size, seqlen_q, nheads, headdim)
        k, v: (batch_size, seqlen_k, nheads_k, headdim); nheads a multiple of nheads_k (MQA / GQA).
        softmax_scale: scaling of QK^T before the softmax; default 1 / sqrt(headdim).
        causal: causal mask aligned to the bottom-right corner.
        window_size: (left, right); query i sees keys in
            [i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right]; negative: unbounded.
        softcap: > 0 replaces scores s by softcap * tanh(s / softcap).
        num_splits: 1 (default) never cuts a query tile's keys; 0 lets flashattn choose; more
            sets the pieces where flashattn's kernels take them (flashattn.h, num_splits).
        pack_gqa: a hint, as in FlashAttention-3; flashattn's rules decide.
        deterministic: bitwise reproducible backward pass.
        return_attn_probs: also return softmax_lse (batch_size, nheads, seqlen_q).
        attention_chunk: > 0 lets query i see key j only where j // attention_chunk equals
            (i + seqlen_k - seqlen_q) // attention_chunk, besides the masks above.
        qv, q_descale, k_descale, v_descale, sm_margin: must stay at their defaults (not
            implemented).
    Return:
        out (batch_size, seqlen_q, nheads, headdim), or (out, softmax_lse).
    """
    _refuse_fa3_only(qv, q_descale, k_descale, v_descale, 0, sm_margin, pack_gqa)
    return _attention(q, k, v, None, None, 0, 0, None, None, softmax_scale, causal, window_size, softcap,
                      num_splits, deterministic, return_attn_probs, attention_chunk)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None,
                           k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                           num_splits=1, pack_gqa=None, deterministic=False, sm_margin=0,
                           return_attn_probs=False):
    """Attention over variable-length batches, as FlashAttention-3's flash_attn_varlen_func.

    Arguments:
        q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim).
        cu_seqlens_q, cu_seqlens_k: (batch_size + 1,) int32 prefix sums of the sequence lengths.
        max_seqlen_q, max_seqlen_k: the longest query / key sequence.
        seqused_q, seqused_k: optional (batch_size,) int32: sequence b uses only its first
            seqused_q[b] query rows and seqused_k[b] key rows, and the masks align to these
            lengths; output rows past seqused_q are 0 (softmax_lse -inf), as are the gradients
            of rows not used. (With cu_seqlens None, q, k, v are fixed-length 4-D batches whose
            sequences use these many rows.)
        Other arguments as flash_attn_func; masks are aligned per sequence.
    Return:
        out (total_q, nheads, headdim), or (out, softmax_lse (nheads, total_q)).
    """
    _refuse_fa3_only(qv, q_descale, k_descale, v_descale, 0, sm_margin, pack_gqa)
    return _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, 0 if max_seqlen_q is None else max_seqlen_q,
                      0 if max_seqlen_k is None else max_seqlen_k, seqused_q, seqused_k, softmax_scale, causal,
                      window_size, softcap, num_splits, deterministic, return_attn_probs, attention_chunk)


def flash_attn_qkvpacked_func(qkv, softmax_scale=None, causal=False, q_descale=None, k_descale=None,
                              v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                              deterministic=False, num_heads_q=None, sm_margin=0, return_attn_probs=False):
    """flash_attn_func on q, k, v stacked in one tensor, as FlashAttention-3's.

    qkv: (batch_size, seqlen, 3, nheads, headdim), or (batch_size, seqlen, nheads_q + 2 * nheads_k,
    headdim) with num_heads_q given (MQA / GQA: q's heads, then k's, then v's). The gradient
    comes back as one tensor of qkv's shape; the 5-D form's backward writes it in place, with no
    concatenation (with attention_chunk, autograd assembles it from the three views' gradients).
    """
    _refuse_fa3_only(None, q_descale, k_descale, v_descale, 0, sm_margin)
    if not isinstance(qkv, Tensor):
        raise TypeError(f"argument 'qkv': expected a torch.Tensor, got {type(qkv).__name__}")
    if qkv.dim() == 5 and qkv.shape[2] == 3 and _ext.integer("attention_chunk", attention_chunk) != 0:
        q, k, v = qkv.unbind(2)
        return _attention(q, k, v, None, None, 0, 0, None, None, softmax_scale, causal, window_size, softcap, 1,
                          deterministic, return_attn_probs, attention_chunk)
    if qkv.dim() == 5:
        if qkv.shape[2] != 3:
            raise ValueError(f"argument 'qkv': has shape {tuple(qkv.shape)}; expected (batch, seqlen, 3, nheads, "
                             "headdim)")
        left, right = _ext.flash_attn_window(window_size)
        scale = _ext.softmax_scale(softmax_scale, _ext.head_dim("qkv", qkv))
        out, lse = ops.attention_packed(qkv, None, None, None, 0, 0, scale, _ext.flag("causal", causal), left, right,
                                        _ext.softcap(softcap), None, _ext.flag("deterministic", deterministic), 1)
        return (out, lse) if _ext.flag("return_attn_probs", return_attn_probs) else out
    if qkv.dim() != 4:
        raise ValueError(f"argument 'qkv': has {qkv.dim()} dimensions; expected (batch, seqlen, 3, nheads, headdim) "
                         "or (batch, seqlen, nheads_q + 2 * nheads_k, headdim)")
    if num_heads_q is None:
        raise ValueError("argument 'num_heads_q': is None; the 4-D qkv (batch, seqlen, nheads_q + 2 * nheads_k, "
                         "headdim) needs it")
    heads_q, heads = _ext.integer("num_heads_q", num_heads_q), qkv.shape[2]
    if not 0 < heads_q < heads or (heads - heads_q) % 2 != 0:
        raise ValueError(f"argument 'num_heads_q': is {heads_q}; qkv's {heads} heads must be num_heads_q + 2 * "
                         "nheads_k with nheads_k >= 1")
    heads_k = (heads - heads_q) // 2
    q, k, v = qkv.split([heads_q, heads_k, heads_k], dim=2)
    return _attention(q, k, v, None, None, 0, 0, None, None, softmax_scale, causal, window_size, softcap, 1,
                      deterministic, return_attn_probs, attention_chunk)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False):
    """Attention of q against a KV cache, as FlashAttention-3's flash_attn_with_kvcache.

    q (batch, seqlen_q, nheads, headdim): flashattn.kvcache's call (which documents the cache,
    append, rotary, left-padding and paging arguments) with page_table for its block_table.
    q (total_q, nheads, headdim) with cu_seqlens_q (batch + 1,) int32: variable-length queries
    against the first cache_seqlens[b] rows of each sequence's cache, contiguous or paged
    (flashattn.kvcache_varlen); appending k / v, rotary tables, cache_batch_idx and cache_leftpad
    are not taken there (refused by name: write the new rows into the cache first), and
    max_seqlen_q is needed under CUDA graph capture only. cu_seqlens_k_new is read only with k and
    v, as in FlashAttention-3, where it is refused (appended keys of variable length are not
    implemented); rotary_seqlens and scheduler_metadata must be None. No backward pass (as in
    FlashAttention-3).
    Return: out (q's shape), or (out, softmax_lse: (batch, nheads, seqlen_q), or (nheads, total_q)
    with cu_seqlens_q) with return_softmax_lse.
    """
    _refuse_fa3_only(qv, q_descale, k_descale, v_descale, attention_chunk, sm_margin, pack_gqa)
    appends = k is not None or v is not None
    for name, value, what in (
            ("cu_seqlens_k_new", cu_seqlens_k_new if appends else None,
             "appended keys of variable length are not implemented; pass k and v as (batch, seqlen_new, nheads_k, "
             "headdim) and None"),
            ("rotary_seqlens", rotary_seqlens, "rotary positions other than the cache's rows are not "
                                               "implemented; pass None"),
            ("scheduler_metadata", scheduler_metadata, "flashattn schedules inside each call; pass None")):
        _refuse_unless(name, value, None, what)
    lse_too = _ext.flag("return_softmax_lse", return_softmax_lse)
    if cu_seqlens_q is None:
        return _flash_attn2_with_kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                                         cache_batch_idx, cache_leftpad, page_table, softmax_scale, causal,
                                         window_size, softcap, rotary_interleaved, None, num_splits, lse_too)
    for name, value in (("k", k), ("v", v), ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin),
                        ("cache_batch_idx", cache_batch_idx), ("cache_leftpad", cache_leftpad)):
        _refuse_unless(name, value, None, "not implemented with cu_seqlens_q (variable-length queries); write new "
                                          "rows into the cache first (rotated), and pass None")
    if not isinstance(q, Tensor):
        raise TypeError(f"argument 'q': expected a torch.Tensor, got {type(q).__name__}")
    out, lse = varlen_queries_with_kvcache(
        q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, cache_seqlens, page_table,
        _ext.softmax_scale(softmax_scale, _ext.head_dim("q", q)), _ext.flag("causal", causal),
        _ext.flash_attn_window(window_size), _ext.softcap(softcap), _splits(num_splits))
    return (out, lse) if lse_too else out


def flash_attn_combine(out_partial: Tensor, lse_partial: Tensor, out: Optional[Tensor] = None,
                       out_dtype: Optional[torch.dtype] = None):
    """Merges attention computed over disjoint pieces of the keys, as FlashAttention-3's.

    out_partial: float32 (num_splits, batch_size, seqlen, nheads, headdim), piece s's normalised
    output (any layout whose last dimension is the head dimension: (num_splits, total_q, nheads,
    headdim) too); lse_partial: float32 out_partial's shape without the last dimension, piece s's
    natural-log logsumexp. With L = log(sum_s exp(lse_s)):
        out = sum_s exp(lse_s - L) * out_s,  softmax_lse = L,
    in float32, then out cast to out_dtype (float32, float16 or bfloat16; default out_partial's).
    `out`, where given, receives the result (its shape, dtype out_dtype) and is returned.
    A piece whose lse is -inf (no key) is not read; a row whose pieces all have lse -inf gets out 0
    and softmax_lse -inf.
    Return: (out (batch_size, seqlen, nheads, headdim), softmax_lse (batch_size, seqlen, nheads)).
    """
    for name, t in (("out_partial", out_partial), ("lse_partial", lse_partial)):
        if not isinstance(t, Tensor):
            raise TypeError(f"argument '{name}': expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"argument '{name}': is {t.dtype}; expected torch.float32 (the pieces' accumulators)")
    if out_partial.dim() < 2:
        raise ValueError(f"argument 'out_partial': has shape {tuple(out_partial.shape)}; expected (num_splits, ..., "
                         "headdim)")
    if lse_partial.shape != out_partial.shape[:-1]:
        raise ValueError(f"argument 'lse_partial': has shape {tuple(lse_partial.shape)}; expected out_partial's "
                         f"without its last dimension, {tuple(out_partial.shape[:-1])}")
    if lse_partial.device != out_partial.device:
        raise ValueError(f"argument 'lse_partial': is on {lse_partial.device}; expected out_partial's device "
                         f"{out_partial.device}")
    out_type = out_partial.dtype if out_dtype is None else out_dtype
    if out_type not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"argument 'out_dtype': is {out_dtype!r}; expected torch.float32, torch.float16 or "
                        "torch.bfloat16")
    if out_partial.shape[0] == 0:
        raise ValueError(f"argument 'out_partial': has shape {tuple(out_partial.shape)}; expected at least one "
                         "piece (num_splits >= 1)")
    # Weights against the largest lse of each row; a row of -inf throughout takes 0 as its largest,
    # so that every weight is exp(-inf) = 0 and no -inf - -inf (NaN) is formed.
    top = lse_partial.amax(dim=0)
    top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    weights = torch.exp(lse_partial - top)
    total = weights.sum(dim=0)
    seen = total > 0
    lse = torch.where(seen, torch.log(torch.where(seen, total, torch.ones_like(total))) + top,
                      torch.full_like(total, float("-inf")))
    weights = weights / torch.where(seen, total, torch.ones_like(total))
    # A piece of weight 0 (no key) is not read, as FlashAttention-3's combine kernel skips it: its
    # output may be anything (a buffer never written), and 0 x NaN would be NaN.
    pieces = torch.where((weights > 0).unsqueeze(-1), out_partial, torch.zeros((), dtype=out_partial.dtype,
                                                                                 device=out_partial.device))
    merged = (weights.unsqueeze(-1) * pieces).sum(dim=0).to(out_type)
    if out is not None:
        if not isinstance(out, Tensor):
            raise TypeError(f"argument 'out': expected a torch.Tensor, got {type(out).__name__}")
        if out.shape != merged.shape or out.dtype != out_type or out.device != merged.device:
            raise ValueError(f"argument 'out': is {tuple(out.shape)} {out.dtype} on {out.device}; expected "
                             f"{tuple(merged.shape)} {out_type} on {merged.device}")
        out.copy_(merged)
        merged = out
    return merged, lse


def get_scheduler_metadata(*args, **kwargs):
    """FlashAttention-3's precomputed schedule: flashattn has none (each call schedules itself), so
    this raises NotImplementedError; pass scheduler_metadata=None instead."""
    raise NotImplementedError("get_scheduler_metadata: flashattn schedules inside each call and takes no "
                              "precomputed schedule; pass scheduler_metadata=None (the default)")
