"""How torch tensors are handed to the C++ library: layout fixes and launch options."""

import contextlib
from typing import Optional

import torch
from torch import Tensor

# The CUDA kernels move rows 16 bytes at a time; the library refuses views that break this
# rather than fault, so such views are copied here instead.
_CUDA_ALIGNMENT = 16


def _cuda_misaligned(t: Tensor) -> bool:
    if t.data_ptr() % _CUDA_ALIGNMENT:
        return True
    itemsize = t.element_size()
    return any(size > 1 and (stride * itemsize) % _CUDA_ALIGNMENT
               for size, stride in zip(t.shape[:-1], t.stride()[:-1]))


def kernel_ready(t: Optional[Tensor]) -> Optional[Tensor]:
    """A view the library accepts: detached (DLPack refuses tensors that require grad) and with a
    contiguous last dimension; on CUDA also 16-byte aligned."""
    if t is None:
        return None
    t = t.detach()
    if t.dim() and t.stride(-1) != 1 and t.shape[-1] > 1:
        return t.contiguous()
    if t.is_cuda and t.dtype in (torch.float16, torch.bfloat16) and t.numel() and _cuda_misaligned(t):
        return t.clone(memory_format=torch.contiguous_format)
    return t


def launch_options(t: Tensor) -> dict:
    """The stream (current CUDA stream of t's device) or thread count (torch's) for a call."""
    if t.is_cuda:
        return {"stream": torch.cuda.current_stream(t.device).cuda_stream, "num_threads": 0}
    return {"stream": 0, "num_threads": torch.get_num_threads()}


def on_device(t: Tensor):
    """Makes t's GPU current for the call (the library launches on the current device)."""
    if t.is_cuda and t.device.index is not None and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()
