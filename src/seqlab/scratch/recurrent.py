"""The recurrent cells, one time step each: RNN (seed 002 ch. 5), LSTM (ch. 6) and GRU, forward and backward.

Each cell is split the way the Time layers use it, so that the gate arithmetic is written once:

* ``project(x)``: the input's part of every gate, ``x W_x + b``: a TimeRNN projects all T steps in one
  matrix product instead of T small ones;
* ``step(ax, h_prev, c_prev)``: the rest of one step, which must run in time order;
* ``step_backward(dh, dc, cache)``: that step's backward, returning the gradient of its pre-activations; the
  weight gradients are then one matrix product over all steps (``write_grads``).

Called on its own (``forward(x, h_prev[, c_prev])`` / ``backward(dh_next[, dc_next])``) a cell is the book's
single-step layer. Weights: ``Wx`` (D, G·H), ``Wh`` (H, G·H), ``b`` (G·H,), where G is the number of gates, and
optionally ``bh`` (G·H,), a second bias on the hidden side as PyTorch has: the book's cells have one bias, but
a twin that trains like a PyTorch layer needs both, since an optimizer moves each of them (the GRU always has
``bh``: its reset gate multiplies it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seqlab.scratch.functions import sigmoid
from seqlab.scratch.layers import Layer

Cache = tuple[Any, ...]


class Recurrent(Layer):
    """What RNN, LSTM and GRU share: the input projection, the weight gradients and the single-step API."""

    gates = 1
    has_cell = False  # an LSTM also carries the memory cell c
    gated_hidden = False  # a GRU's hidden-side pre-activations get another gradient than its input side's

    def __init__(self, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray | None = None) -> None:
        super().__init__(Wx, Wh, b, *([] if bh is None else [bh]))
        self.hidden_size = Wh.shape[0]
        self.hidden_bias = bh is not None

    #: this cell's gate blocks as PyTorch's indices: the LSTM's f, g, i, o are PyTorch's blocks 1, 2, 0, 3
    torch_blocks: tuple[int, ...] = (0,)

    @classmethod
    def from_torch(cls, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray, b_hh: np.ndarray) -> Recurrent:
        """The cell of PyTorch's weights (as arrays): ``weight_ih`` (G·H, D), ``weight_hh`` (G·H, H) and both
        biases (``b`` and ``bh``), gates reordered."""
        def order(a: np.ndarray) -> np.ndarray:
            return np.concatenate([np.split(a, len(cls.torch_blocks))[k] for k in cls.torch_blocks])

        return cls(order(w_ih).T.copy(), order(w_hh).T.copy(), order(b_ih), order(b_hh))

    def to_torch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``from_torch``'s inverse: (weight_ih, weight_hh, bias_ih, bias_hh); bias_hh is 0 for a cell of one bias."""
        inverse = np.argsort(self.torch_blocks)

        def order(a: np.ndarray) -> np.ndarray:
            return np.concatenate([np.split(a, len(inverse))[k] for k in inverse])

        Wx, Wh, b = self.params[:3]
        b_hh = order(self.params[3]) if self.hidden_bias else np.zeros_like(b)
        return order(Wx.T), order(Wh.T), order(b), b_hh

    def project(self, x: np.ndarray) -> np.ndarray:
        """x W_x + b: (M, D) -> (M, G·H)."""
        Wx, _, b = self.params[:3]
        return x @ Wx + b

    def hidden(self, h_prev: np.ndarray) -> np.ndarray:
        """h_{t−1} W_h (+ b_h): (N, H) -> (N, G·H)."""
        out = h_prev @ self.params[1]
        return out + self.params[3] if self.hidden_bias else out

    def step(self, ax: np.ndarray, h_prev: np.ndarray, c_prev: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray | None, Cache]:
        raise NotImplementedError

    def step_backward(self, dh: np.ndarray, dc: np.ndarray | None, cache: Cache
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """-> (d ax, d of the hidden-side pre-activations, the gradient that reaches h_prev other than
        through W_h (or None), dc_prev)."""
        raise NotImplementedError

    def write_grads(self, x: np.ndarray, h_prev: np.ndarray, dax: np.ndarray, dah: np.ndarray) -> None:
        """The weight gradients, in place, of M steps at once: x (M, D), h_prev (M, H), dax and dah (M, G·H)."""
        self.grads[0][...] = x.T @ dax
        self.grads[1][...] = h_prev.T @ dah
        self.grads[2][...] = dax.sum(axis=0)
        if self.hidden_bias:
            self.grads[3][...] = dah.sum(axis=0)

    def input_grad(self, dax: np.ndarray) -> np.ndarray:
        return dax @ self.params[0].T

    def hidden_grad(self, dah: np.ndarray, dh_direct: np.ndarray | None) -> np.ndarray:
        dh_prev = dah @ self.params[1].T
        return dh_prev if dh_direct is None else dh_prev + dh_direct

    def forward(self, x: np.ndarray, h_prev: np.ndarray, c_prev: np.ndarray | None = None) -> Any:
        self.x, self.h_prev = x, h_prev
        h, c, self.cache = self.step(self.project(x), h_prev, c_prev)
        return (h, c) if self.has_cell else h

    def backward(self, dh_next: np.ndarray, dc_next: np.ndarray | None = None) -> Any:
        dax, dah, dh_direct, dc_prev = self.step_backward(dh_next, dc_next, self.cache)
        self.write_grads(self.x, self.h_prev, dax, dah)
        dx, dh_prev = self.input_grad(dax), self.hidden_grad(dah, dh_direct)
        return (dx, dh_prev, dc_prev) if self.has_cell else (dx, dh_prev)


class RNN(Recurrent):
    """h_t = tanh(h_{t−1} W_h + x_t W_x + b) (S34); backward: dt = dh (1 − h_t²), dW_h = h_{t−1}ᵀ dt,
    dW_x = x_tᵀ dt, db = Σ dt, dh_{t−1} = dt W_hᵀ, dx = dt W_xᵀ."""

    def step(self, ax, h_prev, c_prev):
        h = np.tanh(ax + self.hidden(h_prev))
        return h, None, (h,)

    def step_backward(self, dh, dc, cache):
        (h,) = cache
        dt = dh * (1 - h * h)
        return dt, dt, None, None


class LSTM(Recurrent):
    """The LSTM (S42), the book's fused affine A = x W_x + h_{t−1} W_h + b with the gates sliced in the book's
    order **f, g, i, o**: f = σ(A[:, :H]), g = tanh(A[:, H:2H]), i = σ(A[:, 2H:3H]), o = σ(A[:, 3H:]);
    c_t = f ⊙ c_{t−1} + g ⊙ i, h_t = o ⊙ tanh(c_t). Backward: ds = dc_t + dh_t ⊙ o ⊙ (1 − tanh²(c_t)),
    dc_{t−1} = ds ⊙ f, df = ds ⊙ c_{t−1}, dg = ds ⊙ i, di = ds ⊙ g, do = dh_t ⊙ tanh(c_t), each then through
    its activation's derivative, and dA = [df, dg, di, do]. (PyTorch orders the gates i, f, g, o.)"""

    gates = 4
    has_cell = True
    torch_blocks = (1, 2, 0, 3)

    def step(self, ax, h_prev, c_prev):
        H = self.hidden_size
        A = ax + self.hidden(h_prev)  # (N, 4H)
        gates = sigmoid(A)  # f, i, o from it; the g block is replaced by its tanh (one call instead of four)
        gates[:, H:2 * H] = np.tanh(A[:, H:2 * H])
        f, g, i, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
        c = f * c_prev + g * i
        tanh_c = np.tanh(c)
        return o * tanh_c, c, (c_prev, gates, tanh_c)

    def step_backward(self, dh, dc, cache):
        c_prev, gates, tanh_c = cache
        H = self.hidden_size
        f, g, i, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
        ds = dh * o * (1 - tanh_c * tanh_c)
        if dc is not None:
            ds += dc
        dA = np.empty_like(gates)  # (N, 4H): [df, dg, di, do], each through its activation's derivative
        dA[:, :H] = ds * c_prev * f * (1 - f)
        dA[:, H:2 * H] = ds * i * (1 - g * g)
        dA[:, 2 * H:3 * H] = ds * g * i * (1 - i)
        dA[:, 3 * H:] = dh * tanh_c * o * (1 - o)
        return dA, dA, None, ds * f


class GRU(Recurrent):
    """The GRU in the form PyTorch (and cuDNN) compute it, so that it has an exact PyTorch twin: gates in the
    order r, z, n, a second bias b_h (3H,) on the hidden side, and the reset gate applied to the hidden
    side's product: r = σ(a_r + h W_hr + b_hr), z = σ(a_z + h W_hz + b_hz), n = tanh(a_n + r ⊙ (h W_hn + b_hn)),
    h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}, where a = x W_x + b. (The book's GRU resets h before its product and has
    one bias; the seed only names the GRU.)"""

    gates = 3
    gated_hidden = True
    torch_blocks = (0, 1, 2)

    def __init__(self, Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, bh: np.ndarray | None = None) -> None:
        if bh is None:
            raise ValueError("a GRU needs its hidden-side bias bh")
        super().__init__(Wx, Wh, b, bh)

    def step(self, ax, h_prev, c_prev):
        H = self.hidden_size
        ah = self.hidden(h_prev)  # (N, 3H)
        r = sigmoid(ax[:, :H] + ah[:, :H])
        z = sigmoid(ax[:, H:2 * H] + ah[:, H:2 * H])
        n = np.tanh(ax[:, 2 * H:] + r * ah[:, 2 * H:])
        return (1 - z) * n + z * h_prev, None, (h_prev, r, z, n, ah[:, 2 * H:])

    def step_backward(self, dh, dc, cache):
        h_prev, r, z, n, ah_n = cache
        dan = dh * (1 - z) * (1 - n * n)
        dar = dan * ah_n * r * (1 - r)
        daz = dh * (h_prev - n) * z * (1 - z)
        dax = np.concatenate((dar, daz, dan), axis=1)
        dah = np.concatenate((dar, daz, dan * r), axis=1)
        return dax, dah, dh * z, None
