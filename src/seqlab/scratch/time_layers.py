"""The Time layers (seed 002 ch. 5–6): a layer applied at every one of T time steps, for inputs (N, T, ...).

``TimeRNN`` / ``TimeLSTM`` / ``TimeGRU`` run their cell over the steps. With ``stateful=True`` (truncated BPTT,
S35) the last h (and c) of one call is where the next call starts, ``set_state`` sets it and
``reset_state`` clears it; the backward pass stops at the block's first step (its gradient w.r.t. the
initial h is kept in ``dh``, for a Seq2seq decoder to hand to its encoder). Unlike the book, which builds
one layer object per step, the input projections and the weight gradients of all T steps are one matrix
product each; only what must run in time order is a Python loop over T.
"""

from __future__ import annotations

import numpy as np

from seqlab.scratch.layers import Dropout, Embedding, Layer
from seqlab.scratch.recurrent import GRU, LSTM, RNN, Cache, Recurrent


class TimeRecurrent(Layer):
    """A recurrent cell over T steps: xs (N, T, D) -> hs (N, T, H)."""

    def __init__(self, cell: Recurrent, stateful: bool = False) -> None:
        super().__init__()
        self.cell = cell
        self.params, self.grads = cell.params, cell.grads
        self.stateful = stateful
        self.h: np.ndarray | None = None
        self.c: np.ndarray | None = None
        self.dh: np.ndarray | None = None

    def set_state(self, h: np.ndarray | None, c: np.ndarray | None = None) -> None:
        self.h, self.c = h, c

    def reset_state(self) -> None:
        self.h = self.c = None

    def forward(self, xs: np.ndarray) -> np.ndarray:
        cell = self.cell
        N, T, D = xs.shape
        H = cell.hidden_size
        ax = cell.project(xs.reshape(N * T, D)).reshape(N, T, -1)  # (N, T, G·H)
        if not self.stateful or self.h is None:
            self.h = np.zeros((N, H), dtype=xs.dtype)
        if cell.has_cell and (not self.stateful or self.c is None):
            self.c = np.zeros((N, H), dtype=xs.dtype)
        self.xs, self.h0 = xs, self.h
        hs = np.empty((N, T, H), dtype=xs.dtype)
        self.caches: list[Cache] = []
        h, c = self.h, self.c
        for t in range(T):
            h, c, cache = cell.step(ax[:, t], h, c)
            hs[:, t] = h
            self.caches.append(cache)
        self.h, self.c, self.hs = h, c, hs
        return hs

    def backward(self, dhs: np.ndarray) -> np.ndarray:
        cell = self.cell
        N, T, H = dhs.shape
        dax = np.empty((N, T, cell.gates * H), dtype=dhs.dtype)
        dah = np.empty_like(dax) if cell.gated_hidden else dax
        dh = np.zeros((N, H), dtype=dhs.dtype)
        dc = np.zeros((N, H), dtype=dhs.dtype) if cell.has_cell else None
        for t in reversed(range(T)):
            dax_t, dah_t, dh_direct, dc = cell.step_backward(dhs[:, t] + dh, dc, self.caches[t])
            dax[:, t] = dax_t
            if cell.gated_hidden:
                dah[:, t] = dah_t
            dh = cell.hidden_grad(dah_t, dh_direct)
        h_prev = np.concatenate((self.h0[:, None], self.hs[:, :-1]), axis=1)  # (N, T, H): each step's h_{t−1}
        M = N * T
        cell.write_grads(self.xs.reshape(M, -1), h_prev.reshape(M, H), dax.reshape(M, -1), dah.reshape(M, -1))
        self.dh = dh
        return cell.input_grad(dax.reshape(M, -1)).reshape(N, T, -1)


class TimeRNN(TimeRecurrent):
    def __init__(self, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray | None = None,
                 stateful: bool = False) -> None:
        super().__init__(RNN(Wx, Wh, b, bh), stateful)


class TimeLSTM(TimeRecurrent):
    def __init__(self, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray | None = None,
                 stateful: bool = False) -> None:
        super().__init__(LSTM(Wx, Wh, b, bh), stateful)


class TimeGRU(TimeRecurrent):
    def __init__(self, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray | None = None,
                 stateful: bool = False) -> None:
        super().__init__(GRU(Wx, Wh, b, bh), stateful)


class TimeEmbedding(Embedding):
    """The Embedding of all T steps at once (S37): ids (N, T) -> (N, T, D). The lookup and the accumulating
    backward are the Embedding's, which take any shape of ids."""


class TimeAffine(Layer):
    """One Affine for all steps (S37): (N, T, H) reshaped to (N·T, H), times W (H, V), plus b."""

    def __init__(self, W: np.ndarray, b: np.ndarray) -> None:
        super().__init__(W, b)

    def forward(self, x: np.ndarray) -> np.ndarray:
        W, b = self.params
        N, T, _ = x.shape
        self.x = x
        return (x.reshape(N * T, -1) @ W + b).reshape(N, T, -1)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        W, _ = self.params
        N, T, V = dout.shape
        dout2 = dout.reshape(N * T, V)
        self.grads[0][...] = self.x.reshape(N * T, -1).T @ dout2
        self.grads[1][...] = dout2.sum(axis=0)
        return (dout2 @ W.T).reshape(N, T, -1)


class TimeSoftmaxWithLoss(Layer):
    """The T Softmax-with-Loss losses averaged (S37): L = (1/T)(L_0 + … + L_{T−1}), averaged over the batch
    too, scores (N, T, V) and targets (N, T) (or one-hot (N, T, V)). Targets equal to ``ignore_label`` (−1,
    as in the book) are masked: no loss, no gradient, and the mean is over the others."""

    ignore_label = -1

    def __init__(self) -> None:
        super().__init__()

    def forward(self, xs: np.ndarray, ts: np.ndarray) -> float:
        N, T, V = xs.shape
        if ts.ndim == 3:
            ts = ts.argmax(axis=2)
        mask = (ts != self.ignore_label).reshape(N * T)
        ts = np.where(mask, ts.reshape(N * T), 0)
        scores = xs.reshape(N * T, V)
        shifted = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        z = e.sum(axis=1)
        log_p = np.where(mask, shifted[np.arange(N * T), ts] - np.log(z), 0)  # log y[n, t_n], 0 where masked
        self.cache = e / z[:, None], ts, mask, max(int(mask.sum()), 1), (N, T, V)  # the softmax y
        return float(-log_p.sum() / self.cache[3])

    def backward(self, dout: float = 1.0) -> np.ndarray:
        ys, ts, mask, count, shape = self.cache
        dx = ys.copy()
        dx[np.arange(len(ts)), ts] -= 1
        dx *= (dout / count) * mask[:, None]
        return dx.reshape(shape)


class TimeDropout(Dropout):
    """Dropout on (N, T, D) inputs. ``variational=True`` draws one mask per sequence and feature and keeps it
    for all T steps (the variational dropout the seed mentions, 002 §6.4)."""

    def __init__(self, ratio: float, rng: np.random.Generator, variational: bool = False) -> None:
        super().__init__(ratio, rng)
        self.variational = variational

    def mask_shape(self, x: np.ndarray) -> tuple[int, ...]:
        N, _, D = x.shape
        return (N, 1, D) if self.variational else x.shape
