"""The functions every layer is made of (seed 002 ch. 1): sigmoid, softmax and the cross-entropy error.

Written for any float dtype: the book's float32, and float64 for the gradient checks."""

from __future__ import annotations

import numpy as np

#: what the book adds inside the logarithm of the cross-entropy error, so that log(0) is never taken
LOG_EPS = 1e-7


def sigmoid(x: np.ndarray) -> np.ndarray:
    """σ(x) = 1 / (1 + exp(−x)) (S5), computed as (1 + tanh(x / 2)) / 2, the same function, which never
    overflows (exp(−x) does for x < −88 in float32) and costs one transcendental call."""
    return 0.5 + 0.5 * np.tanh(0.5 * x)


def softmax(x: np.ndarray) -> np.ndarray:
    """y_k = exp(s_k) / Σ_i exp(s_i) over the last axis (S9); the row maximum is subtracted first, so
    ``softmax([1000, 1000])`` is ``[0.5, 0.5]``, not NaN."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cross_entropy_error(y: np.ndarray, t: np.ndarray) -> float:
    """L = −(1/N) Σ_n log y[n, t_n] (S10): ``y`` (N, K) probabilities or (K,) for one datum; ``t`` the correct
    classes (N,), or one-hot rows of ``y``'s shape. The book's 1e-7 is added inside the logarithm."""
    if y.ndim == 1:
        y, t = y.reshape(1, -1), np.asarray(t).reshape(1, -1)
    if t.size == y.size:  # one-hot -> class ids
        t = t.argmax(axis=1)
    t = np.asarray(t).reshape(-1)
    n = y.shape[0]
    return float(-np.sum(np.log(y[np.arange(n), t] + LOG_EPS)) / n)
