"""BERT's pretraining model (seed 002 §10.1, S96–S100): the Transformer encoder with BERT's embeddings (learned
positions, segments A/B, LayerNorm), a masked-language-model head and, optionally, next-sentence prediction.

    ids, segments ─ LearnedEmbedder ─ N × EncoderLayer (GELU, post-LN) ─ hidden (batch, len, d)
        hidden at the masked positions ─ Dense + GELU + LayerNorm ─ · Embeddingᵀ + b ─ logits over the vocabulary
        hidden at <sos> ([CLS]) ─ Dense + tanh (the pooler) ─ Linear(d, 2) ─ IsNext / NotNext

The output layer of the masked-LM head is the token embedding itself (tied, as in BERT), with a bias of its
own. A classifier fine-tuned from this model (``model.init_from``) takes the encoder; the heads stay behind.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from seqlab.config import Config
from seqlab.model.masks import example_ids, padding_mask
from seqlab.model.transformer import LAYER_NORM_EPS, Embedder, Encoder, LearnedEmbedder, TransformerShape, init_linear_layers

# The seed's BERT shapes (S96): BASE 12 layers, 12 heads (110 M parameters); LARGE 24 layers, 16 heads (340 M).
BERT_PRESETS: dict[str, dict[str, int]] = {
    "bert_base": {"d_model": 768, "num_layers": 12, "num_heads": 12, "d_ff": 3072},
    "bert_large": {"d_model": 1024, "num_layers": 24, "num_heads": 16, "d_ff": 4096},
}
# What BERT's encoder is besides its size (S100): learned positions over 512, two segments, GELU, post-LN,
# dropout 0.1 on embeddings, sublayers and attention weights.
BERT_EMBEDDING = {"positions": "learned", "segments": 2, "activation": "gelu", "norm": "post", "max_length": 512,
                  "dropout": 0.1, "attention_dropout": 0.1}


class EncoderShape(TransformerShape):
    """The Transformer encoder stack of the encoder-only models (``encoder``, ``span``, ``bert``): its size, its
    embeddings (the seed's √d_model-scaled tokens + sinusoidal PE, or BERT's learned positions and segments with
    a LayerNorm) and its FFN's activation. ``preset`` takes BERT's shape; keys given beside it win."""

    preset: Literal["bert_base", "bert_large"] | None = Field(
        None, description="BERT-base (12 layers, 12 heads, 768) or BERT-large (24, 16, 1024), with BERT's "
                          "embeddings, GELU and post-LN (S96, S100)")
    positions: Literal["sinusoidal", "learned"] = Field(
        "sinusoidal", description="the seed's fixed PE added to √d_model-scaled tokens, or BERT's learned "
                                  "position (and segment) embeddings summed and layer-normalised")
    segments: int = Field(0, ge=0, description="learned segment embeddings (BERT's sentence A / B: 2); 0: none")
    activation: Literal["relu", "gelu"] = Field("relu", description="the FFN's: the seed's ReLU or BERT's GELU")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") in BERT_PRESETS:
            return BERT_EMBEDDING | BERT_PRESETS[data["preset"]] | data
        return data

    @model_validator(mode="after")
    def _segments(self) -> EncoderShape:
        if self.segments and self.positions != "learned":
            raise ValueError("model.segments are BERT's learned embeddings: they need model.positions learned")
        return self

    def check(self, config: Config) -> None:
        config.refuse_warmup("encoder-only models use train.schedule: constant, cosine or linear")
        if config.data.max_source_length > self.max_length:
            raise ValueError(f"model.max_length ({self.max_length}) must cover data.max_source_length "
                             f"({config.data.max_source_length})")

    def ffn_activation(self) -> Literal["relu", "gelu"]:
        return self.activation

    def embedder(self, vocab_size: int) -> Embedder | LearnedEmbedder:
        """The seed's embedding + PE, or BERT's learned positions (and segments)."""
        if self.positions == "learned":
            return LearnedEmbedder(vocab_size, self, self.segments)
        return Embedder(vocab_size, self)


class BertConfig(EncoderShape):
    """BERT's pretraining (seed 002 §10.1, S96–S100): the encoder under a masked-language-model head, and
    optionally next-sentence prediction. Trained by ``seqlab pretrain``; a classifier starts from it with
    ``model.init_from``. Defaults: a small encoder with BERT's embeddings, GELU and post-LN."""

    type: Literal["bert"] = "bert"
    norm: Literal["post", "pre"] = "post"
    positions: Literal["sinusoidal", "learned"] = "learned"
    segments: int = Field(2, ge=0)
    activation: Literal["relu", "gelu"] = "gelu"
    attention_dropout: float = Field(0.1, ge=0, lt=1)
    mask_probability: float = Field(0.15, gt=0, lt=1, description="the share of tokens to predict (BERT's 15 %)")
    mask_split: tuple[float, float, float] = Field(
        (0.8, 0.1, 0.1), description="of the tokens to predict, the shares replaced by <mask>, by a random token "
                                     "and left unchanged (BERT's 80 / 10 / 10)")
    next_sentence: bool = Field(
        False, description="also next-sentence prediction: pairs (A, B) of a pair corpus, B replaced by a random "
                           "B half of the time, read from <sos> (BERT's NSP)")

    @model_validator(mode="after")
    def _split(self) -> BertConfig:
        if abs(sum(self.mask_split) - 1) > 1e-6 or min(self.mask_split) < 0:
            raise ValueError(f"model.mask_split must be three shares summing to 1, got {list(self.mask_split)}")
        if self.next_sentence and self.segments < 2:
            raise ValueError("model.next_sentence reads sentence pairs: it needs model.segments 2")
        return self

    def check(self, config: Config) -> None:
        if self.next_sentence:
            config.refuse_lines()  # next-sentence prediction reads pairs
            if config.data.prepared is not None:
                raise ValueError("data.prepared: next-sentence prediction draws its pairs across the whole split "
                                 "every epoch, which a prepared directory does not serve; set "
                                 "model.next_sentence: false or train from the corpus")
        super().check(config)

    def describe(self) -> str:
        return f"BERT encoder, {self.num_layers} × {self.d_model}, masked language model"


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
    logits at the positions ``where`` (True); ``next_sentence_logits(hidden)`` -> (batch, 2); ``model(ids)``: the
    masked-LM logits at every position (batch, len, vocab)."""

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

    def forward(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """ids (batch, len) -> the masked-LM logits at every position (batch, len, vocab)."""
        return self.mlm(self.encode(ids, segments))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        return (example_ids(self.encoder.embed.embedding.num_embeddings),)

    def masked_logits(self, hidden: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """The vocabulary logits (masked positions, vocab) at ``where`` (batch, len) True, in row-major order:
        only the positions to predict go through the output layer."""
        return self.mlm(hidden[where])

    def next_sentence_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """IsNext (0) / NotNext (1) logits (batch, 2) from the pooled <sos> ([CLS]) vector."""
        if self.pooler is None or self.nsp is None:
            raise ValueError("this model was pretrained without next-sentence prediction (model.next_sentence)")
        return self.nsp(torch.tanh(self.pooler(hidden[:, 0])))
