"""The torch.library custom ops every torch entry point is built on.

``flashattn::fwd`` and ``flashattn::bwd`` cover fixed-length (4-D) and variable-length (3-D with
cu_seqlens) batches. ``flashattn::fwd_packed`` / ``flashattn::bwd_packed`` are the same attention
for q, k, v stacked along dimension -3 of one tensor (qkv, or q and kv): their backward writes
dq, dk, dv straight into views of one packed gradient, so no gradient is concatenated afterwards.
Each op has a fake implementation, so torch.compile traces through them with fullgraph=True, and
the forward ops have a registered backward. Outputs are allocated here, in torch, and the C++
library writes into them on the caller's current CUDA stream.
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd import forward_ad

from flashattn import _ext
from flashattn._torch_util import kernel_ready, launch_options, on_device, output_dlpack

__all__ = ["fwd", "bwd", "fwd_packed", "bwd_packed", "attention", "attention_packed", "lse_shape"]


def lse_shape(q: Tensor, varlen: bool) -> Tuple[int, ...]:
    """flash_attn's softmax_lse layout: (batch, nheads, seqlen) or (nheads, total_q) for varlen."""
    if varlen:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


@torch.library.custom_op("flashattn::fwd", mutates_args=())
def fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: Optional[Tensor],
    deterministic: bool,
    seqused_q: Optional[Tensor] = None,
    seqused_k: Optional[Tensor] = None,
    num_splits: int = 0,
) -> Tuple[Tensor, Tensor]:
    """Attention output (shape and dtype of q) and row logsumexp (float32).

    With seqused_q, the rows past each sequence's used length are not computed: out is 0 and lse
    -inf there, as for rows that see no key. num_splits: flash_attn's (0 the library's choice, 1
    keys never split, more the pieces of the GQA-packed Hopper kernel and of the sm80 kernel)."""
    return _run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                        window_left, window_right, softcap, alibi_slopes, seqused_q, seqused_k, num_splits)


def _run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                 window_left, window_right, softcap, alibi_slopes, seqused_q=None, seqused_k=None, num_splits=0,
                 block_table=None, indices_checked=False):
    """The library's forward into fresh out and lse; block_table (int32 (batch, max_pages), no
    gradient: decoding) makes k and v pages (num_pages, page_size, nheads_kv, headdim).
    indices_checked: the caller has read back and checked seqused and block_table, so the library
    reads none of them back (AttentionParams::indices_checked: one synchronisation a call fewer)."""
    varlen = cu_seqlens_q is not None
    if seqused_q is None and not varlen:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        lse = torch.empty(lse_shape(q, varlen), dtype=torch.float32, device=q.device)
    else:  # the library leaves the unused rows alone, and varlen rows outside every sequence
        # (cu_seqlens_q[0] > 0, or a padded tail past cu_seqlens_q[-1]): 0 there, as their gradient
        out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.full(lse_shape(q, varlen), float("-inf"), dtype=torch.float32, device=q.device)
    with on_device(q):
        _ext.forward(
            kernel_ready(q), kernel_ready(k), kernel_ready(v), output_dlpack(out), output_dlpack(lse),
            cu_seqlens_q=kernel_ready(cu_seqlens_q), cu_seqlens_k=kernel_ready(cu_seqlens_k),
            seqused_q=kernel_ready(seqused_q), seqused_k=kernel_ready(seqused_k),
            max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale,
            causal=causal, window=(window_left, window_right), softcap=softcap,
            alibi_slopes=kernel_ready(alibi_slopes), num_splits=num_splits, block_table=kernel_ready(block_table),
            indices_checked=indices_checked, **launch_options(q),
        )
    return out, lse


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
              window_left, window_right, softcap, alibi_slopes, deterministic, seqused_q=None, seqused_k=None,
              num_splits=0):
    out = q.new_empty(q.shape)
    lse = q.new_empty(lse_shape(q, cu_seqlens_q is not None), dtype=torch.float32)
    return out, lse


@torch.library.custom_op("flashattn::bwd", mutates_args=())
def bwd(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: Optional[Tensor],
    deterministic: bool,
    seqused_q: Optional[Tensor] = None,
    seqused_k: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of q, k, v given the forward's out and lse (0 in rows past seqused_q / seqused_k)."""
    return _grads(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                  causal, window_left, window_right, softcap, alibi_slopes, deterministic, seqused_q, seqused_k)


def _grads(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
           causal, window_left, window_right, softcap, alibi_slopes, deterministic, seqused_q=None,
           seqused_k=None):
    # The library leaves dq rows past seqused_q and dk, dv rows past seqused_k alone, and (varlen)
    # the rows outside every sequence, whose gradient is 0 (not whatever the memory held, which
    # reached the weights of the layers before).
    varlen = cu_seqlens_q is not None
    fresh_q = torch.empty_like if seqused_q is None and not varlen else torch.zeros_like
    fresh_k = torch.empty_like if seqused_k is None and not varlen else torch.zeros_like
    dq = fresh_q(q, memory_format=torch.contiguous_format)
    dk = fresh_k(k, memory_format=torch.contiguous_format)
    dv = fresh_k(v, memory_format=torch.contiguous_format)
    _run_backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic,
                  seqused_q, seqused_k)
    return dq, dk, dv


def _run_backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic,
                  seqused_q=None, seqused_k=None):
    """The library's backward into dq, dk, dv (any views), on q's device and current stream."""
    with on_device(q):
        _ext.backward(
            kernel_ready(dout), kernel_ready(q), kernel_ready(k), kernel_ready(v), kernel_ready(out),
            kernel_ready(lse), output_dlpack(dq), output_dlpack(dk), output_dlpack(dv),
            cu_seqlens_q=kernel_ready(cu_seqlens_q), cu_seqlens_k=kernel_ready(cu_seqlens_k),
            seqused_q=kernel_ready(seqused_q), seqused_k=kernel_ready(seqused_k),
            max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, softmax_scale=softmax_scale,
            causal=causal, window=(window_left, window_right), softcap=softcap,
            alibi_slopes=kernel_ready(alibi_slopes), deterministic=deterministic, **launch_options(q),
        )


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic,
              seqused_q=None, seqused_k=None):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
     window_left, window_right, softcap, alibi_slopes, deterministic, seqused_q, seqused_k, _num_splits) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes, seqused_q, seqused_k)
    ctx.options = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right,
                   softcap)
    ctx.deterministic = deterministic
    # lse is returned for inspection (return_attn_probs); like flash_attn, no gradient flows into it.
    ctx.mark_non_differentiable(lse)


def _backward_with(grads):
    def backward(ctx, dout, _dlse):
        if dout is None:  # only lse was used (set_materialize_grads(False)): no gradient flows
            return (None,) * 17
        q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes, seqused_q, seqused_k = ctx.saved_tensors
        max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap = ctx.options
        dq, dk, dv = grads(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                           ctx.deterministic, seqused_q, seqused_k)
        return (dq, dk, dv) + (None,) * 14
    return backward


fwd.register_autograd(_backward_with(bwd), setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """flashattn::fwd / bwd without the dispatcher, for plain eager calls. The custom ops' Python
    wrapping (argument defaults, autograd wrapper, op redispatch) cost about 1.1 ms of host time
    per forward + backward on the H200 machine's host (torch.profiler, d128 seqlen 512 causal),
    more than the kernels' 0.95 ms, so short sequences waited for the host. Same library calls,
    same saved tensors; torch.compile, tracing and dispatch modes still get the custom ops."""

    @staticmethod
    def forward(ctx, *inputs):
        out, lse = _run_forward(*inputs[:13], *inputs[14:])  # inputs[13]: deterministic
        _setup_context(ctx, inputs, (out, lse))
        ctx.set_materialize_grads(False)  # lse's gradient (unused) stays None instead of a zeros launch
        return out, lse

    # The backward is not itself differentiable: a second derivative through it would silently
    # drop attention's own second-order term (gradient penalties came out 13-100% off).
    backward = staticmethod(torch.autograd.function.once_differentiable(_backward_with(_grads)))


def _plain_eager(tensors) -> bool:
    if torch.compiler.is_compiling() or torch.utils._python_dispatch._get_current_dispatch_mode() is not None:
        return False
    return all(t is None or type(t) in (Tensor, torch.nn.Parameter) for t in tensors)


def _records_grad(differentiable) -> bool:
    """Whether autograd would record a call on these inputs. Where it would not (inference, no_grad,
    inputs without requires_grad), the eager paths call the forward directly: autograd.Function.apply
    alone cost ~14 us of host time a call on a 2-core host (session 60), beside a forward kernel of
    26-35 us at 512 keys whose timing the host's time per call reaches (docs/perf.md). Inside a
    forward-mode AD level or a functorch transform (vmap, torch.func.grad) the Function runs, so
    that dual or wrapped inputs meet its refusal (no jvp, no setup_context) instead of losing their
    tangents or reaching the library as tensors without storage; under torch.jit.trace it runs so
    that the trace records the call (the library's writes into out are invisible to the tracer,
    whose graph would return the empty output). differentiable: every tensor input, as
    Function.apply counts them (alibi_slopes included, though no gradient reaches it)."""
    if (forward_ad._current_level >= 0 or torch._C._functorch.maybe_current_level() is not None
            or torch._C._get_tracing_state() is not None):
        return True
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in differentiable)


def attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
              window_right, softcap, alibi_slopes, deterministic, seqused_q=None, seqused_k=None, num_splits=0,
              indices_checked=False):
    """flashattn::fwd with its backward: through the custom op when compiling or tracing, else
    through _EagerAttention (the same computation with less host time). indices_checked
    (_run_forward's) holds where the call goes straight to the library (eager, no gradient
    recorded); elsewhere the library checks the lengths as ever."""
    inputs = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
              window_right, softcap, alibi_slopes, deterministic, seqused_q, seqused_k, num_splits)
    if _plain_eager((q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, seqused_q, seqused_k)):
        if not _records_grad((q, k, v, alibi_slopes)):
            return _run_forward(*inputs[:13], *inputs[14:], indices_checked=indices_checked)  # [13]: deterministic
        return _EagerAttention.apply(*inputs)
    return fwd(*inputs)


# ---- packed q/k/v: one gradient buffer ----------------------------------------------------------

def _unpack(packed: Tensor, q: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    """q, k, v as views: packed is qkv (..., 3, nheads, headdim) when q is None, else kv
    (..., 2, nheads_k, headdim)."""
    if q is None:
        q, k, v = packed.unbind(-3)
        return q, k, v
    k, v = packed.unbind(-3)
    return q, k, v


def _check_packed(packed: Tensor, q: Optional[Tensor]) -> None:
    expected = 3 if q is None else 2
    if packed.dim() < 4 or packed.shape[-3] != expected:
        name = "qkv" if q is None else "kv"
        raise ValueError(f"argument '{name}': has shape {tuple(packed.shape)}; expected {expected} stacked tensors "
                         f"in dimension -3, e.g. (batch, seqlen, {expected}, nheads, headdim)")


@torch.library.custom_op("flashattn::fwd_packed", mutates_args=())
def fwd_packed(
    packed: Tensor,
    q: Optional[Tensor],
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: Optional[Tensor],
    deterministic: bool,
    num_splits: int = 0,
) -> Tuple[Tensor, Tensor]:
    """fwd of the q, k, v views of packed (qkv, or kv with q given); num_splits as fwd's."""
    return _packed_forward(packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                           window_left, window_right, softcap, alibi_slopes, deterministic, num_splits)


def _packed_forward(packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                    window_left, window_right, softcap, alibi_slopes, deterministic, num_splits=0):
    _check_packed(packed, q)
    q, k, v = _unpack(packed, q)
    return _run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                        window_left, window_right, softcap, alibi_slopes, num_splits=num_splits)


@fwd_packed.register_fake
def _fwd_packed_fake(packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                     window_left, window_right, softcap, alibi_slopes, deterministic, num_splits=0):
    _check_packed(packed, q)
    q = _unpack(packed, q)[0]
    return q.new_empty(q.shape), q.new_empty(lse_shape(q, cu_seqlens_q is not None), dtype=torch.float32)


@torch.library.custom_op("flashattn::bwd_packed", mutates_args=())
def bwd_packed(
    dout: Tensor,
    packed: Tensor,
    q: Optional[Tensor],
    out: Tensor,
    lse: Tensor,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    alibi_slopes: Optional[Tensor],
    deterministic: bool,
) -> List[Tensor]:
    """[dqkv] when packed is qkv, [dq, dkv] when it is kv: the kernels write each gradient into
    its slice of the packed gradient, which has packed's shape (contiguous)."""
    return _packed_grads(dout, packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic)


def _packed_grads(dout, packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                  causal, window_left, window_right, softcap, alibi_slopes, deterministic):
    _check_packed(packed, q)
    # Varlen rows outside every sequence get gradient 0 (see _grads).
    fresh = torch.empty if cu_seqlens_q is None else torch.zeros
    dpacked = fresh(packed.shape, dtype=packed.dtype, device=packed.device)
    q_, k, v = _unpack(packed, q)
    if q is None:
        dq, dk, dv = dpacked.unbind(-3)
    else:
        dq = fresh(q.shape, dtype=q.dtype, device=q.device)
        dk, dv = dpacked.unbind(-3)
    _run_backward(dout, q_, k, v, out, lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic)
    return [dpacked] if q is None else [dq, dpacked]


@bwd_packed.register_fake
def _bwd_packed_fake(dout, packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                     softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic):
    dpacked = packed.new_empty(packed.shape)
    return [dpacked] if q is None else [q.new_empty(q.shape), dpacked]


def _setup_packed_context(ctx, inputs, output):
    (packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
     window_right, softcap, alibi_slopes, deterministic) = inputs[:13]  # [13]: num_splits, the forward's only
    out, lse = output
    ctx.save_for_backward(packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes)
    ctx.options = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                   deterministic)
    ctx.mark_non_differentiable(lse)


def _backward_packed_with(grads_of):
    def backward(ctx, dout, _dlse):
        packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes = ctx.saved_tensors
        (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
         deterministic) = ctx.options
        grads = grads_of(dout, packed, q, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic)
        dpacked, dq = (grads[0], None) if q is None else (grads[1], grads[0])
        return (dpacked, dq) + (None,) * 12
    return backward


fwd_packed.register_autograd(_backward_packed_with(bwd_packed), setup_context=_setup_packed_context)


class _EagerPackedAttention(torch.autograd.Function):
    """flashattn::fwd_packed / bwd_packed without the dispatcher (see _EagerAttention)."""

    @staticmethod
    def forward(ctx, *inputs):
        out, lse = _packed_forward(*inputs)
        _setup_packed_context(ctx, inputs, (out, lse))
        return out, lse

    backward = staticmethod(torch.autograd.function.once_differentiable(_backward_packed_with(_packed_grads)))


def attention_packed(packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                     window_left, window_right, softcap, alibi_slopes, deterministic, num_splits=0):
    """flashattn::fwd_packed with its backward, through the custom op when compiling or tracing,
    else through _EagerPackedAttention."""
    inputs = (packed, q, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left,
              window_right, softcap, alibi_slopes, deterministic, num_splits)
    if _plain_eager((packed, q, cu_seqlens_q, cu_seqlens_k, alibi_slopes)):
        if not _records_grad((packed, q, alibi_slopes)):
            return _packed_forward(*inputs)
        return _EagerPackedAttention.apply(*inputs)
    return fwd_packed(*inputs)
