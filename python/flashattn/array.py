"""flashattn on any DLPack array: NumPy on the CPU, CuPy / JAX / PyTorch arrays on CUDA devices.

No autograd here: forward() returns the output (and the row logsumexp), backward() the gradients.
Layouts are flash_attn's (see flashattn.flash_attn_interface): (batch, seqlen, nheads, headdim),
or (total, nheads, headdim) with int32 cu_seqlens for variable-length batches.

Outputs are allocated with the input's own array library (NumPy, PyTorch, or the array-API
namespace of the input, e.g. CuPy), on the input's device, unless passed in as out=, lse=,
dq=, dk=, dv=. JAX arrays are immutable, so for JAX inputs flashattn allocates the outputs
itself and returns them as new JAX arrays (through DLPack, without a copy); JAX arrays are
refused as out=/lse=/dq=/dk=/dv= buffers, while writable buffers of another library (NumPy,
CuPy) are still written in place. On CUDA, JAX inputs are read once JAX has finished writing
them (its DLPack export waits for that), and the call waits for flashattn's kernels before
handing the results back, since JAX does not tell DLPack producers its stream.
"""

import operator
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


def _is_jax(a) -> bool:
    return _module_name(a) in ("jax", "jaxlib")


def _refuse_jax_outputs(**buffers) -> None:
    for name, buffer in buffers.items():
        if buffer is not None and _is_jax(buffer):
            raise TypeError(f"argument '{name}': JAX arrays are immutable and cannot be written into; leave "
                            f"'{name}' out (flashattn then returns a new JAX array) or pass a writable buffer "
                            "of another library (NumPy, CuPy)")


def _empty(like, shape: Sequence[int], float32: bool = False):
    """An uninitialised array of `like`'s library, device and dtype (or float32). For JAX inputs,
    a buffer of flashattn's own that _results() turns into a JAX array after the call."""
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
        device_type, device_id = like.__dlpack_device__()
        return _ext.empty([int(n) for n in shape], "float32" if float32 else str(like.dtype), int(device_type),
                          int(device_id))
    if hasattr(like, "__array_namespace__"):
        xp = like.__array_namespace__()
        return xp.empty(tuple(shape), dtype=xp.float32 if float32 else like.dtype, device=like.device)
    raise TypeError(f"cannot allocate outputs for {type(like).__name__}; pass them in (out=, lse=, ...)")


def _current_stream(like, stream: Optional[int]) -> int:
    if stream is not None:
        try:
            handle = operator.index(stream)
        except TypeError:
            handle = None
        if handle is None or not 0 <= handle < 2**64:
            raise TypeError(f"argument 'stream': is {stream!r}; expected a CUDA stream handle (an integer in [0, 2^64))")
        return handle
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


def _results(like, stream: int, allocated):
    """The arrays to hand back: for JAX inputs, flashattn's own buffers (`allocated`, by position)
    become JAX arrays once the kernels that write them have finished."""
    if not _is_jax(like) or not allocated:
        return None
    import jax.dlpack

    device_type, device_id = like.__dlpack_device__()
    if int(device_type) == _DLPACK_CUDA:
        _ext.synchronize(int(device_id), stream)
    return {name: jax.dlpack.from_dlpack(buffer) for name, buffer in allocated.items() if buffer is not None}


def _lse_shape(q, varlen: bool) -> Tuple[int, ...]:
    return (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])


def _check_arrays(required, optional, outputs) -> None:
    """Every array argument supports DLPack (a list or None where one is required would reach the
    extension and fail naming nothing), and every output buffer given can be written."""
    for name, a in required.items():
        _device_type(a, name)
    for name, a in optional.items():
        if a is not None:
            _device_type(a, name)
    for name, a in outputs.items():
        if a is None:
            continue
        _device_type(a, name)
        flags = getattr(a, "flags", None)  # NumPy's: a read-only view refuses the write
        if flags is not None and getattr(flags, "writeable", True) is False:
            raise ValueError(f"argument '{name}': is read-only; expected a writable array")


def _scalars(max_seqlen_q, max_seqlen_k, causal, window_size, num_threads) -> dict:
    """The scalar arguments as the extension takes them, each refused by name where it cannot be.
    Window sides go to the library as given (it takes -1 for unbounded and names any other
    negative), not mapped as flash_attn_func maps them."""
    left, right = _ext.window_pair(window_size)
    return dict(max_seqlen_q=_ext.integer("max_seqlen_q", max_seqlen_q),
                max_seqlen_k=_ext.integer("max_seqlen_k", max_seqlen_k), causal=_ext.flag("causal", causal),
                window=(_ext.integer("window_size", left), _ext.integer("window_size", right)),
                num_threads=_ext.integer("num_threads", num_threads))


def _backend(name: str):
    try:
        return getattr(_ext.Backend, name)
    except AttributeError:
        raise ValueError(f"argument 'backend': is {name!r}; expected 'auto', 'cpu', 'cpu_reference' or 'cuda'") from None


def forward(q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None,
            max_seqlen_q: int = 0, max_seqlen_k: int = 0,
            softmax_scale: Optional[float] = None, causal: bool = False, window_size=(-1, -1),
            softcap: float = 0.0, alibi_slopes=None, out=None, lse=None, return_lse: bool = False,
            stream: Optional[int] = None, backend: str = "auto", num_threads: int = 0):
    """Attention of q over k, v. Returns out, or (out, lse) when return_lse is true.

    seqused_q, seqused_k: optional int32 (batch,) used lengths (FlashAttention-3's seqused); rows
        past them are not written, so pass zeroed out= / lse= buffers where those rows must be defined.
    stream: CUDA stream handle to launch on; by default the input library's current stream.
    backend: 'auto' (by device), 'cpu', 'cpu_reference' (float64 oracle) or 'cuda'.
    """
    _check_arrays(dict(q=q, k=k, v=v), dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_q=seqused_q,
                                            seqused_k=seqused_k, alibi_slopes=alibi_slopes), dict(out=out, lse=lse))
    scalars = _scalars(max_seqlen_q, max_seqlen_k, causal, window_size, num_threads)
    _refuse_jax_outputs(out=out, lse=lse)
    varlen = cu_seqlens_q is not None
    allocated = {}
    if out is None:
        out = allocated["out"] = _empty(q, q.shape)
    if lse is None and return_lse:
        lse = allocated["lse"] = _empty(q, _lse_shape(q, varlen), float32=True)
    stream = _current_stream(q, stream)
    _ext.forward(q, k, v, out, lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                 seqused_q=seqused_q, seqused_k=seqused_k, softmax_scale=_ext.softmax_scale(softmax_scale, q.shape[-1]),
                 softcap=_ext.softcap(softcap), alibi_slopes=alibi_slopes, backend=_backend(backend), stream=stream,
                 **scalars)
    converted = _results(q, stream, allocated)
    if converted:
        out, lse = converted.get("out", out), converted.get("lse", lse)
    return (out, lse) if return_lse else out


def backward(dout, q, k, v, out, lse, *, cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None,
             max_seqlen_q: int = 0, max_seqlen_k: int = 0, softmax_scale: Optional[float] = None, causal: bool = False,
             window_size=(-1, -1), softcap: float = 0.0, alibi_slopes=None, deterministic: bool = False,
             dq=None, dk=None, dv=None, stream: Optional[int] = None, backend: str = "auto",
             num_threads: int = 0):
    """Gradients (dq, dk, dv) of the attention forward() computed, given dout and its out and lse.
    With seqused_q / seqused_k, gradient rows past them are not written (pass zeroed buffers)."""
    _check_arrays(dict(dout=dout, q=q, k=k, v=v, out=out, lse=lse),
                  dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_q=seqused_q, seqused_k=seqused_k,
                       alibi_slopes=alibi_slopes), dict(dq=dq, dk=dk, dv=dv))
    scalars = _scalars(max_seqlen_q, max_seqlen_k, causal, window_size, num_threads)
    _refuse_jax_outputs(dq=dq, dk=dk, dv=dv)
    allocated = {}
    if dq is None:
        dq = allocated["dq"] = _empty(q, q.shape)
    if dk is None:
        dk = allocated["dk"] = _empty(k, k.shape)
    if dv is None:
        dv = allocated["dv"] = _empty(v, v.shape)
    stream = _current_stream(q, stream)
    _ext.backward(dout, q, k, v, out, lse, dq, dk, dv, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  seqused_q=seqused_q, seqused_k=seqused_k, softmax_scale=_ext.softmax_scale(softmax_scale, q.shape[-1]),
                  softcap=_ext.softcap(softcap), alibi_slopes=alibi_slopes,
                  deterministic=_ext.flag("deterministic", deterministic), backend=_backend(backend), stream=stream,
                  **scalars)
    converted = _results(q, stream, allocated)
    if converted:
        dq, dk, dv = (converted.get(name, given) for name, given in (("dq", dq), ("dk", dk), ("dv", dv)))
    return dq, dk, dv
