"""The seeds' worked examples: attention, masks, positional encoding, schedule, LayerNorm, loss."""

import math
from typing import Any, cast

import pytest
import torch

from seqlab.loss import token_nll_sum
from seqlab.model.attention import scaled_dot_product_attention
from seqlab.model.masks import look_ahead_mask, padding_mask
from seqlab.model.positional import sinusoidal_table
from seqlab.model.transformer import DecoderLayer, EncoderLayer, Residual, Transformer, TransformerConfig
from seqlab.train.schedule import transformer_lr

# seed 000, "scaled dot-product attention" test tensors
TEMP_K = torch.tensor([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]], dtype=torch.float32)
TEMP_V = torch.tensor([[1, 0], [10, 0], [100, 5], [1000, 6]], dtype=torch.float32)


@pytest.mark.parametrize(
    "query, weights, output",
    [
        ([[0, 10, 0]], [[0, 1, 0, 0]], [[10, 0]]),
        ([[0, 0, 10]], [[0, 0, 0.5, 0.5]], [[550, 5.5]]),
        ([[0, 0, 10], [0, 10, 0], [10, 10, 0]], [[0, 0, 0.5, 0.5], [0, 1, 0, 0], [0.5, 0.5, 0, 0]],
         [[550, 5.5], [10, 0], [5.5, 0]]),
    ],
)
def test_scaled_dot_product_attention_seed_examples(query, weights, output):
    out, w = scaled_dot_product_attention(torch.tensor(query, dtype=torch.float32), TEMP_K, TEMP_V)
    torch.testing.assert_close(w, torch.tensor(weights, dtype=torch.float32), atol=1e-5, rtol=0)
    torch.testing.assert_close(out, torch.tensor(output, dtype=torch.float32), atol=1e-4, rtol=0)


def test_attention_logits_are_scaled_by_sqrt_dk():
    # seed: matmul_qk [0, 100, 0, 0] -> logits [0, 57.7, 0, 0] (100 / sqrt(3))
    q = torch.tensor([[0.0, 10.0, 0.0]])
    assert (q @ TEMP_K.T / math.sqrt(3))[0, 1] == pytest.approx(57.735, abs=1e-3)
    weights_at_half_scale = torch.softmax(torch.tensor([0.0, 1.0]), -1)
    _, w = scaled_dot_product_attention(torch.tensor([[1.0, 1.0, 1.0, 1.0]]),
                                        torch.tensor([[0.0] * 4, [1.0, 1.0, 0.0, 0.0]]), torch.eye(2))
    torch.testing.assert_close(w[0], weights_at_half_scale)  # q·k = 2, sqrt(4) = 2 -> logit 1


def test_masked_keys_get_zero_weight():
    mask = torch.tensor([[False, True, False, False]])
    _, w = scaled_dot_product_attention(torch.tensor([[0.0, 10.0, 0.0]]), TEMP_K, TEMP_V, mask)
    assert w[0, 1] == 0.0
    torch.testing.assert_close(w.sum(-1), torch.ones(1))


def test_padding_mask_seed_example():
    mask = padding_mask(torch.tensor([[1, 21, 777, 0, 0]]))
    assert mask.shape == (1, 1, 1, 5)
    assert mask.int().tolist() == [[[[0, 0, 0, 1, 1]]]]


def test_look_ahead_mask_seed_example():
    mask = look_ahead_mask(torch.tensor([[1, 2, 0, 4, 5]]))
    assert mask.shape == (1, 1, 5, 5)
    assert mask.int().tolist() == [[[[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 1, 0, 1], [0, 0, 1, 0, 0]]]]


def test_positional_encoding_seed_values():
    pe = sinusoidal_table(50, 128)
    assert pe.shape == (1, 50, 128)
    assert pe[0, 0, :6].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    torch.testing.assert_close(pe[0, 1, :4], torch.tensor([0.841471, 0.540302, 0.761720, 0.647906]), atol=1e-6, rtol=0)
    torch.testing.assert_close(sinusoidal_table(2, 4)[0, 1], torch.tensor([0.841471, 0.540302, 0.0099998, 0.99995]),
                               atol=1e-6, rtol=0)


def test_positional_angle_table_d128():
    # seed 000 prints the angles pos / 10000^(2i/d) for pos 1: 1, 1, 0.86, 0.86, 0.74, 0.74, 0.64, 0.64, 0.56, 0.56
    pe = sinusoidal_table(2, 128)[0, 1]
    angles = torch.where(torch.arange(10) % 2 == 0, torch.asin(pe[:10]), torch.acos(pe[:10]))
    torch.testing.assert_close(angles, torch.tensor([1, 1, 0.86, 0.86, 0.74, 0.74, 0.64, 0.64, 0.56, 0.56]), atol=0.01, rtol=0)


def test_schedule_seed_values():
    assert transformer_lr(1, 128, 4000) == pytest.approx(3.494e-7, rel=1e-3)
    assert transformer_lr(4000, 128, 4000) == pytest.approx(1.3975e-3, rel=1e-3)
    assert transformer_lr(200000, 128, 4000) == pytest.approx(1.976e-4, rel=1e-3)
    assert transformer_lr(4000, 512, 4000) == pytest.approx(6.988e-4, rel=1e-3)
    rates = [transformer_lr(s, 128, 4000) for s in range(1, 8001, 50)]
    peak = rates.index(max(rates))
    assert all(a < b for a, b in zip(rates[:peak], rates[1 : peak + 1]))
    assert all(a > b for a, b in zip(rates[peak:], rates[peak + 1 :]))


def test_layer_norm_seed_example():
    """seqlab's Add & Norm (post-LN, a sublayer that adds nothing) on seed 000's LayerNorm example, with the
    seed's Keras epsilon 1e-6."""
    residual = Residual(4, dropout=0.0, pre_norm=False)
    assert residual.norm.eps == 1e-6
    out = residual(torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.zeros_like)
    torch.testing.assert_close(out[0], torch.tensor([-1.341640, -0.447213, 0.447213, 1.341640]), atol=1e-5, rtol=0)


def _mean_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> float:
    """Mean cross-entropy per real target token, as training divides ``token_nll_sum``."""
    return float(token_nll_sum(logits, targets, label_smoothing)) / max(int((targets != 0).sum()), 1)


def test_loss_ignores_padding():
    vocab = 7
    logits = torch.zeros(2, 5, vocab)  # uniform: every real token costs ln V
    targets = torch.tensor([[4, 5, 0, 0, 0], [6, 0, 0, 0, 0]])
    assert _mean_loss(logits, targets) == pytest.approx(math.log(vocab))
    assert _mean_loss(logits, torch.zeros(2, 5, dtype=torch.long)) == 0.0
    # changing the logits at padded positions changes nothing
    noisy = logits.clone()
    noisy[0, 2:] = torch.randn(3, vocab)
    assert _mean_loss(noisy, targets) == pytest.approx(math.log(vocab))


@pytest.mark.parametrize("average", ["all", "tokens"])
def test_seed_000s_loss_averages_over_every_position(average):
    """S93: seed 000's loss_function, reduce_mean over all B·(MAX_LENGTH − 1) positions, pads too: for uniform
    logits over V and k real tokens out of n positions, (k / n)·ln V (``train.loss_average: all``); seqlab's
    default divides by the k real tokens: ln V."""
    from types import SimpleNamespace

    from seqlab.config import Config
    from seqlab.data.batching import collate
    from seqlab.train.family.seq2seq import Transduction

    vocab = 9
    batch = collate([[4, 2], [5, 2]], [[4], [5, 6, 7]])  # y + <eos>: 2 and 4 tokens, both padded to 4
    assert batch.trg_out.numel() == 8 and batch.num_target_tokens == 6
    data = {"corpus": {"format": "task", "task": "date"}}
    family = SimpleNamespace(config=Config.model_validate({"data": data, "train": {"loss_average": average}}))
    count = Transduction.count(cast(Any, family), batch)  # what the batch's summed loss is divided by
    uniform = torch.zeros(2, 4, vocab)
    expected = (6 / 8 if average == "all" else 1.0) * math.log(vocab)
    assert float(token_nll_sum(uniform, batch.trg_out)) / count == pytest.approx(expected)
    assert float(token_nll_sum(uniform, torch.zeros_like(batch.trg_out))) == 0.0  # all pads: 0


def test_label_smoothing_matches_definition():
    logits = torch.randn(1, 3, 5)
    targets = torch.tensor([[1, 2, 0]])
    eps = 0.1
    logp = torch.log_softmax(logits[0, :2], -1)
    expected = ((1 - eps) * -logp[torch.arange(2), targets[0, :2]] - eps * logp.mean(-1)).mean()
    assert _mean_loss(logits, targets, eps) == pytest.approx(float(expected), rel=1e-5)


def test_seed_001_masks_keep_where_seqlabs_hide():
    """S81: seed 001 builds masks True = keep (``(tokens != 0)`` and ``tril``) and fills where ``mask == 0``;
    seqlab's are True = hide (seed 000's convention). They are each other's negation, and both hide the same
    positions."""
    tokens = torch.tensor([[1, 2, 0, 4, 5]])
    pad_keep = (tokens != 0).unsqueeze(1).unsqueeze(2)  # (1, 1, 1, 5)
    sub_keep = torch.tril(torch.ones((5, 5))).bool()  # (5, 5)
    assert pad_keep.shape == (1, 1, 1, 5) and (pad_keep & sub_keep).shape == (1, 1, 5, 5)
    assert torch.equal(pad_keep, ~padding_mask(tokens))
    assert torch.equal(pad_keep & sub_keep, ~look_ahead_mask(tokens))


def test_attention_weight_dropout_of_seed_001():
    """S76: ``matmul(dropout(attn_weights), v)``; the weights returned are those before dropout, and in
    evaluation (no dropout) the result is the plain attention's."""
    from seqlab.model.attention import MultiHeadAttention

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    plain_out, plain_w = scaled_dot_product_attention(q, k, v)
    out, w = scaled_dot_product_attention(q, k, v, dropout=0.5)
    assert torch.equal(w, plain_w) and torch.allclose(w.sum(-1), torch.ones(2, 3, 4))
    assert not torch.allclose(out, plain_out)
    layer = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 5, 16)
    layer.eval()
    assert torch.equal(layer(x, x, x)[0], layer(x, x, x)[0])  # deterministic in evaluation
    layer.fused = False
    eval_out = layer(x, x, x)[0]
    layer.train()
    assert not torch.allclose(layer(x, x, x)[0], eval_out)  # dropped in training, reference path
    layer.fused = True
    assert not torch.allclose(layer(x, x, x)[0], eval_out)  # and in PyTorch's fused kernel


# --- seed 000's small_transformer, as its Keras code builds it (configs/chatbot_ko_seed000.yaml) ---------------


def _small_transformer(**keys) -> Transformer:
    """seed 000: transformer(vocab_size=9000, num_layers=4, dff=512, d_model=128, num_heads=4, dropout=0.3)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=128, num_layers=4, num_heads=4, d_ff=512, dropout=0.3, norm="post", **keys)
    return Transformer(cfg, 9000, 9000)


def test_small_transformer_has_the_seeds_parameter_count():
    """The parameters of seed 000's Keras layers, counted from their shapes: two 9000 × 128 Embeddings, 4 encoder
    layers (MHA: 4 Dense(d_model) with biases; FFN; 2 LayerNorms), 4 decoder layers (2 MHA, FFN, 3 LayerNorms),
    the output Dense(vocab_size); its PositionalEncoding has none. seqlab, built from the same keys, has as many."""
    d, ff, v, n = 128, 512, 9000, 4
    mha, ffn, norm = 4 * (d * d + d), d * ff + ff + ff * d + d, 2 * d
    keras = 2 * v * d + n * (mha + ffn + 2 * norm) + n * (2 * mha + ffn + 3 * norm) + d * v + v
    assert sum(p.numel() for p in _small_transformer().parameters()) == keras == 5_316_392


def test_keras_embedding_initialiser():
    model = _small_transformer(embedding_init="keras")
    weight = model.encoder.embed.embedding.weight.detach()[1:]  # <pad>'s row stays 0
    assert weight.abs().max() <= 0.05 and weight.std() == pytest.approx(0.1 / math.sqrt(12), rel=0.02)  # U(-a, a)
    assert _small_transformer().encoder.embed.embedding.weight.detach()[1:].std() == pytest.approx(128**-0.5, rel=0.02)


def test_seed_000_decoder_has_no_dropout_after_its_masked_self_attention():
    """seed 000's decoder_layer: LN(attention1 + inputs), no Dropout, while the other sublayers have one. In
    training, the masked self-attention block is then deterministic and the cross-attention block is not."""
    keras = _small_transformer(decoder_self_dropout=False).train()
    paper = _small_transformer().train()
    x = torch.randn(2, 5, 128)
    for model, self_deterministic in ((keras, True), (paper, False)):
        layer = cast(DecoderLayer, model.decoder.layers[0])
        self_outs = [layer.self_block(x, lambda h: h * 2) for _ in range(2)]
        assert layer.cross_block is not None
        cross_outs = [layer.cross_block(x, lambda h: h * 2) for _ in range(2)]
        assert torch.equal(*self_outs) == self_deterministic
        assert not torch.equal(*cross_outs)
    assert all(cast(EncoderLayer, model.encoder.layers[0]).attn_block.dropout.p == 0.3 for model in (keras, paper))
