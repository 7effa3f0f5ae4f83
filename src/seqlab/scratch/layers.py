"""The layers of seed 002 ch. 1 and the Embedding / Dropout of ch. 4 and 6, forward and backward by hand.

The layer protocol (S7): a layer has ``forward`` and ``backward`` and two lists, ``params`` and ``grads``, of
the same length; ``grads[i]`` belongs to ``params[i]``. A model gathers its layers' lists into its own, so
``model.params[k] is layer.params[j]`` (the same arrays, no copies). So ``backward`` writes every gradient
**in place** (``self.grads[0][...] = dW``, never ``self.grads[0] = dW``, which would rebind the layer's entry
and leave the model holding the old array), and an optimizer updates the parameters in place for the same
reason. Shapes: N is the batch, D an input width, H an output width.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from seqlab.scratch.functions import cross_entropy_error, sigmoid, softmax


class Layer:
    """The protocol every layer and model follows: ``params`` and ``grads`` (S7)."""

    params: list[np.ndarray]
    grads: list[np.ndarray]

    def __init__(self, *params: np.ndarray) -> None:
        self.params = list(params)
        self.grads = [np.zeros_like(p) for p in params]

    def forward(self, *inputs: Any) -> Any:
        raise NotImplementedError

    def backward(self, *douts: Any) -> Any:
        """The gradients of the inputs, from those of the outputs; the parameters' go to ``grads``."""
        raise NotImplementedError


class MatMul(Layer):
    """y = x W (S3): dx = dy Wᵀ, dW = xᵀ dy."""

    def __init__(self, W: np.ndarray) -> None:
        super().__init__(W)

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.x = x
        return x @ self.params[0]  # (N, D) @ (D, H) -> (N, H)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        (W,) = self.params
        self.grads[0][...] = self.x.T @ dout
        return dout @ W.T


class Affine(Layer):
    """y = x W + b (S2): MatMul plus a bias, whose gradient is dout summed over the batch."""

    def __init__(self, W: np.ndarray, b: np.ndarray) -> None:
        super().__init__(W, b)

    def forward(self, x: np.ndarray) -> np.ndarray:
        W, b = self.params
        self.x = x
        return x @ W + b

    def backward(self, dout: np.ndarray) -> np.ndarray:
        W, _ = self.params
        self.grads[0][...] = self.x.T @ dout
        self.grads[1][...] = dout.sum(axis=0)
        return dout @ W.T


class Sigmoid(Layer):
    """y = σ(x), dy/dx = y (1 − y) (S5)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.out = sigmoid(x)
        return self.out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout * self.out * (1 - self.out)


class Softmax(Layer):
    """y = softmax(x) over the last axis (S9); dx = y ⊙ (dy − Σ_k dy_k y_k)."""

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.out = softmax(x)
        return self.out

    def backward(self, dout: np.ndarray) -> np.ndarray:
        y = self.out
        return y * (dout - (dout * y).sum(axis=-1, keepdims=True))


class SoftmaxWithLoss(Layer):
    """Softmax followed by the cross-entropy error (S11): the loss of scores ``x`` (N, K) for the correct
    classes ``t`` (N,) or one-hot (N, K); backward = (y − t) / N."""

    def forward(self, x: np.ndarray, t: np.ndarray) -> float:
        self.y = softmax(x)
        self.t = t.argmax(axis=1) if t.size == self.y.size else t
        return cross_entropy_error(self.y, self.t)

    def backward(self, dout: float = 1.0) -> np.ndarray:
        n = self.t.shape[0]
        dx = self.y.copy()
        dx[np.arange(n), self.t] -= 1
        return dx * (dout / n)


class Repeat(Layer):
    """The branch node (S4): x (1, D) copied to N rows; its backward sums the N upstream gradients."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: np.ndarray) -> np.ndarray:
        return np.repeat(x, self.n, axis=0)  # (1, D) -> (N, D)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout.sum(axis=0, keepdims=True)  # (N, D) -> (1, D)


class Sum(Layer):
    """The sum node (S4), Repeat's reverse: (N, D) -> (1, D); its backward repeats the gradient N times."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.n = x.shape[0]
        return x.sum(axis=0, keepdims=True)

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return np.repeat(dout, self.n, axis=0)


class Dropout(Layer):
    """Dropout (S46) as inverted dropout: at training time each activation is kept with probability
    1 − ``ratio`` and scaled by 1 / (1 − ratio), so at evaluation time (``train = False``) it is the identity.
    (The book's ch. 1 layer scales at evaluation instead; its TimeDropout scales as here, as PyTorch does.)"""

    def __init__(self, ratio: float, rng: np.random.Generator) -> None:
        super().__init__()
        self.ratio = ratio
        self.rng = rng
        self.train = True

    def mask_shape(self, x: np.ndarray) -> tuple[int, ...]:
        """One keep-or-drop draw per activation."""
        return x.shape

    def forward(self, x: np.ndarray) -> np.ndarray:
        if not self.train or self.ratio == 0:
            self.mask = None
            return x
        keep = self.rng.random(self.mask_shape(x)) >= self.ratio
        self.mask = keep.astype(x.dtype) / x.dtype.type(1 - self.ratio)
        return x * self.mask

    def backward(self, dout: np.ndarray) -> np.ndarray:
        return dout if self.mask is None else dout * self.mask


class Embedding(Layer):
    """out = W[idx] (S27): a row lookup, what one-hot × W computes. Its backward **adds** each row's
    gradient into dW, since an id that occurs twice must get the sum of both gradients (assignment would keep
    only one); the rows not looked up get 0."""

    def __init__(self, W: np.ndarray) -> None:
        super().__init__(W)

    def forward(self, idx: np.ndarray) -> np.ndarray:
        self.idx = idx
        return self.params[0][idx]  # idx (...,) -> (..., D)

    def backward(self, dout: np.ndarray) -> None:
        dW = self.grads[0]
        dW[...] = 0
        np.add.at(dW, self.idx.reshape(-1), dout.reshape(-1, dW.shape[1]))
