"""The RNN language models of seed 002 ch. 5–6: SimpleRnnlm, Rnnlm and BetterRnnlm, all one ``RNNLM``.

    ids (N, T) -> TimeEmbedding -> [TimeDropout -> TimeRNN/LSTM/GRU] × layers -> TimeDropout -> TimeAffine
               -> TimeSoftmaxWithLoss

the structure of seqlab's PyTorch ``model.lm.RNNLM``, its twin. The recurrent layers are stateful (truncated
BPTT, S35): ``reset_state`` starts every row afresh. With ``tie_weights`` (S45) the output Affine's weight is
the embedding matrix's transpose, a view of the same memory; ``optimizers.shared_params`` sums its two
gradients.
"""

from __future__ import annotations

import numpy as np

from seqlab.scratch.layers import Layer
from seqlab.scratch.models.base import Init, Model
from seqlab.scratch.time_layers import (
    TimeAffine,
    TimeDropout,
    TimeEmbedding,
    TimeGRU,
    TimeLSTM,
    TimeRecurrent,
    TimeRNN,
    TimeSoftmaxWithLoss,
)

GATES = {"rnn": 1, "lstm": 4, "gru": 3}


def recurrent_layer(cell: str, input_size: int, hidden_size: int, init: Init, stateful: bool,
                    hidden_bias: bool = False) -> TimeRecurrent:
    """A Time RNN / LSTM / GRU with the book's initialisation: Wx randn/√D, Wh randn/√H, biases 0; with
    ``hidden_bias`` (always for the GRU) PyTorch's second bias too."""
    G = GATES[cell]
    Wx, Wh, b = init.weight(input_size, G * hidden_size), init.weight(hidden_size, G * hidden_size), init.zeros(G * hidden_size)
    bh = init.zeros(G * hidden_size) if hidden_bias or cell == "gru" else None
    return {"rnn": TimeRNN, "lstm": TimeLSTM, "gru": TimeGRU}[cell](Wx, Wh, b, bh, stateful=stateful)


class RNNLM(Model):
    def __init__(self, vocab_size: int, cell: str = "lstm", embedding_size: int = 650, hidden_size: int = 650,
                 num_layers: int = 2, dropout: float = 0.5, variational: bool = False, tie_weights: bool = True,
                 rng: np.random.Generator | None = None, dtype: type = np.float32, hidden_bias: bool = False) -> None:
        """``hidden_bias``: the recurrent layers have PyTorch's two biases (the NumPy engine's twin)."""
        if tie_weights and embedding_size != hidden_size:
            raise ValueError(f"tying needs embedding_size == hidden_size (got {embedding_size} and {hidden_size})")
        rng = rng if rng is not None else np.random.default_rng()
        init = Init(rng, dtype)
        self.embed = TimeEmbedding(init.embedding(vocab_size, embedding_size))
        sizes = [embedding_size] + [hidden_size] * num_layers
        self.rnns = [recurrent_layer(cell, sizes[i], sizes[i + 1], init, True, hidden_bias) for i in range(num_layers)]
        self.drops = [TimeDropout(dropout, rng, variational) for _ in range(num_layers + 1)]
        W = self.embed.params[0].T if tie_weights else init.weight(hidden_size, vocab_size)
        self.affine = TimeAffine(W, init.zeros(vocab_size))
        layers: list[Layer] = [self.embed]
        for drop, rnn in zip(self.drops, self.rnns):
            layers += [drop, rnn]
        layers += [self.drops[-1], self.affine]
        super().__init__(layers)
        self.loss_layer = TimeSoftmaxWithLoss()

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """ids (N, T) -> scores (N, T, V), the state carried on from the previous call."""
        out = xs
        for layer in self.layers:
            out = layer.forward(out)
        return out

    def forward(self, xs: np.ndarray, ts: np.ndarray) -> float:
        return self.loss_layer.forward(self.predict(xs), ts)

    def backward(self, dout: float = 1.0) -> None:
        d = self.loss_layer.backward(dout)
        for layer in reversed(self.layers):
            d = layer.backward(d)

    def reset_state(self) -> None:
        for rnn in self.rnns:
            rnn.reset_state()

    def generate(self, start_ids: np.ndarray, length: int, rng: np.random.Generator,
                 skip_ids: tuple[int, ...] = ()) -> np.ndarray:
        """Text generation by sampling (S47): from each start word of ``start_ids`` (N,), ``length`` ids
        (N, length), the first the start word, each next one drawn from the softmax of the scores and fed
        back; ``skip_ids`` (e.g. <unk>) are never drawn. In evaluation mode, from a fresh state."""
        self.eval()
        self.reset_state()
        ids = np.empty((len(start_ids), length), dtype=np.int64)
        ids[:, 0] = start_ids
        for t in range(1, length):
            scores = self.predict(ids[:, t - 1:t])[:, 0].astype(np.float64)  # (N, V)
            scores[:, list(skip_ids)] = -np.inf
            p = np.exp(scores - scores.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            ids[:, t] = (p.cumsum(axis=1) > rng.random((len(p), 1))).argmax(axis=1)  # one draw per row
        return ids


class SimpleRnnlm(RNNLM):
    """Seed 002 ch. 5 (S38): TimeEmbedding -> TimeRNN -> TimeAffine, no dropout, untied."""

    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int, rng: np.random.Generator | None = None,
                 dtype: type = np.float32) -> None:
        super().__init__(vocab_size, "rnn", wordvec_size, hidden_size, 1, 0.0, tie_weights=False, rng=rng, dtype=dtype)


class Rnnlm(RNNLM):
    """Seed 002 ch. 6 (S44): SimpleRnnlm with an LSTM."""

    def __init__(self, vocab_size: int = 10000, wordvec_size: int = 100, hidden_size: int = 100,
                 rng: np.random.Generator | None = None, dtype: type = np.float32) -> None:
        super().__init__(vocab_size, "lstm", wordvec_size, hidden_size, 1, 0.0, tie_weights=False, rng=rng, dtype=dtype)


class BetterRnnlm(RNNLM):
    """Seed 002 ch. 6 (S45): two LSTM layers, dropout 0.5 in depth, the embedding tied to the output."""

    def __init__(self, vocab_size: int = 10000, wordvec_size: int = 650, hidden_size: int = 650,
                 dropout_ratio: float = 0.5, rng: np.random.Generator | None = None, dtype: type = np.float32) -> None:
        super().__init__(vocab_size, "lstm", wordvec_size, hidden_size, 2, dropout_ratio, tie_weights=True, rng=rng,
                         dtype=dtype)
