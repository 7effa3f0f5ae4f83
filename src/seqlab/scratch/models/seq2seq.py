"""The seq2seq models of seed 002 ch. 7: Encoder, Decoder, Seq2seq, and the Peeky decoder.

The encoder reads the question, the decoder is a language model started from the encoder's last h, the
context vector (S48, S50–S52); trained by teacher forcing on ``ts[:, :-1]`` against ``ts[:, 1:]``. The book's
sequences have one fixed length (it pads with spaces, which are data, S53); seqlab's batches are padded at the
end, so the models also take ``lengths`` (N,): the encoder's context is then the h of each row's last real
step (the padding read after it changes no earlier state) and attention gives the padding no weight, as
seqlab's PyTorch RNNSeq2seq does (S54). Generation takes the argmax of the scores (S51) for all rows at once.
"""

from __future__ import annotations

import numpy as np

from seqlab.scratch.models.base import Init, Model
from seqlab.scratch.models.rnnlm import recurrent_layer
from seqlab.scratch.time_layers import TimeAffine, TimeEmbedding, TimeSoftmaxWithLoss


class Encoder(Model):
    """TimeEmbedding -> TimeLSTM (not stateful): ids (N, T) -> the last h (N, H) (S50)."""

    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int, init: Init,
                 hidden_bias: bool = False) -> None:
        self.embed = TimeEmbedding(init.embedding(vocab_size, wordvec_size))
        self.lstm = recurrent_layer("lstm", wordvec_size, hidden_size, init, False, hidden_bias)
        super().__init__([self.embed, self.lstm])

    def forward(self, xs: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        self.hs = self.lstm.forward(self.embed.forward(xs))  # (N, T, H)
        self.rows, self.last = last_steps(xs, lengths)
        return self.hs[self.rows, self.last]

    def backward(self, dh: np.ndarray) -> None:
        dhs = np.zeros_like(self.hs)
        dhs[self.rows, self.last] = dh  # the upward outputs were not used; only the last h reached the decoder
        self.embed.backward(self.lstm.backward(dhs))


def last_steps(xs: np.ndarray, lengths: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, positions) of each row's last real step: T − 1, or ``lengths − 1``."""
    N, T = xs.shape
    return np.arange(N), np.full(N, T - 1) if lengths is None else np.asarray(lengths) - 1


class Decoder(Model):
    """TimeEmbedding -> TimeLSTM (stateful, started from the encoder's h) -> TimeAffine (S51)."""

    peek = False  # the context h also enters the LSTM's input (Peeky)
    affine_inputs = 1  # the Affine reads H (1) or 2H (2: Peeky's [h; out], attention's [context; out])

    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int, init: Init,
                 hidden_bias: bool = False) -> None:
        H = hidden_size
        self.embed = TimeEmbedding(init.embedding(vocab_size, wordvec_size))
        self.lstm = recurrent_layer("lstm", wordvec_size + H * self.peek, H, init, True, hidden_bias)
        self.affine = TimeAffine(init.weight(H * self.affine_inputs, vocab_size), init.zeros(vocab_size))
        super().__init__([self.embed, self.lstm, self.affine])

    def forward(self, xs: np.ndarray, h: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """ids (N, T), context h (N, H) -> scores (N, T, V). (``lengths``: the encoder's, read by attention.)"""
        self.lstm.set_state(h)
        return self.affine.forward(self.lstm.forward(self.embed.forward(xs)))

    def backward(self, dscore: np.ndarray) -> np.ndarray:
        """-> the gradient of the context h (N, H)."""
        self.embed.backward(self.lstm.backward(self.affine.backward(dscore)))
        assert self.lstm.dh is not None
        return self.lstm.dh

    def generate(self, h: np.ndarray, start_ids: np.ndarray, sample_size: int,
                 lengths: np.ndarray | None = None) -> np.ndarray:
        """Greedy: start ids (N,) -> (N, sample_size), each step's argmax fed back (S51)."""
        self.lstm.set_state(h)
        ids = np.empty((len(start_ids), sample_size + 1), dtype=np.int64)
        ids[:, 0] = start_ids
        for t in range(sample_size):
            score = self.affine.forward(self.lstm.forward(self.embed.forward(ids[:, t:t + 1])))
            ids[:, t + 1] = score[:, 0].argmax(axis=1)
        return ids[:, 1:]


class PeekyDecoder(Decoder):
    """The Peeky decoder (S56): the context h is concatenated to every step's LSTM input, ``[h; embedding]``
    (Wx (H + D, 4H)), and to the Affine's input, ``[h; lstm output]`` (W (2H, V)). The gradient of h sums
    the state path and every peek."""

    peek = True
    affine_inputs = 2

    def forward(self, xs: np.ndarray, h: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        N, T = xs.shape
        self.lstm.set_state(h)
        hs = np.broadcast_to(h[:, None], (N, T, h.shape[1]))  # (N, T, H): the context at every step
        out = self.lstm.forward(np.concatenate((hs, self.embed.forward(xs)), axis=2))
        return self.affine.forward(np.concatenate((hs, out), axis=2))

    def backward(self, dscore: np.ndarray) -> np.ndarray:
        H = self.lstm.cell.hidden_size
        dout = self.affine.backward(dscore)  # (N, T, 2H)
        dx = self.lstm.backward(dout[:, :, H:])  # (N, T, H + D)
        self.embed.backward(dx[:, :, H:])
        assert self.lstm.dh is not None
        return self.lstm.dh + dout[:, :, :H].sum(axis=1) + dx[:, :, :H].sum(axis=1)

    def generate(self, h: np.ndarray, start_ids: np.ndarray, sample_size: int,
                 lengths: np.ndarray | None = None) -> np.ndarray:
        self.lstm.set_state(h)
        ids = np.empty((len(start_ids), sample_size + 1), dtype=np.int64)
        ids[:, 0] = start_ids
        peek = h[:, None]  # (N, 1, H)
        for t in range(sample_size):
            out = self.lstm.forward(np.concatenate((peek, self.embed.forward(ids[:, t:t + 1])), axis=2))
            score = self.affine.forward(np.concatenate((peek, out), axis=2))
            ids[:, t + 1] = score[:, 0].argmax(axis=1)
        return ids[:, 1:]


class Seq2seq(Model):
    """Encoder + Decoder and the loss (S52): ``forward(xs, ts)`` feeds ``ts[:, :-1]`` and scores
    ``ts[:, 1:]``; ``generate(xs, start_id, sample_size)`` answers every row of ``xs``."""

    encoder_class: type[Encoder] = Encoder
    decoder_class: type[Decoder] = Decoder

    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int, rng: np.random.Generator | None = None,
                 dtype: type = np.float32, target_vocab_size: int | None = None, hidden_bias: bool = False) -> None:
        """``target_vocab_size``: the decoder's vocabulary where it is not the encoder's (seqlab's two tokenizers);
        ``hidden_bias``: LSTMs with PyTorch's two biases (the NumPy engine's twin)."""
        init = Init(rng if rng is not None else np.random.default_rng(), dtype)
        self.encoder = self.encoder_class(vocab_size, wordvec_size, hidden_size, init, hidden_bias)
        self.decoder = self.decoder_class(target_vocab_size or vocab_size, wordvec_size, hidden_size, init, hidden_bias)
        super().__init__([self.encoder, self.decoder])
        self.loss_layer = TimeSoftmaxWithLoss()

    def forward(self, xs: np.ndarray, ts: np.ndarray) -> float:
        return self.loss(xs, ts[:, :-1], ts[:, 1:])

    def loss(self, xs: np.ndarray, decoder_xs: np.ndarray, decoder_ts: np.ndarray,
             lengths: np.ndarray | None = None) -> float:
        """The mean loss of the decoder's scores on ``decoder_xs`` (N, T_d) against ``decoder_ts`` (targets −1
        are ignored), the sources ``xs`` (N, T) of ``lengths`` real steps (all if None)."""
        score = self.decoder.forward(decoder_xs, self.encoder.forward(xs, lengths), lengths)
        return self.loss_layer.forward(score, decoder_ts)

    def backward(self, dout: float = 1.0) -> None:
        self.encoder.backward(self.decoder.backward(self.loss_layer.backward(dout)))

    def generate(self, xs: np.ndarray, start_id: int, sample_size: int,
                 lengths: np.ndarray | None = None) -> np.ndarray:
        """questions (N, T) -> answers (N, sample_size) by greedy decoding."""
        start = np.full(len(xs), start_id, dtype=np.int64)
        return self.decoder.generate(self.encoder.forward(xs, lengths), start, sample_size, lengths)


class PeekySeq2seq(Seq2seq):
    decoder_class = PeekyDecoder
