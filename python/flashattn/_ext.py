"""The compiled extension, imported in one place so that its absence gives one clear error."""

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
cuda_available = _C.cuda_available
