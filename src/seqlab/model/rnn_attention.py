"""Attention for RNN encoder-decoders: the score functions and the weighted sum (seeds 000, 002 ch. 8, 003).

At decoder step t a query vector (Luong: the decoder state s_t; Bahdanau: s_{t-1})
scores every encoder state h_i, the scores become weights by a softmax, and the
weighted sum of the encoder states is the context vector:

    e_i = score(s, h_i)          dot:      sᵀ h_i                      (Luong)
                                 general:  sᵀ W h_i                    (Luong, multiplicative)
                                 concat:   vᵀ tanh(W_1 h_i + W_2 s)    (Bahdanau, additive)
    α   = softmax(e)             the book's ``AttentionWeight``
    a   = Σ_i α_i h_i            the book's ``WeightSum``

Padded source positions get no weight. What the decoder does with the context
(Luong's tanh(W_c[a; s]) output layer, Bahdanau's [context; embedding] RNN
input) belongs to the decoders that use these pieces.
"""

from __future__ import annotations

import torch
from torch import nn

from seqlab.model.attention import MASK_VALUE


class DotScore(nn.Module):
    """e_i = sᵀ h_i; query and keys must have the same size."""

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        # query (batch, [steps,] hidden), keys (batch, src_len, hidden) -> (batch, [steps,] src_len)
        return torch.einsum("b...h,bth->b...t", query, keys)


class GeneralScore(nn.Module):
    """e_i = sᵀ W h_i (Luong's "general"); W maps key size to query size."""

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.w = nn.Linear(key_size, query_size, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.einsum("b...h,bth->b...t", query, self.w(keys))


class ConcatScore(nn.Module):
    """e_i = vᵀ tanh(W_1 h_i + W_2 s) (Bahdanau's additive score, Luong's "concat")."""

    def __init__(self, query_size: int, key_size: int, attention_size: int) -> None:
        super().__init__()
        self.w_keys = nn.Linear(key_size, attention_size, bias=False)
        self.w_query = nn.Linear(query_size, attention_size, bias=False)
        self.v = nn.Linear(attention_size, 1, bias=False)

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        keys = self.w_keys(keys)  # (batch, src_len, attention)
        if query.dim() == 3:  # several steps at once
            keys = keys.unsqueeze(1)  # (batch, 1, src_len, attention)
        hidden = torch.tanh(keys + self.w_query(query).unsqueeze(-2))  # (batch, [steps,] src_len, attention)
        return self.v(hidden).squeeze(-1)  # (batch, [steps,] src_len)


def attention_weights(scores: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
    """α = softmax(e) over source positions; ``pad`` (batch, src_len) True at padding gets weight 0.

    ``scores`` (batch, src_len), or (batch, steps, src_len) for several decoder steps at once."""
    if pad is not None:
        scores = scores.masked_fill(pad if scores.dim() == 2 else pad.unsqueeze(1), MASK_VALUE)
    return torch.softmax(scores, dim=-1)


def weighted_sum(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """a = Σ_i α_i h_i: weights (batch, [steps,] src_len), values (batch, src_len, hidden) -> (batch, [steps,] hidden)."""
    return torch.einsum("b...t,bth->b...h", weights, values)


class RNNAttention(nn.Module):
    """One attention step: score, softmax, weighted sum. Returns the context and the weights."""

    def __init__(self, score: str, query_size: int, key_size: int, attention_size: int | None = None) -> None:
        super().__init__()
        if score == "dot":
            if query_size != key_size:
                raise ValueError(f"dot attention needs equal sizes, got query {query_size} and keys {key_size}")
            self.score: nn.Module = DotScore()
        elif score == "general":
            self.score = GeneralScore(query_size, key_size)
        elif score == "concat":
            self.score = ConcatScore(query_size, key_size, attention_size or query_size)
        else:
            raise ValueError(f"unknown attention score {score!r} (dot, general, concat)")

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, pad: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query (batch, [steps,] query_size), keys (batch, src_len, key_size) -> context (batch, [steps,] key_size),
        weights (batch, [steps,] src_len)."""
        weights = attention_weights(self.score(query, keys), pad)
        return weighted_sum(weights, keys), weights
