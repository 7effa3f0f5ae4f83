"""word2vec against seed 002's worked examples (S23–S25, S27–S31) and gradient checks in float64."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from seqlab.vectors.corpus import create_contexts_target, preprocess
from seqlab.vectors.word2vec import (
    NegativeSamplingWord2Vec,
    SimpleCBOW,
    SimpleSkipGram,
    UnigramSampler,
    embedding_dot,
    sigmoid_loss,
)

TEXT = "You say goodbye and I say hello."


def _toy():
    corpus, word_to_id, _ = preprocess(TEXT)
    contexts, target = create_contexts_target(corpus, window_size=1)
    return torch.as_tensor(contexts), torch.as_tensor(target), len(word_to_id)


def test_simple_cbow_starts_at_ln_v_and_learns():  # S23, S25
    contexts, target, vocab = _toy()
    model = SimpleCBOW(vocab, 5, torch.Generator().manual_seed(0))
    with torch.no_grad():
        first = float(model(contexts, target))
    assert first == pytest.approx(math.log(7), abs=0.01)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(300):
        loss = model(contexts, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.5 * first
    assert model.word_vecs.shape == (7, 5) and torch.equal(model.word_vecs, model.w_in.detach())


def test_simple_skip_gram_starts_at_twice_ln_v():  # S24
    contexts, target, vocab = _toy()
    model = SimpleSkipGram(vocab, 5, torch.Generator().manual_seed(0))
    assert model(contexts, target).item() == pytest.approx(2 * math.log(7), abs=0.02)


def test_simple_models_pass_a_gradient_check():
    contexts, target, vocab = _toy()
    for model_type in (SimpleCBOW, SimpleSkipGram):
        model = model_type(vocab, 3, torch.Generator().manual_seed(1)).double()
        weights = (model.w_in.detach().clone().requires_grad_(), model.w_out.detach().clone().requires_grad_())
        assert torch.autograd.gradcheck(
            lambda w_in, w_out, m=model: torch.func.functional_call(m, {"w_in": w_in, "w_out": w_out}, (contexts, target)),
            weights)


def test_embedding_backward_accumulates_repeated_rows():  # S27
    embedding = nn.Embedding(7, 3)
    idx = torch.tensor([0, 2, 0, 4])
    dout = torch.randn(4, 3)
    embedding(idx).backward(dout)
    grad = embedding.weight.grad
    assert grad is not None and torch.allclose(grad[0], dout[0] + dout[2])
    assert torch.equal(grad[[1, 3, 5, 6]], torch.zeros(4, 3))


def test_embedding_dot_seed_example():  # S28
    w_out = nn.Embedding.from_pretrained(torch.arange(21, dtype=torch.float32).view(7, 3), freeze=False)
    h = torch.tensor([[0.0, 1, 2], [3, 4, 5], [6, 7, 8]], requires_grad=True)
    out = embedding_dot(w_out, h, torch.tensor([0, 3, 1]))
    assert out.tolist() == [5.0, 122.0, 86.0]
    # the slide's backward: h = [3, 4, 5] against row 1 = [1, 1, 1], dout = 3
    w_out = nn.Embedding.from_pretrained(torch.ones(7, 3), freeze=False)
    h = torch.tensor([[3.0, 4, 5]], requires_grad=True)
    embedding_dot(w_out, h, torch.tensor([1])).backward(torch.tensor([3.0]))
    assert w_out.weight.grad is not None and w_out.weight.grad[1].tolist() == [9.0, 12.0, 15.0]
    assert h.grad is not None and h.grad.tolist() == [[3.0, 3.0, 3.0]]


def test_sigmoid_loss_seed_example():  # S29
    logit = torch.tensor([math.log(0.9 / 0.1)])  # σ = 0.9
    assert float(sigmoid_loss(logit, torch.tensor([1]))) == pytest.approx(0.10536, abs=1e-5)


@pytest.mark.parametrize("cbow", [True, False])
def test_negative_sampling_loss_is_one_plus_k_ln_2_at_zero_scores(cbow):  # S30
    k = 5
    model = NegativeSamplingWord2Vec(7, 4, cbow=cbow)
    with torch.no_grad():
        model.w_out.weight.zero_()
    inputs = torch.tensor([[0, 2], [1, 3]]) if cbow else torch.tensor([1, 2])
    loss = model(inputs, torch.tensor([1, 2]), torch.randint(0, 7, (2, k)))
    assert loss.item() == pytest.approx((1 + k) * math.log(2), abs=1e-6)


def test_negative_sampling_step_touches_only_its_rows():
    model = NegativeSamplingWord2Vec(1000, 8, cbow=False, generator=torch.Generator().manual_seed(0))
    model(torch.tensor([3, 4]), torch.tensor([5, 6]), torch.tensor([[7, 8], [9, 10]])).backward()
    w_in, w_out = model.w_in.weight.grad, model.w_out.weight.grad
    assert w_in is not None and w_in.is_sparse and w_out is not None and w_out.is_sparse
    assert set(w_in.coalesce().indices()[0].tolist()) == {3, 4}
    assert set(w_out.coalesce().indices()[0].tolist()) == {5, 6, 7, 8, 9, 10}


def test_negative_sampling_passes_a_gradient_check():
    model = NegativeSamplingWord2Vec(7, 3, cbow=False, generator=torch.Generator().manual_seed(2)).double()
    model.w_in.sparse = model.w_out.sparse = False  # gradcheck compares dense gradients; sparsity is tested above
    contexts, positive, negatives = torch.tensor([0, 2]), torch.tensor([1, 2]), torch.tensor([[4, 5], [6, 0]])

    def loss(w_in, w_out):
        return torch.func.functional_call(model, {"w_in.weight": w_in, "w_out.weight": w_out},
                                          (contexts, positive, negatives))

    weights = (model.w_in.weight.detach().clone().requires_grad_(), model.w_out.weight.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(loss, weights)


def test_unigram_sampler_seed_distribution_and_frequencies():  # S31
    sampler = UnigramSampler(np.array([0.7, 0.29, 0.01]), generator=torch.Generator().manual_seed(0))
    assert np.allclose(sampler.probabilities, [0.64196878, 0.33150408, 0.02652714], atol=1e-8)
    draws = sampler.sample(100_000, 1).ravel()
    frequencies = np.bincount(draws.numpy(), minlength=3) / draws.numel()
    assert np.allclose(frequencies, sampler.probabilities, atol=0.01)


def test_cbow_gives_every_context_row_the_whole_error():
    """word2vec.c's and gensim's CBOW update: the forward uses the mean, each context row gets its full gradient."""
    model = NegativeSamplingWord2Vec(7, 3, cbow=True, generator=torch.Generator().manual_seed(2))
    model.w_in.sparse = False
    h = model._context_mean(torch.tensor([[0, 2, 4]]))
    assert torch.allclose(h[0], model.w_in.weight[[0, 2, 4]].mean(dim=0))
    h.backward(torch.tensor([[1.0, 2.0, 3.0]]))
    grad = model.w_in.weight.grad
    assert grad is not None
    for row in (0, 2, 4):
        assert grad[row].tolist() == [1.0, 2.0, 3.0]


def test_the_books_cbow_splits_the_error_between_the_context_rows():
    """The book's CBOW.backward: ``dout *= 1 / len(self.in_layers)``, then each context row's Embedding."""
    model = NegativeSamplingWord2Vec(7, 3, cbow=True, generator=torch.Generator().manual_seed(2), book=True)
    h = model._context_mean(torch.tensor([[0, 2, 4]]))
    assert torch.allclose(h[0], model.w_in.weight[[0, 2, 4]].mean(dim=0))
    h.backward(torch.tensor([[3.0, 6.0, 9.0]]))
    grad = model.w_in.weight.grad
    assert grad is not None and not grad.is_sparse  # dense tables: the book's Adam moves every row's moments
    for row in (0, 2, 4):
        assert grad[row].tolist() == [1.0, 2.0, 3.0]


def test_the_alias_table_holds_each_words_probability_exactly():
    from seqlab.vectors.word2vec import alias_table

    counts = np.random.default_rng(0).zipf(1.3, 5000).astype(np.float64)
    sampler = UnigramSampler(counts)
    keep, alias = alias_table(sampler.probabilities)
    share = keep / len(keep)  # each column's own word, then what it gives to its alias
    np.add.at(share, alias, (1 - keep) / len(keep))
    assert np.allclose(share, sampler.probabilities, rtol=0, atol=1e-12)
    assert (keep >= 0).all() and (keep <= 1).all()
