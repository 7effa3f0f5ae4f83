"""seqlab.scratch's models and training loops: the seeds' shapes and numbers (S7–S8, S12–S13, S36–S38,
S45, S47, S50–S51, S56, S63, S67), gradient checks of whole models in float64, and learning end to end."""

import numpy as np
import pytest

from seqlab.scratch.gradcheck import check_gradients
from seqlab.scratch.models import RNNLM, AttentionSeq2seq, BetterRnnlm, PeekySeq2seq, Rnnlm, Seq2seq, SimpleRnnlm, TwoLayerNet
from seqlab.scratch.models.base import Init, Model
from seqlab.scratch.models.seq2seq import Encoder
from seqlab.scratch.optimizers import SGD, Adam, shared_params
from seqlab.scratch.trainer import RnnlmTrainer, Trainer, exact_match, perplexity

TOL = 1e-6


def rng(seed=0):
    return np.random.default_rng(seed)


def spread(model):
    """Weights of order 1: with the book's small initial ones (embeddings randn / 100) the gradients are so small
    that the numerical gradient's rounding (≈ 1e-16 · L / ε) is no longer negligible against them."""
    r = rng(11)
    for p in model.params:
        if not any(p.base is q for q in model.params):  # a tied view changes with its base
            p[...] = r.normal(0, 0.5, p.shape)


def model_check(model, forward):
    """The gradient check of a whole model's loss w.r.t. every parameter (shared ones once)."""
    spread(model)

    def backward(d):
        model.backward(d)
        return model.grads
    return check_gradients(forward, backward, model.params)


def test_two_layer_net_shapes_shared_arrays_and_gradients():
    net = TwoLayerNet(2, 4, 3, rng())
    assert [p.shape for p in net.params] == [(2, 4), (4,), (4, 3), (3,)]
    assert all(p is q for p, q in zip(net.params, [*net.layers[0].params, *net.layers[2].params]))
    assert all(g is q for g, q in zip(net.grads, [*net.layers[0].grads, *net.layers[2].grads]))  # S7: no copies
    x, t = rng(1).standard_normal((10, 2)), rng(2).integers(0, 3, 10)
    assert net.predict(x).shape == (10, 3)
    assert np.isscalar(net.forward(x, t))
    assert max(model_check(net, lambda: net.forward(x, t))) < TOL


def test_trainer_iterations_loss_lines_and_learning():
    """S13: 320 samples, batch 32 -> 10 iterations an epoch; a loss line every eval_interval iterations."""
    r = rng(3)
    x = r.standard_normal((320, 2))
    t = (x[:, 0] * x[:, 1] > 0).astype(int) + (x[:, 0] > 1)  # three classes, not linearly separable
    net = TwoLayerNet(2, 10, 3, rng(4))
    lines: list[str] = []
    trainer = Trainer(net, Adam(0.05), rng(5), log=lines.append)
    trainer.fit(x, t, max_epoch=30, batch_size=32, eval_interval=20)
    assert len(lines) == len(trainer.loss_list) == 30 * 10 // 20
    assert lines[0].startswith("| epoch 2 | iter 10 / 10 |") and lines[1].startswith("| epoch 4 | iter 10 / 10 |")
    assert trainer.loss_list[-1] < 0.6 * trainer.loss_list[0]


def test_trainer_draws_each_epochs_minibatches_in_a_new_random_order():
    """S13: the book's Trainer shuffles the samples every epoch (``np.random.permutation``): each epoch sees
    every sample once, in another order."""

    class Recorder(Model):
        """A model of no layers that notes the samples of every minibatch."""

        def __init__(self) -> None:
            super().__init__([])
            self.seen: list[list[int]] = []

        def forward(self, x: np.ndarray, t: np.ndarray) -> float:
            self.seen.append(x[:, 0].astype(int).tolist())
            return 0.0

        def backward(self, dout: float = 1.0) -> None:
            pass

    model = Recorder()
    Trainer(model, SGD(0.1), rng(5), log=lambda line: None).fit(
        np.arange(40.0)[:, None], np.zeros(40, dtype=int), max_epoch=2, batch_size=8)
    first, second = sum(model.seen[:5], []), sum(model.seen[5:], [])
    assert sorted(first) == sorted(second) == list(range(40))
    assert first != second and first != list(range(40))


def test_simple_rnnlm_shapes_of_the_seed():
    model = SimpleRnnlm(7, 4, 3, rng())
    assert [p.shape for p in model.params] == [(7, 4), (4, 3), (3, 3), (3,), (3, 7), (7,)]
    assert all(p.dtype == np.float32 for p in model.params)
    assert model.predict(np.array([[0, 1, 2]])).shape == (1, 3, 7)
    model.reset_state()
    xs = np.array([[0, 1, 2], [3, 4, 1]])
    assert model.embed.forward(xs).shape == (2, 3, 4) and model.predict(xs).shape == (2, 3, 7)


@pytest.mark.parametrize("kind,tie,variational", [("lstm", True, False), ("gru", False, True), ("rnn", True, False)])
def test_rnnlm_gradient_check(kind, tie, variational):
    model = RNNLM(9, kind, 4, 4, num_layers=2, dropout=0.3, variational=variational, tie_weights=tie, rng=rng(),
                  dtype=np.float64)
    xs, ts = rng(1).integers(0, 9, (2, 5)), rng(2).integers(0, 9, (2, 5))
    for drop in model.drops:  # the same masks on every call: a fixed generator state per call
        drop.rng = np.random.default_rng(7)

    def forward():
        for drop in model.drops:
            drop.rng = np.random.default_rng(7)
        model.reset_state()
        return model.forward(xs, ts)

    def backward(d):
        model.backward(d)
        return shared_params(model.params, model.grads)[1]

    spread(model)
    params = [p for p in model.params if not any(p.base is q for q in model.params)]  # the tied view counted once
    errors = check_gradients(forward, backward, params)
    assert max(errors) < TOL, errors


def test_better_rnnlm_ties_its_output_to_the_embedding():
    V, H = 20, 6
    tied, untied = BetterRnnlm(V, H, H, rng=rng()), RNNLM(V, "lstm", H, H, 2, 0.5, tie_weights=False, rng=rng())
    W_out = tied.affine.params[0]
    assert np.shares_memory(W_out, tied.embed.params[0]) and W_out.shape == (H, V)
    tied.embed.params[0][3, 2] = 42.0
    assert W_out[2, 3] == 42.0  # the same memory
    count = lambda m: sum(p.size for p in m.params if not any(p.base is q for q in m.params))  # noqa: E731
    assert count(untied) - count(tied) == V * H
    xs = rng(1).integers(0, V, (2, 5))
    tied.eval()
    first = tied.predict(xs)
    tied.reset_state()
    assert np.array_equal(first, tied.predict(xs))  # evaluation is deterministic: dropout off
    tied.train()
    tied.reset_state()
    assert not np.array_equal(first, tied.predict(xs))


def test_rnnlm_in_blocks_equals_one_unrolled_run():
    model = Rnnlm(12, 5, 6, rng())
    xs = rng(1).integers(0, 12, (3, 8))
    whole = model.predict(xs)
    model.reset_state()
    parts = np.concatenate([model.predict(xs[:, :3]), model.predict(xs[:, 3:])], axis=1)
    assert np.allclose(parts, whole, atol=1e-6)


def test_generate_is_reproducible_and_follows_a_one_hot_distribution():
    model = Rnnlm(10, 4, 4, rng())
    a = model.generate(np.array([1, 2]), 12, np.random.default_rng(9))
    b = model.generate(np.array([1, 2]), 12, np.random.default_rng(9))
    assert a.shape == (2, 12) and np.array_equal(a, b) and (a[:, 0] == [1, 2]).all()
    model.affine.params[1][...] = -1e4
    model.affine.params[1][7] = 1e4  # every next word is 7 whatever the state
    assert (model.generate(np.array([3]), 6, np.random.default_rng(1), skip_ids=(0,))[0, 1:] == 7).all()


def test_rnnlm_trainer_learns_a_repeating_stream():
    corpus = np.tile(np.array([0, 1, 2, 3, 4, 1, 5, 6]), 300)
    model = Rnnlm(7, 8, 16, rng())
    trainer = RnnlmTrainer(model, SGD(1.0), log=lambda _: None)
    before = perplexity(model, corpus[:200])
    trainer.fit(corpus, max_epoch=8, batch_size=4, time_size=5, max_grad=5.0, eval_interval=10)
    assert before == pytest.approx(7, rel=0.1)  # ≈ uniform over V at the start (S39)
    assert perplexity(model, corpus[:200]) < 1.5 and trainer.ppl_list[-1] < trainer.ppl_list[0]


def test_rnnlm_loss_decreases_on_real_captions(shared_data):  # S44, Multi30k's English standing in for PTB
    import gzip

    from seqlab.vectors.corpus import preprocess

    with gzip.open(shared_data / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as lines:
        text = " ".join(next(lines).strip() for _ in range(1800))
    corpus, word_to_id, _ = preprocess(text)
    train, held_out = corpus[:-4000], corpus[-4000:]  # the last ~300 captions are not trained on
    model = Rnnlm(len(word_to_id), 100, 100, rng())
    trainer = RnnlmTrainer(model, SGD(20.0), log=lambda _: None)
    before = perplexity(model, held_out)
    trainer.fit(train, max_epoch=2, batch_size=20, time_size=35, max_grad=0.25, eval_interval=10)
    assert before == pytest.approx(len(word_to_id), rel=0.1)  # ≈ uniform over the vocabulary at the start
    assert trainer.ppl_list[-1] < 0.3 * trainer.ppl_list[0]
    assert perplexity(model, held_out) < 0.3 * before


def test_seq2seq_shapes_of_the_seed():
    init = Init(rng())
    enc = Encoder(13, 16, 128, init)
    assert enc.forward(rng(1).integers(0, 13, (5, 7))).shape == (5, 128)
    peeky = PeekySeq2seq(13, 16, 128, rng())
    assert peeky.decoder.lstm.params[0].shape == (144, 512) and peeky.decoder.affine.params[0].shape == (256, 13)
    attention = AttentionSeq2seq(13, 16, 128, rng())
    hs = attention.encoder.forward(rng(1).integers(0, 13, (5, 7)))
    assert hs.shape == (5, 7, 128)
    assert attention.decoder.affine.params[0].shape == (256, 13)
    assert attention.decoder.forward(rng(2).integers(0, 13, (5, 4)), hs).shape == (5, 4, 13)


@pytest.mark.parametrize("model_class", [Seq2seq, PeekySeq2seq, AttentionSeq2seq])
def test_seq2seq_gradient_checks(model_class):
    model = model_class(8, 3, 4, rng(), dtype=np.float64)
    xs, ts = rng(1).integers(0, 8, (2, 5)), rng(2).integers(0, 8, (2, 4))
    assert max(model_check(model, lambda: model.forward(xs, ts))) < TOL


@pytest.mark.parametrize("model_class", [Seq2seq, PeekySeq2seq, AttentionSeq2seq])
def test_seq2seq_learns_to_reverse_short_sequences(model_class):
    r = rng(4)
    questions = r.integers(2, 8, (1200, 4))
    answers = np.concatenate([np.ones((1200, 1), dtype=int), questions[:, ::-1]], axis=1)  # "_" then the reverse
    model = model_class(8, 8, 32, rng(5))
    Trainer(model, Adam(0.01), rng(6), log=lambda _: None).fit(questions[:1000], answers[:1000], max_epoch=15,
                                                               batch_size=50, max_grad=5.0, eval_interval=0)
    accuracy = exact_match(model, questions[1000:], answers[1000:])
    assert accuracy > 0.8, accuracy
    assert model.generate(questions[1000:1003], 1, 4).shape == (3, 4)
