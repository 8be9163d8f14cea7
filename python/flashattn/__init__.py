"""flashattn: exact attention without materialising the score matrix.

With PyTorch installed, the flash_attn 2.x functions are available here and in
flashattn.flash_attn_interface, FlashAttention-3's in flashattn.fa3_interface, `flashattn.torch.activate()` routes F.scaled_dot_product_attention
to flashattn, and `import flashattn.transformers` registers the Hugging Face attention
implementation "tiled_attention". flashattn.array works on any DLPack array (NumPy, CuPy, JAX)
without PyTorch.
"""

import importlib
import importlib.util

from flashattn._ext import cuda_available

__version__ = "0.1.0"

__all__ = ["cuda_available", "__version__"]

if importlib.util.find_spec("torch") is not None:
    from flashattn.flash_attn_interface import (  # noqa: F401
        flash_attn_func,
        flash_attn_kvpacked_func,
        flash_attn_qkvpacked_func,
        flash_attn_varlen_func,
        flash_attn_varlen_kvpacked_func,
        flash_attn_varlen_qkvpacked_func,
        flash_attn_with_kvcache,
    )
    try:
        from flashattn import torch  # noqa: F401  (flashattn.torch.activate() after `import flashattn`)
    except (ImportError, AttributeError):
        # PyTorch before 2.11 has no flash-attention registry; the functions above still work and
        # importing flashattn.torch explicitly reports what is missing.
        pass

    __all__ += [
        "flash_attn_func",
        "flash_attn_kvpacked_func",
        "flash_attn_qkvpacked_func",
        "flash_attn_varlen_func",
        "flash_attn_varlen_kvpacked_func",
        "flash_attn_with_kvcache",
        "flash_attn_varlen_qkvpacked_func",
    ]

_LAZY_SUBMODULES = ("array", "bert_padding", "fa3_interface", "transformers")


def __getattr__(name):
    # transformers is slow to import; load these submodules on first use only.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"flashattn.{name}")
    raise AttributeError(f"module 'flashattn' has no attribute {name!r}")
