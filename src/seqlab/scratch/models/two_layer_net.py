"""TwoLayerNet (S8): Affine -> Sigmoid -> Affine, and a Softmax-with-Loss on top; the book's first model."""

from __future__ import annotations

import numpy as np

from seqlab.scratch.layers import Affine, Sigmoid, SoftmaxWithLoss
from seqlab.scratch.models.base import Model


class TwoLayerNet(Model):
    """``TwoLayerNet(2, 4, 3)``: W1 (2, 4), b1 (4,), W2 (4, 3), b2 (3,), all ``randn`` as in the seed."""

    def __init__(self, input_size: int, hidden_size: int, output_size: int, rng: np.random.Generator,
                 dtype: type = np.float64) -> None:
        def randn(*shape: int) -> np.ndarray:
            return rng.standard_normal(shape).astype(dtype)

        super().__init__([Affine(randn(input_size, hidden_size), randn(hidden_size)), Sigmoid(),
                          Affine(randn(hidden_size, output_size), randn(output_size))])
        self.loss_layer = SoftmaxWithLoss()

    def predict(self, x: np.ndarray) -> np.ndarray:
        """x (N, input) -> scores (N, output)."""
        for layer in self.layers:
            x = layer.forward(x)
        return x

    def forward(self, x: np.ndarray, t: np.ndarray) -> float:
        return self.loss_layer.forward(self.predict(x), t)

    def backward(self, dout: float = 1.0) -> np.ndarray:
        d = self.loss_layer.backward(dout)
        for layer in reversed(self.layers):
            d = layer.backward(d)
        return d
