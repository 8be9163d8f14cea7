"""flash_attn_with_kvcache against a per-sequence float64 reference: the cache appended row by row,
the rotary embedding channel pair by channel pair, then reference.attention on the used rows."""

import math

import pytest
import torch

from flashattn import _ext, flash_attn_with_kvcache
from reference import assert_close_to_reference, attention


def rotate_reference(x, cos, sin, position, interleaved):
    """x (H, D) at one position, in float64, pair by pair."""
    x = x.double().clone()
    out = x.clone()
    half = cos.shape[1]
    for i in range(half):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
        c, s = float(cos[position, i]), float(sin[position, i])
        out[:, a] = x[:, a] * c - x[:, b] * s
        out[:, b] = x[:, a] * s + x[:, b] * c
    return out


def rotary_tables(seqlen_ro, rotary_dim):
    angles = torch.arange(seqlen_ro).double().unsqueeze(1) / 10000.0 ** (torch.arange(rotary_dim // 2).double() /
                                                                         (rotary_dim // 2))
    return angles.cos().float(), angles.sin().float()


def reference(q, k_cache, v_cache, k, v, lengths, rows, rotary, interleaved, causal, window, softcap, pads=None,
              alibi=None):
    """The caches after the append (float64) and out, lse per sequence; sequence b's keys are its
    cache rows pads[b] .. lengths[b] + seqlen_new - 1 (flash_attn's cache_leftpad), the rotary
    positions the rows themselves."""
    kc, vc = k_cache.double().clone(), v_cache.double().clone()
    outs, lses = [], []
    seqlen_new = 0 if k is None else k.shape[1]
    local = causal or window != (-1, -1)
    for b in range(q.shape[0]):
        n, r = lengths[b], rows[b]
        for j in range(seqlen_new):
            kc[r, n + j] = (rotate_reference(k[b, j], *rotary, n + j, interleaved) if rotary else k[b, j].double())
            vc[r, n + j] = v[b, j].double()
        qb = q[b].double().clone()
        if rotary:
            for i in range(q.shape[1]):
                qb[i] = rotate_reference(q[b, i], *rotary, n + (i if local else 0), interleaved)
        pad = pads[b] if pads else 0
        used = n + seqlen_new
        if used == pad:  # no key: output 0, lse -inf (flash_attn's convention)
            outs.append(torch.zeros_like(qb))
            lses.append(torch.full((q.shape[2], q.shape[1]), -math.inf, dtype=torch.float64))
            continue
        out, lse = attention(qb[None], kc[r, pad:used][None], vc[r, pad:used][None], causal=causal, window=window,
                             softcap=softcap, alibi=None if alibi is None else alibi[b:b + 1])
        outs.append(out[0])
        lses.append(lse[0])
    return kc, vc, torch.stack(outs), torch.stack(lses)


CASES = [
    # batch, seqlen_q, seqlen_new, nheads, nheads_k, cache rows, lengths, options
    dict(lengths=[0, 17, 39], seqlen_q=1, seqlen_new=1),
    dict(lengths=[5, 30, 12], seqlen_q=1, seqlen_new=1, causal=True, rotary="interleaved"),
    dict(lengths=[5, 30, 12], seqlen_q=3, seqlen_new=3, causal=True, rotary="halves"),
    dict(lengths=[9, 0, 25], seqlen_q=2, seqlen_new=0),
    dict(lengths=[9, 2, 25], seqlen_q=4, seqlen_new=4, window=(6, 0), softcap=5.0, rotary="interleaved"),
    dict(lengths=[3, 21, 14], seqlen_q=2, seqlen_new=2, batch_idx=[4, 0, 2], rotary="halves"),
    dict(lengths=[3, 21, 14], seqlen_q=1, seqlen_new=1, paged=8, causal=True, rotary="interleaved"),
    dict(lengths=[0, 33, 7], seqlen_q=5, seqlen_new=5, paged=20, causal=True),
    # cache_leftpad: each sequence's keys from its own row (a pad of all its rows leaves only the
    # new keys, or none), with the masks, the rotary positions, cache_batch_idx and pages.
    dict(lengths=[4, 30, 12], seqlen_q=1, seqlen_new=1, leftpad=[1, 29, 0], rotary="halves"),
    dict(lengths=[5, 30, 12], seqlen_q=3, seqlen_new=3, causal=True, leftpad=[5, 7, 11], rotary="interleaved"),
    dict(lengths=[9, 6, 25], seqlen_q=2, seqlen_new=0, leftpad=[3, 6, 20]),
    dict(lengths=[9, 2, 25], seqlen_q=4, seqlen_new=4, window=(3, 1), softcap=5.0, leftpad=[8, 1, 2]),
    dict(lengths=[3, 21, 14], seqlen_q=2, seqlen_new=2, batch_idx=[4, 0, 2], leftpad=[2, 13, 0], causal=True),
    dict(lengths=[3, 21, 14], seqlen_q=3, seqlen_new=1, paged=8, causal=True, leftpad=[1, 9, 14]),
    dict(lengths=[7, 30, 12], seqlen_q=2, seqlen_new=2, causal=True, alibi=True),
    dict(lengths=[7, 30, 12], seqlen_q=2, seqlen_new=2, causal=True, alibi=True, leftpad=[2, 25, 6]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k != "lengths"))
def test_with_kvcache_matches_reference(case):
    check_case(case)


# An int cache_seqlens (every sequence the same length, known to the host): the contiguous cache's
# keys are a view of its first rows, the pages' and left padding's lengths a tensor made here;
# the same answers as the tensor of lengths gives, appends and rotary positions included.
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items() if k != "lengths"))
def test_with_kvcache_int_lengths_match_reference(case):
    length = min(max(case["lengths"]), 40 - case["seqlen_new"])
    pads = case.get("leftpad")
    check_case(dict(case, lengths=[length] * 3, **({"leftpad": [min(p, length) for p in pads]} if pads else {})),
               int_lengths=True)


def check_case(case, int_lengths=False):
    torch.manual_seed(7)
    batch, nheads, nheads_k, headdim, capacity = 3, 4, 2, 32, 40
    lengths, seqlen_q, seqlen_new = case["lengths"], case["seqlen_q"], case["seqlen_new"]
    causal, window, softcap = case.get("causal", False), case.get("window", (-1, -1)), case.get("softcap", 0.0)
    batch_idx = case.get("batch_idx")
    cache_batch = 5 if batch_idx else batch
    q = torch.randn(batch, seqlen_q, nheads, headdim)
    k_cache = torch.randn(cache_batch, capacity, nheads_k, headdim)
    v_cache = torch.randn(cache_batch, capacity, nheads_k, headdim)
    k = torch.randn(batch, seqlen_new, nheads_k, headdim) if seqlen_new else None
    v = torch.randn(batch, seqlen_new, nheads_k, headdim) if seqlen_new else None
    rotary = rotary_tables(64, 24) if case.get("rotary") else None
    interleaved = case.get("rotary") == "interleaved"
    rows = batch_idx or list(range(batch))
    pads = case.get("leftpad")
    alibi = torch.rand(batch, nheads) + 0.1 if case.get("alibi") else None
    kc_ref, vc_ref, out_ref, lse_ref = reference(q, k_cache, v_cache, k, v, lengths, rows, rotary, interleaved,
                                                 causal, window, softcap, pads, alibi)
    options = dict(k=k, v=v, cache_seqlens=lengths[0] if int_lengths else torch.tensor(lengths, dtype=torch.int32),
                   causal=causal,
                   window_size=window, softcap=softcap, rotary_interleaved=interleaved, return_softmax_lse=True)
    if pads:
        options["cache_leftpad"] = torch.tensor(pads, dtype=torch.int32)
    if alibi is not None:
        options["alibi_slopes"] = alibi
    if rotary:
        options.update(rotary_cos=rotary[0], rotary_sin=rotary[1])
    if batch_idx:
        options["cache_batch_idx"] = torch.tensor(batch_idx, dtype=torch.int32)
    if case.get("paged"):
        # The same rows laid out in pages of a shuffled pool with spare blocks.
        page = case["paged"]
        blocks = capacity // page
        pool = torch.randperm(batch * blocks + 3)[:batch * blocks].view(batch, blocks).to(torch.int32)
        k_pages = torch.randn(batch * blocks + 3, page, nheads_k, headdim)
        v_pages = torch.randn_like(k_pages)
        for b in range(batch):
            for i in range(blocks):
                k_pages[pool[b, i]] = k_cache[b, i * page:(i + 1) * page]
                v_pages[pool[b, i]] = v_cache[b, i * page:(i + 1) * page]
        out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, block_table=pool, **options)
        k_cache = torch.stack([k_pages[pool[b].long()].flatten(0, 1) for b in range(batch)])
        v_cache = torch.stack([v_pages[pool[b].long()].flatten(0, 1) for b in range(batch)])
    else:
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, **options)
    assert_close_to_reference(out, out_ref, name="out")
    assert_close_to_reference(lse, lse_ref, name="lse")
    # The append happened in place, at the right rows only (every other row keeps its bits).
    assert_close_to_reference(k_cache, kc_ref, atol=1e-6, name="k_cache")
    assert torch.equal(v_cache.double(), vc_ref), "v_cache"


def test_int_cache_seqlens_and_plain_output():
    torch.manual_seed(1)
    q = torch.randn(2, 1, 2, 16)
    k_cache, v_cache = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=6, softmax_scale=0.3)
    ref, _ = attention(q, k_cache[:, :6], v_cache[:, :6], scale=0.3)
    assert_close_to_reference(out, ref, name="out")
    # Without cache_seqlens the whole cache is read.
    ref_all, _ = attention(q, k_cache, v_cache)
    assert_close_to_reference(flash_attn_with_kvcache(q, k_cache, v_cache), ref_all, name="out (whole cache)")


def test_with_kvcache_errors():
    q = torch.randn(2, 1, 2, 16)
    k_cache, v_cache = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    k = v = torch.randn(2, 1, 2, 16)
    lengths = torch.tensor([3, 9], dtype=torch.int32)
    k_before = k_cache.clone()
    with pytest.raises(ValueError, match="argument 'cache_seqlens': entry 1 is 10"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=torch.tensor([3, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'cache_seqlens': entry 0 is -1"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([-1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'cache_seqlens': entry 0 is 10"):  # an int, checked on the host
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=10)
    with pytest.raises(ValueError, match="argument 'cache_seqlens': expected an int32"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths.long())
    with pytest.raises(ValueError, match="argument 'cache_seqlens': is needed"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v)
    with pytest.raises(ValueError, match="argument 'v': k and v"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, None, cache_seqlens=lengths)
    with pytest.raises(ValueError, match="argument 'k': expected shape"):
        flash_attn_with_kvcache(q, k_cache, v_cache, torch.randn(2, 1, 3, 16), v, cache_seqlens=lengths)
    with pytest.raises(ValueError, match="argument 'v': is torch.float16 on cpu; expected the cache's torch.float32"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v.half(), cache_seqlens=lengths)
    with pytest.raises(ValueError, match="argument 'cache_batch_idx': entry 7"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                cache_batch_idx=torch.tensor([0, 7], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'block_table': row 0 names block 5"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([3, 1], dtype=torch.int32),
                                block_table=torch.tensor([[5], [1]], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'block_table': row 1 names block -3"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([3, 1], dtype=torch.int32),
                                block_table=torch.tensor([[0], [-3]], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'cache_batch_idx': entry -1"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths,
                                cache_batch_idx=torch.tensor([1, -1], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'cache_batch_idx': cannot be combined"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, block_table=torch.zeros(2, 1, dtype=torch.int32),
                                cache_batch_idx=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'rotary_cos': has 4 positions; this call needs 10"):
        cos, sin = rotary_tables(4, 8)
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, rotary_cos=cos, rotary_sin=sin)
    with pytest.raises(ValueError, match=r"argument 'cache_leftpad': entry 1 is 10; it must lie in \[0, 9\]"):
        flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths,
                                cache_leftpad=torch.tensor([0, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match=r"argument 'cache_leftpad': entry 0 is -2"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=6, cache_leftpad=torch.tensor([-2, 0], dtype=torch.int32))
    with pytest.raises(ValueError, match="argument 'cache_leftpad': expected an int32 tensor of shape \\(2,\\)"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, cache_leftpad=lengths.long())
    with pytest.raises(ValueError, match="argument 'k_cache': has 2 sequences; expected batch 3"):
        flash_attn_with_kvcache(torch.randn(3, 1, 2, 16), k_cache, v_cache)
    assert _ext.max_num_splits == 256  # the bound the docstring and flash_attn's callers know
    for bad in (-1, 257, True, 2.0, "2"):
        with pytest.raises(ValueError, match="argument 'num_splits': is"):
            flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, num_splits=bad)
    # The refused calls wrote nothing into the cache.
    assert torch.equal(k_cache, k_before)


def test_leftpad_with_no_query_rows_or_no_sequences():
    # Shapes with nothing to compute give empty results, as the call without cache_leftpad does
    # (q flattened for the varlen form must not divide by its zero rows).
    k_cache, v_cache = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    pads = torch.tensor([1, 0], dtype=torch.int32)
    lengths = torch.tensor([4, 7], dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(torch.randn(2, 0, 2, 16), k_cache, v_cache, cache_seqlens=lengths,
                                       cache_leftpad=pads, return_softmax_lse=True)
    assert out.shape == (2, 0, 2, 16) and lse.shape == (2, 2, 0)
    none = torch.zeros(0, dtype=torch.int32)
    out, lse = flash_attn_with_kvcache(torch.randn(0, 1, 2, 16), k_cache[:0], v_cache[:0], cache_seqlens=none,
                                       cache_leftpad=none, return_softmax_lse=True)
    assert out.shape == (0, 1, 2, 16) and lse.shape == (0, 2, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("leftpad", [False, True], ids=["plain", "leftpad"])
@pytest.mark.parametrize("num_splits", [0, 3])
@pytest.mark.parametrize("paged", [False, True])
def test_with_kvcache_on_gpu_bf16(paged, num_splits, leftpad):
    # A decode step as an inference loop runs it: GQA 8 / 2 heads, d128, one new token each, bf16.
    # num_splits 3: on Hopper each packed tile's 4 key blocks cut into 3 pieces (0: not cut here).
    # leftpad: left-padded sequences (cache_leftpad), one padded to its whole cache.
    torch.manual_seed(3)
    batch, nheads, nheads_k, headdim, capacity, page = 4, 8, 2, 128, 512, 128
    lengths = [0, 100, 383, 511]
    pads = [0, 37, 383, 7] if leftpad else None
    q = torch.randn(batch, 1, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k_cache = torch.randn(batch, capacity, nheads_k, headdim, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    k, v = (torch.randn(batch, 1, nheads_k, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cos, sin = (t.cuda() for t in rotary_tables(capacity, 64))
    kc_ref, vc_ref, out_ref, lse_ref = reference(q.cpu(), k_cache.cpu(), v_cache.cpu(), k.cpu(), v.cpu(), lengths,
                                                 list(range(batch)), (cos.cpu(), sin.cpu()), False, True, (-1, -1), 0.0,
                                                 pads)
    options = dict(cache_seqlens=torch.tensor(lengths, dtype=torch.int32, device="cuda"), causal=True,
                   rotary_cos=cos, rotary_sin=sin, rotary_interleaved=False, return_softmax_lse=True,
                   num_splits=num_splits)
    if leftpad:
        options["cache_leftpad"] = torch.tensor(pads, dtype=torch.int32, device="cuda")
    if paged:
        blocks = capacity // page
        table = torch.randperm(batch * blocks, device="cuda").view(batch, blocks).to(torch.int32)
        k_pages = torch.empty(batch * blocks, page, nheads_k, headdim, device="cuda", dtype=torch.bfloat16)
        v_pages = torch.empty_like(k_pages)
        k_pages[table.long()] = k_cache.view(batch, blocks, page, nheads_k, headdim)
        v_pages[table.long()] = v_cache.view(batch, blocks, page, nheads_k, headdim)
        out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, k, v, block_table=table, **options)
        k_cache, v_cache = k_pages[table.long()].flatten(1, 2), v_pages[table.long()].flatten(1, 2)
    else:
        out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, **options)
    # bf16 inputs rotated in float32 and rounded once: a few units of bf16 in O.
    assert_close_to_reference(out.cpu(), out_ref, atol=2e-2, rtol=2e-2, name="out")
    assert_close_to_reference(lse.cpu(), lse_ref, atol=1e-2, rtol=1e-3, name="lse")
    assert_close_to_reference(k_cache.cpu(), kc_ref, atol=2e-2, rtol=1e-2, name="k_cache")
    assert torch.equal(v_cache.cpu().double(), vc_ref), "v_cache"


@pytest.mark.gpu
@pytest.mark.parametrize("page, headdim", [(128, 128), (256, 128), (128, 256)])
def test_paged_cache_is_read_in_place_on_gpu(page, headdim, monkeypatch):
    # Pages of a multiple of 128 rows: the kernel reads them where they are, so the call allocates
    # little beside out and lse, where the copy (FLASHATTN_PAGED_GATHER=1, the control: the
    # measurement sees a copy when there is one) allocates the reached pages of K and V again. Both
    # give what the contiguous cache gives, within bf16's reach (different kernels on Hopper).
    # Head dim 256: on Hopper the packed sm90 kernel's 64-key blocks, two a page (since session 84;
    # sm80 reads these pages in place too, so this checks values and memory, not the route:
    # Sm90Paged.WideHeadDimsMatchReference checks that).
    torch.manual_seed(9)
    batch, nheads, nheads_k, capacity = 3, 16, 4, 4096
    blocks = capacity // page
    q = torch.randn(batch, 1, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = (torch.randn(batch, capacity, nheads_k, headdim, device="cuda", dtype=torch.bfloat16)
                        for _ in range(2))
    # The table sliced from a wider one (its rows 2 * blocks entries apart), as pools hand them out.
    wide = torch.full((batch, 2 * blocks), -1, dtype=torch.int32, device="cuda")
    wide[:, :blocks] = torch.randperm(batch * blocks + 5, device="cuda")[:batch * blocks].view(batch, blocks)
    table = wide[:, :blocks]
    k_pages = torch.full((batch * blocks + 5, page, nheads_k, headdim), float("nan"), device="cuda",
                         dtype=torch.bfloat16)
    v_pages = k_pages.clone()
    k_pages[table.long()] = k_cache.view(batch, blocks, page, nheads_k, headdim)
    v_pages[table.long()] = v_cache.view(batch, blocks, page, nheads_k, headdim)
    lengths = torch.tensor([capacity, 1, 2500], dtype=torch.int32, device="cuda")
    out_ref, lse_ref = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, return_softmax_lse=True)
    cache_bytes = k_cache.numel() * k_cache.element_size()

    def paged_call():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out, lse = flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=lengths, block_table=table,
                                           return_softmax_lse=True)
        torch.cuda.synchronize()
        return out, lse, torch.cuda.max_memory_allocated() - base

    out, lse, extra = paged_call()
    assert extra < cache_bytes / 8, f"the paged call allocated {extra} bytes (the cache's K: {cache_bytes})"
    torch.testing.assert_close(out.float(), out_ref.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, lse_ref, atol=1e-3, rtol=1e-4)
    monkeypatch.setenv("FLASHATTN_PAGED_GATHER", "1")
    out_copy, lse_copy, extra_copy = paged_call()
    assert extra_copy >= cache_bytes, f"the copy allocated only {extra_copy} bytes"
    torch.testing.assert_close(out_copy.float(), out_ref.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("paged", [False, True])
def test_bad_indices_raise_though_the_kernel_ran_first_on_gpu(paged, monkeypatch):
    # Where only the attention kernel reads the lengths and the table, the kernel is enqueued
    # before the host waits for their read-back (the kernels clamp what they read), and the call
    # still raises on a bad entry: the error names it, the device is left without a fault, and the
    # next call with good indices is right.
    from flashattn import kvcache
    torch.manual_seed(12)
    batch, nheads, nheads_k, headdim, capacity, page = 3, 8, 2, 128, 1024, 128
    blocks = capacity // page
    q = torch.randn(batch, 1, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = (torch.randn(batch, capacity, nheads_k, headdim, device="cuda", dtype=torch.bfloat16)
                        for _ in range(2))
    lengths = [capacity, 300, 1]
    options = dict(return_softmax_lse=True)
    if paged:
        table = torch.randperm(batch * blocks, device="cuda").view(batch, blocks).to(torch.int32)
        k_pages, v_pages = (torch.empty(batch * blocks, page, nheads_k, headdim, device="cuda", dtype=torch.bfloat16)
                            for _ in range(2))
        k_pages[table.long()] = k_cache.view(batch, blocks, page, nheads_k, headdim)
        v_pages[table.long()] = v_cache.view(batch, blocks, page, nheads_k, headdim)
        caches, options["block_table"] = (k_pages, v_pages), table
    else:
        caches = (k_cache, v_cache)
    order = []
    forward, finish = _ext.forward, kvcache._finish_read_back
    monkeypatch.setattr(_ext, "forward", lambda *a, **kw: (order.append("kernel"), forward(*a, **kw))[1])
    monkeypatch.setattr(kvcache, "_finish_read_back", lambda p: (order.append("check"), finish(p))[1])

    def call(used, **more):
        return flash_attn_with_kvcache(q, *caches, cache_seqlens=torch.tensor(used, dtype=torch.int32, device="cuda"),
                                       **{**options, **more})

    for bad in (-5, capacity + 1, 2 ** 30):
        with pytest.raises(ValueError, match=f"argument 'cache_seqlens': entry 1 is {bad}"):
            call([capacity, bad, 1])
    if paged:
        for bad in (-7, batch * blocks, 2 ** 30):
            wrong = table.clone()
            wrong[2, 0] = bad
            with pytest.raises(ValueError, match=f"argument 'block_table': row 2 names block {bad}"):
                call(lengths, block_table=wrong)
    assert order[:2] == ["kernel", "check"], order
    torch.cuda.synchronize()  # no fault left behind by the clamped launches
    out, lse = call(lengths)
    for b, n in enumerate(lengths):  # bf16 out: within a few of its ulps of the float64 reference
        ref, ref_lse = attention(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n])
        assert_close_to_reference(out[b:b + 1], ref, atol=1e-2, name=f"out[{b}]")
        assert_close_to_reference(lse[b:b + 1], ref_lse, atol=1e-4, name=f"lse[{b}]")


def test_num_splits_any_integer_type():
    # The CPU ignores num_splits, so every accepted value gives the same answer.
    np = pytest.importorskip("numpy")
    torch.manual_seed(2)
    q = torch.randn(2, 1, 4, 16)
    k_cache, v_cache = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    plain = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7)
    for splits in (1, 256, np.int64(3), torch.tensor(2).item()):
        assert torch.equal(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=7, num_splits=splits), plain)


@pytest.mark.gpu
@pytest.mark.parametrize("kv_heads", [2, 8])
def test_num_splits_reaches_the_hopper_kernel(kv_heads):
    # Decode over 1000 keys (8 key blocks a tile), GQA 8 / 2 and MHA 8 / 8 (the packed kernel at
    # G = 1): num_splits 4 cuts each tile's keys into 4 pieces and 1 into none, so the logsumexp's
    # float32 rounding differs between the two (were num_splits lost on the way, both would run
    # the same launch), while both stay within bf16's reach of each other.
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the key splits are the Hopper kernel's")
    torch.manual_seed(6)
    q = torch.randn(2, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
    k_cache, v_cache = (torch.randn(2, 1000, kv_heads, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lengths = torch.tensor([1000, 990], dtype=torch.int32, device="cuda")
    runs = {n: flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, num_splits=n,
                                       return_softmax_lse=True) for n in (1, 4)}
    (out1, lse1), (out4, lse4) = runs[1], runs[4]
    assert not torch.equal(lse1, lse4), "num_splits 1 and 4 ran the same launch"
    torch.testing.assert_close(out4.float(), out1.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse4, lse1, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("paged", [False, True])
def test_the_library_is_told_the_lengths_were_checked(paged, monkeypatch):
    # flash_attn_with_kvcache reads the lengths and the table back once to check them, and says so
    # (indices_checked), so the library does not read them back a second time (a wait on the
    # device each: session 77 measured three a paged step).
    calls = []
    forward = _ext.forward

    def recording_forward(*args, **kwargs):
        calls.append(kwargs.get("indices_checked"))
        return forward(*args, **kwargs)

    monkeypatch.setattr(_ext, "forward", recording_forward)
    torch.manual_seed(4)
    q = torch.randn(2, 1, 4, 16)
    lengths = torch.tensor([5, 8], dtype=torch.int32)
    if paged:
        pages = torch.randn(4, 4, 2, 16), torch.randn(4, 4, 2, 16)
        flash_attn_with_kvcache(q, *pages, cache_seqlens=lengths,
                                block_table=torch.tensor([[2, 0], [1, 3]], dtype=torch.int32))
    else:
        flash_attn_with_kvcache(q, torch.randn(2, 8, 2, 16), torch.randn(2, 8, 2, 16), cache_seqlens=lengths)
    assert calls == [True]


def test_int_length_hands_the_library_the_used_rows(monkeypatch):
    # An int cache_seqlens on a contiguous cache: the library gets a view of the first
    # cache_seqlens + seqlen_new rows and no seqused_k (no lengths tensor made, the key pieces
    # sized by the keys there are); on pages it still gets the lengths.
    from flashattn import ops
    calls = []
    forward = ops._run_forward

    def recording_forward(*args, **kwargs):  # args[1]: k, args[14]: seqused_k
        calls.append((args[1].shape[1], args[14] is None))
        return forward(*args, **kwargs)

    monkeypatch.setattr(ops, "_run_forward", recording_forward)
    torch.manual_seed(8)
    q = torch.randn(2, 1, 4, 16)
    k_cache, v_cache = torch.randn(2, 12, 2, 16), torch.randn(2, 12, 2, 16)
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=5)
    flash_attn_with_kvcache(q, k_cache, v_cache, torch.randn(2, 1, 2, 16), torch.randn(2, 1, 2, 16), cache_seqlens=5)
    flash_attn_with_kvcache(q, k_cache.view(6, 4, 2, 16), v_cache.view(6, 4, 2, 16), cache_seqlens=5,
                            block_table=torch.tensor([[0, 1, 2], [3, 4, 5]], dtype=torch.int32))
    assert calls == [(5, True), (6, True), (4, False)]


def test_block_table_entries_past_the_used_blocks_may_be_anything():
    torch.manual_seed(5)
    q = torch.randn(2, 1, 2, 16)
    pages = torch.randn(6, 4, 2, 16), torch.randn(6, 4, 2, 16)
    table = torch.tensor([[3, 1, -1, 99], [0, 5, 2, -7]], dtype=torch.int32)  # used: 2 and 3 blocks
    lengths = torch.tensor([6, 9], dtype=torch.int32)
    out = flash_attn_with_kvcache(q, *pages, cache_seqlens=lengths, block_table=table)
    for b, blocks in enumerate(([3, 1], [0, 5, 2])):
        keys, values = (torch.cat([p[i] for i in blocks])[:int(lengths[b])] for p in pages)
        ref, _ = attention(q[b:b + 1], keys[None], values[None])
        assert_close_to_reference(out[b:b + 1], ref, name=f"out[{b}]")


@pytest.mark.gpu
@pytest.mark.parametrize("cache_len,heads,kv_heads,d,new_lengths", [
    (256, 8, 2, 64, (37, 101)),
    # On Hopper 16 packed tiles cut by keys into pieces (the key splits), their workspace then
    # the graph's own: the replay must still match the eager call bit for bit.
    (6144, 32, 8, 128, (5000, 2999)),
    # MHA: 32 tiles of the packed kernel at G = 1, split the same way.
    (6144, 16, 16, 128, (5000, 2999)),
])
def test_with_kvcache_under_cuda_graph_capture(cache_len, heads, kv_heads, d, new_lengths):
    # A captured decode step replayed with new lengths gives what an eager call gives.
    torch.manual_seed(4)
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(2, 1, heads, d, device=dev, dtype=dt)
    k_cache, v_cache = (torch.randn(2, cache_len, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    k, v = (torch.randn(2, 1, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    lengths = torch.tensor([10, cache_len - 56], dtype=torch.int32, device=dev)
    caches = k_cache.clone(), v_cache.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        flash_attn_with_kvcache(q, k_cache.clone(), v_cache.clone(), k, v, cache_seqlens=lengths, causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attn_with_kvcache(q, *caches, k, v, cache_seqlens=lengths, causal=True)
    lengths.copy_(torch.tensor(new_lengths, dtype=torch.int32))
    graph.replay()
    eager_caches = k_cache.clone(), v_cache.clone()
    expected = flash_attn_with_kvcache(q, *eager_caches, k, v, cache_seqlens=lengths, causal=True)
    torch.cuda.synchronize()
    assert torch.equal(out, expected)
    assert torch.equal(caches[0], eager_caches[0]) and torch.equal(caches[1], eager_caches[1])
    assert torch.equal(caches[0][1, new_lengths[1]], k[1, 0])  # the replay appended at the new lengths


@pytest.mark.gpu
def test_paged_kvcache_under_cuda_graph_capture():
    # A captured decode step on a paged cache (pages of 128 rows: read in place; nothing read back
    # under capture, the table and lengths trusted) replayed after the lengths and the whole table
    # changed gives what an eager call on the new ones gives, bit for bit, and appends where the
    # new table says: the table is read at replay, not baked in at capture.
    torch.manual_seed(10)
    dev, dt = "cuda", torch.bfloat16
    batch, heads, kv_heads, d, page, blocks = 2, 16, 4, 128, 128, 8
    pool = batch * blocks + 4
    q = torch.randn(batch, 1, heads, d, device=dev, dtype=dt)
    k, v = (torch.randn(batch, 1, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    k_pages, v_pages = (torch.randn(pool, page, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    table = torch.randperm(pool, device=dev)[:batch * blocks].view(batch, blocks).to(torch.int32)
    lengths = torch.tensor([10, 700], dtype=torch.int32, device=dev)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph
        flash_attn_with_kvcache(q, k_pages.clone(), v_pages.clone(), k, v, cache_seqlens=lengths, block_table=table,
                                causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = flash_attn_with_kvcache(q, k_pages, v_pages, k, v, cache_seqlens=lengths, block_table=table,
                                      causal=True)
    new_lengths = (900, 3)
    lengths.copy_(torch.tensor(new_lengths, dtype=torch.int32))
    table.copy_(torch.randperm(pool, device=dev)[:batch * blocks].view(batch, blocks).to(torch.int32))
    eager_pages = k_pages.clone(), v_pages.clone()
    graph.replay()
    expected = flash_attn_with_kvcache(q, *eager_pages, k, v, cache_seqlens=lengths, block_table=table, causal=True)
    torch.cuda.synchronize()
    assert torch.equal(out, expected)
    assert torch.equal(k_pages, eager_pages[0]) and torch.equal(v_pages, eager_pages[1])
    for b, n in enumerate(new_lengths):  # the replay appended at the new lengths, in the new table's pages
        assert torch.equal(k_pages[table[b, n // page].long(), n % page], k[b, 0])


@pytest.mark.gpu
def test_with_kvcache_leftpad_under_cuda_graph_capture():
    # cache_leftpad in a captured decode step (nothing read back: the pads and lengths trusted, the
    # longest key span given as twice the cache) replayed with new lengths and pads, against the
    # float64 reference. Not bit for bit against an eager call: eager derives the longest span
    # from cu_seqlens_k, so the library may choose its launch differently.
    torch.manual_seed(8)
    dev, dt = "cuda", torch.bfloat16
    batch, heads, kv_heads, d, cache_len = 2, 16, 4, 128, 3000
    q = torch.randn(batch, 1, heads, d, device=dev, dtype=dt)
    k_cache, v_cache = (torch.randn(batch, cache_len, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    k, v = (torch.randn(batch, 1, kv_heads, d, device=dev, dtype=dt) for _ in range(2))
    lengths = torch.tensor([10, 2000], dtype=torch.int32, device=dev)
    pads = torch.tensor([4, 100], dtype=torch.int32, device=dev)
    kc, vc = k_cache.clone(), v_cache.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph
        flash_attn_with_kvcache(q, kc.clone(), vc.clone(), k, v, cache_seqlens=lengths, cache_leftpad=pads, causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=lengths, cache_leftpad=pads, causal=True,
                                           return_softmax_lse=True)
    new_lengths, new_pads = [1999, 37], [1500, 37]
    lengths.copy_(torch.tensor(new_lengths, dtype=torch.int32))
    pads.copy_(torch.tensor(new_pads, dtype=torch.int32))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _, _, out_ref, lse_ref = reference(q.cpu(), k_cache.cpu(), v_cache.cpu(), k.cpu(), v.cpu(), new_lengths,
                                       list(range(batch)), None, False, True, (-1, -1), 0.0, new_pads)
    assert_close_to_reference(out.cpu(), out_ref, atol=2e-2, rtol=2e-2, name="out")
    assert_close_to_reference(lse.cpu(), lse_ref, atol=1e-2, rtol=1e-3, name="lse")


def test_with_kvcache_reads_back_only_tensors_of_indices(monkeypatch):
    """A read-back of the indices synchronises with the device: none where cache_seqlens is an int
    or None and no index tensor is given; one (of every tensor together) where there is one to check."""
    from flashattn import kvcache
    reads = []  # the read-backs started, each as the count of tensors it carries
    start = kvcache._start_read_back
    monkeypatch.setattr(kvcache, "_start_read_back", lambda tensors: reads.append(len(tensors)) or start(tensors))
    q = torch.randn(2, 1, 2, 16)
    k_cache, v_cache = torch.randn(2, 10, 2, 16), torch.randn(2, 10, 2, 16)
    expected = flash_attn_with_kvcache(q, k_cache[:, :6], v_cache[:, :6])
    assert reads == []
    assert torch.equal(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=6), expected)
    assert reads == []
    lengths = torch.tensor([6, 6], dtype=torch.int32)
    assert torch.equal(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths), expected)
    assert reads == [1]
    flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=6, cache_batch_idx=torch.tensor([1, 0], dtype=torch.int32))
    assert reads == [1, 1]
    # The whole cache as None, as an int and as a tensor (the first two pass the library no lengths).
    whole = flash_attn_with_kvcache(q, k_cache, v_cache)
    assert torch.equal(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=10), whole)
    assert torch.equal(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor([10, 10], dtype=torch.int32)),
                       whole)
    assert not torch.equal(expected, whole)
