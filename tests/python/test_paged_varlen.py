"""flash_attn_varlen_func with block_table: variable-length queries over a paged cache. Checked
against the float64 reference on the unpaged keys the pages hold (NaN in the spare pages and past
each sequence's keys, so a wrong page or row shows), read in place and through the copy
(FLASHATTN_PAGED_GATHER=1)."""

import pytest
import torch

from flashattn import flash_attn_varlen_func
from reference import assert_close_to_reference, cu_seqlens, varlen_attention


def paged_case(lengths_q, lengths_k, page, nheads=4, nheads_k=2, headdim=32, device="cpu", dtype=torch.float32,
               seed=0):
    """q rows, unpaged k / v rows and their pages: (q, k, v, cu_q, cu_k, k_pages, v_pages, table)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lengths_q), nheads, headdim, generator=gen).to(device, dtype)
    k, v = (torch.randn(sum(lengths_k), nheads_k, headdim, generator=gen).to(device, dtype) for _ in range(2))
    blocks = [(n + page - 1) // page for n in lengths_k]
    width = max(blocks) + 1  # one entry past every sequence's keys: -1, never read
    spare = 3
    order = torch.randperm(sum(blocks) + spare, generator=gen).tolist()
    table = torch.full((len(lengths_k), width), -1, dtype=torch.int32)
    k_pages = torch.full((sum(blocks) + spare, page, nheads_k, headdim), float("nan"), dtype=dtype, device=device)
    v_pages = k_pages.clone()
    row = 0
    for b, n in enumerate(lengths_k):
        for j in range(blocks[b]):
            p = order.pop()
            table[b, j] = p
            rows = min(page, n - j * page)
            k_pages[p, :rows] = k[row + j * page:row + j * page + rows]
            v_pages[p, :rows] = v[row + j * page:row + j * page + rows]
        row += n
    return (q, k, v, cu_seqlens(lengths_q, device), cu_seqlens(lengths_k, device), k_pages, v_pages,
            table.to(device))


@pytest.mark.parametrize("page", [1, 16, 48])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("gather", ["0", "1"])
def test_paged_varlen_matches_the_reference(page, causal, gather, monkeypatch):
    monkeypatch.setenv("FLASHATTN_PAGED_GATHER", gather)
    lengths_q, lengths_k = [3, 0, 5, 1], [40, 0, 61, 7]
    q, k, v, cu_q, cu_k, k_pages, v_pages, table = paged_case(lengths_q, lengths_k, page, seed=page)
    # Over pages cu_seqlens_k gives lengths only: an offset (a slice of a longer vector) changes nothing.
    out, lse, _ = flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k + 1000, max(lengths_q), max(lengths_k),
                                         causal=causal, block_table=table, return_attn_probs=True)
    ref_out, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, causal=causal)
    assert_close_to_reference(out, ref_out, name="out")
    assert_close_to_reference(lse, ref_lse, name="lse")
    plain = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal)
    # Copied, or read in place on the CPU kernel's packed path (tiles across pages staged): the
    # unpaged call's tiles, its bits.
    assert torch.equal(out, plain), "paged and unpaged keys gave different bits on the CPU"


@pytest.mark.parametrize("gather", ["0", "1"])
def test_paged_varlen_with_seqused_k(gather, monkeypatch):
    # Sequence 0 uses 20 of its 33 keys: 2 pages of 16, so its third entry may be anything.
    monkeypatch.setenv("FLASHATTN_PAGED_GATHER", gather)
    lengths_q, lengths_k = [2, 4], [33, 50]
    q, k, v, cu_q, cu_k, k_pages, v_pages, table = paged_case(lengths_q, lengths_k, 16, seed=3)
    table[0, 2] = -1
    used = torch.tensor([20, 50], dtype=torch.int32)
    out = flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k + 7, 4, 50, block_table=table, seqused_k=used)
    ref, _ = varlen_attention(q, k, v, cu_q, cu_k, seqused_k=used)
    assert_close_to_reference(out, ref, name="out")


@pytest.mark.gpu
@pytest.mark.parametrize("page", [16, 128, 256])
def test_paged_varlen_on_gpu(page, monkeypatch):
    # Pages of 128 and 256 rows are read in place by the sm80 kernel; 16-row pages (vLLM's default)
    # are copied first. Both equal the unpaged varlen call within bf16's reach, and the copy
    # (FLASHATTN_PAGED_GATHER=1) equals the in-place read within it too.
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    lengths_q, lengths_k = [7, 1, 0, 130], [1000, 300, 0, 777]
    q, k, v, cu_q, cu_k, k_pages, v_pages, table = paged_case(lengths_q, lengths_k, page, nheads=16, nheads_k=4,
                                                              headdim=128, device="cuda", dtype=torch.bfloat16)
    for causal in (False, True):
        out = flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k, 130, 1000, causal=causal, block_table=table)
        plain = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 130, 1000, causal=causal)
        torch.testing.assert_close(out.float(), plain.float(), atol=2e-2, rtol=2e-2)
        assert out.isfinite().all()
        monkeypatch.setenv("FLASHATTN_PAGED_GATHER", "1")
        copied = flash_attn_varlen_func(q, k_pages, v_pages, cu_q, cu_k, 130, 1000, causal=causal, block_table=table)
        monkeypatch.delenv("FLASHATTN_PAGED_GATHER")
        torch.testing.assert_close(copied.float(), out.float(), atol=2e-2, rtol=2e-2)
