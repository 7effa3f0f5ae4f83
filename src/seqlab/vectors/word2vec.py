"""word2vec in PyTorch (seed 002 ch. 3–4): the simple CBOW and skip-gram with a full softmax, and the fast
CBOW and skip-gram with an embedding lookup and negative sampling.

* ``SimpleCBOW``: the context words share ``W_in (V, H)``; the hidden vector is the **average** of their
  rows; ``W_out (H, V)`` and a softmax predict the centre word: ``L = −log P(w_t | w_{t−1}, w_{t+1})``.
* ``SimpleSkipGram``: the centre word predicts each context word; the loss is the **sum** of the
  per-context softmax losses, ``L = −Σ_c log P(w_c | w_t)``.
* Negative sampling turns the softmax over V into binary decisions: the true (centre, context) pair
  scores ``σ(h · W_out[w])`` against label 1 and ``k`` words drawn from ``P(w)^0.75`` against label 0,
  ``L = −log σ(s⁺) − Σ_k log σ(−s⁻_k)`` (seed 002 §4.2). A step then reads and writes only the
  ``(k + 1)`` output rows and the input rows of its batch, not all V.

The word vectors are ``W_in`` (seed 002 §3.4: "using only the input-side weights is most popular").
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqlab.vectors.pairs import PAD_CONTEXT


def _small_normal(rows: int, cols: int, generator: torch.Generator | None) -> nn.Parameter:
    """0.01 · N(0, 1), the seed's initialisation of both weight matrices."""
    return nn.Parameter(0.01 * torch.randn(rows, cols, generator=generator))


class SimpleCBOW(nn.Module):
    """The seed's ``SimpleCBOW``: average the context rows of W_in, then a softmax over the vocabulary."""

    def __init__(self, vocab_size: int, hidden_size: int, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.w_in = _small_normal(vocab_size, hidden_size, generator)  # (V, H)
        self.w_out = _small_normal(hidden_size, vocab_size, generator)  # (H, V)

    def forward(self, contexts: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """contexts (N, C), target (N,) -> the mean loss over the batch."""
        h = self.w_in[contexts].mean(dim=1)  # (N, H)
        return F.cross_entropy(h @ self.w_out, target)

    @property
    def word_vecs(self) -> torch.Tensor:
        return self.w_in.detach()


class SimpleSkipGram(SimpleCBOW):
    """The seed's ``SimpleSkipGram``: the centre word's row of W_in predicts every context word."""

    def forward(self, contexts: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """contexts (N, C), target (N,) -> the sum over context positions of their mean loss."""
        logits = self.w_in[target] @ self.w_out  # (N, V)
        return sum((F.cross_entropy(logits, contexts[:, c]) for c in range(contexts.size(1))), torch.zeros(()))


def embedding_dot(w_out: nn.Embedding, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The seed's ``EmbeddingDot``: ``sum(W_out[idx] * h)`` per row, the rows looked up through the embedding
    (so that a sparse one gets a sparse gradient). h (N, H), idx (N,) or (N, K) -> (N,) or (N, K)."""
    rows = w_out(idx)  # (N, H) or (N, K, H)
    return (rows * (h if idx.dim() == 1 else h[:, None, :])).sum(dim=-1)


def sigmoid_loss(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``SigmoidWithLoss``: −(t log σ(x) + (1 − t) log(1 − σ(x))), summed (computed from the logits, stably)."""
    return F.binary_cross_entropy_with_logits(scores, labels.to(scores.dtype), reduction="sum")


class UnigramSampler:
    """Negative words drawn from the corpus' unigram distribution raised to ``power`` (seed 002 §4.2.6):
    ``P'(w) = P(w)^0.75 / Σ_j P(w_j)^0.75`` makes rare words a little more likely.

    Draws are with replacement and may hit the positive word (``kernel.train_job`` skips such a draw, as
    word2vec.c and gensim do); the book's CPU sampler instead removes the target from each row's distribution
    and draws without replacement, which costs a distribution per row.

    A draw is O(1) by Walker's alias method: one uniform number picks a column ``i`` of V equal columns and a
    point in it; below ``keep[i]`` the draw is ``i``, above it ``alias[i]``. The table is exact: each word's
    share over the columns is its probability (to float64 rounding). Binary search in the cumulative
    distribution (``torch.multinomial``'s way) costs log V and was a tenth of a training step."""

    def __init__(self, counts: np.ndarray, power: float = 0.75, generator: torch.Generator | None = None) -> None:
        self.probabilities = unigram_probabilities(counts, power)
        keep, alias = alias_table(self.probabilities)
        self._keep, self._alias = torch.as_tensor(keep), torch.as_tensor(alias)
        self.generator = generator

    def sample(self, rows: int, k: int) -> torch.Tensor:
        """(rows, k) word ids."""
        point = torch.rand(rows * k, generator=self.generator, dtype=torch.float64) * len(self._keep)
        column = point.long()
        ids = torch.where(point - column < self._keep[column], column, self._alias[column])
        return ids.view(rows, k)


def unigram_probabilities(counts: np.ndarray, power: float = 0.75) -> np.ndarray:
    """``P'(w) = count(w)^power / Σ_j count(w_j)^power`` (seed 002 §4.2.6), float64."""
    weights = np.power(np.asarray(counts, dtype=np.float64), power)
    return weights / weights.sum()


def alias_table(probabilities: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's construction: column i keeps i with probability ``keep[i]`` and otherwise gives ``alias[i]``."""
    size = len(probabilities)
    mass = probabilities * size  # each column holds 1
    keep, alias = np.ones(size), np.arange(size)
    small = [i for i in range(size) if mass[i] < 1.0]
    large = [i for i in range(size) if mass[i] >= 1.0]
    while small and large:
        light, heavy = small.pop(), large.pop()
        keep[light], alias[light] = mass[light], heavy  # the light word's column is topped up by the heavy one
        mass[heavy] -= 1.0 - mass[light]
        (small if mass[heavy] < 1.0 else large).append(heavy)
    return keep, alias  # columns left in either list hold their word alone (keep 1)


def _context_rows(contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CBOW contexts (N, C) -> the rows to look up (padding as row 0) and where a context is present (N, C, 1)."""
    return contexts.clamp(min=0), (contexts != PAD_CONTEXT).unsqueeze(-1)


class NegativeSamplingWord2Vec(nn.Module):
    """CBOW (``cbow=True``: the mean of the context rows predicts the centre word) or skip-gram (the centre
    word's row predicts one context word) with negative sampling. Both tables are embeddings with sparse
    gradients, so a step touches only the rows of its batch; ``book=True``: the book's CBOW, whose dense tables
    Adam updates whole and whose mean splits its gradient between the context rows (``_context_mean``)."""

    def __init__(self, vocab_size: int, dim: int, cbow: bool, generator: torch.Generator | None = None,
                 book: bool = False) -> None:
        super().__init__()
        self.cbow = cbow
        self.book = book
        self.w_in = nn.Embedding(vocab_size, dim, sparse=not book)
        self.w_out = nn.Embedding(vocab_size, dim, sparse=not book)
        with torch.no_grad():
            self.w_in.weight.copy_(0.01 * torch.randn(vocab_size, dim, generator=generator))
            self.w_out.weight.copy_(0.01 * torch.randn(vocab_size, dim, generator=generator))

    def forward(self, inputs: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """inputs: contexts (N, C) for CBOW (``pairs.PAD_CONTEXT`` where a row has fewer), centre words (N,)
        for skip-gram; positive (N,), negatives (N, K) -> the mean over the batch of the positive and the K
        negative losses, summed."""
        h = self._context_mean(inputs) if self.cbow else self.w_in(inputs)  # (N, H)
        scores = torch.cat([embedding_dot(self.w_out, h, positive)[:, None],
                            embedding_dot(self.w_out, h, negatives)], dim=1)  # (N, 1 + K)
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1.0
        return sigmoid_loss(scores, labels) / scores.size(0)

    def _context_mean(self, contexts: torch.Tensor) -> torch.Tensor:
        """The mean of each row's context vectors, padding left out: (N, C) -> (N, H).

        Backward, every context row gets the whole gradient of the mean, not its 1/C share: the update
        of word2vec.c and gensim (``cbow_mean=1``), so that seqlab and gensim train CBOW alike. The
        book divides it (its ``dout *= 1/len``), which slows the input vectors by the window's width; so does
        the book's CBOW here (``book``), the mean's own gradient."""
        rows, present = _context_rows(contexts)
        summed = (self.w_in(rows) * present).sum(dim=1)
        mean = summed / present.sum(dim=1).clamp(min=1)
        if self.book:
            return mean  # backward: dh / C to each context row
        return mean.detach() + (summed - summed.detach())  # the mean forward; backward, dh to every context row

    @property
    def word_vecs(self) -> torch.Tensor:
        return self.w_in.weight.detach()
