"""The compiled extension, imported in one place so that its absence gives one clear error."""

import functools
import math
import operator
import struct

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


_INT32_MAX = 2**31 - 1
_FLT_MIN = 1.1754943508222875e-38  # the smallest normal float32
_FLT_MAX = 3.4028234663852886e38
# The checks below take a few tenths of a microsecond each and a flash_attn_func call makes
# several, so the usual values (a Python float in float32's normal range, a Python int) are
# decided by a first test alone.


def _as_float32(value: float) -> float:
    """value as the library's float32 parameters receive it: rounded, inf past float32's range."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def real(name: str, value) -> float:
    """A real-valued argument: a number (NumPy's and 0-d tensors' too), not a string that float()
    would parse ("0.5") nor None."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"argument '{name}': is {value!r}; expected a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"argument '{name}': is {value!r}; expected a number") from None


def head_dim(name: str, t) -> int:
    """The head dimension (last size) of tensor argument `name`, which must have one."""
    if len(t.shape) == 0:
        raise ValueError(f"argument '{name}': is 0-dimensional; expected (..., nheads, headdim)")
    return t.shape[-1]


def softmax_scale(given, headdim: int) -> float:
    """The softmax_scale to pass the library for a caller's value (None: 1 / sqrt(headdim)). The
    library reads 0 as that default, so a caller's 0 is refused, not turned into it (the SDPA hook
    hands it back to PyTorch on the ValueError); so is a value that becomes 0 (or inf) in the
    library's float32, as 1e-300 silently became the default."""
    if given is None:
        try:
            return 1.0 / math.sqrt(headdim)
        except ZeroDivisionError:  # the library's own check, which the division would never reach
            raise ValueError("argument 'q': head dimension 0 is not allowed; expected a multiple of 8 in [8, 256]") from None
    if type(given) is float and _FLT_MIN <= abs(given) <= _FLT_MAX:
        return given
    scale = real("softmax_scale", given)
    if scale == 0.0:
        raise ValueError("argument 'softmax_scale': 0 is not supported (uniform weights: take v's mean)")
    rounded = _as_float32(scale)
    if math.isfinite(scale) and (rounded == 0.0 or math.isinf(rounded)):
        raise ValueError(f"argument 'softmax_scale': is {given!r}, which float32 (the library's type) holds as "
                         f"{rounded}; expected a finite nonzero float32")
    return scale  # NaN and inf go on to the library, which refuses them by name


def softcap(given) -> float:
    """softcap for the library: 0 (off), or at least the smallest normal float32, below which the
    kernels' 1 / softcap overflows (as the library checks); a positive value that float32 rounds
    to 0 or to a denormal would otherwise turn the cap off or reach the library as one."""
    if type(given) is float and (given == 0.0 or _FLT_MIN <= given <= _FLT_MAX):
        return given
    cap = real("softcap", given)
    if cap > 0.0 and not _FLT_MIN <= _as_float32(cap) < math.inf:
        raise ValueError(f"argument 'softcap': is {given!r}; expected 0 (off) or a float32 from {_FLT_MIN:g} "
                         "(the smallest normal float32) to its largest")
    return cap  # negative and NaN values go on to the library, which refuses them by name


def integer(name: str, value, unbounded_below: bool = False) -> int:
    """An integer argument the library takes as a C int: any integer type (numpy's too), not a
    float (which int() would truncate) or a bool (a flag given in the wrong place), inside int32
    (past it the extension's own conversion fails naming no argument). unbounded_below: every
    negative value means -1 (a window side)."""
    if type(value) is int and (unbounded_below or -_INT32_MAX - 1 <= value) and value <= _INT32_MAX:
        return max(value, -1) if unbounded_below else value
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"argument '{name}': is {value!r}; expected an integer") from None
    if unbounded_below:
        n = max(n, -1)
    if not -_INT32_MAX - 1 <= n <= _INT32_MAX:
        raise ValueError(f"argument '{name}': is {n}; expected an integer in [-2^31, 2^31 - 1] (the library's int)")
    return n


def flag(name: str, value) -> bool:
    """A yes / no argument: a bool (NumPy's too) or the integers 0 and 1; not a string, which bool()
    would read as True whatever it says ("no")."""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    try:
        n = operator.index(value)
    except TypeError:
        n = None
    if n not in (0, 1):
        raise TypeError(f"argument '{name}': is {value!r}; expected True or False")
    return bool(n)


def window_pair(window_size) -> tuple:
    """(left, right) as given, or a ValueError naming window_size where it is not a pair."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"argument 'window_size': is {window_size!r}; expected a pair (left, right)") from None
    return left, right


def flash_attn_window(window_size) -> tuple:
    """(left, right) for the library from flash_attn's window_size. flash_attn reads every negative
    side as unbounded (its C++ turns any left < 0 into seqlen_k); the library takes only -1 for that,
    so callers written against flash_attn keep working. A fractional side (1.5) is refused, not
    truncated."""
    left, right = window_pair(window_size)
    if type(left) is int and type(right) is int and left <= _INT32_MAX and right <= _INT32_MAX:
        return (left if left >= -1 else -1), (right if right >= -1 else -1)
    return integer("window_size", left, unbounded_below=True), integer("window_size", right, unbounded_below=True)
