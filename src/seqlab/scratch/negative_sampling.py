"""word2vec's faster output side (seed 002 ch. 4): EmbeddingDot, SigmoidWithLoss, the unigram sampler and the
negative-sampling loss, which turns "which of V words?" into "is it this word?" for one positive and a few
sampled negative words."""

from __future__ import annotations

import numpy as np

from seqlab.scratch.functions import cross_entropy_error, sigmoid
from seqlab.scratch.layers import Embedding, Layer


class EmbeddingDot(Layer):
    """out_n = W[idx_n] · h_n (S28): the score of one output word per row, h (N, H), idx (N,) -> (N,).
    Backward: dW[idx_n] += dout_n h_n, dh_n = dout_n W[idx_n]."""

    def __init__(self, W: np.ndarray) -> None:
        self.embed = Embedding(W)
        self.params, self.grads = self.embed.params, self.embed.grads

    def forward(self, h: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.target_W = self.embed.forward(idx)  # (N, H)
        self.h = h
        return (self.target_W * h).sum(axis=1)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        dout = dout.reshape(-1, 1)
        self.embed.backward(dout * self.h)
        return dout * self.target_W


class SigmoidWithLoss(Layer):
    """y = σ(x), the binary cross-entropy −(t log y + (1 − t) log(1 − y)) averaged over the batch (S29);
    backward = (y − t) dout / N."""

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: np.ndarray, t: np.ndarray) -> float:
        self.y, self.t = sigmoid(x), t
        return cross_entropy_error(np.stack((1 - self.y, self.y), axis=1), t)

    def backward(self, dout: float = 1.0) -> np.ndarray:
        return (self.y - self.t) * (dout / len(self.t))


class UnigramSampler:
    """Negative words drawn from the unigram distribution raised to ``power`` and renormalised (S31):
    P'(w) = P(w)^0.75 / Σ_v P(v)^0.75, which lifts rare words. Each row of ``sample`` excludes its own
    target word (drawn again where it came up), as the book's sampler does."""

    def __init__(self, corpus: np.ndarray, power: float, sample_size: int, rng: np.random.Generator) -> None:
        counts = np.bincount(corpus).astype(np.float64)
        p = counts ** power
        self.word_p = p / p.sum()
        self.sample_size = sample_size
        self.rng = rng

    def sample(self, target: np.ndarray) -> np.ndarray:
        """target (N,) -> negatives (N, sample_size), none equal to its row's target."""
        negatives = self.rng.choice(len(self.word_p), size=(len(target), self.sample_size), p=self.word_p)
        clash = negatives == target[:, None]
        while clash.any():
            negatives[clash] = self.rng.choice(len(self.word_p), size=int(clash.sum()), p=self.word_p)
            clash = negatives == target[:, None]
        return negatives


class NegativeSamplingLoss(Layer):
    """The positive word's binary loss (label 1) plus the ``sample_size`` negatives' (label 0) (S30), each an
    EmbeddingDot of the output weights W (V, H) with the hidden vector h (N, H); all share W, so their
    gradients are summed into one."""

    def __init__(self, W: np.ndarray, corpus: np.ndarray, rng: np.random.Generator, power: float = 0.75,
                 sample_size: int = 5) -> None:
        self.sampler = UnigramSampler(corpus, power, sample_size, rng)
        self.dots = [EmbeddingDot(W) for _ in range(sample_size + 1)]
        self.losses = [SigmoidWithLoss() for _ in range(sample_size + 1)]
        self.params = [W]
        self.grads = [np.zeros_like(W)]

    def forward(self, h: np.ndarray, target: np.ndarray) -> float:
        words = np.concatenate((target[:, None], self.sampler.sample(target)), axis=1)  # (N, 1 + k)
        labels = np.zeros(words.shape, dtype=np.int64)
        labels[:, 0] = 1
        return sum(loss.forward(dot.forward(h, words[:, k]), labels[:, k])
                   for k, (dot, loss) in enumerate(zip(self.dots, self.losses)))

    def backward(self, dout: float = 1.0) -> np.ndarray:
        dh = np.zeros_like(self.dots[0].h)
        self.grads[0][...] = 0
        for dot, loss in zip(self.dots, self.losses):
            dh += dot.backward(loss.backward(dout))
            self.grads[0] += dot.grads[0]
        return dh
