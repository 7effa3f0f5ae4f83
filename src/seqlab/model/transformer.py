"""The Transformer encoder-decoder of "Attention Is All You Need" (seeds 000, 001, 004).

Data flow, with the seed's names::

    source ids ─ Embedding·√d_model + PE ─ dropout ─ N × EncoderLayer ──────────────┐ memory
    target ids ─ Embedding·√d_model + PE ─ dropout ─ N × DecoderLayer(memory) ─ Linear ─ logits

Each sublayer is wrapped as ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the
paper's and the seed's order, LayerNorm eps 1e-6), or as
``x + Dropout(Sublayer(LayerNorm(x)))`` with a final LayerNorm (pre-LN, optional).
Embeddings start at N(0, d_model^-0.5) so that after the √d_model scale they have
unit variance, the size of the positional encoding (with N(0, 1) the positions
are drowned out; see docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from seqlab.config import TransformerConfig
from seqlab.model.attention import MultiHeadAttention
from seqlab.model.masks import look_ahead_mask, padding_mask
from seqlab.model.positional import PositionalEncoding

LAYER_NORM_EPS = 1e-6  # Keras LayerNormalization(epsilon=1e-6) in seed 000


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(torch.relu(self.w_1(x)))


class Residual(nn.Module):
    """Add & Norm around one sublayer: post-LN ``LN(x + drop(f(x)))`` or pre-LN ``x + drop(f(LN(x)))``."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention (padding mask) then FFN, each inside Add & Norm."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.attn_block = Residual(cfg.d_model, cfg.dropout, pre)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, pre)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # x: (batch, src_len, d_model)
        x = self.attn_block(x, lambda h: self.self_attn(h, h, h, mask)[0])
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention (look-ahead mask), encoder-decoder attention (padding mask), FFN.

    Unlike the seed's Keras code, dropout is applied to the first sublayer too
    (as the paper does and every other sublayer in the seed does).
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads)
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff)
        self.self_block = Residual(cfg.d_model, cfg.dropout, pre)
        self.cross_block = Residual(cfg.d_model, cfg.dropout, pre)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, pre)

    def forward(
        self,
        x: torch.Tensor,  # (batch, trg_len, d_model)
        memory: torch.Tensor,  # (batch, src_len, d_model), the last encoder layer's output
        self_mask: torch.Tensor,  # (batch, 1, trg_len, trg_len)
        cross_mask: torch.Tensor,  # (batch, 1, 1, src_len)
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        x = self.self_block(x, lambda h: self.self_attn(h, h, h, self_mask)[0])
        weights = None

        def cross(h: torch.Tensor) -> torch.Tensor:
            nonlocal weights
            out, weights = self.cross_attn(h, memory, memory, cross_mask, need_weights)
            return out

        x = self.cross_block(x, cross)
        return self.ffn_block(x, self.ffn), weights  # weights: (batch, heads, trg_len, src_len)


class Embedder(nn.Module):
    """Token embedding × √d_model + positional encoding, then dropout (seed 000 ``encoder``/``decoder``)."""

    def __init__(self, vocab_size: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.embedding = nn.Embedding(vocab_size, cfg.d_model, padding_idx=0)
        nn.init.normal_(self.embedding.weight, std=cfg.d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.positions = PositionalEncoding(cfg.d_model, cfg.max_length)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # ids: (batch, len) -> (batch, len, d_model)
        return self.dropout(self.positions(self.embedding(ids) * self.scale))


class Encoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.embed = Embedder(vocab_size, cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS) if cfg.norm == "pre" else nn.Identity()

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(src)  # (batch, src_len, d_model)
        for layer in self.layers:
            x = layer(x, src_mask)
        return self.final_norm(x)


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.embed = Embedder(vocab_size, cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS) if cfg.norm == "pre" else nn.Identity()

    def forward(
        self,
        trg: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        x = self.embed(trg)  # (batch, trg_len, d_model)
        self_mask = look_ahead_mask(trg)
        weights = []
        for layer in self.layers:
            x, w = layer(x, memory, self_mask, src_mask, need_weights)
            if w is not None:
                weights.append(w)
        return self.final_norm(x), weights


class Transformer(nn.Module):
    """``model(src, trg_in)`` -> logits (batch, trg_len, trg_vocab); no softmax (seed 000 ``Dense(vocab_size)``)."""

    def __init__(self, cfg: TransformerConfig, src_vocab: int, trg_vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(src_vocab, cfg)
        self.decoder = Decoder(trg_vocab, cfg)
        self.generator = nn.Linear(cfg.d_model, trg_vocab)
        self._init_linear_layers()
        if cfg.tie_output:
            self.generator.weight = self.decoder.embed.embedding.weight

    def _init_linear_layers(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (batch, src_len) -> memory (batch, src_len, d_model) and its padding mask (batch, 1, 1, src_len)."""
        src_mask = padding_mask(src)
        return self.encoder(src, src_mask), src_mask

    def decode(
        self, trg: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """trg (batch, trg_len) -> logits (batch, trg_len, trg_vocab) and, if asked, the
        cross-attention weights of every layer, each (batch, heads, trg_len, src_len)."""
        hidden, weights = self.decoder(trg, memory, src_mask, need_weights)
        return self.generator(hidden), weights

    def forward(self, src: torch.Tensor, trg: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(trg, memory, src_mask)[0]
