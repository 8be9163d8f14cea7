"""How torch tensors are handed to the C++ library: layout fixes and launch options."""

import contextlib
from typing import Optional

import torch
from torch import Tensor
from torch.utils.dlpack import to_dlpack

# The CUDA kernels move rows 16 bytes at a time; the library refuses views that break this
# rather than fault, so such views are copied here instead.
_CUDA_ALIGNMENT = 16


def _cuda_misaligned(t: Tensor) -> bool:
    if t.data_ptr() % _CUDA_ALIGNMENT:
        return True
    itemsize = t.element_size()
    if t.dim() and t.is_contiguous():  # every stride is a multiple of the last dimension's
        return (t.shape[-1] * itemsize) % _CUDA_ALIGNMENT != 0 and t.numel() > t.shape[-1]
    return any(size > 1 and (stride * itemsize) % _CUDA_ALIGNMENT
               for size, stride in zip(t.shape[:-1], t.stride()[:-1]))


def kernel_ready(t: Optional[Tensor]):
    """t as a DLPack capsule of a view the library accepts: a contiguous last dimension and, on CUDA,
    16-byte aligned rows (else a copy). torch.utils.dlpack.to_dlpack costs ~0.5 us against ~5 us
    for Tensor.__dlpack__, which the extension would call on a tensor (its checks are moot here),
    and a forward + backward hands over 14 tensors (benchmarks/host_cost.py, session 6)."""
    if t is None:
        return None
    # The common case in five attribute reads (each ~0.4 us on the GPU machine's host, where the
    # general checks below took 2.6 us a tensor, session 76): contiguous, its start and its rows
    # 16-byte aligned, no negative bit, which every branch below would pass unchanged.
    if t.is_contiguous() and t.dim() and not t.data_ptr() % _CUDA_ALIGNMENT and \
            not (t.shape[-1] * t.element_size()) % _CUDA_ALIGNMENT and not t.is_neg():
        return to_dlpack(t)
    # A view with torch's negative bit set (torch._neg_view, the imaginary part of a conjugate)
    # holds its values un-negated in memory, and DLPack carries no such bit: the library would
    # read them with the wrong sign.
    if t.is_neg():
        t = t.resolve_neg()
    if t.dim() and t.stride(-1) != 1 and t.shape[-1] > 1:
        return to_dlpack(t.detach().contiguous())
    if t.is_cuda and t.dtype in (torch.float16, torch.bfloat16) and t.numel() and _cuda_misaligned(t):
        return to_dlpack(t.detach().clone(memory_format=torch.contiguous_format))
    return to_dlpack(t)


def output_dlpack(t: Tensor):
    """An output tensor (any view the library accepts, written in place) as a DLPack capsule."""
    return to_dlpack(t)


# The current stream's handle without building a torch.cuda.Stream object (0.2 us against 5.7 us
# a call on the GPU machine's host, session 76; the same value, capture streams included).
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def launch_options(t: Tensor) -> dict:
    """The stream (current CUDA stream of t's device) or thread count (torch's) for a call."""
    if t.is_cuda:
        if _raw_stream is not None:
            return {"stream": _raw_stream(t.get_device()), "num_threads": 0}
        return {"stream": torch.cuda.current_stream(t.device).cuda_stream, "num_threads": 0}
    return {"stream": 0, "num_threads": torch.get_num_threads()}


_SAME_DEVICE = contextlib.nullcontext()  # reusable: entering it does nothing


def on_device(t: Tensor):
    """Makes t's GPU current for the call (the library launches on the current device)."""
    if t.is_cuda:
        index = t.get_device()
        if index != torch.cuda.current_device():
            return torch.cuda.device(index)
    return _SAME_DEVICE
