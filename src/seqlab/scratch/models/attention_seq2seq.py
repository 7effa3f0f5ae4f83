"""AttentionSeq2seq (seed 002 ch. 8, S63–S67): the encoder hands over all its states, and the decoder reads
them through attention at every step.

    decoder: TimeEmbedding -> TimeLSTM (from the encoder's last h) -> TimeAttention(encoder hs, decoder hs)
             -> [context; decoder h] -> TimeAffine (2H -> V)
"""

from __future__ import annotations

import numpy as np

from seqlab.scratch.attention import TimeAttention
from seqlab.scratch.models.base import Init
from seqlab.scratch.models.seq2seq import Decoder, Encoder, Seq2seq, last_steps


class AttentionEncoder(Encoder):
    """Returns every step's h: ids (N, T) -> hs (N, T, H) (S63); the decoder finds the last real one."""

    def forward(self, xs: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        self.hs = self.lstm.forward(self.embed.forward(xs))
        return self.hs

    def backward(self, dhs: np.ndarray) -> None:
        self.embed.backward(self.lstm.backward(dhs))


class AttentionDecoder(Decoder):
    """S67: the Affine (2H, V) reads the attention's context concatenated with the LSTM's output."""

    affine_inputs = 2

    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int, init: Init,
                 hidden_bias: bool = False) -> None:
        super().__init__(vocab_size, wordvec_size, hidden_size, init, hidden_bias)
        self.attention = TimeAttention()  # no weights of its own

    def start(self, enc_hs: np.ndarray, lengths: np.ndarray | None) -> np.ndarray | None:
        """The LSTM starts from each row's last real encoder state; returns the padding mask (N, T_e) or None."""
        N, T_e, _ = enc_hs.shape
        self.rows, self.last = last_steps(enc_hs[:, :, 0], lengths)
        self.lstm.set_state(enc_hs[self.rows, self.last])
        return None if lengths is None else np.arange(T_e) >= np.asarray(lengths)[:, None]

    def forward(self, xs: np.ndarray, enc_hs: np.ndarray, lengths: np.ndarray | None = None) -> np.ndarray:
        """ids (N, T_d), encoder states (N, T_e, H) -> scores (N, T_d, V)."""
        mask = self.start(enc_hs, lengths)
        dec_hs = self.lstm.forward(self.embed.forward(xs))
        context = self.attention.forward(enc_hs, dec_hs, mask)
        return self.affine.forward(np.concatenate((context, dec_hs), axis=2))

    def backward(self, dscore: np.ndarray) -> np.ndarray:
        """-> the gradient of the encoder states (N, T_e, H): the attention's, and the LSTM's initial h at the
        last step."""
        H = self.lstm.cell.hidden_size
        dout = self.affine.backward(dscore)  # (N, T_d, 2H)
        denc_hs, ddec_hs = self.attention.backward(dout[:, :, :H])
        self.embed.backward(self.lstm.backward(ddec_hs + dout[:, :, H:]))
        denc_hs[self.rows, self.last] += self.lstm.dh
        return denc_hs

    def generate(self, enc_hs: np.ndarray, start_ids: np.ndarray, sample_size: int,
                 lengths: np.ndarray | None = None) -> np.ndarray:
        mask = self.start(enc_hs, lengths)
        ids = np.empty((len(start_ids), sample_size + 1), dtype=np.int64)
        ids[:, 0] = start_ids
        weights = []
        for t in range(sample_size):
            dec_hs = self.lstm.forward(self.embed.forward(ids[:, t:t + 1]))
            context = self.attention.forward(enc_hs, dec_hs, mask)
            weights.append(self.attention.attention_weights[0])
            score = self.affine.forward(np.concatenate((context, dec_hs), axis=2))
            ids[:, t + 1] = score[:, 0].argmax(axis=1)
        self.generated_weights = np.stack(weights, axis=1)  # (N, sample_size, T_e): the heat map of S68
        return ids[:, 1:]


class AttentionSeq2seq(Seq2seq):
    encoder_class = AttentionEncoder
    decoder_class = AttentionDecoder
