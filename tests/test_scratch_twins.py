"""seqlab.scratch held equal to PyTorch: every layer and model with its twin, weights copied across (gates
reordered), outputs and gradients equal to 1e-6 in float64. These twins are the reference seqlab's PyTorch
models are tested against."""

import numpy as np
import pytest
import torch
from torch import nn

from seqlab.model.lm import RNNLM as TorchRNNLM
from seqlab.model.rnn import RNNConfig, RNNSeq2seq
from seqlab.scratch.layers import Affine, Embedding
from seqlab.scratch.models import RNNLM, AttentionSeq2seq, PeekySeq2seq, Seq2seq
from seqlab.scratch.optimizers import SGD, AdaGrad, Adam, Momentum, shared_params
from seqlab.scratch.recurrent import GRU, LSTM, RNN
from seqlab.scratch.time_layers import TimeGRU, TimeLSTM, TimeRecurrent, TimeRNN, TimeSoftmaxWithLoss

TOL = 1e-6
CELLS = {"rnn": (RNN, TimeRNN, nn.RNN), "lstm": (LSTM, TimeLSTM, nn.LSTM), "gru": (GRU, TimeGRU, nn.GRU)}


def close(a, b):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else b
    assert a.shape == b.shape, (a.shape, b.shape)
    assert np.abs(a - b).max() < TOL, np.abs(a - b).max()


def arrays(module: nn.Module, suffix: str = "_l0") -> list[np.ndarray]:
    return [getattr(module, f"{name}{suffix}").detach().numpy() for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def grads(module: nn.Module, suffix: str = "_l0") -> list[np.ndarray]:
    return [getattr(module, f"{name}{suffix}").grad.numpy() for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def test_affine_and_embedding_equal_linear_and_nn_embedding():
    linear = nn.Linear(5, 3).double()
    affine = Affine(linear.weight.detach().numpy().T.copy(), linear.bias.detach().numpy().copy())
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    dout = torch.randn(4, 3, dtype=torch.float64)
    y = linear(x)
    y.backward(dout)
    close(affine.forward(x.detach().numpy()), y)
    close(affine.backward(dout.numpy()), x.grad)
    assert linear.weight.grad is not None
    close(affine.grads[0], linear.weight.grad.T)
    close(affine.grads[1], linear.bias.grad)
    table = nn.Embedding(7, 3).double()
    embed = Embedding(table.weight.detach().numpy().copy())
    ids = torch.tensor([[0, 2, 0], [4, 2, 6]])
    out = table(ids)
    dout = torch.randn(2, 3, 3, dtype=torch.float64)
    out.backward(dout)
    close(embed.forward(ids.numpy()), out)
    embed.backward(dout.numpy())
    close(embed.grads[0], table.weight.grad)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_time_cells_equal_torch_rnns_forward_and_backward(kind):
    cell_class, time_class, torch_class = CELLS[kind]
    rnn = torch_class(3, 4, batch_first=True).double()
    with torch.no_grad():
        for p in rnn.parameters():
            p.normal_()
    layer = TimeRecurrent(cell_class.from_torch(*arrays(rnn)))
    xs = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    hs, _ = rnn(xs)
    dhs = torch.randn_like(hs)
    hs.backward(dhs)
    close(layer.forward(xs.detach().numpy()), hs)
    close(layer.backward(dhs.numpy()), xs.grad)
    for mine, theirs in zip(layer.grads, cell_class.from_torch(*grads(rnn)).params):
        close(mine, theirs)
    back = layer.cell.to_torch()  # and the way back to PyTorch's layout
    for mine, theirs in zip(cell_class.from_torch(*back).params, layer.params):
        close(mine, theirs)


def test_lstm_gate_order_maps_pytorchs_blocks():
    H = 2
    w = np.arange(4 * H, dtype=np.float64)[:, None]  # PyTorch's rows: i i f f g g o o
    cell = LSTM.from_torch(w, np.zeros((4 * H, H)), np.zeros(4 * H), np.zeros(4 * H))
    assert cell.params[0][0].tolist() == [2, 3, 4, 5, 0, 1, 6, 7]  # the book's f f g g i i o o


def test_time_softmax_with_loss_equals_cross_entropy_with_ignore_index():
    scores = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 5, -1, 0], [2, -1, 3, 3]])
    loss = nn.functional.cross_entropy(scores.reshape(-1, 6), targets.reshape(-1), ignore_index=-1)
    loss.backward()
    layer = TimeSoftmaxWithLoss()
    assert layer.forward(scores.detach().numpy(), targets.numpy()) == pytest.approx(loss.item(), abs=TOL)
    close(layer.backward(), scores.grad)


def copy_lm(torch_lm: TorchRNNLM, lm: RNNLM, cell_class) -> None:
    lm.embed.params[0][...] = torch_lm.embedding.weight.detach().numpy()
    for rnn, module in zip(lm.rnns, torch_lm.layers):
        for mine, theirs in zip(rnn.params, cell_class.from_torch(*arrays(module)).params):
            mine[...] = theirs
    if lm.affine.params[0].base is not lm.embed.params[0]:
        lm.affine.params[0][...] = torch_lm.output.weight.detach().numpy().T
    lm.affine.params[1][...] = torch_lm.output.bias.detach().numpy()


@pytest.mark.parametrize("kind,tie", [("lstm", True), ("gru", False), ("rnn", True)])
def test_rnnlm_equals_seqlabs_pytorch_rnnlm_over_two_stateful_batches(kind, tie):
    V, H = 11, 5
    torch_lm = TorchRNNLM(V, kind, H, H, num_layers=2, dropout=0.5, tie_weights=tie).double().eval()
    with torch.no_grad():
        for p in torch_lm.parameters():
            p.normal_(0, 0.5)
    lm = RNNLM(V, kind, H, H, num_layers=2, dropout=0.5, tie_weights=tie, dtype=np.float64, hidden_bias=True)
    lm.eval()
    copy_lm(torch_lm, lm, CELLS[kind][0])
    ids = torch.randint(0, V, (3, 9))
    state = None
    for block in (slice(0, 4), slice(4, 8)):  # truncated BPTT: the state carried, the backward path cut
        x, t = ids[:, block], ids[:, block.start + 1:block.stop + 1]
        torch_lm.zero_grad()
        logits, state = torch_lm(x, state)
        state = TorchRNNLM.detach(state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), t.reshape(-1))
        loss.backward()
        assert lm.forward(x.numpy(), t.numpy()) == pytest.approx(loss.item(), abs=TOL)
        lm.backward()
        params, merged = shared_params(lm.params, lm.grads)
        assert len(params) == len(lm.params) - tie  # the tied weight counted once
        close(merged[0], torch_lm.embedding.weight.grad)
        for rnn, module in zip(lm.rnns, torch_lm.layers):
            for mine, theirs in zip(rnn.grads, CELLS[kind][0].from_torch(*grads(module)).params):
                close(mine, theirs)
        close(lm.affine.grads[1], torch_lm.output.bias.grad)


START = 4  # the answers' first symbol, the book's "_"


def seq2seq_pair(scratch_class, **rnn):
    V, D, H = 13, 4, 6
    cfg = RNNConfig(embedding_size=D, hidden_size=H, **rnn)
    twin = RNNSeq2seq(cfg, V, V).double().eval()
    with torch.no_grad():
        for p in twin.parameters():
            p.normal_(0, 0.5)
    model = scratch_class(V, D, H, dtype=np.float64, hidden_bias=True)
    enc, dec = model.encoder, model.decoder
    enc.embed.params[0][...] = twin.encoder.embedding.weight.detach().numpy()
    for mine, theirs in zip(enc.lstm.params, LSTM.from_torch(*arrays(twin.encoder.layers[0])).params):
        mine[...] = theirs
    dec.embed.params[0][...] = twin.decoder.embedding.weight.detach().numpy()
    for mine, theirs in zip(dec.lstm.params, LSTM.from_torch(*arrays(twin.decoder.rnn)).params):
        mine[...] = theirs
    dec.affine.params[0][...] = twin.decoder.output.weight.detach().numpy().T
    dec.affine.params[1][...] = twin.decoder.output.bias.detach().numpy()
    return model, twin


@pytest.mark.parametrize("scratch_class,rnn", [(Seq2seq, {}), (PeekySeq2seq, {"peeky": True}),
                                               (AttentionSeq2seq, {"attention": "dot", "head": "book"})],
                         ids=["seq2seq", "peeky", "attention"])
def test_seq2seq_models_equal_seqlabs_rnn_seq2seq(scratch_class, rnn):
    model, twin = seq2seq_pair(scratch_class, **rnn)
    src = torch.randint(4, 13, (3, 7))  # no padding: the book's sequences have one length
    trg = torch.randint(4, 13, (3, 5))
    trg[:, 0] = START
    logits = twin(src, trg[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 13), trg[:, 1:].reshape(-1))
    loss.backward()
    assert model.forward(src.numpy(), trg.numpy()) == pytest.approx(loss.item(), abs=TOL)
    model.backward()
    enc, dec = model.encoder, model.decoder
    close(enc.embed.grads[0], twin.encoder.embedding.weight.grad)
    close(dec.embed.grads[0], twin.decoder.embedding.weight.grad)
    for mine, theirs in zip(enc.lstm.grads, LSTM.from_torch(*grads(twin.encoder.layers[0])).params):
        close(mine, theirs)
    for mine, theirs in zip(dec.lstm.grads, LSTM.from_torch(*grads(twin.decoder.rnn)).params):
        close(mine, theirs)
    close(dec.affine.grads[0], twin.decoder.output.weight.grad.T)
    close(dec.affine.grads[1], twin.decoder.output.bias.grad)
    # greedy answers: the scratch batch against seqlab's step contract
    with torch.no_grad():
        state = twin.start(src)
        ids = trg[:, 0]
        answers = []
        for _ in range(4):
            step_logits, state, _ = twin.step(ids, state)
            ids = step_logits.argmax(-1)
            answers.append(ids)
    assert np.array_equal(model.generate(src.numpy(), START, 4), torch.stack(answers, 1).numpy())


@pytest.mark.parametrize("mine,theirs", [
    (lambda: SGD(0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    (lambda: Momentum(0.1, 0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    (lambda: AdaGrad(0.1), lambda p: torch.optim.Adagrad(p, lr=0.1, eps=1e-7)),
    (lambda: Adam(0.01, eps=0.0), lambda p: torch.optim.Adam(p, lr=0.01, eps=0.0)),
], ids=["sgd", "momentum", "adagrad", "adam"])
def test_optimizers_take_pytorchs_steps(mine, theirs):
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    optimizer, reference = mine(), theirs(tensors)
    for _ in range(5):
        grads = [rng.standard_normal(p.shape) for p in params]
        for t, g in zip(tensors, grads):
            t.grad = torch.tensor(g)
        reference.step()
        optimizer.update(params, grads)
    for p, t in zip(params, tensors):
        close(p, t)


def test_sgd_step_of_the_seed():
    p = np.array([1.0])
    SGD(0.1).update([p], [np.array([2.0])])
    assert p == pytest.approx([0.8])


def test_book_init_gives_the_books_scales_and_keeps_a_tied_embedding():
    from seqlab.model.init import book_init

    lm = TorchRNNLM(2000, "lstm", 64, 64, num_layers=2, tie_weights=True)
    book_init(lm)
    assert lm.output.weight is lm.embedding.weight
    assert lm.embedding.weight.std().item() == pytest.approx(0.01, rel=0.05)  # randn / 100, not 1/√H
    assert lm.layers[0].get_parameter("weight_ih_l0").std().item() == pytest.approx(1 / 8, rel=0.05)  # randn / √64
    assert not lm.layers[1].get_parameter("bias_hh_l0").any() and not lm.output.bias.any()
