"""RNN attention pieces against the book's worked examples (DLFS2 ch. 8) and the score definitions."""

import pytest
import torch

from seqlab.model.rnn_attention import (
    ConcatScore,
    DotScore,
    GeneralScore,
    RNNAttention,
    attention_weights,
    weighted_sum,
)

# the book's AttentionWeight example
HS = torch.tensor([[[1, 0, -1, 1], [-1, 0, 1, 1], [0, 1, 1, -1], [1, 1, 0, -1], [-1, 0, 1, 0]]], dtype=torch.float32)
H = torch.tensor([[1, 0, -1, 1]], dtype=torch.float32)


def test_attention_weight_example():
    scores = DotScore()(H, HS)
    assert scores.tolist() == [[3, -1, -2, 0, -2]]
    torch.testing.assert_close(
        attention_weights(scores), torch.tensor([[0.92457, 0.01693, 0.00623, 0.04603, 0.00623]]), atol=1e-5, rtol=0
    )


def test_weight_sum_example():
    hs = torch.arange(1, 41, dtype=torch.float32).reshape(2, 5, 4)
    a = torch.tensor([[0.8, 0.1, 0.03, 0.05, 0.02], [0.01, 0.02, 0.9, 0.05, 0.02]])
    torch.testing.assert_close(
        weighted_sum(a, hs), torch.tensor([[2.56, 3.56, 4.56, 5.56], [29.2, 30.2, 31.2, 32.2]]), atol=1e-4, rtol=0
    )


def test_general_with_identity_equals_dot():
    score = GeneralScore(4, 4)
    with torch.no_grad():
        score.w.weight.copy_(torch.eye(4))
    torch.testing.assert_close(score(H, HS), DotScore()(H, HS))


def test_concat_score_definition_and_bound():
    torch.manual_seed(0)
    score = ConcatScore(query_size=3, key_size=4, attention_size=6)
    query, keys = torch.randn(2, 3), torch.randn(2, 5, 4)
    w1, w2, v = score.w_keys.weight, score.w_query.weight, score.v.weight[0]
    expected = torch.stack([torch.stack([v @ torch.tanh(w1 @ keys[b, i] + w2 @ query[b]) for i in range(5)])
                            for b in range(2)])
    torch.testing.assert_close(score(query, keys), expected)
    with torch.no_grad():
        assert float(score(query * 100, keys).abs().max()) <= float(v.abs().sum()) + 1e-6


def test_one_hot_states_pick_their_position():
    # seed 000 (S60): encoder states one-hot x 10, a query along h_2 -> alpha ~ one-hot at 2, a ~ h_2
    keys = torch.eye(4)[None] * 10
    context, weights = RNNAttention("dot", 4, 4)(keys[:, 2], keys)
    assert int(weights.argmax()) == 2 and float(weights[0, 2]) > 0.999
    torch.testing.assert_close(context, keys[:, 2], atol=1e-3, rtol=0)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_padding_gets_no_weight_and_rows_sum_to_one(score):
    torch.manual_seed(0)
    attention = RNNAttention(score, 4, 4)
    pad = torch.tensor([[False, False, False, True, True]])
    context, weights = attention(H, HS, pad)
    assert weights[0, 3:].tolist() == [0.0, 0.0]
    torch.testing.assert_close(weights.sum(-1), torch.ones(1))
    unpadded, _ = attention(H, HS[:, :3])
    torch.testing.assert_close(context, unpadded)


def test_bad_choices_are_explained():
    with pytest.raises(ValueError, match="equal sizes"):
        RNNAttention("dot", 4, 8)
    with pytest.raises(ValueError, match="unknown attention score"):
        RNNAttention("luong", 4, 4)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_several_queries_at_once_equal_one_at_a_time(score):
    torch.manual_seed(0)
    attention = RNNAttention(score, 4, 4)
    keys, queries = torch.randn(2, 5, 4), torch.randn(2, 3, 4)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    context, weights = attention(queries, keys, pad)  # (2, 3, 4), (2, 3, 5)
    for t in range(3):
        one_context, one_weights = attention(queries[:, t], keys, pad)
        torch.testing.assert_close(context[:, t], one_context)
        torch.testing.assert_close(weights[:, t], one_weights)
    assert float(weights[1, :, 3:].detach().abs().max()) == 0.0


def test_luong_attention_output_layer_is_tanh_of_w_c_over_the_context_and_state():
    """S60 (seed 000, 003): v_t = [a_t; s_t] has 2h dimensions, s̃_t = tanh(W_c v_t + b_c) has h, and
    ŷ_t = softmax(W_y s̃_t + b_y) reads s̃_t."""
    from seqlab.model.rnn import RNNDecoder

    torch.manual_seed(0)
    h = 6
    decoder = RNNDecoder(11, 4, h, h, attention="dot")
    assert decoder.combine is not None
    assert (decoder.combine.in_features, decoder.combine.out_features, decoder.output.in_features) == (2 * h, h, h)
    seen: dict[str, torch.Tensor] = {}
    decoder.combine.register_forward_hook(lambda module, args, out: seen.update(v=args[0], combined=out))
    decoder.output.register_forward_hook(lambda module, args, out: seen.update(s_tilde=args[0]))
    memory = torch.randn(2, 5, h)
    decoder(torch.randint(4, 11, (2, 3)), memory, torch.zeros(2, 5, dtype=torch.bool), memory[:, -1])
    assert seen["v"].shape == (2, 3, 2 * h) and seen["s_tilde"].shape == (2, 3, h)
    torch.testing.assert_close(seen["s_tilde"], torch.tanh(seen["combined"]))


def test_bahdanaus_decoder_reads_the_context_beside_its_input_embedding():
    """S62 (seed 000): the context vector is concatenated with x_t and fed to the LSTM with s_{t-1}: the LSTM's
    input is embedding + encoder hidden wide, and no W_c layer follows it."""
    from seqlab.model.rnn import RNNDecoder

    decoder = RNNDecoder(11, 4, 6, 10, attention="bahdanau")
    assert decoder.rnn.input_size == 4 + 10 and decoder.combine is None and decoder.output.in_features == 6
