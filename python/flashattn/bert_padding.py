"""Padding helpers with flash_attn.bert_padding's names and return conventions.

A padded batch (batch, seqlen, ...) with a 0/1 attention mask becomes the packed (total, ...)
layout of the varlen functions, plus the cu_seqlens and the indices to scatter results back.
"""

import torch
import torch.nn.functional as F

__all__ = ["unpad_input", "pad_input", "index_first_axis"]


def index_first_axis(x, indices):
    """x[indices] along the first axis, for x of shape (batch * seqlen, ...)."""
    return x.index_select(0, indices)


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """Keep the tokens where attention_mask (batch, seqlen) is nonzero.

    unused_mask marks tokens that are kept in the output but not counted in seqused.
    Return: (hidden_states (total, ...), indices (total,), cu_seqlens (batch + 1,) int32,
             max_seqlen_in_batch (int), seqused (batch,) int32).
    """
    all_mask = attention_mask + unused_mask if unused_mask is not None else attention_mask
    seqlens = all_mask.sum(dim=-1, dtype=torch.int32)
    seqused = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(all_mask.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max().item()) if seqlens.numel() else 0
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = hidden_states.reshape(-1, *hidden_states.shape[2:])
    return index_first_axis(flat, indices), indices, cu_seqlens, max_seqlen, seqused


def pad_input(hidden_states, indices, batch, seqlen):
    """Inverse of unpad_input: scatter (total, ...) rows back to (batch, seqlen, ...), zeros elsewhere."""
    out = hidden_states.new_zeros((batch * seqlen, *hidden_states.shape[1:]))
    out.index_copy_(0, indices, hidden_states)
    return out.reshape(batch, seqlen, *hidden_states.shape[1:])
