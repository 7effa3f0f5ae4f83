"""A causal Transformer language model: the decoder blocks of ``transformer.py`` without cross-attention.

    ids (B, T) -> Embedding·√d_model + PE -> dropout -> N × [masked self-attention, FFN] -> (LayerNorm) -> Linear

It reads the same truncated-BPTT batches as the RNN LM (``data.stream``), but carries nothing from one batch
to the next: its context is the ``train.time_size`` positions of its window (the state it returns is None).
Generation keeps each layer's self-attention keys and values (the cache of seq2seq decoding), so every step
computes only the new position; the context may grow to ``model.max_length`` positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

import torch
from pydantic import Field
from torch import nn

from seqlab.config import Config
from seqlab.model.cache import Cache, KVCache, searching
from seqlab.model.kneser_ney import NGRAMS, KneserNeyConfig, described
from seqlab.model.masks import example_ids, look_ahead_mask
from seqlab.model.transformer import (
    LAYER_NORM_EPS,
    DecoderLayer,
    Embedder,
    LayerProjections,
    TransformerShape,
    init_linear_layers,
)
from seqlab.specials import PAD


class TransformerLMConfig(TransformerShape):
    """A causal Transformer language model: the decoder blocks without cross-attention; ``max_length`` is the
    longest context."""

    type: Literal["transformer_lm"] = "transformer_lm"
    tie_weights: bool = Field(True, description="the output layer's weight is the embedding matrix")
    ngrams: KneserNeyConfig | None = Field(None, description=NGRAMS)

    def check(self, config: Config) -> None:
        if config.train.time_size + 1 > self.max_length:
            raise ValueError(f"model.max_length ({self.max_length}) must cover train.time_size + 1 "
                             f"({config.train.time_size + 1})")
        config.refuse_warmup("language models use train.schedule: constant, cosine, linear or plateau")
        if config.train.carry_state:
            raise ValueError("train.carry_state: a causal Transformer carries no state from one batch to the next")

    def describe(self) -> str:
        return f"causal Transformer language model, {self.num_layers} × {self.d_model}{described(self.ngrams)}"

    def build(self, vocab_size: int) -> TransformerLM:
        return TransformerLM(self, vocab_size)


class TransformerLM(nn.Module):
    def __init__(self, cfg: TransformerLMConfig, vocab_size: int) -> None:
        super().__init__()
        self.max_length = cfg.max_length
        self.embed = Embedder(vocab_size, cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg, cross=False) for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPS) if cfg.norm == "pre" else nn.Identity()
        self.output = nn.Linear(cfg.d_model, vocab_size)
        init_linear_layers(self)
        if cfg.tie_weights:
            self.output.weight = self.embed.embedding.weight

    def _run(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[KVCache]]:
        """ids (B, T) -> logits (B, T, V) and every layer's K, V of the T positions (the cache ``step`` extends)."""
        self._fits(ids.size(1))
        x = self.embed(ids)  # (B, T, d_model)
        mask = look_ahead_mask(ids) if ids.size(1) > 1 else None
        present = []
        for layer in self.layers:
            x, _, kv = layer(x, None, mask, None)
            present.append(KVCache.of(*kv))
        return self.output(self.final_norm(x)), present

    def _fits(self, positions: int) -> None:
        """A context of ``positions`` must fit the positional table."""
        if positions > self.max_length:
            raise ValueError(f"a context of {positions} positions exceeds model.max_length ({self.max_length})")

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        return (example_ids(self.embed.embedding.num_embeddings),)

    def forward(self, ids: torch.Tensor, state: None = None) -> tuple[torch.Tensor, None]:
        """ids (B, T) -> logits (B, T, V); the state is always None (nothing is carried between batches)."""
        return self._run(ids)[0], None

    @staticmethod
    def detach(state: None) -> None:
        return None

    # --- generation: the step contract of seqlab.decoding ------------------------------------------------

    def start(self, src: torch.Tensor) -> TransformerLMState:
        """src (B, P): prompts of one length (``<eos>`` then their words) -> the cache after them and the
        logits of the word that follows."""
        if (src == PAD).any():
            raise ValueError("the prompts of one batch must have the same length")
        logits, prompt = self._run(src)
        past = [searching(cache.k, cache.v) for cache in prompt]
        return TransformerLMState(past, logits[:, -1], [cast(DecoderLayer, layer).projections() for layer in self.layers])

    def step(self, ids: torch.Tensor, state: TransformerLMState,
             need_weights: bool = False) -> tuple[torch.Tensor, TransformerLMState, None]:
        if state.pending is not None:
            return state.pending, TransformerLMState(state.past, None, state.projections), None
        offset = state.past[0].length
        self._fits(offset + 1)
        x = self.embed(ids[:, None], offset)[:, 0]  # (B, d_model)
        past = []
        for layer, cache, projections in zip(self.layers, state.past, state.projections):
            x, _, cache = cast(DecoderLayer, layer).extend(x, cache, None, None, projections)
            past.append(cache)
        return self.output(self.final_norm(x)), TransformerLMState(past, None, state.projections), None


@dataclass(frozen=True)
class TransformerLMState:
    past: Sequence[Cache]  # per layer, each (B, heads, positions, depth)
    pending: torch.Tensor | None  # (B, V): the logits after the prompt, before the first step
    projections: list[LayerProjections]  # per layer: its linear maps fixed for the search

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> TransformerLMState:
        past = [cache.select(rows) for cache in self.past]
        return TransformerLMState(past, None if self.pending is None else self.pending.index_select(0, rows),
                                  self.projections)

    def beams(self, k: int) -> TransformerLMState:
        """Each prompt's row k times in a row."""
        rows = self.past[0].rows
        return self.select(torch.arange(rows, device=self.past[0].k.device).repeat_interleave(k))
