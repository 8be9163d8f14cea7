"""float64 PyTorch attention with flashattn's documented semantics (see include/flashattn/flashattn.h):
bottom-right aligned causal/window masks, tanh softcap, ALiBi, GQA, empty rows give 0 and lse -inf."""

import math

import torch


def attention(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi=None, scale=None, dtype=torch.float64,
              chunk=0):
    """q (B, Sq, H, D), k/v (B, Sk, Hk, D) -> out (B, Sq, H, D), lse (B, H, Sq), computed in dtype.
    chunk > 0 (FlashAttention-3's attention_chunk): query i sees key j only where j // chunk equals
    (i + Sk - Sq) // chunk."""
    batch, seqlen_q, nheads, headdim = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(headdim) if scale is None else scale
    q, k, v = (t.to(dtype) for t in (q, k, v))
    k = k.repeat_interleave(nheads // nheads_k, dim=2)
    v = v.repeat_interleave(nheads // nheads_k, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(seqlen_q, device=q.device).view(-1, 1)
    j = torch.arange(seqlen_k, device=q.device).view(1, -1)
    diagonal = i + seqlen_k - seqlen_q
    if alibi is not None:
        slopes = alibi.to(dtype).reshape(-1, nheads, 1, 1)
        s = s - slopes * (diagonal - j).abs()
    visible = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=q.device)
    right = 0 if causal else window[1]
    if right >= 0:
        visible &= j <= diagonal + right
    if window[0] >= 0:
        visible &= j >= diagonal - window[0]
    if chunk > 0:
        visible &= torch.div(j, chunk, rounding_mode="floor") == torch.div(diagonal, chunk, rounding_mode="floor")
    s = s.masked_fill(~visible, float("-inf"))
    row_max = s.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(s - row_max)
    denom = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    lse = torch.where(denom > 0, torch.log(denom) + row_max, torch.full_like(denom, float("-inf")))
    return torch.einsum("bhqk,bkhd->bqhd", p, v), lse.squeeze(-1)


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, alibi=None, seqused_q=None, seqused_k=None, **options):
    """Packed (total, H, D) inputs: each sequence through attention(). lse is (H, total_q).

    With seqused_q/seqused_k, sequence b is only its first seqused rows; the query rows past them
    get output 0 and lse -inf (and no gradient flows to any unused row)."""
    outs, lses = [], []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(bounds_q) - 1):
        span_q = bounds_q[b + 1] - bounds_q[b]
        used_q = span_q if seqused_q is None else int(seqused_q[b])
        used_k = bounds_k[b + 1] - bounds_k[b] if seqused_k is None else int(seqused_k[b])
        qb = q[bounds_q[b]:bounds_q[b] + used_q].unsqueeze(0)
        kb = k[bounds_k[b]:bounds_k[b] + used_k].unsqueeze(0)
        vb = v[bounds_k[b]:bounds_k[b] + used_k].unsqueeze(0)
        alibi_b = None if alibi is None else (alibi[b] if alibi.dim() == 2 else alibi)
        if used_k:
            out, lse = attention(qb, kb, vb, alibi=alibi_b, **options)
        else:  # no key at all: every row sees none
            dtype = options.get("dtype", torch.float64)
            out = torch.zeros(1, used_q, *q.shape[1:], dtype=dtype, device=q.device)
            lse = torch.full((1, q.shape[1], used_q), float("-inf"), dtype=dtype, device=q.device)
        outs.append(torch.cat([out[0], out.new_zeros(span_q - used_q, *out.shape[2:])]))
        lses.append(torch.cat([lse[0], lse.new_full((lse.shape[1], span_q - used_q), float("-inf"))], dim=1))
    return torch.cat(outs), torch.cat(lses, dim=1)


def cu_seqlens(lengths, device="cpu"):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32, device=device)


def alibi_slopes(nheads, batch=None, device="cpu"):
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / nheads) for h in range(nheads)], device=device)
    return slopes if batch is None else slopes.repeat(batch, 1) * torch.linspace(0.5, 1.5, batch, device=device).view(-1, 1)


def assert_close_to_reference(actual, reference, lowp_reference=None, atol=1e-5, rtol=1e-4, factor=2.0, name=""):
    """actual vs a float64 reference. With lowp_reference (PyTorch's own computation in the same low
    precision), the error may be up to `factor` times PyTorch's own error plus atol."""
    actual, reference = actual.double(), reference.double()
    finite = torch.isfinite(reference)
    assert torch.equal(finite, torch.isfinite(actual)), f"{name}: non-finite entries differ"
    err = (actual - reference)[finite].abs().max().item() if finite.any() else 0.0
    if lowp_reference is None:
        bound = atol + rtol * reference[finite].abs().max().item() if finite.any() else atol
    else:
        lowp_err = (lowp_reference.double() - reference)[finite].abs().max().item() if finite.any() else 0.0
        bound = factor * lowp_err + atol
    assert err <= bound, f"{name}: max error {err:.3g} > bound {bound:.3g}"
