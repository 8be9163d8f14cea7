"""Variable-length queries against a KV cache: FlashAttention-3's flash_attn_with_kvcache with
cu_seqlens_q (a serving step that extends several sequences by different numbers of tokens, e.g.
chunked prefill against a paged cache).

Sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of q (total_q, nheads,
headdim); its keys are the first cache_seqlens[b] rows of its cache: row b of a contiguous cache
(batch, seqlen_cache, nheads_k, headdim), or the pages page_table[b] names of a paged one
(num_pages, page_size, nheads_k, headdim). Masks align each sequence's queries to the end of its
keys (bottom-right), as everywhere in flashattn. The library's varlen form runs it as it is:
  * a paged cache in place, cu_seqlens_k the prefix sums of the lengths (the library reads each
    sequence's keys from row 0 of its pages), where the kernels take the page size (any on the
    CPU; on CUDA see flashattn.kvcache), else the pages the sequences use are gathered into a
    contiguous copy first;
  * a contiguous cache as rows (batch * seqlen_cache, nheads_k, headdim), a view where its first
    two dimensions merge, sequence b's keys from row b * seqlen_cache, counted by seqused_k.
cache_seqlens is read back and checked here, a gathered table's used entries too, and the library
reads back and checks cu_seqlens_q and a table it reads in place (flashattn.h), so a bad entry is an
error naming the caller's argument; under CUDA graph capture nothing is read back and the kernels
clamp what they read. Not taken here, each refused by name: appending k / v, rotary
tables, cache_batch_idx, cache_leftpad (write new rows into the cache first, rotated).
"""

from typing import Optional

import torch
from torch import Tensor

from flashattn import _ext, ops
from flashattn.kvcache import _fail, _first_outside, _gather_pages, _index_tensor, _paging

# The library's names for what this call builds from the caller's arguments.
_CALLER_NAMES = {"'block_table'": "'page_table'", "'seqused_k'": "'cache_seqlens'", "'k'": "'k_cache'",
                 "'v'": "'v_cache'"}


def _in_callers_names(error: Exception) -> Exception:
    message = str(error)
    for ours, theirs in _CALLER_NAMES.items():
        message = message.replace("argument " + ours, "argument " + theirs)
    return type(error)(message)


def varlen_queries_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, cu_seqlens_q: Tensor,
                                max_seqlen_q: Optional[int], cache_seqlens, page_table: Optional[Tensor],
                                scale: float, causal: bool, window, softcap: float, num_splits: int):
    """out (total_q, nheads, headdim) and lse (nheads, total_q) of the module's docstring; scale,
    causal, window, softcap and num_splits already checked as the library takes them."""
    if not isinstance(q, Tensor) or q.dim() != 3:
        _fail("q", "expected a 3-D torch.Tensor (total_q, nheads, headdim) where cu_seqlens_q is given")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, Tensor) or t.dim() != 4:
            _fail(name, "expected a 4-D torch.Tensor")
    if k_cache.shape != v_cache.shape:
        _fail("v_cache", f"has shape {tuple(v_cache.shape)}; expected k_cache's {tuple(k_cache.shape)}")
    if not isinstance(cu_seqlens_q, Tensor) or cu_seqlens_q.dim() != 1 or cu_seqlens_q.shape[0] < 1:
        _fail("cu_seqlens_q", "expected a 1-D int32 tensor (batch + 1,)")
    batch = cu_seqlens_q.shape[0] - 1
    device = q.device
    capturing = q.is_cuda and torch.cuda.is_current_stream_capturing()
    page_table, page, capacity = _paging("page_table", page_table, k_cache, batch, device)
    if page_table is None and k_cache.shape[0] != batch:
        _fail("k_cache", f"has {k_cache.shape[0]} sequences; expected one per sequence of cu_seqlens_q ({batch})")

    if cache_seqlens is None or (isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool)):
        length = capacity if cache_seqlens is None else cache_seqlens  # None: the whole cache
        if not 0 <= length <= capacity:
            _fail("cache_seqlens", f"is {length}; it must lie in [0, {capacity}] (the cache holds {capacity} rows a "
                                   "sequence)")
        lengths = torch.full((batch,), length, dtype=torch.int32, device=device)
        known = [length] * batch
    else:
        lengths = _index_tensor("cache_seqlens", cache_seqlens, batch, device)
        known = None if capturing else lengths.tolist()
        bad = None if known is None else next((b for b, n in enumerate(known) if not 0 <= n <= capacity), None)
        if bad is not None:
            _fail("cache_seqlens", f"entry {bad} is {known[bad]}; it must lie in [0, {capacity}] (the cache holds "
                                   f"{capacity} rows a sequence)")
    if capturing and max_seqlen_q is None:
        _fail("max_seqlen_q", "is None; under CUDA graph capture the longest query sequence must be given")
    # The library reads cu_seqlens back and derives the longest sequences, except under capture.
    longest_q = _ext.integer("max_seqlen_q", max_seqlen_q) if capturing else 0
    longest_k = capacity if capturing else 0

    def run(keys, values, cu_seqlens_k, seqused_k, table):
        try:
            return ops._run_forward(q, keys, values, cu_seqlens_q, cu_seqlens_k, longest_q, longest_k, scale, causal,
                                    *window, softcap, None, None, seqused_k, num_splits, table)
        except (ValueError, TypeError) as error:
            raise _in_callers_names(error) from None

    if page_table is not None:
        cu_seqlens_k = torch.cat((torch.zeros(1, dtype=torch.int32, device=device),
                                  lengths.cumsum(0, dtype=torch.int32)))
        try:
            return run(k_cache, v_cache, cu_seqlens_k, None, page_table)
        except NotImplementedError:
            pass  # a page size the kernels cannot read in place: the used pages, gathered
        if known is None:  # under capture: every page of the table, trusted
            blocks = page_table.shape[1]
        else:
            used_blocks = [(n + page - 1) // page for n in known]
            blocks = max(max(used_blocks, default=1), 1)
            entries = page_table[:, :blocks].tolist()
            for b, n in enumerate(used_blocks):
                bad = _first_outside(entries[b][:n], k_cache.shape[0])
                if bad is not None:
                    _fail("page_table", f"row {b} names page {bad}; k_cache has {k_cache.shape[0]} pages")
        k_cache, v_cache = _gather_pages(k_cache, v_cache, page_table, blocks)
        capacity = blocks * page
        longest_k = capacity if capturing else 0
    rows = k_cache.shape[1]
    cu_seqlens_k = torch.arange(batch + 1, dtype=torch.int32, device=device) * rows
    return run(k_cache.flatten(0, 1), v_cache.flatten(0, 1), cu_seqlens_k, lengths, None)
