"""RNN encoders: shapes, padding handled exactly, bidirectional halves, skip connections, Reverse."""

import pytest
import torch

from seqlab.model.rnn import RNNConfig, RNNDecoder, RNNEncoder, RNNSeq2seq, mirror_positions
from seqlab.specials import EOS, PAD


def test_reverse_keeps_eos_and_padding_in_place():
    src = torch.tensor([[5, 6, 7, EOS, PAD], [8, 9, EOS, PAD, PAD], [4, 5, 6, 7, EOS]])
    reversed_src = src.gather(1, mirror_positions(src))
    assert reversed_src.tolist() == [[7, 6, 5, EOS, PAD], [9, 8, EOS, PAD, PAD], [7, 6, 5, 4, EOS]]
    assert torch.equal(reversed_src.gather(1, mirror_positions(reversed_src)), src)


def test_reverse_attention_lines_up_with_the_input_tokens():
    # Reverse = the same model reading the reversed sentence; its attention is reported in input order.
    torch.manual_seed(0)
    cfg = RNNConfig(cell="lstm", embedding_size=8, hidden_size=12, attention="dot", reverse=True)
    model = RNNSeq2seq(cfg, 20, 15).eval()
    plain = RNNSeq2seq(cfg.model_copy(update={"reverse": False}), 20, 15).eval()
    plain.load_state_dict(model.state_dict())
    src = torch.tensor([[5, 6, 7, EOS, PAD], [5, 6, 7, 8, EOS]])
    trg = torch.randint(4, 15, (2, 4))
    mirror = mirror_positions(src)
    logits, (weights,) = model.decode(trg, *model.encode(src), need_weights=True)  # (batch, 1, trg_len, src_len)
    logits_plain, (weights_plain,) = plain.decode(trg, *plain.encode(src.gather(1, mirror)), need_weights=True)
    torch.testing.assert_close(logits, logits_plain)
    torch.testing.assert_close(weights, weights_plain.gather(-1, mirror[:, None, None, :].expand_as(weights_plain)))


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_shapes(cell, bidirectional):
    encoder = RNNEncoder(20, 16, 32, cell=cell, num_layers=2, bidirectional=bidirectional)
    states, final = encoder(torch.randint(4, 20, (3, 7)))
    width = 64 if bidirectional else 32
    assert states.shape == (3, 7, width) and encoder.output_size == width
    assert final.shape == (3, width)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])  # forward-only layers run padded, bidirectional ones packed
def test_a_sentence_alone_equals_it_inside_a_padded_batch(cell, bidirectional):
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, 12, cell=cell, num_layers=2, bidirectional=bidirectional, skip=True).eval()
    alone = torch.tensor([[5, 6, 7, EOS]])
    batch = torch.tensor([[9, 8, 7, 6, 5, 4, EOS], [5, 6, 7, EOS, PAD, PAD, PAD]])
    states_alone, final_alone = encoder(alone)
    states_batch, final_batch = encoder(batch)
    torch.testing.assert_close(states_batch[1, :4], states_alone[0], atol=1e-6, rtol=1e-5)
    assert float(states_batch[1, 4:].detach().abs().max()) == 0.0  # nothing at padding
    torch.testing.assert_close(final_batch[1], final_alone[0], atol=1e-6, rtol=1e-5)
    assert not torch.allclose(final_batch[0], final_batch[1])


def test_final_state_is_the_last_real_position():
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, 12, cell="lstm").eval()
    states, final = encoder(torch.tensor([[5, 6, 7, EOS, PAD, PAD]]))
    torch.testing.assert_close(final[0], states[0, 3])  # the book's Encoder returns hs[:, -1]


def test_backward_half_reads_the_reversed_sentence():
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, 12, cell="lstm", bidirectional=True).eval()
    forward_only = torch.nn.LSTM(8, 12, batch_first=True)
    layer = encoder.layers[0]
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(forward_only, name).copy_(getattr(layer, name + "_reverse"))
    src = torch.tensor([[5, 6, 7, 8, EOS]])
    states, _ = encoder(src)
    backward, _ = forward_only(encoder.embedding(src.flip(1)))
    torch.testing.assert_close(states[0, :, 12:], backward[0].flip(0), atol=1e-6, rtol=1e-5)


def test_skip_connections_add_each_layers_input():
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 12, 12, cell="gru", num_layers=2, skip=True).eval()
    src = torch.tensor([[5, 6, 7, EOS]])
    states, _ = encoder(src)
    first, _ = encoder.layers[0](encoder.embedding(src))
    second, _ = encoder.layers[1](first)
    torch.testing.assert_close(states, second + first, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_one_bias_holds_b_hh_at_zero_and_equals_the_summed_biases(cell):
    """model.hidden_bias false: the book's one bias per gate; b_ih + b_hh is one bias in two copies."""
    torch.manual_seed(0)
    config = RNNConfig(cell=cell, embedding_size=6, hidden_size=8, attention="dot", hidden_bias=False)
    model = RNNSeq2seq(config, 12, 10)
    rnns = [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]
    assert len(rnns) == 2 and all(not r.get_parameter("bias_hh_l0").requires_grad
                                  and not r.get_parameter("bias_hh_l0").any() for r in rnns)
    src, trg = torch.randint(4, 12, (3, 5)), torch.randint(4, 10, (3, 4))
    model(src, trg).sum().backward()
    torch.optim.Adam(model.parameters(), lr=0.1).step()
    # only b_ih learned
    assert all(not r.get_parameter("bias_hh_l0").any() and r.get_parameter("bias_ih_l0").any() for r in rnns)
    two = RNNSeq2seq(RNNConfig(cell=cell, embedding_size=6, hidden_size=8, attention="dot"), 12, 10)
    two.load_state_dict(model.state_dict())
    with torch.no_grad():
        for r in (m for m in two.modules() if isinstance(m, torch.nn.RNNBase)):
            r.get_parameter("bias_ih_l0").sub_(0.25)
            r.get_parameter("bias_hh_l0").add_(0.25)  # the same sum: the same model
    assert torch.allclose(two(src, trg), model(src, trg), atol=1e-6)


def test_unknown_cell():
    with pytest.raises(ValueError, match="unknown RNN cell"):
        RNNEncoder(10, 4, 4, cell="transformer")


def _encoded(bidirectional=False, hidden=12):
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, hidden, cell="lstm", bidirectional=bidirectional).eval()
    src = torch.tensor([[5, 6, 7, EOS, PAD], [5, 6, 7, 8, EOS]])
    states, final = encoder(src)
    return src, states, final


def test_peeky_widths_are_the_books():
    # 002 §7.3: wordvec 16, hidden 128 -> LSTM Wx (D+H, 4H) = (144, 512), Affine W (2H, V) = (256, V)
    decoder = RNNDecoder(13, 16, 128, 128, cell="lstm", peeky=True)
    assert tuple(decoder.rnn.weight_ih_l0.T.shape) == (144, 512)
    assert tuple(decoder.output.weight.T.shape) == (256, 13)


def test_plain_decoder_starts_from_the_encoders_final_h():
    *_, final = _encoded()
    decoder = RNNDecoder(15, 8, 12, 12, cell="lstm")
    h, c = decoder.init_state(final)
    torch.testing.assert_close(h[0], final)
    assert float(c.abs().max()) == 0.0


@pytest.mark.parametrize("attention", ["none", "dot", "general", "concat", "bahdanau"])
@pytest.mark.parametrize("peeky", [False, True])
def test_every_variant_is_causal_and_attends_only_to_real_tokens(attention, peeky):
    src, states, final = _encoded(bidirectional=True)
    torch.manual_seed(1)
    hidden = 24 if attention == "dot" else 10
    decoder = RNNDecoder(15, 8, hidden, 24, cell="gru", num_layers=2, peeky=peeky, attention=attention).eval()
    trg = torch.randint(4, 15, (2, 5))
    logits, weights = decoder(trg, states, src == PAD, final)
    assert logits.shape == (2, 5, 15)
    changed = trg.clone()
    changed[:, 3] = (trg[:, 3] - 3) % 11 + 4
    torch.testing.assert_close(decoder(changed, states, src == PAD, final)[0][:, :3], logits[:, :3])
    assert not torch.allclose(decoder(changed, states, src == PAD, final)[0][:, 3], logits[:, 3])
    if attention == "none":
        assert weights is None
    else:
        assert weights.shape == (2, 5, 5)
        assert float(weights[0, :, 4].detach().abs().max()) == 0.0  # the padded source position
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))


@pytest.mark.parametrize("attention", ["none", "dot", "general", "concat", "bahdanau"])
@pytest.mark.parametrize("peeky", [False, True])
def test_teacher_forcing_equals_one_step_at_a_time(attention, peeky):
    # Without Bahdanau the teacher-forced decoder runs all steps in one RNN call; it must match step().
    src, states, final = _encoded()
    torch.manual_seed(2)
    decoder = RNNDecoder(15, 8, 12, 12, cell="lstm", num_layers=2, peeky=peeky, attention=attention).eval()
    trg = torch.randint(4, 15, (2, 6))
    logits, weights = decoder(trg, states, src == PAD, final)
    state, step_logits, step_weights = decoder.init_state(final), [], []
    for t in range(trg.size(1)):
        out, state, w = decoder.step(trg[:, t], state, states, src == PAD, final)
        step_logits.append(out)
        step_weights.append(w)
    torch.testing.assert_close(logits, torch.stack(step_logits, dim=1))
    if attention != "none":
        torch.testing.assert_close(weights, torch.stack([w for w in step_weights if w is not None], dim=1))


def test_bahdanau_queries_the_previous_state_and_luong_the_current():
    src, states, final = _encoded()
    pad = src == PAD
    ids = torch.tensor([5, 6])
    for kind, query_is_previous in (("bahdanau", True), ("general", False)):
        torch.manual_seed(0)
        decoder = RNNDecoder(15, 8, 12, 12, cell="lstm", attention=kind).eval()
        state = decoder.init_state(final)
        _, new_state, weights = decoder.step(ids, state, states, pad, final)
        assert decoder.attention is not None
        query = state[0][-1] if query_is_previous else new_state[0][-1]
        _, expected = decoder.attention(query, states, pad)
        torch.testing.assert_close(weights, expected)


def test_attention_seq2seq_learns_to_copy():
    torch.manual_seed(0)
    encoder = RNNEncoder(12, 16, 32, cell="lstm")
    decoder = RNNDecoder(12, 16, 32, 32, cell="lstm", attention="dot")
    params = list(encoder.parameters()) + list(decoder.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-2)
    src = torch.randint(4, 12, (64, 5))
    trg_in = torch.cat([torch.ones(64, 1, dtype=torch.long), src], dim=1)  # <sos> copy
    trg_out = torch.cat([src, torch.full((64, 1), EOS)], dim=1)
    for _ in range(150):
        states, final = encoder(src)
        logits, _ = decoder(trg_in, states, src == PAD, final)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 12), trg_out.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert float(loss.detach()) < 0.05
    assert torch.equal(logits.argmax(-1), trg_out)


def test_source_dropout_drops_the_encoders_embeddings_in_training_only():
    # model.source_dropout: the encoder's input embeddings are dropped (as the decoder's are by model.dropout);
    # a zero row of the embedding is what a dropped position looks like to the first layer.
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 64, 12, cell="gru", source_dropout=0.5)
    src = torch.randint(4, 20, (8, 9))
    embedded = encoder.embedding(src)
    dropped = encoder.source_dropout(embedded)
    kept = dropped != 0
    assert 0.4 < kept.float().mean().item() < 0.6
    torch.testing.assert_close(dropped[kept], embedded[kept] * 2)  # kept elements scaled by 1 / (1 - p)
    torch.manual_seed(1)
    training = encoder(src)[0]
    torch.manual_seed(2)
    assert not torch.allclose(training, encoder(src)[0])  # another mask, other states
    plain = RNNEncoder(20, 64, 12, cell="gru")
    plain.load_state_dict(encoder.state_dict())
    torch.testing.assert_close(encoder.eval()(src)[0], plain.eval()(src)[0])  # evaluation drops nothing
