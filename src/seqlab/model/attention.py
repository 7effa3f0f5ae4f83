"""Scaled dot-product attention and multi-head attention (seeds 000, 001, 004).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Two paths compute the same thing: the plain reference below, which also
returns the attention weights (for plots and tests), and PyTorch's fused
``scaled_dot_product_attention`` for speed. Tests hold them equal. The fused
kernel is used for float32 training: under bf16 autocast on the CPU its backward
pass is about 7× slower than the plain path (torch 2.13, ``benchmarks/attention_paths.py``),
while the plain path runs its two matmuls in bf16. Incremental decoding, one query per row, has its own
``one_query_attention`` (``benchmarks/profile_ops.py decode``): the scale and the mask are applied once, not at
every step, and the beams of a source share its K, V.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from seqlab import precision

MASK_VALUE = -1e9  # seed 000: ``logits += mask * -1e9``


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, dropout: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference path. q (..., q_len, d_k), k (..., k_len, d_k), v (..., k_len, d_v); mask True = hide.
    ``dropout``: dropout on the weights before they weigh V (seed 001's ``matmul(dropout(attn_weights), v)``, S76).

    Returns the output (..., q_len, d_v) and the weights (..., q_len, k_len), before dropout, as seed 001 does.
    """
    logits = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (..., q_len, k_len)
    if mask is not None:
        logits = logits + mask.to(logits.dtype) * MASK_VALUE
    weights = torch.softmax(logits, dim=-1)
    return (F.dropout(weights, dropout) if dropout else weights) @ v, weights


def one_query_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, need_weights: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention for one new position per row (incremental decoding): ``softmax(q K^T + bias) V`` with q already
    scaled by 1/sqrt(d_k) (``MultiHeadAttention.query_projection``) and ``bias`` the mask times −1e9, both done once
    instead of at every step.

    q (sources · g, d_model): g rows per source, in a row (a source's beams, ``TransformerState.beams``), its
    heads side by side; k, v (sources, heads, k_len, depth); bias (sources, 1, 1, k_len) or None. Each source's
    g queries are one (g, d_k) block against its K: a matrix product instead of g matrix-vector products over g
    copies of K. Returns the heads merged, (sources · g, d_model), and, if asked, the weights (sources · g, heads,
    k_len)."""
    sources, heads, _, depth = k.shape
    g = q.size(0) // sources
    q = q.view(sources, g, heads, depth).transpose(1, 2)  # (sources, heads, g, depth)
    logits = q @ k.transpose(-2, -1)  # (sources, heads, g, k_len)
    weights = torch.softmax(logits if bias is None else logits + bias, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(sources * g, heads * depth)  # (rows, d_model)
    return out, weights.transpose(1, 2).reshape(sources * g, heads, -1) if need_weights else None


Projection = Callable[[torch.Tensor], list[torch.Tensor]]
LinearMap = Callable[[torch.Tensor], torch.Tensor]


def frozen(weight: torch.Tensor, bias: torch.Tensor) -> LinearMap:
    """x (rows, in) -> x W^T + b, with W (out, in) and b fixed for one search: W^T laid out (in, out) once, so that
    each step is a plain matrix product (for a few rows, one sentence's beams, faster on the CPU than
    ``F.linear``'s product with the transposed weight), and both cast once to the dtype autocast computes in where it
    is on, instead of at every step. In fp32 on a CPU where oneDNN's prepacked product pays
    (``precision.onednn_fp32_pays``), a step of ``PACKED_WORK`` multiply-adds or more multiplies through it, W packed
    at the first such step; never while compiled or exported, whose graphs hold the plain product."""
    device = weight.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    weight_t, bias = weight.t().contiguous().to(dtype), bias.to(dtype)  # (in, out), (out,)

    def product(x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias, x, weight_t)

    traced = torch.compiler.is_compiling() or torch.compiler.is_exporting()
    if device != "cpu" or dtype != torch.float32 or traced or not precision.onednn_fp32_pays():
        return product
    packed: list[torch.Tensor] = []  # W in oneDNN's layout, made at the first step that uses it

    def packed_product(x: torch.Tensor) -> torch.Tensor:
        if not precision.large_product(x.size(0), weight.numel()):
            return product(x)
        if not packed:
            packed.append(precision.onednn_packed(weight))
        return precision.onednn_product(x, packed[0], bias)

    return packed_product


def float_linear(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A linear layer's float weight (out, in) and bias (out,): an ``nn.Linear``'s, or the same held prepacked
    (``runtime.PackedLinear``); None for a layer without them (``Runtime``'s int8 layers, no bias)."""
    weight, bias = getattr(layer, "weight", None), getattr(layer, "bias", None)
    if isinstance(weight, torch.Tensor) and isinstance(bias, torch.Tensor) and weight.is_floating_point():
        return weight, bias
    return None


def fixed(layer: nn.Module) -> LinearMap:
    """A linear layer as ``frozen`` for one search; layers that hold no float weight (``Runtime``'s int8) as they
    are."""
    weights = float_linear(layer)
    return layer if weights is None else frozen(*weights)


def stacked(first: nn.Module, *others: nn.Module, scale: float) -> Projection:
    """x (rows, d_model) -> [first(x) · scale, *(layer(x) for layer in others)]: one matrix product over the linear
    layers' weights stacked here, once per search (``Transformer.start``: the weights may change between two
    searches, as in training), with the scale folded in (``frozen``); layers that hold no float weight
    (``Runtime``'s int8) are called one by one."""
    layers = (first, *others)
    weights = [float_linear(layer) for layer in layers]
    if any(pair is None for pair in weights):
        return lambda x: [first(x) * scale, *(layer(x) for layer in others)]
    pairs = cast(list[tuple[torch.Tensor, torch.Tensor]], weights)
    weight = torch.cat([pairs[0][0] * scale, *(w for w, _ in pairs[1:])])  # (outputs, d_model)
    bias = torch.cat([pairs[0][1] * scale, *(b for _, b in pairs[1:])])
    sizes = [w.size(0) for w, _ in pairs]
    product = frozen(weight, bias)
    return lambda x: list(product(x).split(sizes, dim=-1))


class MultiHeadAttention(nn.Module):
    """W_Q, W_K, W_V (d_model -> d_model), split into heads, attention, concat, W_O.

    ``fused`` selects PyTorch's fused kernel for float32 inputs of more than one
    query; the reference path runs otherwise and whenever the weights are asked for.
    """

    fused: bool = True

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        """``dropout``: on the attention weights, in training only (``model.attention_dropout``)."""
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.dropout = dropout
        self.depth = d_model // num_heads  # d_k = d_v
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.depth).transpose(1, 2)  # (batch, heads, len, depth)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.num_heads * self.depth)  # (batch, len, d_model)

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """key/value (batch, k_len, d_model) -> K, V (batch, heads, k_len, depth). Incremental decoding
        computes them once per source (cross-attention) or once per new target token (self-attention)."""
        return self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))

    def attend(
        self,
        query: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (batch, q_len, d_model) against projected K, V (batch, heads, k_len, depth)."""
        q = self.split_heads(self.w_q(query))
        p = self.dropout if self.training else 0.0
        if need_weights or not self.fused or q.dtype != torch.float32 or q.size(2) == 1:
            out, weights = scaled_dot_product_attention(q, k, v, mask, p)
        else:
            keep = None if mask is None else ~mask  # SDPA's boolean masks mark the positions that take part
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p), None
        return self.w_o(self.merge_heads(out)), weights

    def query_projection(self) -> Projection:
        """Incremental decoding's cross-attention query: x (rows, d_model) -> [Q / sqrt(d_k)] (``stacked``)."""
        return stacked(self.w_q, scale=self.depth**-0.5)

    def qkv_projection(self) -> Projection:
        """Incremental decoding's self-attention: x (rows, d_model) -> [Q / sqrt(d_k), K, V], each (rows, d_model),
        one matrix product with W_Q, W_K, W_V side by side (``stacked``)."""
        return stacked(self.w_q, self.w_k, self.w_v, scale=self.depth**-0.5)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (batch, q_len, d_model), key/value (batch, k_len, d_model), mask broadcastable to
        (batch, heads, q_len, k_len). Returns (batch, q_len, d_model) and, if asked, the weights
        (batch, heads, q_len, k_len) from the reference path."""
        return self.attend(query, *self.project_kv(key, value), mask, need_weights)
