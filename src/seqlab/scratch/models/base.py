"""What every scratch model shares: its layers' ``params`` and ``grads`` gathered into one list each (S7),
the switch between training and evaluation, and the book's initialisation."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from seqlab.scratch.layers import Dropout, Layer


class Model(Layer):
    """A layer made of layers: ``params[k]`` and ``grads[k]`` are the layers' own arrays, not copies."""

    def __init__(self, layers: Iterable[Layer]) -> None:
        self.layers = list(layers)
        self.params = [p for layer in self.layers for p in layer.params]
        self.grads = [g for layer in self.layers for g in layer.grads]

    def train(self, on: bool = True) -> None:
        """Dropout on (training) or off (evaluation: deterministic)."""
        for layer in self.layers:
            if isinstance(layer, Dropout):
                layer.train = on
            elif isinstance(layer, Model):
                layer.train(on)

    def eval(self) -> None:
        self.train(False)


class Init:
    """The book's initialisation (S38): weights ``randn / √fan_in`` (Xavier's 1 / √n, n the number of nodes of
    the previous layer), embeddings ``randn / 100``, biases 0, in ``dtype`` (the book's float32)."""

    def __init__(self, rng: np.random.Generator, dtype: type = np.float32) -> None:
        self.rng, self.dtype = rng, dtype

    def weight(self, fan_in: int, fan_out: int) -> np.ndarray:
        return (self.rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(self.dtype)

    def embedding(self, vocab_size: int, width: int) -> np.ndarray:
        return (self.rng.standard_normal((vocab_size, width)) / 100).astype(self.dtype)

    def zeros(self, size: int) -> np.ndarray:
        return np.zeros(size, dtype=self.dtype)
