"""Run every F.scaled_dot_product_attention that picks the flash backend on flashattn.

    import flashattn.torch
    handle = flashattn.torch.activate()   # or: with flashattn.torch.activate(): ...
    ...                                   # SDPA (flash backend) now runs on flashattn
    handle.remove()                       # PyTorch's own kernels again (same as deactivate())

flashattn registers itself as impl "flashattn" in torch.nn.attention's flash-attention registry
(the mechanism FA3/FA4 use) when this module is imported; activate() selects it. It overrides
aten::_flash_attention_forward/_backward and aten::_scaled_dot_product_flash_attention/_backward
on CUDA, and aten::_scaled_dot_product_flash_attention_for_cpu/_backward on the CPU. Inputs it
cannot take (dropout, attention masks on CPU, unsupported head dims or dtypes) go to the kernel
PyTorch had registered before activation.

activate() also puts FLASH first in SDPA's backend priority order, because on sm90/sm100 with
cuDNN newer than 9.15 PyTorch 2.11 tries cuDNN before FLASH (sdp_utils.cpp, priority_order()),
and a model that does not force a backend would then never call the flash operators. PyTorch
writes its cuDNN-first default into the global order lazily, on the first CUDA SDPA backend
choice of the process (eager or while torch.compile traces), overwriting any order set before.
activate() therefore makes that choice once itself (on three tiny CUDA tensors) before
reordering; deactivate() puts back the order it found.
"""

import warnings

import torch as _torch
from torch import _C as _torch_c
from torch.library import Library, get_kernel
from torch.nn import attention as _nn_attention
from torch.nn.attention import SDPBackend as _SDPBackend

from flashattn import _sdpa_kernels

__all__ = ["IMPL_NAME", "activate", "deactivate", "is_active", "stats"]

IMPL_NAME = "flashattn"

# How often each aten operator ran on flashattn or fell back ("<op>:fallback").
stats = _sdpa_kernels.stats


class _Registration:
    """The dispatcher overrides; remove() puts PyTorch's kernels back."""

    def __init__(self):
        self._libraries = []
        for dispatch_key, kernels in _sdpa_kernels.KERNELS.items():
            library = Library("aten", "IMPL", dispatch_key)  # noqa: TOR901
            for op_name, kernel in kernels.items():
                _sdpa_kernels.originals[op_name] = get_kernel(f"aten::{op_name}", dispatch_key)
                with warnings.catch_warnings():
                    # Overriding aten's kernel is the point; the dispatcher warns about it regardless.
                    warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
                    library.impl(op_name, kernel, dispatch_key, with_keyset=True)
            self._libraries.append(library)

    def remove(self) -> None:
        for library in self._libraries:
            library._destroy()
        self._libraries = []


class ActiveHandle:
    """Returned by activate(): remove() (or leaving a with block) restores PyTorch's kernels."""

    def remove(self) -> None:
        deactivate()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


# SDPA's backend priority before activate() put FLASH first; restored by deactivate().
_saved_priority = None


def _settle_pytorch_priority() -> None:
    """Lets PyTorch write its default backend order now rather than over ours at the first SDPA call.

    The default is written by the first CUDA backend choice in the process and never again, so
    this changes nothing PyTorch would not have set itself."""
    if not _torch.cuda.is_available():
        return  # the CPU SDPA path has no priority order
    try:
        probe = _torch.zeros((1, 1, 1, 8), dtype=_torch.float16, device="cuda")
        _torch._fused_sdp_choice(probe, probe, probe)
    except RuntimeError as why:  # e.g. every SDPA backend disabled: then there is nothing to settle
        warnings.warn(f"flashattn.torch.activate(): could not settle SDPA's backend order ({why})", stacklevel=3)


def _prefer_flash() -> None:
    """SDPA only reaches the flash kernels when it picks the FLASH backend; put it first so that
    models which do not ask for a backend run on flashattn too (PyTorch may otherwise prefer cuDNN)."""
    global _saved_priority
    if _saved_priority is not None or not hasattr(_torch_c, "_get_sdp_priority_order"):
        return
    _settle_pytorch_priority()
    _saved_priority = list(_torch_c._get_sdp_priority_order())
    flash = int(_SDPBackend.FLASH_ATTENTION)
    _torch_c._set_sdp_priority_order([flash] + [b for b in _saved_priority if b != flash])


def _restore_priority() -> None:
    global _saved_priority
    if _saved_priority is not None:
        _torch_c._set_sdp_priority_order(_saved_priority)
        _saved_priority = None


def activate() -> ActiveHandle:
    """Make flashattn the flash-attention implementation behind F.scaled_dot_product_attention,
    and FLASH the first backend SDPA tries."""
    _nn_attention.activate_flash_attention_impl(IMPL_NAME)
    _prefer_flash()
    return ActiveHandle()


def deactivate() -> None:
    """Restore PyTorch's own flash-attention kernels and backend priority if flashattn is active."""
    if is_active():
        _nn_attention.restore_flash_attention_impl()
    _restore_priority()


def is_active() -> bool:
    return _nn_attention.current_flash_attention_impl() == IMPL_NAME


_nn_attention.register_flash_attention_impl(IMPL_NAME, register_fn=_Registration)
