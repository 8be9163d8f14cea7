"""A tiny random Llama with attn_implementation="tiled_attention" against "sdpa"."""

import pytest
import torch

transformers = pytest.importorskip("transformers")
import flashattn.transformers as fa_hf  # noqa: E402  (registers the implementation)


def tiny_llama(device="cpu", dtype=torch.float32, **overrides):
    sizes = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=256)
    config = transformers.LlamaConfig(**{**sizes, **overrides})
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def padded_batch(device="cpu", batch=3, seqlen=24):
    ids = torch.randint(0, 256, (batch, seqlen), device=device)
    mask = torch.ones(batch, seqlen, dtype=torch.long, device=device)
    mask[1, :7] = 0  # left padding
    if batch > 2:
        mask[2, -5:] = 0  # right padding
    return ids, mask


def logits(model, implementation, **inputs):
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        return model(**inputs).logits.float()


def test_name_avoids_flash():
    assert "flash" not in fa_hf.NAME
    with pytest.raises(ValueError, match="flash"):
        fa_hf.register("my_flash")


def test_selected_by_from_config():
    model = transformers.LlamaForCausalLM._from_config(tiny_llama().config, attn_implementation=fa_hf.NAME)
    assert model.config._attn_implementation == fa_hf.NAME


def test_logits_match_sdpa_without_padding():
    model = tiny_llama()
    ids = torch.randint(0, 256, (2, 40))
    torch.testing.assert_close(logits(model, fa_hf.NAME, input_ids=ids), logits(model, "sdpa", input_ids=ids),
                               atol=1e-4, rtol=1e-4)


def test_padded_batch_goes_through_varlen_and_matches_sdpa():
    model = tiny_llama()
    ids, mask = padded_batch()
    got = logits(model, fa_hf.NAME, input_ids=ids, attention_mask=mask)
    expected = logits(model, "sdpa", input_ids=ids, attention_mask=mask)
    valid = mask.bool()
    torch.testing.assert_close(got[valid], expected[valid], atol=1e-4, rtol=1e-4)


def test_sliding_window_model_matches_sdpa():
    config = transformers.MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, sliding_window=8)
    torch.manual_seed(0)
    model = transformers.MistralForCausalLM(config).eval()
    ids = torch.randint(0, 256, (2, 30))
    torch.testing.assert_close(logits(model, fa_hf.NAME, input_ids=ids), logits(model, "sdpa", input_ids=ids),
                               atol=1e-4, rtol=1e-4)


def test_bidirectional_encoder_with_padding_matches_sdpa():
    config = transformers.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids, mask = padded_batch()
    outputs = {}
    for implementation in (fa_hf.NAME, "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs[implementation] = model(input_ids=ids, attention_mask=mask).last_hidden_state
    valid = mask.bool()
    torch.testing.assert_close(outputs[fa_hf.NAME][valid], outputs["sdpa"][valid], atol=1e-4, rtol=1e-4)


def test_greedy_generation_with_cache_and_left_padding_matches_sdpa():
    model = tiny_llama()
    ids, mask = padded_batch(batch=2)
    outputs = {}
    for implementation in (fa_hf.NAME, "sdpa"):
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs[implementation] = model.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    assert torch.equal(outputs[fa_hf.NAME], outputs["sdpa"])


def test_training_step_gradients_match_sdpa():
    model = tiny_llama()
    ids, mask = padded_batch()
    # Padded positions have no defined output; score only tokens predicted from a real token.
    labels = ids.masked_fill(~(mask.bool() & mask.roll(1, dims=1).bool()), -100)
    grads = {}
    for implementation in (fa_hf.NAME, "sdpa"):
        model.set_attn_implementation(implementation)
        model.zero_grad()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        grads[implementation] = [p.grad.clone() for p in model.parameters()]
    for got, expected in zip(grads[fa_hf.NAME], grads["sdpa"]):
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_logits_match_sdpa_padded(dtype):
    model = tiny_llama("cuda", dtype, hidden_size=512, intermediate_size=1024, num_attention_heads=4)
    ids, mask = padded_batch("cuda", batch=4, seqlen=128)
    got = logits(model, fa_hf.NAME, input_ids=ids, attention_mask=mask)
    expected = logits(model, "sdpa", input_ids=ids, attention_mask=mask)
    valid = mask.bool()
    torch.testing.assert_close(got[valid], expected[valid], atol=5e-2, rtol=5e-2)
    got = logits(model, fa_hf.NAME, input_ids=ids)
    expected = logits(model, "sdpa", input_ids=ids)
    torch.testing.assert_close(got, expected, atol=5e-2, rtol=5e-2)


def test_sequences_packed_by_position_ids_attend_within_their_own():
    # Two sequences in one row marked only by position_ids restarting at 0 (a packing collator
    # without cu_seq_lens): each must see only itself, as when run alone.
    model = tiny_llama()
    torch.manual_seed(1)
    first, second = torch.randint(0, 256, (1, 10)), torch.randint(0, 256, (1, 14))
    packed = torch.cat((first, second), dim=1)
    positions = torch.cat((torch.arange(10), torch.arange(14))).unsqueeze(0)
    got = logits(model, fa_hf.NAME, input_ids=packed, position_ids=positions)
    alone = torch.cat((logits(model, "sdpa", input_ids=first), logits(model, "sdpa", input_ids=second)), dim=1)
    torch.testing.assert_close(got, alone, atol=1e-4, rtol=1e-4)


def test_four_dimensional_mask_is_refused_by_name():
    q = torch.randn(2, 4, 12, 32)
    module = torch.nn.Module()
    mask = torch.ones(2, 1, 12, 12, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match="attention_mask"):
        fa_hf.attention_forward(module, q, q, q, mask)
