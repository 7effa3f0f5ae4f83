"""RNN encoders: shapes, padding handled exactly, bidirectional halves, skip connections, Reverse."""

import pytest
import torch

from seqlab.model.rnn import RNNEncoder, reverse_source
from seqlab.tokenizer import EOS, PAD


def test_reverse_keeps_eos_and_padding_in_place():
    src = torch.tensor([[5, 6, 7, EOS, PAD], [8, 9, EOS, PAD, PAD], [4, 5, 6, 7, EOS]])
    assert reverse_source(src).tolist() == [[7, 6, 5, EOS, PAD], [9, 8, EOS, PAD, PAD], [7, 6, 5, 4, EOS]]
    assert torch.equal(reverse_source(reverse_source(src)), src)


@pytest.mark.parametrize("cell, parts", [("rnn", 1), ("gru", 1), ("lstm", 2)])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_shapes(cell, parts, bidirectional):
    encoder = RNNEncoder(20, 16, 32, cell=cell, num_layers=2, bidirectional=bidirectional)
    states, finals = encoder(torch.randint(4, 20, (3, 7)))
    width = 64 if bidirectional else 32
    assert states.shape == (3, 7, width) and encoder.output_size == width
    assert len(finals) == 2 and all(len(f) == parts and f[0].shape == (3, width) for f in finals)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_a_sentence_alone_equals_it_inside_a_padded_batch(cell):
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, 12, cell=cell, num_layers=2, bidirectional=True, skip=True).eval()
    alone = torch.tensor([[5, 6, 7, EOS]])
    batch = torch.tensor([[9, 8, 7, 6, 5, 4, EOS], [5, 6, 7, EOS, PAD, PAD, PAD]])
    states_alone, finals_alone = encoder(alone)
    states_batch, finals_batch = encoder(batch)
    torch.testing.assert_close(states_batch[1, :4], states_alone[0], atol=1e-6, rtol=1e-5)
    assert float(states_batch[1, 4:].detach().abs().max()) == 0.0  # nothing at padding
    for final_alone, final_batch in zip(finals_alone, finals_batch):
        for a, b in zip(final_alone, final_batch):
            torch.testing.assert_close(b[1], a[0], atol=1e-6, rtol=1e-5)


def test_final_state_is_the_last_real_position():
    torch.manual_seed(0)
    encoder = RNNEncoder(20, 8, 12, cell="lstm").eval()
    states, finals = encoder(torch.tensor([[5, 6, 7, EOS, PAD, PAD]]))
    torch.testing.assert_close(finals[0][0][0], states[0, 3])  # the book's Encoder returns hs[:, -1]


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


def test_unknown_cell():
    with pytest.raises(ValueError, match="unknown RNN cell"):
        RNNEncoder(10, 4, 4, cell="transformer")
