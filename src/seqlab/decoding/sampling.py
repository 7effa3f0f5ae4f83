"""Sampling (seed 002 §7.1: draw the next word from the softmax instead of taking the argmax).

The distribution can be sharpened or flattened by a temperature
(softmax(log p / T); T → 0 is greedy), cut to the k most probable words
(top-k), or to the smallest set of words whose probability reaches p
(top-p, "nucleus" sampling, Holtzman et al. 2020). A seeded generator makes
the samples reproducible.
"""

from __future__ import annotations

from typing import Any

import torch

from seqlab.decoding.greedy import Pick, decode_left_to_right
from seqlab.decoding.hypothesis import Hypothesis, log_probs
from seqlab.decoding.step import StepDecoder


def sampler(temperature: float, top_k: int, top_p: float, generator: torch.Generator) -> Pick:
    """The word picker: top-k, then top-p, on log-probabilities divided by the temperature."""

    def pick(logits: torch.Tensor) -> torch.Tensor:  # (batch, vocab) -> (batch,)
        scores = log_probs(logits)
        if temperature == 0.0:
            return scores.argmax(dim=-1)
        scores = scores / temperature
        if top_k:
            kth = scores.topk(min(top_k, scores.size(-1)), dim=-1).values[:, -1:]  # (batch, 1)
            scores = scores.masked_fill(scores < kth, -torch.inf)
        if top_p < 1.0:
            ordered, order = scores.sort(dim=-1, descending=True)
            probs = ordered.softmax(dim=-1)
            outside = probs.cumsum(dim=-1) - probs >= top_p  # the mass before this word already reaches p
            scores = scores.scatter(1, order, ordered.masked_fill(outside, -torch.inf))
        # drawn on the CPU, so that a seed gives the same samples on every device
        return torch.multinomial(scores.softmax(dim=-1).cpu(), 1, generator=generator).squeeze(1).to(scores.device)

    return pick


def sample(
    model: StepDecoder[Any],
    src: torch.Tensor,
    limits: torch.Tensor,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    need_weights: bool = False,
) -> list[list[Hypothesis]]:
    """``num_samples`` sampled outputs per sentence of src (batch, src_len); scores are the model's
    log-probabilities (at temperature 1, whatever temperature drew them)."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.arange(src.size(0), device=src.device).repeat_interleave(num_samples)  # each sentence num_samples times
    drawn = decode_left_to_right(model, src[rows], limits.to(src.device)[rows], sampler(temperature, top_k, top_p, generator),
                                 need_weights)
    return [drawn[i : i + num_samples] for i in range(0, len(drawn), num_samples)]
