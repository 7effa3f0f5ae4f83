"""Text classification with the Transformer's encoder alone (seed 001, S106; BERT's fine-tuning, seed 002 §10.1).

    ids ─ Embedding·√d_model + PE ─ N × EncoderLayer ─ pool ─ dropout ─ Linear(d_model, classes) ─ logits

Every input is ``<sos> tokens <eos>`` (BERT's ``[CLS] … [SEP]``). The sentence's vector is the encoder's output
at ``<sos>`` (``pooling: cls``, BERT's) or the mean over the non-padding positions (``pooling: mean``); one
classification layer reads it, "1 classification layer for fine-tuning" (seed 002 §10.1).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from seqlab.model.bert import EncoderShape
from seqlab.model.dropout import Dropout
from seqlab.model.masks import example_ids, padding_mask
from seqlab.model.ngrams import NgramConfig
from seqlab.model.transformer import Encoder, init_linear_layers


class EncoderConfig(EncoderShape):
    """The Transformer's encoder alone, pooled into one vector, then one Linear to the classes: seed 001's text
    classification (S106), BERT's fine-tuning (S96). Reads pairs whose target is a label."""

    type: Literal["encoder"] = "encoder"
    pooling: Literal["cls", "mean"] = Field(
        "mean", description="the sentence's vector: the encoder's output at a <sos> put before every input (BERT's "
                            "[CLS]), or the mean over the input's tokens")
    init_from: str | None = Field(
        None, description="a `seqlab pretrain` run directory: start from its encoder and its tokenizer (the shape "
                          "keys must be the same)")
    ngrams: NgramConfig | None = Field(
        None, description="an n-gram head beside the encoder (TF-IDF + logistic regression, fitted on the training "
                          "texts), its class probabilities averaged with the encoder's (seqlab.model.ngrams)")

    def describe(self) -> str:
        head = f", with a TF-IDF n-gram head (weight {self.ngrams.weight})" if self.ngrams else ""
        return f"Transformer encoder, {self.num_layers} × {self.d_model}, pooling {self.pooling}{head}"


class EncoderClassifier(nn.Module):
    """``model(src)`` -> logits (batch, classes); no softmax."""

    def __init__(self, cfg: EncoderConfig, vocab_size: int, num_classes: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(vocab_size, cfg)
        self.dropout = Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, num_classes)
        init_linear_layers(self)

    def pool(self, hidden: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """hidden (batch, len, d_model) -> (batch, d_model): the <sos> position, or the mean over the tokens."""
        if self.cfg.pooling == "cls":
            return hidden[:, 0]
        keep = (~padding_mask(src)[:, 0, 0]).unsqueeze(-1).to(hidden.dtype)  # (batch, len, 1)
        return (hidden * keep).sum(1) / keep.sum(1)

    def classify(self, src: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """src (batch, len) -> logits (batch, classes) and, if asked, each layer's self-attention weights
        (batch, heads, len, len)."""
        hidden, weights = self.encoder(src, padding_mask(src), need_weights)  # (batch, len, d_model)
        return self.head(self.dropout(self.pool(hidden, src))), weights

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        return (example_ids(self.encoder.embed.embedding.num_embeddings),)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return self.classify(src)[0]
