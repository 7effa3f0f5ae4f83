"""BERT's pretraining model (seed 002 §10.1, S96–S100): the Transformer encoder with BERT's embeddings (learned
positions, segments A/B, LayerNorm), a masked-language-model head and, optionally, next-sentence prediction.

    ids, segments ─ LearnedEmbedder ─ N × EncoderLayer (GELU, post-LN) ─ hidden (batch, len, d)
        hidden at the masked positions ─ Dense + GELU + LayerNorm ─ · Embeddingᵀ + b ─ logits over the vocabulary
        hidden at <sos> ([CLS]) ─ Dense + tanh (the pooler) ─ Linear(d, 2) ─ IsNext / NotNext

The output layer of the masked-LM head is the token embedding itself (tied, as in BERT), with a bias of its
own. A classifier fine-tuned from this model (``model.init_from``) takes the encoder; the heads stay behind.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from seqlab.config import BertConfig
from seqlab.model.masks import padding_mask
from seqlab.model.transformer import LAYER_NORM_EPS, Encoder, init_linear_layers


class MaskedLMHead(nn.Module):
    """Dense(d, d) + GELU + LayerNorm, then logits through the (tied) token embedding plus a bias."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        d_model = embedding.embedding_dim
        self.dense = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
        self.embedding = embedding  # shared with the encoder, not a copy
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (..., d) -> logits (..., vocab)."""
        return self.norm(F.gelu(self.dense(hidden))) @ self.embedding.weight.t() + self.bias


class Bert(nn.Module):
    """``model.encode(ids, segments)`` -> hidden (batch, len, d); ``masked_logits(hidden, where)`` -> the masked-LM
    logits at the positions ``where`` (True); ``next_sentence_logits(hidden)`` -> (batch, 2)."""

    def __init__(self, cfg: BertConfig, vocab_size: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(vocab_size, cfg)
        self.mlm = MaskedLMHead(self.encoder.embed.embedding)
        self.pooler = nn.Linear(cfg.d_model, cfg.d_model) if cfg.next_sentence else None
        self.nsp = nn.Linear(cfg.d_model, 2) if cfg.next_sentence else None
        init_linear_layers(self)

    def encode(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """ids (batch, len) -> hidden (batch, len, d_model)."""
        return self.encoder(ids, padding_mask(ids), segments=segments)[0]

    def masked_logits(self, hidden: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """The vocabulary logits (masked positions, vocab) at ``where`` (batch, len) True, in row-major order:
        only the positions to predict go through the output layer."""
        return self.mlm(hidden[where])

    def next_sentence_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """IsNext (0) / NotNext (1) logits (batch, 2) from the pooled <sos> ([CLS]) vector."""
        if self.pooler is None or self.nsp is None:
            raise ValueError("this model was pretrained without next-sentence prediction (model.next_sentence)")
        return self.nsp(torch.tanh(self.pooler(hidden[:, 0])))
