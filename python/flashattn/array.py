"""flashattn on any DLPack array: NumPy on the CPU, CuPy / JAX / PyTorch arrays on CUDA devices.

No autograd here: forward() returns the output (and the row logsumexp), backward() the gradients.
Layouts are flash_attn's (see flashattn.flash_attn_interface): (batch, seqlen, nheads, headdim),
or (total, nheads, headdim) with int32 cu_seqlens for variable-length batches.

Outputs are allocated with the input's own array library (NumPy, PyTorch, or the array-API
namespace of the input, e.g. CuPy), on the input's device, unless passed in as out=, lse=,
dq=, dk=, dv=. Immutable arrays (JAX) cannot be written: pass writable output buffers of
another library (e.g. CuPy or NumPy) and convert the results with jax.dlpack.from_dlpack.
"""

import math
from typing import Optional, Sequence, Tuple

from flashattn import _ext

__all__ = ["forward", "backward"]

_DLPACK_CUDA = 2


def _device_type(a, name: str = "q") -> int:
    try:
        return int(a.__dlpack_device__()[0])
    except AttributeError:
        raise TypeError(f"argument '{name}': expected an array supporting DLPack (__dlpack__), "
                        f"got {type(a).__name__}") from None


def _module_name(a) -> str:
    return type(a).__module__.split(".")[0]


def _empty(like, shape: Sequence[int], float32: bool = False):
    """An uninitialised array of `like`'s library, device and dtype (or float32)."""
    library = _module_name(like)
    if library == "numpy":
        import numpy as np

        return np.empty(shape, dtype=np.float32 if float32 else like.dtype)
    if library == "torch":
        import torch

        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype, device=like.device)
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(tuple(shape), dtype=cupy.float32 if float32 else like.dtype)
    if library in ("jax", "jaxlib"):
        raise TypeError("JAX arrays are immutable, so flashattn cannot allocate its outputs as JAX arrays; pass "
                        "writable buffers (out=, lse=, dq=, dk=, dv=, e.g. CuPy or NumPy arrays) and convert the "
                        "results with jax.dlpack.from_dlpack")
    if hasattr(like, "__array_namespace__"):
        xp = like.__array_namespace__()
        return xp.empty(tuple(shape), dtype=xp.float32 if float32 else like.dtype, device=like.device)
    raise TypeError(f"cannot allocate outputs for {type(like).__name__}; pass them in (out=, lse=, ...)")


def _current_stream(like, stream: Optional[int]) -> int:
    if stream is not None:
        return int(stream)
    if _device_type(like) != _DLPACK_CUDA:
        return 0
    library = _module_name(like)
    if library == "torch":
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream
    if library == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0  # the legacy default stream orders against every blocking stream


def _lse_shape(q, varlen: bool) -> Tuple[int, ...]:
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])


def _scale(softmax_scale: Optional[float], q) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)


def _backend(name: str):
    try:
        return getattr(_ext.Backend, name)
    except AttributeError:
        raise ValueError(f"argument 'backend': is {name!r}; expected 'auto', 'cpu', 'cpu_reference' or 'cuda'") from None


def forward(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q: int = 0, max_seqlen_k: int = 0,
            softmax_scale: Optional[float] = None, causal: bool = False, window_size=(-1, -1),
            softcap: float = 0.0, alibi_slopes=None, out=None, lse=None, return_lse: bool = False,
            stream: Optional[int] = None, backend: str = "auto", num_threads: int = 0):
    """Attention of q over k, v. Returns out, or (out, lse) when return_lse is true.

    stream: CUDA stream handle to launch on; by default the input library's current stream.
    backend: 'auto' (by device), 'cpu', 'cpu_reference' (float64 oracle) or 'cuda'.
    """
    _device_type(q)
    varlen = cu_seqlens_q is not None
    out = _empty(q, q.shape) if out is None else out
    if lse is None and return_lse:
        lse = _empty(q, _lse_shape(q, varlen), float32=True)
    _ext.forward(q, k, v, out, lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                 max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, softmax_scale=_scale(softmax_scale, q),
                 causal=causal, window=tuple(window_size), softcap=softcap, alibi_slopes=alibi_slopes,
                 backend=_backend(backend), num_threads=num_threads, stream=_current_stream(q, stream))
    return (out, lse) if return_lse else out


def backward(dout, q, k, v, out, lse, *, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q: int = 0,
             max_seqlen_k: int = 0, softmax_scale: Optional[float] = None, causal: bool = False,
             window_size=(-1, -1), softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
             dq=None, dk=None, dv=None, stream: Optional[int] = None, backend: str = "auto",
             num_threads: int = 0):
    """Gradients (dq, dk, dv) of the attention forward() computed, given dout and its out and lse."""
    _device_type(q)
    dq = _empty(q, q.shape) if dq is None else dq
    dk = _empty(k, k.shape) if dk is None else dk
    dv = _empty(v, v.shape) if dv is None else dv
    _ext.backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                  softmax_scale=_scale(softmax_scale, q), causal=causal, window=tuple(window_size),
                  softcap=softcap, alibi_slopes=alibi_slopes, deterministic=deterministic,
                  backend=_backend(backend), num_threads=num_threads, stream=_current_stream(q, stream))
    return dq, dk, dv
