"""Optimizers and the helpers around them (seed 002 ch. 1 and 5): SGD, Momentum, AdaGrad, Adam, gradient
clipping, and the merging of shared weights. Every update changes the parameters **in place** (S7), since
the model and its layers hold the same arrays."""

from __future__ import annotations

import numpy as np


class SGD:
    """W ← W − lr · ∂L/∂W (S12)."""

    def __init__(self, lr: float = 0.01) -> None:
        self.lr = lr

    def update(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        for p, g in zip(params, grads):
            p -= self.lr * g


class Momentum:
    """v ← μ v − lr · g; W ← W + v (v starts at 0). The same steps as PyTorch's SGD with momentum μ at a
    constant rate, whose buffer is −v / lr."""

    def __init__(self, lr: float = 0.01, momentum: float = 0.9) -> None:
        self.lr, self.momentum = lr, momentum
        self.v: list[np.ndarray] | None = None

    def update(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        if self.v is None:
            self.v = [np.zeros_like(p) for p in params]
        for p, g, v in zip(params, grads, self.v):
            v *= self.momentum
            v -= self.lr * g
            p += v


class AdaGrad:
    """h ← h + g ⊙ g; W ← W − lr · g / (√h + ε), the book's ε = 1e-7 (PyTorch's Adagrad with ``eps=1e-7``)."""

    def __init__(self, lr: float = 0.01, eps: float = 1e-7) -> None:
        self.lr, self.eps = lr, eps
        self.h: list[np.ndarray] | None = None

    def update(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        if self.h is None:
            self.h = [np.zeros_like(p) for p in params]
        for p, g, h in zip(params, grads, self.h):
            h += g * g
            p -= self.lr * g / (np.sqrt(h) + self.eps)


class Adam:
    """Adam as the book writes it: m ← m + (1 − β1)(g − m), v ← v + (1 − β2)(g² − v), and
    W ← W − lr_t · m / (√v + ε) with the bias corrections folded into lr_t = lr · √(1 − β2^t) / (1 − β1^t).
    That is PyTorch's Adam exactly when ε = 0; otherwise the book's ε acts as ε / √(1 − β2^t) does in
    PyTorch's form (a difference that fades as t grows)."""

    def __init__(self, lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-7) -> None:
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.iter = 0
        self.m: list[np.ndarray] | None = None
        self.v: list[np.ndarray] | None = None

    def update(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        if self.m is None or self.v is None:
            self.m = [np.zeros_like(p) for p in params]
            self.v = [np.zeros_like(p) for p in params]
        self.iter += 1
        # a Python float, so that float32 parameters are updated in float32 (a NumPy float64 scalar would
        # promote the whole update to float64)
        lr_t = float(self.lr * np.sqrt(1 - self.beta2 ** self.iter) / (1 - self.beta1 ** self.iter))
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m += (1 - self.beta1) * (g - m)
            v += (1 - self.beta2) * (g * g - v)
            p -= lr_t * m / (np.sqrt(v) + self.eps)


Optimizer = SGD | Momentum | AdaGrad | Adam


def clip_grads(grads: list[np.ndarray], max_norm: float) -> float:
    """Gradient clipping (S41): if the global norm ‖ĝ‖ = √(Σ over all arrays of Σ g²) reaches ``max_norm``,
    every gradient is scaled in place by rate = max_norm / (‖ĝ‖ + 1e-6). Returns the norm before clipping."""
    total = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
    rate = max_norm / (total + 1e-6)
    if rate < 1:
        for g in grads:
            g *= rate
    return total


def shared_params(params: list[np.ndarray], grads: list[np.ndarray]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The parameters once each, with the gradients of a weight used in several places summed: the same array
    twice (a Seq2seq's shared layers), or an array and its transpose (weight tying, S45: the output Affine's
    W is the embedding's ``W.T``, a view of the same memory). The book's ``remove_duplicate``; called after
    each backward, before clipping and the update. The first occurrence's gradient array holds the sum."""
    kept: list[np.ndarray] = []
    kept_grads: list[np.ndarray] = []
    for p, g in zip(params, grads):
        for q, h in zip(kept, kept_grads):
            if p is q:
                h += g
                break
            if p.ndim == 2 and p.base is q and p.shape == q.T.shape and np.shares_memory(p, q):
                h += g.T
                break
        else:
            kept.append(p)
            kept_grads.append(g)
    return kept, kept_grads
