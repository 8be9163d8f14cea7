"""flashattn kernels for the aten flash-attention operators that F.scaled_dot_product_attention uses.

Each function has the schema of the aten operator it replaces (with the dispatch key set first).
Inputs flashattn cannot take are handed to the kernel PyTorch had registered before; `stats`
counts both outcomes so that callers (and tests) can see which one ran.

Layouts: the SDPA operators take (batch, nheads, seqlen, headdim); flashattn takes
(batch, seqlen, nheads, headdim), so the views are transposed, never copied. Output buffers are
allocated exactly as aten's meta functions describe, so compiled graphs see the strides they expect.
"""

import logging
from collections import Counter
from typing import Callable, Dict, Optional

import torch
from torch import Tensor

from flashattn import _ext
from flashattn._torch_util import kernel_ready, launch_options, on_device, output_dlpack

log = logging.getLogger(__name__)

stats: Counter = Counter()

# aten operator name -> the kernel that was registered for it before activation, per dispatch key.
originals: Dict[str, Callable] = {}

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class _Unsupported(Exception):
    pass


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise _Unsupported(why)


def _check_common(query: Tensor, key: Tensor, value: Tensor, dropout_p: float) -> None:
    _require(dropout_p == 0.0, "dropout")
    _require(query.dtype in _DTYPES and key.dtype == query.dtype and value.dtype == query.dtype, "dtype")
    head_dim = query.shape[-1]
    _require(head_dim % 8 == 0 and 8 <= head_dim <= 256 and value.shape[-1] == head_dim, "head dim")
    _require(query.device == key.device == value.device, "devices")
    _require(not query.is_cuda or _ext.cuda_available(), "no CUDA backend in this build")


def _run(op_name: str, keyset, impl: Callable, args, kwargs):
    """Runs flashattn's impl, or the original kernel when the inputs are outside what it takes."""
    try:
        result = impl(*args, **kwargs)
    except (_Unsupported, NotImplementedError, ValueError, TypeError) as why:
        log.debug("flashattn: %s falls back to PyTorch's kernel: %s", op_name, why)
        stats[op_name + ":fallback"] += 1
        return originals[op_name].call_boxed(keyset, *args, **kwargs)
    stats[op_name] += 1
    return result


def _empty_like_last_contiguous(t: Tensor) -> Tensor:
    out = torch.empty_like(t)
    _require(out.stride(-1) == 1, "output layout")
    return out


def _bshd(t: Tensor) -> Tensor:
    return t.transpose(1, 2)


def _forward(q, k, v, out, lse, *, cu_q=None, cu_k=None, max_q=0, max_k=0, scale=None, causal=False,
             window=(-1, -1), alibi=None):
    with on_device(q):
        _ext.forward(kernel_ready(q), kernel_ready(k), kernel_ready(v), output_dlpack(out), output_dlpack(lse),
                     cu_seqlens_q=kernel_ready(cu_q), cu_seqlens_k=kernel_ready(cu_k), max_seqlen_q=max_q,
                     max_seqlen_k=max_k,
                     softmax_scale=0.0 if scale is None else _ext.softmax_scale(scale, q.shape[-1]),
                     causal=causal, window=window, alibi_slopes=kernel_ready(alibi), **launch_options(q))


def _backward(dout, q, k, v, out, lse, dq, dk, dv, *, cu_q=None, cu_k=None, max_q=0, max_k=0,
              scale=None, causal=False, window=(-1, -1)):
    with on_device(q):
        _ext.backward(kernel_ready(dout), kernel_ready(q), kernel_ready(k), kernel_ready(v), kernel_ready(out),
                      kernel_ready(lse), output_dlpack(dq), output_dlpack(dk), output_dlpack(dv),
                      cu_seqlens_q=kernel_ready(cu_q), cu_seqlens_k=kernel_ready(cu_k), max_seqlen_q=max_q,
                      max_seqlen_k=max_k,
                      softmax_scale=0.0 if scale is None else _ext.softmax_scale(scale, q.shape[-1]),
                      causal=causal, window=window,
                      deterministic=torch.are_deterministic_algorithms_enabled(), **launch_options(q))


def _window(left: Optional[int], right: Optional[int]):
    # None or any negative side is unbounded, as in the flash kernels aten wraps.
    return (-1 if left is None else max(int(left), -1), -1 if right is None else max(int(right), -1))


def _rng_placeholders(device):
    # Without dropout there is no random state; aten's contract still returns these tensors.
    return (torch.zeros((2,), dtype=torch.uint64, device=device),
            torch.zeros((), dtype=torch.uint64, device=device))


# ---- aten::_scaled_dot_product_flash_attention (CUDA, (B, H, S, D)) ---------------------------------

def _sdpa_flash_forward(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
                        scale=None):
    _check_common(query, key, value, dropout_p)
    _require(not return_debug_mask, "debug mask")
    out = _empty_like_last_contiguous(query)
    batch, nheads, seqlen_q, _ = query.shape
    lse = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32, device=query.device)
    _forward(_bshd(query), _bshd(key), _bshd(value), _bshd(out), lse, scale=scale, causal=is_causal)
    seed, offset = _rng_placeholders(query.device)
    debug_mask = torch.empty(0, dtype=query.dtype, device=query.device)
    return out, lse, None, None, seqlen_q, key.shape[2], seed, offset, debug_mask


def sdpa_flash_forward(keyset, *args, **kwargs):
    return _run("_scaled_dot_product_flash_attention", keyset, _sdpa_flash_forward, args, kwargs)


def _sdpa_flash_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                         dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    _check_common(query, key, value, dropout_p)
    dq, dk, dv = (_empty_like_last_contiguous(t) for t in (query, key, value))
    _backward(_bshd(grad_out), _bshd(query), _bshd(key), _bshd(value), _bshd(out), logsumexp,
              _bshd(dq), _bshd(dk), _bshd(dv), scale=scale, causal=is_causal)
    return dq, dk, dv


def sdpa_flash_backward(keyset, *args, **kwargs):
    return _run("_scaled_dot_product_flash_attention_backward", keyset, _sdpa_flash_backward, args, kwargs)


# ---- aten::_flash_attention_forward/backward (CUDA, (B, S, H, D) or varlen (T, H, D)) ---------------

def _flash_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                   return_debug_mask, *, scale=None, window_size_left=None, window_size_right=None,
                   seqused_k=None, alibi_slopes=None):
    _check_common(query, key, value, dropout_p)
    _require(not return_debug_mask, "debug mask")
    _require(seqused_k is None, "seqused_k")
    out = _empty_like_last_contiguous(query)
    varlen = cum_seq_q is not None
    lse_shape = (query.shape[1], query.shape[0]) if varlen else (query.shape[0], query.shape[2], query.shape[1])
    lse = torch.empty(lse_shape, dtype=torch.float32, device=query.device)
    _forward(query, key, value, out, lse, cu_q=cum_seq_q, cu_k=cum_seq_k,
             max_q=int(max_q) if varlen else 0, max_k=int(max_k) if varlen else 0, scale=scale,
             causal=is_causal, window=_window(window_size_left, window_size_right), alibi=alibi_slopes)
    seed, offset = _rng_placeholders(query.device)
    return out, lse, seed, offset, torch.empty(0, dtype=query.dtype, device=query.device)


def flash_forward(keyset, *args, **kwargs):
    return _run("_flash_attention_forward", keyset, _flash_forward, args, kwargs)


def _flash_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                    dropout_p, is_causal, rng_state, unused, *, scale=None, window_size_left=None,
                    window_size_right=None):
    _check_common(query, key, value, dropout_p)
    varlen = cum_seq_q is not None and cum_seq_q.numel() > 0
    dq, dk, dv = (_empty_like_last_contiguous(t) for t in (query, key, value))
    _backward(grad_out, query, key, value, out, logsumexp, dq, dk, dv,
              cu_q=cum_seq_q if varlen else None, cu_k=cum_seq_k if varlen else None,
              max_q=int(max_q) if varlen else 0, max_k=int(max_k) if varlen else 0, scale=scale,
              causal=is_causal, window=_window(window_size_left, window_size_right))
    return dq, dk, dv


def flash_backward(keyset, *args, **kwargs):
    return _run("_flash_attention_backward", keyset, _flash_backward, args, kwargs)


# ---- aten::_scaled_dot_product_flash_attention_for_cpu[_backward] (CPU, (B, H, S, D)) ----------------

def _check_cpu(query, key, is_causal, attn_mask):
    _require(attn_mask is None, "attn_mask")
    # SDPA's is_causal is aligned top-left; flashattn aligns bottom-right. They agree when square.
    _require(not is_causal or query.shape[2] == key.shape[2], "causal with seqlen_q != seqlen_k")


def _cpu_forward(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check_common(query, key, value, dropout_p)
    _check_cpu(query, key, is_causal, attn_mask)
    out = _empty_like_last_contiguous(query)
    batch, nheads, seqlen_q, _ = query.shape
    lse = torch.empty((batch, nheads, seqlen_q), dtype=torch.float32)
    _forward(_bshd(query), _bshd(key), _bshd(value), _bshd(out), lse, scale=scale, causal=is_causal)
    # aten's CPU kernel stores logsumexp as (B, S, H) memory; match it for compiled graphs.
    lse_out = torch.empty((batch, seqlen_q, nheads), dtype=torch.float32).transpose(1, 2)
    return out, lse_out.copy_(lse)


def cpu_forward(keyset, *args, **kwargs):
    return _run("_scaled_dot_product_flash_attention_for_cpu", keyset, _cpu_forward, args, kwargs)


def _cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                  scale=None):
    _check_common(query, key, value, dropout_p)
    _check_cpu(query, key, is_causal, attn_mask)
    dq, dk, dv = (torch.empty_permuted(t.shape, (0, 2, 1, 3), dtype=t.dtype) for t in (query, key, value))
    _backward(_bshd(grad_out), _bshd(query), _bshd(key), _bshd(value), _bshd(out), logsumexp,
              _bshd(dq), _bshd(dk), _bshd(dv), scale=scale, causal=is_causal)
    return dq, dk, dv


def cpu_backward(keyset, *args, **kwargs):
    return _run("_scaled_dot_product_flash_attention_for_cpu_backward", keyset, _cpu_backward, args, kwargs)


# dispatch key -> {aten operator: flashattn kernel}
KERNELS = {
    "CUDA": {
        "_scaled_dot_product_flash_attention": sdpa_flash_forward,
        "_scaled_dot_product_flash_attention_backward": sdpa_flash_backward,
        "_flash_attention_forward": flash_forward,
        "_flash_attention_backward": flash_backward,
    },
    "CPU": {
        "_scaled_dot_product_flash_attention_for_cpu": cpu_forward,
        "_scaled_dot_product_flash_attention_for_cpu_backward": cpu_backward,
    },
}
