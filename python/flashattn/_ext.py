"""The compiled extension, imported in one place so that its absence gives one clear error."""

import functools

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
# Asked on every SDPA call while the hook is active; the answer cannot change within a process.
cuda_available = functools.lru_cache(maxsize=None)(_C.cuda_available)
