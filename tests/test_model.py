"""The Transformer's modules against independent references and the seeds' invariants."""

import pytest
import torch

from seqlab.model import num_parameters
from seqlab.model.attention import MultiHeadAttention
from seqlab.model.masks import padding_mask
from seqlab.model.transformer import Embedder, EncoderLayer, Transformer, TransformerConfig

SMALL = TransformerConfig(d_model=32, num_layers=2, num_heads=4, d_ff=64, dropout=0.1, max_length=64)


def _copy_into_torch_mha(mha: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    d = mha.w_q.in_features
    ref = torch.nn.MultiheadAttention(d, mha.num_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.w_q.bias, mha.w_k.bias, mha.w_v.bias]))
        ref.out_proj.weight.copy_(mha.w_o.weight)
        ref.out_proj.bias.copy_(mha.w_o.bias)
    return ref.eval()


@pytest.mark.parametrize("need_weights", [False, True])
def test_multi_head_attention_equals_torch(need_weights):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    ref = _copy_into_torch_mha(mha)
    query, memory = torch.randn(3, 5, 16), torch.randn(3, 7, 16)
    ids = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    out, weights = mha(query, memory, memory, padding_mask(ids), need_weights=need_weights)
    expected, expected_weights = ref(query, memory, memory, key_padding_mask=ids == 0, average_attn_weights=False)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)


def test_cross_attention_shapes_of_seed_004():
    mha = MultiHeadAttention(512, 8)
    out, weights = mha(torch.randn(2, 7, 512), torch.randn(2, 11, 512), torch.randn(2, 11, 512), need_weights=True)
    assert out.shape == (2, 7, 512) and weights.shape == (2, 8, 7, 11)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 8, 7))


def test_split_then_merge_heads_is_identity():
    mha = MultiHeadAttention(128, 4)
    x = torch.randn(64, 40, 128)
    assert mha.split_heads(x).shape == (64, 4, 40, 32)
    torch.testing.assert_close(mha.merge_heads(mha.split_heads(x)), x)


def test_keys_come_from_their_own_projection():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 5, 8)
    _, w1 = mha(x, x, x, need_weights=True)
    _, w2 = mha(x, torch.randn(1, 5, 8), x, need_weights=True)  # only the key input changes
    assert not torch.allclose(w1, w2)


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(d_model=10, num_heads=4)


def test_paper_defaults():
    cfg = TransformerConfig()
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.d_ff, cfg.dropout) == (512, 6, 8, 2048, 0.1)


def test_small_transformer_of_seed_000():
    cfg = TransformerConfig(d_model=128, num_layers=4, num_heads=4, d_ff=512, dropout=0.3)
    model = Transformer(cfg, 9000, 9000).eval()
    logits = model(torch.randint(1, 9000, (2, 10)), torch.randint(1, 9000, (2, 9)))
    assert logits.shape == (2, 9, 9000)
    assert len(model.encoder.layers) == 4 and len(model.decoder.layers) == 4
    first = model.encoder.layers[0]
    assert isinstance(first, EncoderLayer) and first.self_attn.depth == 32


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_fused_path_equals_reference_path(norm):
    torch.manual_seed(0)
    model = Transformer(SMALL.model_copy(update={"norm": norm}), 20, 20).eval()
    src = torch.randint(1, 20, (4, 9))
    src[1, 6:] = 0
    trg = torch.randint(1, 20, (4, 6))
    trg[2, 4:] = 0
    fused = model(src, trg)
    MultiHeadAttention.fused = False
    try:
        reference = model(src, trg)
    finally:
        MultiHeadAttention.fused = True
    torch.testing.assert_close(fused, reference, atol=1e-5, rtol=1e-5)


def test_embeddings_scaled_and_positions_added():
    torch.manual_seed(0)
    model = Transformer(SMALL, 20, 20).eval()
    embed = model.encoder.embed
    assert isinstance(embed, Embedder)  # sinusoidal positions, not BERT's learned ones
    ids = torch.tensor([[3, 5, 7]])
    expected = embed.embedding.weight[ids] * SMALL.d_model**0.5 + embed.positions.table[:, :3]
    torch.testing.assert_close(embed(ids), expected)
    # unit-variance embeddings after scaling, the size of the positional encoding
    assert 0.8 < float((embed.embedding.weight[1:].detach() * SMALL.d_model**0.5).std()) < 1.2


def test_decoder_is_causal():
    torch.manual_seed(0)
    model = Transformer(SMALL, 20, 20).eval()
    src = torch.randint(1, 20, (1, 8))
    trg = torch.randint(1, 20, (1, 6))
    changed = trg.clone()
    changed[0, 4] = (trg[0, 4] % 19) + 1
    a, b = model(src, trg), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_source_padding_changes_nothing():
    torch.manual_seed(0)
    model = Transformer(SMALL, 20, 20).eval()
    src = torch.randint(1, 20, (1, 8))
    trg = torch.randint(1, 20, (1, 6))
    padded = torch.cat([src, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, trg), model(padded, trg), atol=1e-5, rtol=1e-5)
    memory, _ = model.encode(src)
    padded_memory, _ = model.encode(padded)
    torch.testing.assert_close(memory, padded_memory[:, :8], atol=1e-5, rtol=1e-5)


def test_tied_output_shares_the_target_embedding():
    model = Transformer(SMALL.model_copy(update={"tie_output": True}), 20, 25)
    assert model.generator.weight is model.decoder.embed.embedding.weight
    assert num_parameters(model) == num_parameters(Transformer(SMALL, 20, 25)) - 25 * 32


def test_cross_attention_weights_are_returned_per_layer():
    model = Transformer(SMALL, 20, 20).eval()
    memory, mask = model.encode(torch.tensor([[5, 6, 7, 0]]))
    _, weights = model.decode(torch.tensor([[1, 4, 9]]), memory, mask, need_weights=True)
    assert len(weights) == SMALL.num_layers and weights[0].shape == (1, 4, 3, 4)
    assert float(weights[0][..., 3].detach().abs().max()) == 0.0  # the PAD key gets no attention
