"""The numerical gradient check every scratch layer passes (seed 002 ch. 1: backward is derived by hand, so it
is checked against the definition of the derivative)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def numerical_gradient(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """∂f/∂x by central differences, (f(x + ε) − f(x − ε)) / 2ε per element. ``f`` reads ``x``, which is changed
    in place one element at a time and put back; use float64."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        kept = x[i]
        x[i] = kept + eps
        up = f()
        x[i] = kept - eps
        down = f()
        x[i] = kept
        grad[i] = (up - down) / (2 * eps)
    return grad


def relative_error(analytic: np.ndarray, numeric: np.ndarray) -> float:
    """‖a − n‖ / (‖a‖ + ‖n‖), 0 when both are 0."""
    scale = np.linalg.norm(analytic) + np.linalg.norm(numeric)
    return 0.0 if scale == 0 else float(np.linalg.norm(analytic - numeric) / scale)


def check_gradients(forward: Callable[[], np.ndarray | float],
                    backward: Callable[[np.ndarray | float], Sequence[np.ndarray]],
                    wrt: Sequence[np.ndarray], seed: int = 0) -> list[float]:
    """The relative error of each analytic gradient against the numerical one. ``forward()`` runs the layer
    (reading the arrays of ``wrt``); a loss is checked as it is, any other output y through the scalar
    Σ y ⊙ R for a fixed random R. ``backward(dout)`` must run the backward pass and return the analytic
    gradients of ``wrt``, in order (its inputs' gradients as returned, its parameters' from ``grads``)."""
    out = forward()
    probe = None if np.isscalar(out) else np.random.default_rng(seed).standard_normal(np.shape(out))

    def scalar() -> float:
        y = forward()
        return float(y) if probe is None else float(np.sum(y * probe))

    forward()
    analytic = [np.array(g, copy=True) for g in backward(1.0 if probe is None else probe)]
    return [relative_error(a, numerical_gradient(scalar, x)) for a, x in zip(analytic, wrt)]
