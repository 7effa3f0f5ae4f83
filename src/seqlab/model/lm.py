"""The RNN language model of seed 002 ch. 5–6: the book's Rnnlm and BetterRnnlm.

    ids (B, T) -> Embedding -> [Dropout -> RNN layer] × num_layers -> Dropout -> Affine -> logits (B, T, V)

* ``cell``: ``rnn`` (h_t = tanh(h_{t−1} W_h + x_t W_x + b), S34), ``lstm`` (S42) or ``gru``.
* Layers are stacked single-layer torch RNNs, so dropout sits only **between** them, in depth, never along
  time (S45: noise along time accumulates). ``variational`` draws one mask per sequence and keeps it for
  every time step (Gal & Ghahramani 2016), the variant the seed names as making dropout along time work.
* ``weight_drop`` (AWD-LSTM, Merity et al. 2018): DropConnect on each layer's hidden-to-hidden weights W_h, one
  mask per forward call, so the recurrence itself is regularised while the fused kernel still runs the layer.
* ``embedding_dropout`` (Gal & Ghahramani 2016, AWD-LSTM): whole words dropped, one decision per word of the
  vocabulary per forward call: every occurrence of a dropped word reads a zero vector, the rest 1 / (1 − p) of theirs.
* ``tie_weights``: the output Affine's weight *is* the embedding matrix (S45): one tensor, whose gradient
  sums both uses, and V · H fewer parameters; it needs ``embedding_size == hidden_size``.
* The state is carried between calls (S35 "stateful"): one entry per layer, ``h`` (1, B, H) or, for the
  LSTM, ``(h, c)``; ``None`` starts from zeros. ``detach`` cuts the backward path and keeps the forward one,
  which is truncated BPTT.
* Generation (S47) goes through the decoding step contract (``decoding/step.py``): ``start`` reads each
  prompt and keeps the distribution of the word after it; the first ``step`` returns that distribution, every
  later one feeds the chosen word back. Greedy, beam search and sampling then work as for seq2seq models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import torch
from pydantic import Field, model_validator
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from seqlab.config import Config, ModelSection
from seqlab.model.dropout import keep_mask
from seqlab.model.init import Initialisation, book_init
from seqlab.model.kneser_ney import NGRAMS, KneserNeyConfig, described
from seqlab.model.lstm import lstm_layer, written_out_pays
from seqlab.model.masks import example_ids
from seqlab.precision import recurrent_kernels
from seqlab.specials import PAD

LayerState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
LMState = list[LayerState]
CELLS: dict[str, Callable[..., nn.RNNBase]] = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


class LMConfig(ModelSection):
    """An RNN language model (seed 002 ch. 5–6). Defaults are the book's BetterRnnlm."""

    type: Literal["lm"] = "lm"
    cell: Literal["rnn", "gru", "lstm"] = "lstm"
    embedding_size: int = Field(650, gt=0)
    hidden_size: int = Field(650, gt=0)
    num_layers: int = Field(2, gt=0)
    dropout: float = Field(0.5, ge=0, lt=1, description="before, between and after the RNN layers, never along time")
    variational: bool = Field(False, description="one dropout mask per sequence, the same at every time step")
    weight_drop: float = Field(0.0, ge=0, lt=1, description="DropConnect on the hidden-to-hidden weights (AWD-LSTM)")
    embedding_dropout: float = Field(0.0, ge=0, lt=1, description="whole words of the vocabulary dropped from the "
                                                                  "input embedding (AWD-LSTM)")
    tie_weights: bool = Field(True, description="the output layer's weight is the embedding matrix")
    init: Initialisation = "torch"
    ngrams: KneserNeyConfig | None = Field(None, description=NGRAMS)

    @model_validator(mode="after")
    def _tied_sizes(self) -> LMConfig:
        if self.tie_weights and self.embedding_size != self.hidden_size:
            raise ValueError(f"model.tie_weights needs embedding_size == hidden_size "
                             f"({self.embedding_size} != {self.hidden_size})")
        return self

    def check(self, config: Config) -> None:
        config.refuse_warmup("language models use train.schedule: constant, cosine, linear or plateau")

    def describe(self) -> str:
        return f"{self.cell.upper()} language model, {self.num_layers} × {self.hidden_size}{described(self.ngrams)}"

    def numpy_needs(self) -> list[str]:
        """The book's Rnnlm and BetterRnnlm in seqlab.scratch have no AWD-LSTM regularisers, no n-gram model."""
        return [why for bad, why in [(self.weight_drop > 0, "model.weight_drop 0"),
                                     (self.embedding_dropout > 0, "model.embedding_dropout 0"),
                                     (self.ngrams is not None, "model.ngrams null")] if bad]

    def build(self, vocab_size: int) -> RNNLM:
        model = RNNLM.from_config(self, vocab_size)
        if self.init == "book":
            book_init(model)
        return model


class RNNLM(nn.Module):
    def __init__(self, vocab_size: int, cell: Literal["rnn", "gru", "lstm"] = "lstm", embedding_size: int = 650,
                 hidden_size: int = 650, num_layers: int = 2, dropout: float = 0.5, variational: bool = False,
                 tie_weights: bool = True, weight_drop: float = 0.0, embedding_dropout: float = 0.0) -> None:
        super().__init__()
        if tie_weights and embedding_size != hidden_size:
            raise ValueError(f"tying needs embedding_size == hidden_size (got {embedding_size} and {hidden_size})")
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        sizes = [embedding_size] + [hidden_size] * num_layers
        self.layers = nn.ModuleList(CELLS[cell](sizes[i], sizes[i + 1], batch_first=True) for i in range(num_layers))
        self.output = nn.Linear(hidden_size, vocab_size)
        if tie_weights:
            self.output.weight = self.embedding.weight  # (V, H): the same memory, one gradient
        self.dropout = dropout
        self.variational = variational
        self.weight_drop = weight_drop
        self.embedding_dropout = embedding_dropout

    def drop(self, x: torch.Tensor) -> torch.Tensor:
        """Inverted dropout of (B, T, F) activations in training; with ``variational``, one mask per sequence
        (``dropout.keep_mask``: three elements decided by each 64-bit random draw)."""
        if not self.training or self.dropout == 0:
            return x
        shape = torch.Size((x.size(0), 1, x.size(2))) if self.variational else x.shape
        return x * keep_mask(shape, self.dropout, x.dtype, x.device)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> (B, T, E); in training with ``embedding_dropout``, the rows of dropped words are zero."""
        if not self.training or self.embedding_dropout == 0:
            return self.embedding(ids)
        weight = self.embedding.weight  # (V, E)
        rows = keep_mask(torch.Size((weight.size(0), 1)), self.embedding_dropout, weight.dtype, weight.device)
        return F.embedding(ids, weight * rows)

    def recur(self, i: int, x: torch.Tensor, state: LayerState | None) -> tuple[torch.Tensor, LayerState]:
        """Layer i over x (B, T, F) from ``state``; in training with ``weight_drop``, through W_h · mask. An LSTM
        layer's training step under bf16 autocast on the CPU runs written out (``model.lstm``)."""
        layer = self.layers[i]
        w_h = cast(torch.Tensor, layer.weight_hh_l0)  # (gates × H, H)
        if self.training and self.weight_drop > 0:
            w_h = w_h * keep_mask(w_h.shape, self.weight_drop, w_h.dtype, w_h.device)
        if isinstance(layer, nn.LSTM) and written_out_pays(x, layer.hidden_size):
            return lstm_layer(layer, x, cast(tuple[torch.Tensor, torch.Tensor] | None, state), w_h)
        with recurrent_kernels():
            if w_h is layer.weight_hh_l0:
                return layer(x, state)
            return functional_call(layer, {**dict(layer.named_parameters()), "weight_hh_l0": w_h}, (x, state))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        return (example_ids(self.embedding.num_embeddings),)

    def forward(self, ids: torch.Tensor, state: LMState | None = None) -> tuple[torch.Tensor, LMState]:
        """ids (B, T), the state left by the previous call (or None) -> logits (B, T, V), the state after T."""
        x = self.drop(self.embed(ids))  # (B, T, E)
        carried: LMState = []
        for i in range(len(self.layers)):
            x, layer_state = self.recur(i, x, None if state is None else state[i])  # (B, T, H)
            carried.append(layer_state)
            x = self.drop(x)
        return self.output(x), carried

    @classmethod
    def from_config(cls, cfg: LMConfig, vocab_size: int) -> RNNLM:
        return cls(vocab_size, cfg.cell, cfg.embedding_size, cfg.hidden_size, cfg.num_layers, cfg.dropout,
                   cfg.variational, cfg.tie_weights, cfg.weight_drop, cfg.embedding_dropout)

    def start(self, src: torch.Tensor) -> LMDecoderState:
        """src (B, P): each row a prompt (``<eos>`` then its words), padded with PAD at the end. Each prompt is
        read from a zero state, the prompts of one length together; what comes back holds, per row, the state
        after it and the logits of the word that follows."""
        lengths = (src != PAD).sum(dim=1)  # (B,)
        hidden, pending, order = [], [], []
        for length in lengths.unique().tolist():
            rows = (lengths == length).nonzero().squeeze(1)
            logits, state = self(src[rows, :length])  # (rows, length, V)
            hidden.append(state)
            pending.append(logits[:, -1])  # (rows, V)
            order.append(rows)
        layers = [_cat([h[i] for h in hidden]) for i in range(len(self.layers))]
        by_length = LMDecoderState(layers, torch.cat(pending))  # rows grouped by length
        return by_length.select(torch.cat(order).argsort())  # back in the order of src

    def step(self, ids: torch.Tensor, state: LMDecoderState,
             need_weights: bool = False) -> tuple[torch.Tensor, LMDecoderState, None]:
        """ids (B,): the words chosen last -> logits (B, V) of the next ones. The first step (whose ids are the
        strategies' <sos>) gives the logits kept by ``start``."""
        if state.pending is not None:
            return state.pending, LMDecoderState(state.hidden, None), None
        logits, hidden = self(ids[:, None], state.hidden)  # (B, 1, V)
        return logits[:, -1], LMDecoderState(hidden, None), None

    @staticmethod
    def detach(state: LMState) -> LMState:
        """The same state with its backward path cut (truncated BPTT)."""
        return [tuple(t.detach() for t in s) if isinstance(s, tuple) else s.detach() for s in state]  # type: ignore[misc]


def flatten_state(state: LMState) -> dict[str, torch.Tensor]:
    """A state as named tensors (``h0``, ``c0``, ``h1`` ...), for a checkpoint."""
    named = {}
    for i, layer in enumerate(state):
        parts = layer if isinstance(layer, tuple) else (layer,)
        named.update({f"{name}{i}": t.detach() for name, t in zip("hc", parts)})
    return named


def unflatten_state(named: dict[str, torch.Tensor]) -> LMState:
    layers = len([k for k in named if k.startswith("h")])
    return [(named[f"h{i}"], named[f"c{i}"]) if f"c{i}" in named else named[f"h{i}"] for i in range(layers)]


def _cat(parts: list[LayerState]) -> LayerState:
    """One layer's states of several rows, joined along the batch (dim 1)."""
    if isinstance(parts[0], tuple):
        return tuple(torch.cat([p[k] for p in parts], dim=1) for k in range(2))  # type: ignore[return-value]
    return torch.cat(parts, dim=1)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LMDecoderState:
    """What generation keeps per row: the RNN state and, before the first step, the next word's logits."""

    hidden: LMState
    pending: torch.Tensor | None  # (B, V)

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> LMDecoderState:
        """Keep, repeat or reorder rows (beam search, finished rows leaving)."""
        hidden = [tuple(t.index_select(1, rows) for t in s) if isinstance(s, tuple) else s.index_select(1, rows)
                  for s in self.hidden]
        pending = None if self.pending is None else self.pending.index_select(0, rows)
        return LMDecoderState(hidden, pending)  # type: ignore[arg-type]

    def beams(self, k: int) -> LMDecoderState:
        """Each prompt's row k times in a row."""
        first = self.hidden[0]
        h = first[0] if isinstance(first, tuple) else first  # (layers, B, H)
        return self.select(torch.arange(h.size(1), device=h.device).repeat_interleave(k))
