"""Hugging Face transformers attention backed by flashattn.

    import flashattn.transformers                      # registers the implementation
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation="tiled_attention")
    # or: model.set_attn_implementation("tiled_attention")

The name avoids the word "flash": transformers treats such names as flash_attn variants or hub
kernels. The mask function is transformers' own FlashAttention one: None when nothing is padded,
else the 2-D (batch, kv_length) padding mask, which this module turns into a variable-length
(unpadded, cu_seqlens) call, as it does sequences packed into one row (cu_seq_lens_q / _k, or
position_ids that restart). Sliding windows and logit softcapping are passed through; attention
sinks (s_aux) and dropout > 0 raise.
"""

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from flashattn.bert_padding import index_first_axis, pad_input, unpad_input
from flashattn.flash_attn_interface import flash_attn_func, flash_attn_varlen_func

__all__ = ["NAME", "attention_forward", "register"]

NAME = "tiled_attention"


def _window(sliding_window):
    # transformers' convention for FlashAttention: a token sees sliding_window - 1 tokens back.
    if sliding_window is None:
        return (-1, -1)
    return (sliding_window - 1, sliding_window - 1)


def _autocast(*tensors):
    device_type = tensors[0].device.type
    if tensors[0].dtype == torch.float32 and torch.is_autocast_enabled(device_type):
        dtype = torch.get_autocast_dtype(device_type)
        return tuple(t.to(dtype) for t in tensors)
    return tensors


def _varlen_padded(q, k, v, attention_mask, **options):
    """Padded (batch, seqlen, nheads, headdim) inputs through the varlen path."""
    batch, seqlen_q = q.shape[:2]
    # Queries are the last seqlen_q positions of the key sequence (prefill or decoding with a cache).
    q_unpad, q_indices, cu_seqlens_q, max_seqlen_q, _ = unpad_input(q, attention_mask[:, -seqlen_q:])
    k_unpad, k_indices, cu_seqlens_k, max_seqlen_k, _ = unpad_input(k, attention_mask)
    v_unpad = index_first_axis(v.reshape(-1, *v.shape[2:]), k_indices)
    out = flash_attn_varlen_func(q_unpad, k_unpad, v_unpad, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                 max_seqlen_k, **options)
    return pad_input(out, q_indices, batch, seqlen_q)


def _varlen_packed(q, k, v, cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k, **options):
    """Several sequences packed into one row (data collators with cu_seq_lens)."""
    out = flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_seq_lens_q.int(),
                                 cu_seq_lens_k.int(), int(max_length_q), int(max_length_k), **options)
    return out.unflatten(0, q.shape[:2])


def _packed_by_positions(position_ids, q, k):
    """(cu_seqlens, max_seqlen) of sequences packed into one row that only position_ids mark, each
    restarting at the row's lowest position, as transformers' own FlashAttention path reads them
    (a collator that packs without cu_seq_lens); None for one sequence (its positions run on),
    a batch of rows, or a step against a cache. One read-back, as in transformers."""
    if (position_ids is None or position_ids.dim() != 2 or q.shape[0] != 1 or q.shape[1] < 2
            or position_ids.shape != (1, q.shape[1]) or k.shape[1] != q.shape[1]):
        return None
    positions = position_ids.reshape(-1)
    starts = (positions == positions.min()).nonzero().view(-1).tolist()
    if len(starts) < 2 or starts[0] != 0:
        return None
    bounds = starts + [positions.numel()]
    cu_seqlens = torch.tensor(bounds, dtype=torch.int32, device=q.device)
    return cu_seqlens, max(b - a for a, b in zip(bounds, bounds[1:]))


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      sliding_window=None, softcap=None, is_causal=None, s_aux=None, **kwargs):
    """transformers' attention signature: query/key/value (batch, nheads, seqlen, headdim) in,
    (attn_output (batch, seqlen, nheads, headdim), None) out."""
    if s_aux is not None:
        raise NotImplementedError(f"attn_implementation={NAME!r}: attention sinks (s_aux) are not supported")
    if query.shape[-1] != value.shape[-1]:
        raise NotImplementedError(f"attn_implementation={NAME!r}: value head dim {value.shape[-1]} differs "
                                  f"from query head dim {query.shape[-1]}")
    q, k, v = _autocast(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    options = dict(dropout_p=dropout, softmax_scale=scaling, causal=bool(is_causal),
                   window_size=_window(sliding_window), softcap=softcap or 0.0)
    if attention_mask is not None:
        if attention_mask.dim() != 2:
            raise ValueError(f"argument 'attention_mask': has shape {tuple(attention_mask.shape)}; "
                             f"attn_implementation={NAME!r} takes only transformers' 2-D (batch, kv_length) "
                             "padding mask (its mask function's), not a 4-D one")
        out = _varlen_padded(q, k, v, attention_mask, **options)
    elif kwargs.get("cu_seq_lens_q") is not None:
        out = _varlen_packed(q, k, v, kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"], kwargs["max_length_q"],
                             kwargs["max_length_k"], **options)
    elif (packed := _packed_by_positions(kwargs.get("position_ids"), q, k)) is not None:
        cu_seqlens, longest = packed
        out = _varlen_packed(q, k, v, cu_seqlens, cu_seqlens, longest, longest, **options)
    else:
        out = flash_attn_func(q, k, v, **options)
    return out, None


def register(name: str = NAME) -> str:
    """Register flashattn with transformers under `name` (done on import with the default name)."""
    if "flash" in name:
        raise ValueError(f"name {name!r} contains 'flash', which transformers reserves for its own flash "
                         "attention and hub kernels; pick another")
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, flash_attention_mask)
    return name


register()
