"""flash_attn_varlen_func's block_table: variable-length queries over a paged KV cache (a prefill
chunk beside decode steps, as serving stacks batch them), forward only.

k and v are pages (num_pages, page_size, nheads_k, headdim); sequence b's keys are rows 0 ..
cu_seqlens_k[b + 1] - cu_seqlens_k[b] - 1 of the pages block_table[b] names, in order (the prefix
sums give lengths only, as in flash_attn). The library reads the pages in place (the CPU
backends at any page size, the CUDA sm80 kernel where a page holds a multiple of its key tile,
on Hopper too); where the build has no kernel for the call, or with FLASHATTN_PAGED_GATHER=1 (an
A/B's other side), each sequence's reached pages are copied into varlen rows first.
"""

import os

import torch

from flashattn import ops
from flashattn.kvcache import _first_outside


def paged_varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                           window, softcap, alibi_slopes, seqused_q, seqused_k, block_table):
    """(out, lse) of q's rows against the paged k / v; arguments as ops._run_forward's."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise NotImplementedError("argument 'block_table': paged k / v are for the forward only (inference); "
                                  "no gradient flows through them (run under torch.no_grad(), or without "
                                  "block_table for training)")
    for name, t in (("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"argument '{name}': has shape {tuple(t.shape)}; with block_table it holds pages "
                             "(num_pages, page_size, nheads_k, headdim)")
    args = (softmax_scale, causal, *window, softcap, alibi_slopes, seqused_q, seqused_k, 0)
    with torch.no_grad():
        if os.environ.get("FLASHATTN_PAGED_GATHER") != "1":
            try:
                return ops._run_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *args,
                                        block_table)
            except NotImplementedError:
                pass
        if q.is_cuda and torch.cuda.is_current_stream_capturing():
            raise NotImplementedError(
                f"argument 'block_table': this build has no kernel that reads pages of {k.shape[1]} rows in "
                "place (pages of a multiple of 128 rows serve every head dim), and copying them needs the "
                "lengths read back, which a CUDA graph capture cannot do")
        keys, values, cu_rows = _gathered_rows(k, v, cu_seqlens_k, seqused_k, block_table)
        return ops._run_forward(q, keys, values, cu_seqlens_q, cu_rows, max_seqlen_q, max_seqlen_k, *args)


def _gathered_rows(k, v, cu_seqlens_k, seqused_k, block_table):
    """(keys, values, cu_seqlens): k and v as unpaged varlen rows, sequence b's keys at rows
    cu_seqlens_k[b] - cu_seqlens_k[0] .. (its used ones, seqused_k[b] where given; the rest 0),
    and the prefix sums that address them. The library has checked none of the indices yet, so
    they are read back and checked here before they index anything."""
    if block_table.dim() != 2 or block_table.dtype != torch.int32 or block_table.device != k.device:
        raise ValueError(f"argument 'block_table': expected an int32 (batch, max_blocks) tensor on {k.device}")
    if v.shape != k.shape:
        raise ValueError(f"argument 'v': has shape {tuple(v.shape)}; expected k's {tuple(k.shape)}")
    page = k.shape[1]
    if page < 1:
        raise ValueError(f"argument 'k': pages of 0 rows (shape {tuple(k.shape)}); expected page_size >= 1")
    cu = cu_seqlens_k.tolist()
    if len(cu) != block_table.shape[0] + 1:
        raise ValueError(f"argument 'block_table': has {block_table.shape[0]} rows; expected one per sequence "
                         f"({len(cu) - 1})")
    used_k = None if seqused_k is None else seqused_k.tolist()
    table = block_table.tolist()
    pieces = []
    for b, row in enumerate(table):
        length = cu[b + 1] - cu[b]
        if length < 0 or cu[b] < 0:
            raise ValueError(f"argument 'cu_seqlens_k': entries {b} and {b + 1} are {cu[b]} and {cu[b + 1]}; "
                             "expected non-negative, non-decreasing prefix sums")
        if length > len(row) * page:
            raise ValueError(f"argument 'cu_seqlens_k': holds a sequence of {length} keys; block_table reaches "
                             f"{len(row) * page}")
        if used_k is not None and len(used_k) == len(table) and 0 <= used_k[b] < length:
            length = used_k[b]  # entries past the used keys may be anything (the library's rule)
        used = row[:(length + page - 1) // page]
        bad = _first_outside(used, k.shape[0])
        if bad is not None:
            raise ValueError(f"argument 'block_table': row {b} names page {bad}; k has {k.shape[0]}")
        pieces.append((length, torch.tensor(used, dtype=torch.long, device=k.device)))
    rows = [n - cu[0] for n in cu]
    shape = (rows[-1],) + tuple(k.shape[2:])
    keys, values = k.new_zeros(shape), v.new_zeros(shape)
    for b, (length, pages) in enumerate(pieces):
        if length:
            keys[rows[b]:rows[b] + length] = k[pages].flatten(0, 1)[:length]
            values[rows[b]:rows[b] + length] = v[pages].flatten(0, 1)[:length]
    return keys, values, torch.tensor(rows, dtype=torch.int32, device=cu_seqlens_k.device)
