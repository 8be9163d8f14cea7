"""The compiled extension, imported in one place so that its absence gives one clear error."""

import functools
import math

try:
    from flashattn import _C
except ImportError as err:  # pragma: no cover - only on a broken install
    raise ImportError(
        f"flashattn's compiled extension (flashattn._C) could not be loaded ({err}); install the "
        "package with `pip install .` from the repository root instead of importing python/flashattn"
    ) from err

Backend = _C.Backend
forward = _C.forward
backward = _C.backward
empty = _C.empty
synchronize = _C.synchronize
# The most pieces num_splits may ask for (the C++ API's kMaxNumSplits).
max_num_splits = _C.max_num_splits
# Asked on every SDPA call while the hook is active; the answer cannot change within a process.
cuda_available = functools.lru_cache(maxsize=None)(_C.cuda_available)


def softmax_scale(given, headdim: int) -> float:
    """The softmax_scale to pass the library for a caller's value (None: 1 / sqrt(headdim)). The
    library reads 0 as that default, so a caller's 0 is refused, not turned into it (the SDPA hook
    hands it back to PyTorch on the ValueError)."""
    if given is None:
        return 1.0 / math.sqrt(headdim)
    if float(given) == 0.0:
        raise ValueError("argument 'softmax_scale': 0 is not supported (uniform weights: take v's mean)")
    return float(given)


def flash_attn_window(window_size) -> tuple:
    """(left, right) for the library from flash_attn's window_size. flash_attn reads every negative
    side as unbounded (its C++ turns any left < 0 into seqlen_k); the library takes only -1 for that,
    so callers written against flash_attn keep working."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"argument 'window_size': is {window_size!r}; expected a pair (left, right)") from None
    return max(int(left), -1), max(int(right), -1)
