"""flash_attn_with_kvcache: decoding against a KV cache, as flash_attn 2.x names and shapes it.

The new keys and values (rotated first where rotary tables are given) are written into the cache
in place at each sequence's cache_seqlens, then q attends to the first cache_seqlens + seqlen_new
rows of its sequence's cache through the forward kernel's seqused_k (masks aligned to that
length, as flash_attn aligns them); where cache_seqlens is an int and the cache contiguous, through
a view of those rows instead (no lengths tensor). What flashattn does differently:
  * the append and the rotary embedding are PyTorch operations, not fused into the kernel;
  * a paged cache (block_table) is read in place where its pages hold a multiple of 128 rows on
    CUDA (on Hopper the packed sm90 kernel reads them for steps of up to 64 query rows, at head
    dim 192 only in pages of a multiple of 896 rows, its 112-key blocks' and 128's; the sm80
    kernel the rest; elsewhere the sm80 kernel) and at any page size on the CPU; other page
    sizes, cache_leftpad with a table, and cache_batch_idx other than the identity are gathered
    into a contiguous copy before the kernel (correct, with the copy's time and memory; of a
    paged cache the blocks up to the longest
    sequence's last, all of the table's under graph capture unless cache_seqlens is an int);
  * the lengths (cache_seqlens, cache_batch_idx, block_table's entries that are used) are read
    back once a call to check them, so a bad index is an error rather than a write out of bounds
    and the library is told so (indices_checked) and reads none of them again. On CUDA, where
    nothing but the attention kernel reads them (no append, rotary, cache_leftpad or
    cache_batch_idx), the kernel is enqueued first and the call raises after it, so the device
    computes while the host waits and checks (the kernels clamp what they read); while a CUDA graph
    is captured none can be read: the append's PyTorch indexing then asserts on a row out of range,
    and the attention kernels clamp the lengths and pages they read (flashattn.h);
  * cache_leftpad (the rows before which a left-padded sequence's cache holds nothing) runs the
    varlen form of the kernel: q and the cache flattened, each sequence's keys from its own
    cache_leftpad[b] (flash_attn refuses it with a paged cache; here it is taken, on the copy);
  * num_splits > 1 sets how many pieces the keys are cut into on the Hopper kernel that packs the
    query heads of a KV head into one tile (GQA and MQA decode, and MHA decode with at most 64
    query rows, one head a tile) and on the sm80 kernel; Hopper's other kernels take it as 0.
"""

import operator
import os
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from flashattn import _ext, ops


def _fail(argument: str, message: str) -> None:
    raise ValueError(f"argument '{argument}': {message}")


def _first_outside(values, bound: int):
    """The first of values outside [0, bound), or None: by min / max first (a decode step checks a
    few thousand entries; a Python test an entry cost ~0.25 us each, 260 us a step at batch 64,
    session 77)."""
    if not values or (min(values) >= 0 and max(values) < bound):
        return None
    return next(i for i in values if not 0 <= i < bound)


def _index_tensor(name: str, t: Optional[Tensor], batch: int, device, table: bool = False) -> Optional[Tensor]:
    """t checked as an int32 index tensor on q's device: (batch,), or (batch, max_blocks) for a table."""
    if t is None:
        return None
    shape_ok = isinstance(t, Tensor) and (t.dim() == 2 and t.shape[0] == batch if table else t.shape == (batch,))
    if not shape_ok or t.dtype != torch.int32:
        _fail(name, f"expected an int32 tensor of shape ({batch},{' max_blocks' if table else ''}), got "
                    f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
                    f"{' ' + str(t.dtype) if isinstance(t, Tensor) else ''}")
    if t.device != device:
        _fail(name, f"is on {t.device}; expected q's device {device}")
    return t


def _paging(name: str, table: Optional[Tensor], k_cache: Tensor, batch: int, device):
    """(table checked as _index_tensor checks it, page size, rows a sequence's cache holds): a paged
    cache's pages times the table's width, else the cache's second dimension (page size None)."""
    table = _index_tensor(name, table, batch, device, table=True)
    if table is None:
        return None, None, k_cache.shape[1]
    page = k_cache.shape[1]
    if page < 1:
        _fail("k_cache", f"pages of 0 rows (shape {tuple(k_cache.shape)}); expected page_size >= 1")
    return table, page, table.shape[1] * page


def _gather_pages(k_cache: Tensor, v_cache: Tensor, table: Tensor, blocks: int) -> Tuple[Tensor, Tensor]:
    """The first `blocks` pages each table row names, as contiguous (batch, blocks * page, Hk, D)
    copies. Entries past a sequence's used pages may be anything (pools pad tables with -1 or stale
    pages): clamped, their rows are never read."""
    pages = table[:, :blocks].long().clamp(0, k_cache.shape[0] - 1)
    return k_cache[pages].flatten(1, 2), v_cache[pages].flatten(1, 2)


def _refuse_appends_into_held_rows(others, width: int, page: int, lengths, seqlen_new: int, used_blocks) -> None:
    """Entry blk of sequence b's table row (others, `width` entries a row) holds its rows
    [blk * page, (blk + 1) * page) up to its end, lengths[b] + seqlen_new, and it appends rows
    lengths[b] on. A row appended into a page slot that another entry holds (a row another sequence
    reads as a key, or appends too) would change that sequence's keys, or race: refused. Pages only
    read by several sequences (a common prefix) are fine."""
    holders = {}
    for b, n in enumerate(lengths):
        for blk in range(used_blocks[b]):
            start = blk * page
            held = (min(n + seqlen_new - start, page), max(n - start, 0), b)  # (end, first written, b)
            holders.setdefault(others[b * width + blk], []).append(held)
    for target, held in holders.items():
        for i, (end, first_written, b) in enumerate(held):
            if first_written >= end:
                continue  # nothing appended into this page by b
            for j, (other_end, _, other) in enumerate(held):
                if j != i and first_written < other_end:
                    whose = "another of its own table entries" if other == b else f"sequence {other}"
                    _fail("block_table", f"sequence {b} appends k and v into rows of page {target} that {whose} "
                                         "also holds; appended rows need a page slot of their own")


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, interleaved: bool) -> Tensor:
    """x (B, S, H, D) with its first 2 * cos.shape[1] channels rotated at positions (B, S)."""
    half = cos.shape[1]
    c = cos[positions].unsqueeze(2).float()  # (B, S, 1, half)
    s = sin[positions].unsqueeze(2).float()
    rotary, rest = x[..., :2 * half].float(), x[..., 2 * half:]
    if interleaved:  # GPT-J: channel pairs (2i, 2i + 1)
        x1, x2 = rotary[..., 0::2], rotary[..., 1::2]
        rotated = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:  # GPT-NeoX: the two halves
        x1, x2 = rotary[..., :half], rotary[..., half:]
        rotated = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((rotated.to(x.dtype), rest), dim=-1)


def flash_attn_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor] = None,
                            v: Optional[Tensor] = None, rotary_cos: Optional[Tensor] = None,
                            rotary_sin: Optional[Tensor] = None,
                            cache_seqlens: Optional[Union[int, Tensor]] = None,
                            cache_batch_idx: Optional[Tensor] = None, cache_leftpad: Optional[Tensor] = None,
                            block_table: Optional[Tensor] = None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Tuple[int, int] = (-1, -1), softcap: float = 0.0,
                            rotary_interleaved: bool = True, alibi_slopes: Optional[Tensor] = None,
                            num_splits: int = 0, return_softmax_lse: bool = False):
    """Attention of q against a KV cache, appending k and v to the cache first (in place).

    Arguments:
        q: (batch, seqlen_q, nheads, headdim).
        k_cache, v_cache: (batch_cache, seqlen_cache, nheads_k, headdim), or with block_table a
            paged cache (num_blocks, page_block_size, nheads_k, headdim).
        k, v: optional (batch, seqlen_new, nheads_k, headdim), written into the cache at rows
            cache_seqlens[b] .. cache_seqlens[b] + seqlen_new - 1 of sequence b.
        rotary_cos, rotary_sin: optional (seqlen_ro, rotary_dim / 2): the first rotary_dim
            channels of k are rotated at their cache positions; those of q at cache_seqlens + i
            where causal or windowed, else all at cache_seqlens. rotary_interleaved: GPT-J pairs
            (True) or GPT-NeoX halves (False).
        cache_seqlens: int or (batch,) int32 rows of the cache already filled (None: all of it,
            only without k and v).
        cache_batch_idx: optional (batch,) int32: the cache row of each sequence (else b).
        cache_leftpad: optional (batch,) int32: sequence b's keys are its cache rows
            cache_leftpad[b] .. cache_seqlens[b] + seqlen_new - 1 (the rows before are left
            padding, never read); masks align to that count of keys. Positions (rotary) stay the
            cache's rows, as in flash_attn.
        block_table: optional (batch, max_blocks) int32 page indices of a paged cache.
        softmax_scale, causal, window_size, softcap, alibi_slopes: as flash_attn_func.
        num_splits: 0 lets the library choose how many pieces the keys of a query tile are cut
            into (each run by a CTA of its own, merged after); 1 cuts nothing; more, that many
            (at most 256, the C++ API's kMaxNumSplits, and one piece per key block).
    Return:
        out (batch, seqlen_q, nheads, headdim); with return_softmax_lse, (out, softmax_lse
        (batch, nheads, seqlen_q)).
    """
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, Tensor) or t.dim() != 4:
            _fail(name, "expected a 4-D torch.Tensor")
    if (k is None) != (v is None):
        _fail("k" if k is None else "v", "k and v are given together or not at all")
    if block_table is not None and cache_batch_idx is not None:
        _fail("cache_batch_idx", "cannot be combined with block_table (as in flash_attn)")
    if k_cache.shape != v_cache.shape:
        _fail("v_cache", f"has shape {tuple(v_cache.shape)}; expected k_cache's {tuple(k_cache.shape)}")
    try:  # any integer type (numpy's too), not bool or float
        splits = operator.index(num_splits) if not isinstance(num_splits, bool) else None
    except TypeError:
        splits = None
    if splits is None or not 0 <= splits <= _ext.max_num_splits:
        _fail("num_splits", f"is {num_splits!r}; expected an integer from 0 (the library chooses) to "
                            f"{_ext.max_num_splits}")
    window = _ext.flash_attn_window(window_size)
    softcap = _ext.softcap(softcap)
    causal = _ext.flag("causal", causal)
    batch, seqlen_q, _, headdim = q.shape
    device = q.device
    seqlen_new = 0
    if k is not None:
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, Tensor) or t.dim() != 4 or t.shape[0] != batch or t.shape[2:] != k_cache.shape[2:]:
                _fail(name, f"expected shape (batch {batch}, seqlen_new, {k_cache.shape[2]}, {k_cache.shape[3]})")
        if v.shape != k.shape:
            _fail("v", f"has shape {tuple(v.shape)}; expected k's {tuple(k.shape)}")
        for name, t, cache in (("k", k, k_cache), ("v", v, v_cache)):
            if t.dtype != cache.dtype or t.device != cache.device:
                _fail(name, f"is {t.dtype} on {t.device}; expected the cache's {cache.dtype} on {cache.device}")
        seqlen_new = k.shape[1]
        for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
            if any(step == 0 and n > 1 for step, n in zip(cache.stride(), cache.shape)):
                _fail(name, f"has strides {cache.stride()}: rows that share memory (as expand gives), where "
                            "appending k and v writes every sequence's rows over the others'")
        if v_cache.data_ptr() == k_cache.data_ptr() and v_cache.numel() > 0:
            _fail("v_cache", "is k_cache's memory: the appended v would overwrite the appended k")

    block_table, page, capacity = _paging("block_table", block_table, k_cache, batch, device)
    cache_batch_idx = _index_tensor("cache_batch_idx", cache_batch_idx, batch, device)
    cache_leftpad = _index_tensor("cache_leftpad", cache_leftpad, batch, device)
    if cache_batch_idx is None and block_table is None and k_cache.shape[0] != batch:
        _fail("k_cache", f"has {k_cache.shape[0]} sequences; expected batch {batch} (or give cache_batch_idx)")

    # Lengths the host already knows (an int, or the whole cache) are checked without reading
    # anything back from the device.
    known_length = None
    if cache_seqlens is None:
        if k is not None:
            _fail("cache_seqlens", "is needed where k and v are appended")
        known_length = capacity
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        known_length = cache_seqlens
    else:
        cache_seqlens = _index_tensor("cache_seqlens", cache_seqlens, batch, device)

    rotary = rotary_cos is not None or rotary_sin is not None
    local = causal or window != (-1, -1)
    if rotary and (not (isinstance(rotary_cos, Tensor) and isinstance(rotary_sin, Tensor)) or rotary_cos.dim() != 2
                   or rotary_cos.shape != rotary_sin.shape or 2 * rotary_cos.shape[1] > headdim):
        _fail("rotary_cos", f"expected rotary_cos and rotary_sin of one shape (seqlen_ro, rotary_dim / 2), "
                            f"rotary_dim <= headdim {headdim}")
    if rotary:
        for name, table in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            if not table.dtype.is_floating_point or table.device != device:
                _fail(name, f"is {table.dtype} on {table.device}; expected a real floating-point table on q's "
                            f"device {device}")
    # One read-back of the index tensors (one transfer for all of them), so that every index below
    # is known to be in bounds: a synchronisation with the device, so none where every index is
    # the host's already (cache_seqlens an int or None, no cache_batch_idx or block_table). None
    # while a CUDA graph is being captured (nothing can be read back there): the tensors are then
    # trusted, as the library trusts GPU length vectors under capture (flashattn.h).
    # (Under capture with a known length, that length is still checked; the tensors are trusted.)
    capturing = q.is_cuda and torch.cuda.is_current_stream_capturing()
    index_tensors = [] if capturing else [t.flatten() for t in (
        None if known_length is not None else cache_seqlens, cache_leftpad, cache_batch_idx, block_table)
        if t is not None]
    in_place_pages = (block_table is not None and (not q.is_cuda or page % 128 == 0)
                      and os.environ.get("FLASHATTN_PAGED_GATHER") != "1")
    # Where nothing but the attention kernel reads the indices (no append, rotation, left padding
    # or cache_batch_idx: PyTorch ops that index with them; no gathered copy of the pages), the
    # kernel is enqueued before the host waits for the read-back. The kernels clamp every length
    # and page they read (flashattn.h), so a bad entry costs nothing unsafe, and the call still
    # raises before it returns, so the clamped result is never seen. The device then runs this
    # step's kernel while the host checks and builds the next step, where it used to sit idle
    # through the wait (an eager paged decode step waited 200 us of its ~250 for the host,
    # session 80).
    check_after_launch = (q.is_cuda and bool(index_tensors) and k is None and not rotary and cache_leftpad is None
                          and cache_batch_idx is None and (block_table is None or in_place_pages))
    pending = _start_read_back(index_tensors) if index_tensors else None
    gathered_blocks = None if block_table is None else block_table.shape[1]

    def check_indices():
        """Raises naming the first bad entry; returns the blocks the longest sequence uses."""
        values = _finish_read_back(pending) if pending is not None else []
        if known_length is None:
            lengths, values = values[:batch], values[batch:]
        else:
            lengths = [known_length] * batch
        if cache_leftpad is not None and not capturing:
            pads, values = values[:batch], values[batch:]
        else:
            pads = [0] * batch
        others = values  # cache_batch_idx or the table
        for b, n in enumerate(lengths):
            if n < 0 or n + seqlen_new > capacity:
                _fail("cache_seqlens", f"entry {b} is {n}; with {seqlen_new} new rows it must lie in "
                                       f"[0, {capacity - seqlen_new}] (the cache holds {capacity} rows)")
            if not 0 <= pads[b] <= n:
                _fail("cache_leftpad", f"entry {b} is {pads[b]}; it must lie in [0, {n}] (cache_seqlens there)")
        cache_rows = k_cache.shape[0]
        bad = None if cache_batch_idx is None else _first_outside(others, cache_rows)
        if bad is not None:
            _fail("cache_batch_idx", f"entry {bad} is outside the cache's {cache_rows} sequences")
        if seqlen_new > 0 and cache_batch_idx is not None and not capturing and len(set(others)) < len(others):
            first = {}
            for b, row in enumerate(others):
                if first.setdefault(row, b) != b:
                    _fail("cache_batch_idx", f"sequences {first[row]} and {b} both name cache row {row} while k and v "
                                             "are appended; each appending sequence needs a row of its own")
        blocks = gathered_blocks
        if block_table is not None:
            used_blocks = [(n + seqlen_new + page - 1) // page for n in lengths]
            width = block_table.shape[1]
            blocks = max(max(used_blocks, default=1), 1)
            appending = seqlen_new > 0 and not capturing
            held, entries = set(), 0
            for b in range(batch):
                row = others[b * width:b * width + used_blocks[b]]
                bad = _first_outside(row, cache_rows)
                if bad is not None:
                    _fail("block_table", f"row {b} names block {bad}; the cache has {cache_rows}")
                if appending:
                    held.update(row)
                    entries += len(row)
            # Where no page is named twice (the usual case, one set over the pages in use) no append
            # can reach a row another entry holds.
            if len(held) < entries:
                _refuse_appends_into_held_rows(others, width, page, lengths, seqlen_new, used_blocks)
        reach = max(lengths, default=0) + max(seqlen_new, seqlen_q if local else 1)
        if rotary and reach > rotary_cos.shape[0]:
            _fail("rotary_cos", f"has {rotary_cos.shape[0]} positions; this call needs {reach}")
        return blocks

    if (not capturing or known_length is not None) and not check_after_launch:
        gathered_blocks = check_indices()

    with torch.no_grad():
        # Each torch op here is a kernel launch on every decode step. A length the host knows
        # becomes a tensor only where the kernel needs one (seqused_k of pages, left padding):
        # a contiguous cache's keys are then its first rows, a view of them (sliced_rows), which
        # also sizes the kernel's key pieces by the keys there are rather than by the cache.
        sliced_rows = (known_length + seqlen_new if known_length is not None and block_table is None
                       and cache_leftpad is None and known_length + seqlen_new > 0 else None)
        if known_length is not None and sliced_rows is None and (known_length != capacity or
                                                                  cache_leftpad is not None):
            cache_seqlens = torch.full((batch,), known_length, dtype=torch.int32, device=device)
        if rotary or k is not None:  # (B, 1), or the int itself (broadcast below)
            starts = known_length if known_length is not None else cache_seqlens.long().unsqueeze(1)
        if rotary:
            q_offsets = torch.arange(seqlen_q, device=device) if local else torch.zeros(seqlen_q, dtype=torch.long,
                                                                                         device=device)
            q = _rotate(q, rotary_cos, rotary_sin, (starts + q_offsets).expand(batch, seqlen_q), rotary_interleaved)
        if k is not None:
            positions = (starts + torch.arange(seqlen_new, device=device)).expand(batch, seqlen_new)  # (B, S_new)
            if rotary:
                k = _rotate(k, rotary_cos, rotary_sin, positions, rotary_interleaved)
            if block_table is not None:
                rows = block_table.long().gather(1, positions // page)
                k_cache[rows, positions % page] = k
                v_cache[rows, positions % page] = v
            else:
                rows = (torch.arange(batch, device=device) if cache_batch_idx is None
                        else cache_batch_idx.long()).unsqueeze(1)
                k_cache[rows, positions] = k
                v_cache[rows, positions] = v

        def copied_keys():
            if block_table is not None:
                # A copy of the blocks the longest sequence uses where the lengths are known (all
                # max_blocks under capture with a tensor of lengths).
                return _gather_pages(k_cache, v_cache, block_table, gathered_blocks)
            keys, values = (k_cache, v_cache) if sliced_rows is None else (k_cache[:, :sliced_rows],
                                                                           v_cache[:, :sliced_rows])
            if cache_batch_idx is not None:  # of the sliced rows only
                return keys.index_select(0, cache_batch_idx), values.index_select(0, cache_batch_idx)
            return keys, values

        scale = _ext.softmax_scale(softmax_scale, headdim)
        if cache_leftpad is not None:
            out, lse = _attend_left_padded(q, *copied_keys(), cache_seqlens, seqlen_new, cache_leftpad, scale,
                                           causal, window, softcap, alibi_slopes, splits, capturing)
            return (out, lse) if return_softmax_lse else out
        # The whole cache (cache_seqlens None: nothing appended) needs no lengths; nothing
        # appended needs no sum.
        if sliced_rows is not None or (known_length is not None and known_length == capacity):
            seqused_k = None
        else:
            seqused_k = cache_seqlens + seqlen_new if seqlen_new else cache_seqlens
        # A paged cache the library reads in place: the CPU backends (at any page size) and the
        # CUDA kernels (sm80's, and on Hopper the packed sm90 one), whose key blocks must each
        # lie inside one page (pages of a multiple of 128 rows serve every head dim: sm80 reads
        # those the sm90 kernel's 112-key blocks at 192 cannot). Where this build has no such
        # kernel for the call (head dim, dtype or card), and with FLASHATTN_PAGED_GATHER=1 (an
        # A/B's other side), the pages are copied instead.
        out = None
        if in_place_pages:
            try:
                out, lse = ops._run_forward(q, k_cache, v_cache, None, None, 0, 0, scale, causal, *window,
                                            softcap, alibi_slopes, None, seqused_k, splits, block_table,
                                            indices_checked=True)
            except NotImplementedError:
                if check_after_launch:  # the copy below is sized and indexed by the checked table
                    gathered_blocks = check_indices()
                    check_after_launch = False
        if out is None:
            out, lse = ops.attention(q, *copied_keys(), None, None, 0, 0, scale, causal, *window,
                                     softcap, alibi_slopes, False, None, seqused_k, splits,
                                     indices_checked=True)
        if check_after_launch:
            check_indices()
    return (out, lse) if return_softmax_lse else out


def _start_read_back(tensors):
    """The index tensors' values on their way to the host: one transfer for all of them, into
    pinned memory without waiting on a GPU (an event marks its end), the values themselves on
    the CPU."""
    # One tensor (a table with int lengths, or the lengths alone) goes as it is: a cat would be a
    # kernel launch of its own, 9 us of an eager step's host time (session 80).
    staged = tensors[0] if len(tensors) == 1 else torch.cat(tensors)
    if not staged.is_cuda:
        return staged, None
    host = staged.to("cpu", non_blocking=True)  # on the tensors' device's current stream
    done = torch.cuda.Event()
    done.record(torch.cuda.current_stream(staged.device))  # that stream, not the current device's
    return host, done


def _finish_read_back(pending):
    """The values of _start_read_back's tensors, as a list (waits for the transfer)."""
    host, done = pending
    if done is not None:
        done.synchronize()
    return host.tolist()


def _attend_left_padded(q, keys, values, cache_seqlens, seqlen_new, leftpad, scale, causal, window, softcap,
                        alibi_slopes, splits, capturing):
    """Attention of q (B, Sq, H, D) against keys / values (B, rows, Hk, D) where sequence b's keys
    are its rows leftpad[b] .. cache_seqlens[b] + seqlen_new - 1: the kernel's varlen form, each
    sequence's keys starting at b * rows + leftpad[b] of the flattened cache (cu_seqlens_k) and
    counted by seqused_k, so no row moves. out (B, Sq, H, D), lse (B, H, Sq)."""
    batch, seqlen_q, nheads, headdim = q.shape
    rows = keys.shape[1]
    device = q.device
    starts = torch.arange(batch, dtype=torch.int32, device=device) * rows + leftpad
    # The last sequence's span ends at the flattened cache's end; each span holds its used rows
    # (leftpad[b] <= cache_seqlens[b], checked), so the spans may pass over the next one's padding.
    cu_seqlens_k = torch.cat((starts, torch.full((1,), batch * rows, dtype=torch.int32, device=device)))
    seqused_k = cache_seqlens - leftpad + seqlen_new
    cu_seqlens_q = torch.arange(batch + 1, dtype=torch.int32, device=device) * seqlen_q
    # A span is at most 2 * rows long (rows + leftpad[b + 1] - leftpad[b]); the library derives the
    # longest from cu_seqlens_k (0) except under graph capture, where it must be given.
    longest_k = 2 * rows if capturing else 0
    out, lse = ops.attention(q.reshape(batch * seqlen_q, nheads, headdim), keys.flatten(0, 1), values.flatten(0, 1),
                             cu_seqlens_q, cu_seqlens_k, seqlen_q, longest_k, scale, causal, *window, softcap,
                             alibi_slopes, False, None, seqused_k, splits)
    return out.view(q.shape), lse.view(nheads, batch, seqlen_q).transpose(0, 1).contiguous()
