"""Drop-in replacements for flash_attn 2.x's functional API (flash_attn.flash_attn_interface).

Names, argument order, defaults, tensor shapes and return conventions follow flash_attn 2.x, so a
program written for flash_attn runs after changing only its import. Differences:
  * dropout_p > 0 raises ValueError (no flashattn kernel implements dropout yet);
  * return_attn_probs=True returns (out, softmax_lse, None): the probabilities are never formed;
  * tensors may live on the CPU (CPU backend) as well as on CUDA devices;
  * head dimensions must be multiples of 8 up to 256; nothing is padded behind the caller's back.

Masks follow flash_attn: causal and sliding windows are aligned to the bottom-right corner of the
score matrix, and a query row that sees no key gets output 0.
"""

import torch
from torch import Tensor

from flashattn import _ext, ops
from flashattn.kvcache import flash_attn_with_kvcache  # noqa: F401  (flash_attn exports it here too)
from flashattn.paged import paged_varlen_attention

__all__ = [
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
]


def _check_dropout(dropout_p: float) -> None:
    if dropout_p != 0.0:
        raise ValueError(
            f"argument 'dropout_p': is {dropout_p}; flashattn has no dropout kernel yet, so only "
            "dropout_p=0.0 is supported (use 0.0 at evaluation time or apply dropout elsewhere)")


def _check_tensors(**tensors) -> None:
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"argument '{name}': expected a torch.Tensor, got {type(t).__name__}")


def _scalars(head_name, heads, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size, softcap):
    """The scalar arguments every attention call takes, as the library takes them, each refused by
    name where it cannot be: (max_seqlen_q, max_seqlen_k, scale, causal, (left, right), softcap);
    the scale's default from the head dimension of `heads` (argument head_name)."""
    window = _ext.flash_attn_window(window_size)
    scale = _ext.softmax_scale(softmax_scale, _ext.head_dim(head_name, heads))
    return (_ext.integer("max_seqlen_q", max_seqlen_q), _ext.integer("max_seqlen_k", max_seqlen_k), scale,
            _ext.flag("causal", causal), window, _ext.softcap(softcap))


def _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
               softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
               return_attn_probs, seqused_q=None, seqused_k=None):
    _check_dropout(dropout_p)
    _check_tensors(q=q, k=k, v=v)
    max_q, max_k, scale, causal, (left, right), cap = _scalars("q", q, max_seqlen_q, max_seqlen_k, softmax_scale,
                                                                causal, window_size, softcap)
    out, lse = ops.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_q, max_k, scale, causal, left, right, cap,
                             alibi_slopes, _ext.flag("deterministic", deterministic), seqused_q, seqused_k)
    return (out, lse, None) if return_attn_probs else out


# The q of the qkv-packed calls (q is then a view of packed): a kv-packed call's q of None is
# refused as its own argument, not taken for a qkv-packed call.
_IN_PACKED = object()


def _packed_attention(packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                      softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                      return_attn_probs):
    """q, k, v as views of packed (qkv with q _IN_PACKED, or kv with q); the gradient comes back as
    one packed tensor."""
    _check_dropout(dropout_p)
    if q is _IN_PACKED:
        q = None
        _check_tensors(qkv=packed)
    else:
        _check_tensors(q=q, kv=packed)
    max_q, max_k, scale, causal, (left, right), cap = _scalars("qkv" if q is None else "kv", packed, max_seqlen_q,
                                                                max_seqlen_k, softmax_scale, causal, window_size,
                                                                softcap)
    out, lse = ops.attention_packed(packed, q, cu_seqlens_q, cu_seqlens_k, max_q, max_k, scale, causal, left, right,
                                    cap, alibi_slopes, _ext.flag("deterministic", deterministic))
    return (out, lse, None) if return_attn_probs else out


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                    softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """Attention over fixed-length batches.

    Arguments:
        q: (batch_size, seqlen_q, nheads, headdim)
        k, v: (batch_size, seqlen_k, nheads_k, headdim); nheads must be a multiple of nheads_k
            (MQA/GQA: query head h reads key/value head h // (nheads // nheads_k)).
        dropout_p: must be 0.0.
        softmax_scale: scaling of QK^T before the softmax; default 1 / sqrt(headdim).
        causal: causal mask aligned to the bottom-right corner.
        window_size: (left, right); query i sees keys in
            [i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right]; -1 is unbounded.
        softcap: > 0 replaces scores s by softcap * tanh(s / softcap).
        alibi_slopes: (nheads,) or (batch_size, nheads) float32; adds
            -slope * |i + seqlen_k - seqlen_q - j| to the score of query i and key j.
        deterministic: bitwise reproducible backward pass.
        return_attn_probs: also return softmax_lse (batch_size, nheads, seqlen_q) and None.
    Return:
        out: (batch_size, seqlen_q, nheads, headdim), or (out, softmax_lse, None).
    """
    return _attention(q, k, v, None, None, 0, 0, dropout_p, softmax_scale, causal, window_size,
                      softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """flash_attn_func with qkv: (batch_size, seqlen, 3, nheads, headdim) stacked.

    The three slices are passed as strided views; nothing is copied, and the backward pass writes
    dq, dk, dv straight into one (batch_size, seqlen, 3, nheads, headdim) gradient of qkv.
    Return as flash_attn_func.
    """
    return _packed_attention(qkv, _IN_PACKED, None, None, 0, 0, dropout_p, softmax_scale, causal, window_size,
                             softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """flash_attn_func with kv: (batch_size, seqlen_k, 2, nheads_k, headdim) stacked; dk and dv
    are written into one gradient of kv's shape."""
    return _packed_attention(kv, q, None, None, 0, 0, dropout_p, softmax_scale, causal, window_size,
                             softcap, alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1),
                           softcap=0.0, alibi_slopes=None, deterministic=False,
                           return_attn_probs=False, block_table=None, *, seqused_q=None, seqused_k=None):
    """Attention over variable-length batches packed along the token axis.

    Arguments:
        q: (total_q, nheads, headdim); k, v: (total_k, nheads_k, headdim).
        cu_seqlens_q, cu_seqlens_k: (batch_size + 1,) int32 prefix sums of the sequence lengths.
        max_seqlen_q, max_seqlen_k: the longest query / key sequence in the batch.
        block_table: optional (batch_size, max_blocks) int32: k and v are then pages
            (num_pages, page_size, nheads_k, headdim) and sequence b's keys are the first
            cu_seqlens_k[b + 1] - cu_seqlens_k[b] rows of the pages its row names (forward only).
        seqused_q, seqused_k (keyword only, as in FlashAttention-3): optional (batch_size,) int32;
            sequence b then uses only its first seqused_q[b] query rows and seqused_k[b] key rows
            (at most its cu_seqlens span), and the masks align to these lengths. Output rows past
            seqused_q are 0 (softmax_lse -inf), and so are the gradients of rows not used.
        Other arguments as flash_attn_func; masks are aligned per sequence.
    Return:
        out: (total_q, nheads, headdim), or (out, softmax_lse (nheads, total_q), None).
    """
    if block_table is not None:
        _check_dropout(dropout_p)
        _check_tensors(q=q, k=k, v=v, block_table=block_table)
        scalars = _scalars("q", q, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size, softcap)
        out, lse = paged_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, *scalars, alibi_slopes, seqused_q,
                                          seqused_k, block_table)
        return (out, lse, None) if return_attn_probs else out
    return _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                      softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                      return_attn_probs, seqused_q, seqused_k)


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, softmax_scale=None,
                                     causal=False, window_size=(-1, -1), softcap=0.0,
                                     alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """flash_attn_varlen_func with qkv: (total, 3, nheads, headdim) and one cu_seqlens; the
    gradient is one tensor of qkv's shape."""
    return _packed_attention(qkv, _IN_PACKED, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, dropout_p,
                             softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                             return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    dropout_p=0.0, softmax_scale=None, causal=False,
                                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                                    deterministic=False, return_attn_probs=False):
    """flash_attn_varlen_func with kv: (total_k, 2, nheads_k, headdim) stacked; dk and dv are
    written into one gradient of kv's shape."""
    return _packed_attention(kv, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                             softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
                             return_attn_probs)
