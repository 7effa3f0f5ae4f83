"""The Transformer encoder-decoder of "Attention Is All You Need" (seeds 000, 001, 004).

Data flow, with the seed's names::

    source ids ─ Embedding·√d_model + PE ─ dropout ─ N × EncoderLayer ──────────────┐ memory
    target ids ─ Embedding·√d_model + PE ─ dropout ─ N × DecoderLayer(memory) ─ Linear ─ logits

Each sublayer is wrapped as ``LayerNorm(x + Dropout(Sublayer(x)))`` (post-LN, the
paper's and the seed's order, LayerNorm eps 1e-6), or as
``x + Dropout(Sublayer(LayerNorm(x)))`` with a final LayerNorm (pre-LN, optional).
Embeddings start at N(0, d_model^-0.5) so that after the √d_model scale they have
unit variance, the size of the positional encoding (with N(0, 1) the positions
are drowned out).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, cast

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from seqlab.config import Config, ModelSection
from seqlab.model.attention import MASK_VALUE, LinearMap, MultiHeadAttention, Projection, fixed, one_query_attention
from seqlab.model.cache import Cache, KVCache, blocks, searching
from seqlab.model.dropout import Dropout
from seqlab.model.masks import example_ids, look_ahead_mask, padding_mask
from seqlab.model.positional import PositionalEncoding
from seqlab.specials import PAD

LAYER_NORM_EPS = 1e-6  # Keras LayerNormalization(epsilon=1e-6) in seed 000

KV = tuple[torch.Tensor, torch.Tensor]  # keys and values split into heads, each (batch, heads, length, depth)


class TransformerShape(ModelSection):
    """The size of a stack of the Transformer's layers: the same keys for every model built of them (the
    encoder-decoder below, the causal LM, the encoder-only models). Defaults: a small stack, pre-LN."""

    d_model: int = Field(256, gt=0)
    num_layers: int = Field(4, gt=0)
    num_heads: int = Field(4, gt=0)
    d_ff: int = Field(1024, gt=0)
    dropout: float = Field(0.1, ge=0, lt=1)
    attention_dropout: float = Field(
        0.0, ge=0, lt=1, description="dropout on the attention weights before they weigh V (seed 001, S76); 0 as "
                                     "seed 000 and the paper")
    activation_dropout: float = Field(
        0.0, ge=0, lt=1, description="dropout on the FFN's hidden units after the activation (fairseq's "
                                     "activation_dropout, of the small-data Transformer recipes); 0 as the seeds")
    norm: Literal["post", "pre"] = "pre"
    max_length: int = Field(512, gt=0, description="positions of the positional table: the longest sequence")
    embedding_init: Literal["normal", "keras"] = Field(
        "normal", description="the token embeddings' start: N(0, 1/d_model), or Keras's Embedding default "
                              "U(-0.05, 0.05) (seed 000's code)")

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerShape:
        if self.d_model % self.num_heads:
            raise ValueError(f"model.d_model ({self.d_model}) must be divisible by model.num_heads ({self.num_heads})")
        return self

    def ffn_activation(self) -> Literal["relu", "gelu"]:
        """The FFN's activation: the seed's ReLU."""
        return "relu"

    def embedder(self, vocab_size: int) -> Embedder | LearnedEmbedder:
        """The input layer: the seed's scaled token embedding + sinusoidal PE."""
        return Embedder(vocab_size, self)


class TransformerConfig(TransformerShape):
    """The Transformer of 'Attention Is All You Need' (seq2seq). Defaults are the paper's base model."""

    type: Literal["transformer"] = "transformer"
    d_model: int = Field(512, gt=0)
    num_layers: int = Field(6, gt=0)
    num_heads: int = Field(8, gt=0)
    d_ff: int = Field(2048, gt=0)
    norm: Literal["post", "pre"] = "post"
    tie_output: bool = Field(False, description="share the target embedding with the output projection")
    decoder_self_dropout: bool = Field(
        True, description="dropout on the decoder's masked self-attention before its Add & Norm, as the paper; "
                          "false: none there, as seed 000's Keras decoder (its other sublayers keep theirs)")

    def describe(self) -> str:
        return f"Transformer {self.num_layers}+{self.num_layers} layers, d_model {self.d_model}"

    def check(self, config: Config) -> None:
        longest = max(config.data.max_source_length, config.eval.max_output_length + 1)
        if longest > self.max_length:
            raise ValueError(f"model.max_length ({self.max_length}) must cover data.max_source_length "
                             f"and eval.max_output_length + 1 ({longest})")

    def build(self, src_vocab: int, trg_vocab: int) -> Transformer:
        return Transformer(self, src_vocab, trg_vocab)

    def cross_attention(self) -> tuple[int, int]:
        """The layers and heads of its attention over the source (what a translator shows)."""
        return self.num_layers, self.num_heads


def init_linear_layers(model: nn.Module) -> None:
    """Every Linear of ``model``: Glorot-uniform weights (Keras's default, the seeds' Dense), zero biases."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position; BERT's uses GELU(x) = x Φ(x)
    (S100: gelu(0) = 0, gelu(1) ≈ 0.8413) in place of max(0, x). ``dropout``: on max(0, x W_1 + b_1) in
    training (``model.activation_dropout``)."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = F.gelu if activation == "gelu" else torch.relu
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(self.activation(self.w_1(x))))  # (..., d_ff) inside

    def fixed(self) -> LinearMap:
        """The same map with its weights fixed for one search (``attention.fixed``)."""
        w_1, w_2, activation = fixed(self.w_1), fixed(self.w_2), self.activation
        return lambda x: w_2(activation(w_1(x)))


class Residual(nn.Module):
    """Add & Norm around one sublayer: post-LN ``LN(x + drop(f(x)))`` or pre-LN ``x + drop(f(LN(x)))``."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return self.after(x, sublayer(self.before(x)))

    def before(self, x: torch.Tensor) -> torch.Tensor:
        """What the sublayer takes: LN(x) (pre-LN) or x."""
        return self.norm(x) if self.pre_norm else x

    def after(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The sublayer's output y added back: x + drop(y) (pre-LN) or LN(x + drop(y))."""
        return x + self.dropout(y) if self.pre_norm else self.norm(x + self.dropout(y))


class EncoderLayer(nn.Module):
    """Self-attention (padding mask) then FFN, each inside Add & Norm."""

    def __init__(self, cfg: TransformerShape) -> None:
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attention_dropout)
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, cfg.ffn_activation(), cfg.activation_dropout)
        self.attn_block = Residual(cfg.d_model, cfg.dropout, pre)
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, pre)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, need_weights: bool = False  # x: (batch, src_len, d_model)
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Returns x and, if asked, the self-attention weights (batch, heads, src_len, src_len)."""
        weights = None

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            nonlocal weights
            out, weights = self.self_attn(h, h, h, mask, need_weights)
            return out

        x = self.attn_block(x, self_attention)
        return self.ffn_block(x, self.ffn), weights


class DecoderLayer(nn.Module):
    """Masked self-attention (look-ahead mask), encoder-decoder attention (padding mask), FFN.

    Dropout is applied to the first sublayer too, as the paper does and every other sublayer in the seed does;
    ``self_dropout`` 0 leaves it out there, as seed 000's Keras code (``model.decoder_self_dropout: false``).
    """

    def __init__(self, cfg: TransformerShape, cross: bool = True, self_dropout: float | None = None) -> None:
        """``cross=False``: no encoder-decoder attention, the block of a decoder-only (causal) language model;
        ``self_dropout``: the dropout after the masked self-attention (default: ``cfg.dropout``)."""
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attention_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attention_dropout) if cross else None
        self.ffn = PositionwiseFeedForward(cfg.d_model, cfg.d_ff, dropout=cfg.activation_dropout)
        self.self_block = Residual(cfg.d_model, cfg.dropout if self_dropout is None else self_dropout, pre)
        self.cross_block = Residual(cfg.d_model, cfg.dropout, pre) if cross else None
        self.ffn_block = Residual(cfg.d_model, cfg.dropout, pre)

    def forward(
        self,
        x: torch.Tensor,  # (batch, trg_len, d_model)
        memory_kv: KV | None,  # the encoder output projected by this layer's W_K, W_V: (batch, heads, src_len, depth)
        self_mask: torch.Tensor | None,  # (batch, 1, trg_len, trg_len); None when one position sees all
        cross_mask: torch.Tensor | None,  # (batch, 1, 1, src_len)
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, KV]:
        """Every target position at once (teacher forcing, a prompt). Returns x, the cross-attention weights
        (batch, heads, trg_len, src_len) if asked, and the self-attention K, V of every position (the cache that
        ``extend`` continues)."""
        present: KV | None = None  # set by self_attention below

        def self_attention(h: torch.Tensor) -> torch.Tensor:
            nonlocal present
            present = self.self_attn.project_kv(h, h)  # (batch, heads, trg_len, depth)
            return self.self_attn.attend(h, *present, self_mask)[0]

        weights = None

        def cross_attention(h: torch.Tensor) -> torch.Tensor:
            nonlocal weights
            assert self.cross_attn is not None and memory_kv is not None
            out, weights = self.cross_attn.attend(h, *memory_kv, cross_mask, need_weights)
            return out

        x = self.self_block(x, self_attention)
        if self.cross_block is not None:
            x = self.cross_block(x, cross_attention)
        assert present is not None  # self_attention ran
        return self.ffn_block(x, self.ffn), weights, present

    def extend(
        self,
        x: torch.Tensor,  # (rows, d_model): one new position per row
        past: Cache,  # the self-attention K, V of the earlier positions: (rows, heads, steps, depth)
        memory_kv: KV | None,  # (sources, heads, src_len, depth), a source's rows in a row
        cross_bias: torch.Tensor | None,  # (sources, 1, 1, src_len): the padding mask times −1e9
        projections: LayerProjections,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Cache]:
        """Incremental decoding: the same layer as ``forward`` for one new position per row, the earlier ones read
        from ``past`` (``past.attend``), its queries, keys and values by ``projections``. Returns x
        (rows, d_model), the cross-attention weights (rows, heads, src_len) if asked, and the cache with this
        position appended (rows, heads, steps + 1, depth)."""
        rows, heads, depth = x.size(0), self.self_attn.num_heads, self.self_attn.depth
        q, k, v = projections.qkv(self.self_block.before(x))  # each (rows, d_model)
        past = past.append(k.view(rows, heads, depth), v.view(rows, heads, depth))  # (rows, heads, steps + 1, depth)
        x = self.self_block.after(x, projections.self_out(past.attend(q)))
        weights = None
        if self.cross_block is not None:
            assert memory_kv is not None and projections.cross_query is not None and projections.cross_out is not None
            q = projections.cross_query(self.cross_block.before(x))[0]
            out, weights = one_query_attention(q, *memory_kv, cross_bias, need_weights)
            x = self.cross_block.after(x, projections.cross_out(out))
        return self.ffn_block.after(x, projections.ffn(self.ffn_block.before(x))), weights, past

    def projections(self) -> LayerProjections:
        """What ``extend`` computes with, its weights fixed (stacked, laid out, cast) once per search."""
        cross = self.cross_attn
        return LayerProjections(self.self_attn.qkv_projection(), fixed(self.self_attn.w_o),
                                None if cross is None else cross.query_projection(),
                                None if cross is None else fixed(cross.w_o), self.ffn.fixed())


class LayerProjections(NamedTuple):
    """A decoder layer's linear maps for one new position per row, made by ``start`` and kept in the search's
    state: the self-attention's stacked Q, K, V (``MultiHeadAttention.qkv_projection``) and W_O, the
    cross-attention's Q (``query_projection``) and W_O, the FFN (``attention.fixed``)."""

    qkv: Projection
    self_out: LinearMap
    cross_query: Projection | None
    cross_out: LinearMap | None
    ffn: LinearMap


class Embedder(nn.Module):
    """Token embedding × √d_model + positional encoding, then dropout (seed 000 ``encoder``/``decoder``)."""

    def __init__(self, vocab_size: int, cfg: TransformerShape) -> None:
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.embedding = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD)
        if cfg.embedding_init == "keras":
            nn.init.uniform_(self.embedding.weight, -0.05, 0.05)  # tf.keras.layers.Embedding's "uniform"
        else:
            nn.init.normal_(self.embedding.weight, std=cfg.d_model**-0.5)
        with torch.no_grad():  # <pad> is masked everywhere; its row stays 0 (and, padding_idx, learns nothing)
            self.embedding.weight[0].zero_()
        self.positions = PositionalEncoding(cfg.d_model, cfg.max_length)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:  # ids: (batch, len) -> (batch, len, d_model)
        return self.dropout(self.positions(self.embedding(ids) * self.scale, offset))


class LearnedEmbedder(nn.Module):
    """BERT's input (seed 002 §10.1): token + learned position (+ segment) embeddings, summed, then LayerNorm and
    dropout; all three tables start at N(0, 0.02²), BERT's initialiser."""

    def __init__(self, vocab_size: int, cfg: TransformerShape, segments: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD)
        self.positions = nn.Embedding(cfg.max_length, cfg.d_model)
        self.segments = nn.Embedding(segments, cfg.d_model) if segments else None
        for table in (self.embedding, self.positions, self.segments):
            if table is not None:
                nn.init.normal_(table.weight, std=0.02)
        with torch.no_grad():
            self.embedding.weight[PAD].zero_()
        self.norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS)
        self.dropout = Dropout(cfg.dropout)

    def forward(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """ids (batch, len) and their segment ids (0 for sentence A, 1 for B; all A when None) -> (batch, len, d)."""
        if ids.size(1) > self.positions.num_embeddings:
            raise ValueError(f"sequence of {ids.size(1)} positions exceeds model.max_length "
                             f"({self.positions.num_embeddings})")
        x = self.embedding(ids) + self.positions.weight[: ids.size(1)]
        if self.segments is not None:
            x = x + (self.segments.weight[0] if segments is None else self.segments(segments))
        return self.dropout(self.norm(x))


class Encoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: TransformerShape) -> None:
        super().__init__()
        self.embed = cfg.embedder(vocab_size)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS) if cfg.norm == "pre" else nn.Identity()

    def forward(
        self, src: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False,
        segments: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """src (batch, src_len), with BERT's embeddings also its segment ids -> (batch, src_len, d_model) and, if
        asked, every layer's self-attention weights, each (batch, heads, src_len, src_len)."""
        x = self.embed(src, segments) if isinstance(self.embed, LearnedEmbedder) else self.embed(src)  # (batch, len, d)
        weights = []
        for layer in self.layers:
            x, w = layer(x, src_mask, need_weights)
            if w is not None:
                weights.append(w)
        return self.final_norm(x), weights


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.embed = Embedder(vocab_size, cfg)
        self_dropout = cfg.dropout if cfg.decoder_self_dropout else 0.0
        self.layers = nn.ModuleList(DecoderLayer(cfg, self_dropout=self_dropout) for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS) if cfg.norm == "pre" else nn.Identity()

    def projections(self) -> list[LayerProjections]:
        """Every layer's projections for ``extend``, stacked for one search."""
        return [cast(DecoderLayer, layer).projections() for layer in self.layers]

    def memory_kv(self, memory: torch.Tensor) -> list[KV]:
        """The encoder output (batch, src_len, d_model) projected for every layer's cross-attention."""
        return [cast(MultiHeadAttention, cast(DecoderLayer, layer).cross_attn).project_kv(memory, memory)
                for layer in self.layers]

    def forward(
        self, trg: torch.Tensor, memory_kv: list[KV], src_mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Teacher forcing: trg (batch, trg_len), every position under the look-ahead mask -> the hidden states
        (batch, trg_len, d_model) and, if asked, the cross-attention weights per layer."""
        x = self.embed(trg)  # (batch, trg_len, d_model)
        self_mask = look_ahead_mask(trg)
        weights = []
        for layer, kv in zip(self.layers, memory_kv):
            x, w, _ = layer(x, kv, self_mask, src_mask, need_weights)
            if w is not None:
                weights.append(w)
        return self.final_norm(x), weights

    def extend(
        self, ids: torch.Tensor, state: TransformerState, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[Cache]]:
        """Incremental decoding: ids (rows,), one new position per row after the cached ones -> its hidden state
        (rows, d_model), the cross-attention weights per layer (rows, heads, src_len) if asked, and each layer's
        cache with this position."""
        past = state.selected_past()
        x = self.embed(ids[:, None], past[0].length)[:, 0]  # (rows, d_model)
        src_len, padded_len = state.src_mask.size(-1), state.memory_kv[0][0].size(2)  # padded: ``Transformer.start``
        cross_bias = F.pad(state.src_mask.to(x.dtype) * MASK_VALUE, (0, padded_len - src_len),
                           value=MASK_VALUE)  # once for every layer: (sources, 1, 1, padded_len)
        weights, present = [], []
        for layer, cache, memory_kv, projections in zip(self.layers, past, state.memory_kv, state.projections):
            x, w, cache = cast(DecoderLayer, layer).extend(x, cache, memory_kv, cross_bias, projections, need_weights)
            present.append(cache)
            if w is not None:
                weights.append(w[..., :src_len])
        return self.final_norm(x), weights, present


class Transformer(nn.Module):
    """``model(src, trg_in)`` -> logits (batch, trg_len, trg_vocab); no softmax (seed 000 ``Dense(vocab_size)``)."""

    def __init__(self, cfg: TransformerConfig, src_vocab: int, trg_vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(src_vocab, cfg)
        self.decoder = Decoder(trg_vocab, cfg)
        self.generator = nn.Linear(cfg.d_model, trg_vocab)
        init_linear_layers(self)
        if cfg.tie_output:
            self.generator.weight = self.decoder.embed.embedding.weight

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (batch, src_len) -> memory (batch, src_len, d_model) and its padding mask (batch, 1, 1, src_len)."""
        src_mask = padding_mask(src)
        return self.encoder(src, src_mask)[0], src_mask

    def decode(
        self, trg: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Teacher forcing: trg (batch, trg_len) -> logits (batch, trg_len, trg_vocab) and, if asked, the
        cross-attention weights of every layer, each (batch, heads, trg_len, src_len)."""
        hidden, weights = self.decoder(trg, self.decoder.memory_kv(memory), src_mask, need_weights)
        return self.generator(hidden), weights

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        src_vocab, trg_vocab = self.encoder.embed.embedding.num_embeddings, self.generator.out_features
        return example_ids(src_vocab), example_ids(trg_vocab, length=6)

    def forward(self, src: torch.Tensor, trg: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(trg, memory, src_mask)[0]

    # --- incremental decoding: the step contract of seqlab.decoding ---------------------------------

    def start(self, src: torch.Tensor, padded: bool = True) -> TransformerState:
        """Encode src (batch, src_len) once and project it for every layer's cross-attention; no target yet.

        ``padded``: the memory K, V in whole blocks of positions, zeros after the source that the step masks
        (``seqlab.model.cache.BLOCK``: the CPU's softmax and batched products run vectorised over them), and the
        sources encoded in pieces of similar length (``pieces``), each cut to its longest source; the exported
        graphs encode the batch as it is and keep the source's length (False)."""
        src_mask = padding_mask(src)
        if not padded:
            memory_kv = self.decoder.memory_kv(self.encode(src)[0])  # each (batch, heads, src_len, depth)
            empty = memory_kv[0][0][:, :, :0]  # (batch, heads, 0, depth)
            return TransformerState(src_mask, memory_kv, [KVCache.of(empty, empty) for _ in memory_kv],
                                    self.decoder.projections())
        memory_kv = self._memory_kv_in_pieces(src, blocks(src.size(1)))
        empty = memory_kv[0][0][:, :, :0]
        return TransformerState(src_mask, memory_kv, [searching(empty, empty) for _ in memory_kv],
                                self.decoder.projections())

    def _memory_kv_in_pieces(self, src: torch.Tensor, width: int) -> list[KV]:
        """Every layer's cross-attention K, V of src (batch, src_len), each (batch, heads, width, depth) with zeros
        after each piece's longest source: the sources encoded piece by piece (``pieces``), so that a short source
        is not computed at the length of the batch's longest."""
        kvs: list[KV] = []
        for rows, longest in pieces(src):
            for layer, piece_kv in enumerate(self.decoder.memory_kv(self.encode(src[rows, :longest])[0])):
                if layer == len(kvs):
                    k, v = (x.new_zeros(src.size(0), x.size(1), width, x.size(3)) for x in piece_kv)
                    kvs.append((k, v))
                for whole, piece in zip(kvs[layer], piece_kv):  # piece: (rows, heads, longest, depth)
                    whole[:, :, :longest].index_copy_(0, rows, piece)
        return kvs

    def step(
        self, ids: torch.Tensor, state: TransformerState, need_weights: bool = False
    ) -> tuple[torch.Tensor, TransformerState, torch.Tensor | None]:
        """ids (batch,), the previous output word -> logits (batch, vocab) of the next, the state with this
        position's keys and values cached, and (if asked) the cross-attention weights (batch, layers, heads,
        src_len). Only the new position is computed: earlier ones are read from the cache."""
        hidden, weights, past = self.decoder.extend(ids, state, need_weights)  # (rows, d_model)
        state = TransformerState(state.src_mask, state.memory_kv, past, state.projections, state.group)
        stacked = torch.stack(weights, dim=1) if need_weights else None  # (rows, layers, heads, src_len)
        return self.generator(hidden), state, stacked


PIECE_TOKENS = 1024  # a piece of ``pieces``: at most this many source positions, padding included
PADDING_SHARE = 0.1  # a batch in which padding is at most this share of the positions is encoded whole


def pieces(src: torch.Tensor) -> list[tuple[torch.Tensor, int]]:
    """src (batch, src_len), right-padded -> its rows in pieces of similar length, each (rows (n,), its longest
    source): the sources in order of length, each piece as large as fits ``PIECE_TOKENS`` (n × longest; one
    source at least), so that the padding the encoder computes stays within a piece. A batch with little
    padding (``PADDING_SHARE``: the date model's, of sources one or two positions apart) stays one piece. On the
    Multi30k test split the longest batch, 232 sources of 19 to 40 positions, was a third padding; in pieces the
    encoder took 0.73× the time (1 thread and 2, AMD EPYC)."""
    lengths = (src != PAD).sum(dim=1)
    if src.numel() * (1 - PADDING_SHARE) <= int(lengths.sum()):
        return [(torch.arange(src.size(0), device=src.device), src.size(1))]
    order = lengths.argsort(stable=True)
    out, start, sizes = [], 0, lengths[order].tolist()
    for end in range(1, len(sizes) + 1):
        if end == len(sizes) or (end + 1 - start) * sizes[end] > PIECE_TOKENS:
            out.append((order[start:end], max(1, sizes[end - 1])))
            start = end
    return out


@dataclass(frozen=True)
class TransformerState:
    """What incremental decoding keeps: per source, its padding mask and cross-attention K, V (computed once);
    per row, the self-attention K, V of every target position decoded so far. A source has ``group`` rows in a
    row (its beams, ``beams(k)``), which attend to its one K, V (``one_query_attention``).

    Rows kept or reordered by ``select`` are taken from the cache when the next step extends it (``order``): at most
    one copy of the filled cache per step (``KVCache.select``), however many selects came before it."""

    src_mask: torch.Tensor  # (sources, 1, 1, src_len)
    memory_kv: list[KV]  # per layer, each (sources, heads, src_len, depth)
    past: Sequence[Cache]  # per layer, each (rows of the cache, heads, steps, depth)
    projections: list[LayerProjections]  # per layer: its linear maps fixed for the search (``Decoder.projections``)
    group: int = 1
    order: torch.Tensor | None = None  # (sources · group,): row i is the cache's row order[i]; None: as it is

    def selected_past(self) -> Sequence[Cache]:
        """The cache with ``order`` applied: (sources · group, heads, steps, depth) per layer."""
        if self.order is None:
            return self.past
        return [cache.select(self.order) for cache in self.past]

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> TransformerState:
        """Keep, repeat or reorder sentences: row i of the result is row ``rows[i]`` (beam search).

        ``same_sources``: row i already holds the source of row ``rows[i]`` (beams reordered among the
        copies of one sentence), so the per-source parts are kept as they are, not copied. After
        ``beams(k)``, rows come in groups of k extending one source, which keeps its one K, V."""
        order = rows if self.order is None else self.order.index_select(0, rows)
        if same_sources:
            return TransformerState(self.src_mask, self.memory_kv, self.past, self.projections, self.group, order)
        sources = rows.view(-1, self.group)[:, 0] // self.group  # (sources kept,)
        memory_kv = [(k.index_select(0, sources), v.index_select(0, sources)) for k, v in self.memory_kv]
        return TransformerState(self.src_mask.index_select(0, sources), memory_kv, self.past, self.projections,
                                self.group, order)

    def beams(self, k: int) -> TransformerState:
        """k rows per source, sharing its cross-attention K, V; the target positions decoded so far (beam search's
        first step) copied per row."""
        assert self.group == 1, "beams(k) starts the beams of a search"
        rows = torch.arange(self.src_mask.size(0), device=self.src_mask.device).repeat_interleave(k)
        return TransformerState(self.src_mask, self.memory_kv, self.past, self.projections, k,
                                self.order).select(rows, True)
