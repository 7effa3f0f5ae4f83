"""Span extraction with the Transformer's encoder (BERT's question answering, seed 002 §10.1, S102–S103).

    <sos> question <eos> context <eos>, segments 0…0 1…1 ─ Encoder ─ hidden (batch, len, d_model)
      ─ dropout ─ Linear(d_model, 2) ─ start logits, end logits (batch, len)

Every token gets a score as the answer's first token and one as its last; positions outside the context
(the question, the separators, padding) are set to -inf, so softmax over a row picks a context token. The answer
is the span (s, e), s ≤ e < s + max_answer_tokens, of the highest start[s] + end[e] (``best_spans``).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from seqlab.config import Config
from seqlab.model.bert import EncoderShape
from seqlab.model.dropout import Dropout
from seqlab.model.masks import example_ids, padding_mask
from seqlab.model.transformer import Encoder, init_linear_layers


class SpanConfig(EncoderShape):
    """Span extraction: ``<sos> question <eos> context <eos>`` through the encoder, then one Linear(d_model, 2)
    scoring every context token as the answer's start and as its end. Reads SQuAD files (``format: squad``)."""

    type: Literal["span"] = "span"
    max_answer_tokens: int = Field(30, gt=0, description="the longest answer the reader proposes, in tokens "
                                                          "(SQuAD's reference code: 30)")
    init_from: str | None = Field(
        None, description="a `seqlab pretrain` run directory: start from its encoder and its tokenizer (the shape "
                          "keys must be the same)")

    def check(self, config: Config) -> None:
        if config.tokens.source.morphemes:
            raise ValueError("tokens.source.morphemes: span extraction maps tokens back to the context's "
                             "characters, which morpheme marks would move")
        super().check(config)

    def describe(self) -> str:
        return f"Transformer encoder, {self.num_layers} × {self.d_model}, span extraction"


class EncoderSpan(nn.Module):
    """``model(ids, segments, context)`` -> (start, end) logits (batch, len), -inf outside the context."""

    def __init__(self, cfg: SpanConfig, vocab_size: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(vocab_size, cfg)
        self.dropout = Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, 2)
        init_linear_layers(self)

    def spans(self, ids: torch.Tensor, segments: torch.Tensor, context: torch.Tensor, need_weights: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """ids, segments (batch, len) and ``context`` (batch, len), True at the context's tokens -> start and end
        logits (batch, len) and, if asked, each layer's self-attention (batch, heads, len, len)."""
        hidden, weights = self.encoder(ids, padding_mask(ids), need_weights, segments)  # (batch, len, d_model)
        logits = self.head(self.dropout(hidden)).float().masked_fill(~context.unsqueeze(-1), float("-inf"))
        return logits[..., 0], logits[..., 1], weights  # each (batch, len)

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        ids = example_ids(self.encoder.embed.embedding.num_embeddings)  # (2, 8): a question of 3, a context of 5
        segments = (torch.arange(ids.size(1)) >= 3).long().expand_as(ids)
        return ids, segments, segments.bool()

    def forward(self, ids: torch.Tensor, segments: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start, end, _ = self.spans(ids, segments, context)
        return start, end


def best_spans(start: torch.Tensor, end: torch.Tensor, longest: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """start, end (batch, len) log-probabilities -> the best span's first and last positions (batch,) and its
    score start[s] + end[e] (batch,), over s ≤ e < s + ``longest``."""
    length = start.size(1)
    pairs = start.unsqueeze(2) + end.unsqueeze(1)  # (batch, len s, len e)
    offsets = torch.arange(length).unsqueeze(0) - torch.arange(length).unsqueeze(1)  # e - s, (len, len)
    pairs = pairs.masked_fill(~((offsets >= 0) & (offsets < longest)), float("-inf"))
    score, flat = pairs.flatten(1).max(1)
    return flat // length, flat % length, score
