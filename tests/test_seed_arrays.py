"""The seeds' worked arrays: the array basics the NumPy framework stands on (S1, seed 002 ch. 1), the
position-wise ReLU FFN (S82) and the reshaping notes behind splitting and merging heads (S95, seeds 001, 002)."""

import math

import numpy as np
import pytest
import torch

from seqlab.model.attention import MultiHeadAttention, scaled_dot_product_attention
from seqlab.model.dropout import keep_mask
from seqlab.model.transformer import PositionwiseFeedForward, TransformerConfig
from seqlab.scratch.layers import Affine, MatMul

# --- S1: broadcasting, dot and the shape rule, through the framework's MatMul and Affine -------------------


@pytest.mark.parametrize(("x", "w", "expected"), [
    ([1, 2, 3], [4, 5, 6], 32),  # vector · vector
    ([1, 2], [[1, 1, 1], [2, 2, 2]], [5, 5, 5]),  # vector · matrix
    ([[1, 1, 1], [2, 2, 2]], [1, 2, 3], [6, 12]),  # matrix · vector
    ([[1, 2], [3, 4]], [[5, 6], [7, 8]], [[19, 22], [43, 50]]),  # matrix · matrix
])
def test_matmul_reproduces_the_seeds_dot_products(x, w, expected):
    layer = MatMul(np.array(w))
    np.testing.assert_array_equal(layer.forward(np.array(x)), np.array(expected))


def test_the_seeds_broadcasting_examples():
    a = np.array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(a * 10, [[10, 20], [30, 40]])  # a scalar stretched to the matrix
    np.testing.assert_array_equal(a * np.array([10, 20]), [[10, 40], [30, 80]])  # a row stretched over the rows
    affine = Affine(np.eye(2, dtype=int), np.array([10, 20]))  # the bias is broadcast the same way
    np.testing.assert_array_equal(affine.forward(a), [[11, 22], [13, 24]])


def test_the_shape_rule_inner_dimensions_must_match():
    assert MatMul(np.ones((2, 4))).forward(np.ones((3, 2))).shape == (3, 4)  # (3×2)(2×4) -> (3×4)
    with pytest.raises(ValueError, match="mismatch"):
        MatMul(np.ones((3, 4))).forward(np.ones((3, 2)))  # (3×2)(3×4): 2 ≠ 3


# --- S82: the position-wise FFN with ReLU ------------------------------------------------------------------


@pytest.fixture
def ffn() -> PositionwiseFeedForward:
    torch.manual_seed(0)
    return PositionwiseFeedForward(128, 512).eval()


def test_ffn_keeps_the_seeds_shapes(ffn):
    x = torch.randn(64, 40, 128)  # seed 000: (64, 40, 128) -> (64, 40, 512) -> (64, 40, 128)
    assert ffn.w_1(x).shape == (64, 40, 512) and ffn(x).shape == x.shape


def test_ffn_is_the_same_at_every_position(ffn):
    x = torch.randn(2, 7, 128)
    order = torch.randperm(7)
    torch.testing.assert_close(ffn(x[:, order]), ffn(x)[:, order])  # permuting positions permutes outputs
    torch.testing.assert_close(ffn(x[:, 3:4]), ffn(x)[:, 3:4])  # a position alone gives what it gave in context


def test_ffn_zeroes_negative_pre_activations(ffn):
    """max(0, x W_1 + b_1) W_2 + b_2: with W_2 the identity's first block, what comes out is the ReLU itself."""
    x = torch.randn(3, 5, 128)
    with torch.no_grad():
        ffn.w_2.weight.copy_(torch.eye(512)[:128])  # keep the first 128 hidden units
        ffn.w_2.bias.zero_()
    hidden = ffn.w_1(x)[..., :128]
    assert (hidden < 0).any() and (hidden > 0).any()
    torch.testing.assert_close(ffn(x), hidden.clamp(min=0))


def test_activation_dropout_drops_hidden_units_in_training_only():
    """``model.activation_dropout``: max(0, x W_1 + b_1) masked and scaled by 1 / (1 - p) before W_2, in training;
    the same map as without it at evaluation; every layer of the Transformer gets it from its config."""
    torch.manual_seed(0)
    ffn, x = PositionwiseFeedForward(8, 32, dropout=0.5), torch.randn(3, 4, 8)
    plain = PositionwiseFeedForward(8, 32)
    plain.load_state_dict(ffn.state_dict())
    torch.manual_seed(1)
    mask = keep_mask(torch.Size([3, 4, 32]), 0.5, torch.float32)
    torch.manual_seed(1)
    torch.testing.assert_close(ffn.train()(x), ffn.w_2(torch.relu(ffn.w_1(x)) * mask))
    assert set(mask.unique().tolist()) == {0.0, 2.0} and not torch.allclose(ffn(x), plain(x))
    torch.testing.assert_close(ffn.eval()(x), plain(x))
    config = TransformerConfig(d_model=16, num_layers=2, num_heads=2, d_ff=32, activation_dropout=0.3)
    model = config.build(20, 20)
    rates = [m.dropout.p for m in model.modules() if isinstance(m, PositionwiseFeedForward)]
    assert rates == [0.3] * 4  # 2 encoder and 2 decoder layers


# --- S95: view against transpose, 3-D products and q·kᵀ ---------------------------------------------------


def test_merging_needs_the_transpose_back():
    """seed 001: b = a.view(2, 6); d = a.view(2, 3, 2).transpose(1, 2).contiguous(); d.reshape(2, 6) is not b,
    but d transposed back and viewed as (2, 6) is. merge_heads transposes back before it reshapes."""
    a = torch.arange(12)
    b, c = a.view(2, 6), a.view(2, 3, 2)
    d = c.transpose(1, 2).contiguous()
    assert not torch.equal(d.reshape(2, 6), b)
    assert torch.equal(d.transpose(1, 2).contiguous().view(2, 6), b)
    mha = MultiHeadAttention(4, 2)
    x = torch.arange(24.0).view(2, 3, 4)  # (batch, len, d_model)
    heads = mha.split_heads(x)  # (2, 2, 3, 2)
    assert not torch.equal(heads.reshape(2, 3, 4), x)
    assert torch.equal(mha.merge_heads(heads), x)


def test_transpose_swaps_the_named_axes():
    assert torch.randn(1, 3, 2, 5).transpose(0, 2).shape == (2, 3, 1, 5)


def test_the_seeds_products_of_3d_arrays():
    product = np.dot(np.arange(8).reshape(2, 2, 2), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(product, [[[3, 4, 5], [9, 14, 19]], [[15, 24, 33], [21, 34, 47]]])
    batched = torch.arange(24.0).reshape(1, 2, 3, 4) @ torch.ones(1, 2, 4, 3)
    rows = torch.tensor([[6.0, 22, 38], [54, 70, 86]]).reshape(1, 2, 3, 1).expand(1, 2, 3, 3)
    assert torch.equal(batched, rows)


def test_q_times_k_transposed_is_the_seeds():
    """q = k = arange(24).reshape(1, 2, 3, 4): the attention weights are softmax(q kᵀ / √4) of the seed's q kᵀ."""
    q = torch.arange(24.0).reshape(1, 2, 3, 4)
    scores = torch.tensor([[[14.0, 38, 62], [38, 126, 214], [62, 214, 366]],
                           [[734, 950, 1166], [950, 1230, 1510], [1166, 1510, 1854]]]).unsqueeze(0)
    assert torch.equal(q @ q.transpose(-2, -1), scores)
    _, weights = scaled_dot_product_attention(q, q, q)
    torch.testing.assert_close(weights, torch.softmax(scores / math.sqrt(4), dim=-1))
