"""Chunked attention (FlashAttention-3's attention_chunk, Llama 4's local layers) on the library's
varlen form, without a mask of its own.

With chunk C, query i of a sequence (position p = i + seqlen_k - seqlen_q, masks bottom-right
aligned as everywhere) sees key j only where j // C == p // C, besides the causal and window
limits. The keys a chunk's queries may see are one contiguous span of key rows (the chunk's), and
the queries whose position falls in one chunk are contiguous rows too, so every (sequence, chunk)
is an ordinary attention problem of its own: a sub-sequence of the varlen form with those queries
and the chunk's keys. Its masks align bottom-right, like the whole problem's, and the two
alignments agree: the last query of a sequence sits at its last key, so a chunk's queries end
where its keys end (the last chunk's at the sequence's last key), and query i of the chunk sits at
key i + (its keys - its queries) of it, the whole problem's position less the chunk's start. So
causal, windows and softcap carry over unchanged, and nothing is masked by the chunk itself.

Queries whose position lies before every key (seqlen_q > seqlen_k) see nothing: a sub-sequence
without keys (output 0, lse -inf). With seqused_q / seqused_k, the unused rows form sub-sequences
without queries or keys (output 0, lse -inf, gradient 0, as the library leaves them).

The sub-sequences are laid out on the host: cu_seqlens (and seqused) on a GPU are read back, so a
call waits for the device once, and none can run under CUDA graph capture (refused).
"""

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from flashattn import ops


def _host_ints(name: str, t: Optional[Tensor]) -> Optional[List[int]]:
    if t is None:
        return None
    if not isinstance(t, Tensor) or t.dim() != 1 or t.dtype != torch.int32:
        raise ValueError(f"argument '{name}': expected a 1-D int32 tensor")
    return t.tolist()


def chunk_layout(first_q: int, spans_q: List[int], used_q: List[int], first_k: int, spans_k: List[int],
                 used_k: List[int], chunk: int):
    """The sub-sequences of every (sequence, chunk): (cu_seqlens_q, cu_seqlens_k, seqused_k,
    longest query span, longest key span) as host lists. The sequences' query rows lie end to end
    from row first_q, spans_q[b] of them for sequence b, its first used_q[b] used; its keys
    likewise from first_k. The sub-sequences tile each sequence's rows in order (rows before
    first_q and past the last sequence stay outside, as the library leaves rows outside every
    sequence)."""
    cu_q, cu_k, seqused = [first_q], [first_k], []

    def add(queries: int, keys: int, keys_used: int) -> None:
        cu_q.append(cu_q[-1] + queries)
        cu_k.append(cu_k[-1] + keys)
        seqused.append(keys_used)

    for b in range(len(spans_q)):
        sq, sk = used_q[b], used_k[b]
        offset = sk - sq  # query i sits at key position i + offset
        before = min(max(-offset, 0), sq)  # queries before every key: no chunk
        if before:
            add(before, 0, 0)
        if before < sq:
            # The queries sit at positions offset + before .. sk - 1, so from the chunk of the
            # first one every chunk has queries, and the chunks before it form one sub-sequence
            # without any (a query-less sub-sequence per chunk would multiply them: the kernels
            # take at most 65535 sequences a call).
            start = (offset + before) // chunk * chunk
            if start:
                add(0, start, 0)
            for first_key in range(start, sk, chunk):
                last_key = min(first_key + chunk, sk)
                # last_key - offset <= sk - offset = sq: the last chunk ends at the last query (a
                # chunk's first query may sit past its first key: the alignment holds).
                add(last_key - offset - max(first_key - offset, before), last_key - first_key, last_key - first_key)
        elif sk:
            add(0, sk, 0)  # no query sees a key
        # The unused rows past seqused (nothing runs on them; the library leaves them as they are).
        if spans_q[b] > sq or spans_k[b] > sk:
            add(spans_q[b] - sq, spans_k[b] - sk, 0)
    longest_q = longest_k = 0  # (a loop: torch.compile traces no max(..., default=))
    for i in range(len(seqused)):
        longest_q = max(longest_q, cu_q[i + 1] - cu_q[i])
        longest_k = max(longest_k, cu_k[i + 1] - cu_k[i])
    return cu_q, cu_k, seqused, longest_q, longest_k


def chunked_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Optional[Tensor],
                      cu_seqlens_k: Optional[Tensor], seqused_q: Optional[Tensor], seqused_k: Optional[Tensor],
                      chunk: int, scale: float, causal: bool, window: Tuple[int, int], softcap: float,
                      deterministic: bool, num_splits: int) -> Tuple[Tensor, Tensor]:
    """(out, lse) of attention with attention_chunk = chunk (> 0), in the shapes of the call
    without it: fixed-length 4-D tensors (lse (batch, nheads, seqlen_q)) or varlen rows
    (lse (nheads, total_q)). The other arguments are already checked as the library takes them."""
    left, right = window
    if q.is_cuda and torch.cuda.is_current_stream_capturing():
        raise NotImplementedError(f"argument 'attention_chunk': is {chunk}; flashattn lays the chunks out on the "
                                  "host, which cannot read lengths back under CUDA graph capture")
    varlen = cu_seqlens_q is not None
    if varlen != (cu_seqlens_k is not None):
        raise ValueError("argument 'cu_seqlens_k': cu_seqlens_q and cu_seqlens_k are given together or not at all")
    # q, k and v are cut into rows below, so the library sees their batch and lengths no more:
    # checked here, each by name.
    form = "rows (total, nheads, headdim) with cu_seqlens" if varlen else "(batch, seqlen, nheads, headdim)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != (3 if varlen else 4):
            raise ValueError(f"argument '{name}': has shape {tuple(t.shape)}; expected {form}")
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"argument 'v': has shape {tuple(v.shape)}; expected k's {tuple(k.shape)} rows and heads")
    if not varlen and k.shape[0] != q.shape[0]:
        raise ValueError(f"argument 'k': batch {k.shape[0]} does not match q's batch {q.shape[0]}")
    if varlen:
        cu_q, cu_k = _host_ints("cu_seqlens_q", cu_seqlens_q), _host_ints("cu_seqlens_k", cu_seqlens_k)
        if len(cu_q) < 1:
            raise ValueError("argument 'cu_seqlens_q': has 0 entries; expected batch + 1 >= 1")
        if len(cu_q) != len(cu_k):
            raise ValueError(f"argument 'cu_seqlens_k': has {len(cu_k)} entries; expected cu_seqlens_q's {len(cu_q)}")
        spans_q = [b - a for a, b in zip(cu_q, cu_q[1:])]
        spans_k = [b - a for a, b in zip(cu_k, cu_k[1:])]
        for name, spans in (("cu_seqlens_q", spans_q), ("cu_seqlens_k", spans_k)):
            bad = next((b for b, n in enumerate(spans) if n < 0), None)
            if bad is not None:
                raise ValueError(f"argument '{name}': entry {bad + 1} is below entry {bad}; entries must not decrease")
        first_q, first_k = cu_q[0], cu_k[0]
        q_rows, k_rows, v_rows = q, k, v
    else:
        batch, seqlen_q, seqlen_k = q.shape[0], q.shape[1], k.shape[1]
        spans_q, spans_k = [seqlen_q] * batch, [seqlen_k] * batch
        first_q = first_k = 0
        q_rows, k_rows, v_rows = q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1)
    batch = len(spans_q)
    used_q = _host_ints("seqused_q", seqused_q) or spans_q
    used_k = _host_ints("seqused_k", seqused_k) or spans_k
    for name, used, spans in (("seqused_q", used_q, spans_q), ("seqused_k", used_k, spans_k)):
        if len(used) != batch:
            raise ValueError(f"argument '{name}': has {len(used)} entries; expected one per sequence ({batch})")
        bad = next((b for b in range(batch) if not 0 <= used[b] <= spans[b]), None)
        if bad is not None:
            raise ValueError(f"argument '{name}': entry {bad} is {used[bad]} but sequence {bad} has {spans[bad]} rows")
    cu_q, cu_k, seqused, longest_q, longest_k = chunk_layout(first_q, spans_q, used_q, first_k, spans_k, used_k,
                                                             chunk)
    device = q.device
    as_tensor = (lambda values: torch.tensor(values, dtype=torch.int32).to(device, non_blocking=True))
    try:
        out, lse = ops.attention(q_rows, k_rows, v_rows, as_tensor(cu_q), as_tensor(cu_k), longest_q, longest_k,
                                 scale, causal, left, right, softcap, None, deterministic, None, as_tensor(seqused),
                                 num_splits)
    except (NotImplementedError, ValueError) as error:
        if "cu_seqlens" not in str(error) and "batch" not in str(error) and "seqused" not in str(error):
            raise
        # About the sub-sequences this layout made, not about the caller's arguments.
        raise type(error)(f"argument 'attention_chunk': {chunk} cuts this call into {len(seqused)} sub-sequences, "
                          f"which the library refused: {error}") from None
    if varlen:
        return out, lse
    lse = lse.view(q.shape[2], q.shape[0], q.shape[1]).transpose(0, 1)
    return out.view(q.shape), lse.clone(memory_format=torch.contiguous_format)
