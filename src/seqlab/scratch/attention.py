"""Attention for the RNN seq2seq (seed 002 ch. 8): the weights, their weighted sum, and both at every step.

Shapes: N the batch, T (or T_e) the encoder steps, T_d the decoder steps, H the hidden width.
"""

from __future__ import annotations

import numpy as np

from seqlab.scratch.layers import Layer, Softmax

MASKED = -1e9  # a padded step's score: its weight exp(−1e9 − max) is exactly 0 in float32 and float64


class AttentionWeight(Layer):
    """a = softmax(s), s_t = hs_t · h (S64): how much the decoder's h (N, H) attends to each encoder state of
    hs (N, T, H). Backward: ds = softmax'(da); dhs = ds ⊗ h; dh = Σ_t ds_t hs_t."""

    def __init__(self) -> None:
        super().__init__()
        self.softmax = Softmax()

    def forward(self, hs: np.ndarray, h: np.ndarray) -> np.ndarray:
        self.hs, self.h = hs, h
        return self.softmax.forward(np.einsum("nth,nh->nt", hs, h))  # (N, T)

    def backward(self, da: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ds = self.softmax.backward(da)  # (N, T)
        return ds[:, :, None] * self.h[:, None, :], np.einsum("nt,nth->nh", ds, self.hs)


class WeightSum(Layer):
    """c = Σ_t a_t hs_t (S65): the context vector (N, H) of weights a (N, T) over hs (N, T, H). Backward:
    dhs = a ⊗ dc, da_t = hs_t · dc."""

    def forward(self, hs: np.ndarray, a: np.ndarray) -> np.ndarray:
        self.hs, self.a = hs, a
        return np.einsum("nt,nth->nh", a, hs)

    def backward(self, dc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.a[:, :, None] * dc[:, None, :], np.einsum("nth,nh->nt", self.hs, dc)


class Attention(Layer):
    """AttentionWeight followed by WeightSum (S66): (hs (N, T, H), h (N, H)) -> the context c (N, H); the
    weights are kept in ``attention_weight``. Backward returns (dhs, dh): hs gets both paths' gradients."""

    def __init__(self) -> None:
        super().__init__()
        self.weight_layer, self.sum_layer = AttentionWeight(), WeightSum()
        self.attention_weight: np.ndarray | None = None

    def forward(self, hs: np.ndarray, h: np.ndarray) -> np.ndarray:
        self.attention_weight = self.weight_layer.forward(hs, h)
        return self.sum_layer.forward(hs, self.attention_weight)

    def backward(self, dc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dhs_sum, da = self.sum_layer.backward(dc)
        dhs_weight, dh = self.weight_layer.backward(da)
        return dhs_sum + dhs_weight, dh


class TimeAttention(Layer):
    """Attention at every decoder step (S66): (hs_enc (N, T_e, H), hs_dec (N, T_d, H)) -> contexts (N, T_d, H);
    ``attention_weights`` lists the T_d weight arrays (N, T_e). The book runs one Attention per step; the
    steps do not depend on each other, so here all are two batched matrix products (the same numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.softmax = Softmax()
        self.attention_weights: list[np.ndarray] = []

    def forward(self, hs_enc: np.ndarray, hs_dec: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """``mask`` (N, T_e), True at padding: those encoder steps get weight 0."""
        scores = hs_dec @ hs_enc.transpose(0, 2, 1)  # (N, T_d, T_e)
        if mask is not None:
            scores = np.where(mask[:, None, :], MASKED, scores)
        a = self.softmax.forward(scores)
        self.hs_enc, self.hs_dec, self.a = hs_enc, hs_dec, a
        self.attention_weights = list(a.transpose(1, 0, 2))
        return a @ hs_enc  # (N, T_d, H)

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = self.a
        ds = self.softmax.backward(dout @ self.hs_enc.transpose(0, 2, 1))  # (N, T_d, T_e)
        dhs_enc = a.transpose(0, 2, 1) @ dout + ds.transpose(0, 2, 1) @ self.hs_dec
        dhs_dec = ds @ self.hs_enc
        return dhs_enc, dhs_dec
