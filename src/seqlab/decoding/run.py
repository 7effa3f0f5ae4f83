"""``search``: runs the strategy that ``DecodeOptions`` asks for over a model's step contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from seqlab.decoding.beam import beam_search
from seqlab.decoding.constraints import Constrained
from seqlab.decoding.greedy import greedy_decode
from seqlab.decoding.hypothesis import Hypothesis
from seqlab.decoding.options import DecodeOptions
from seqlab.decoding.sampling import sample
from seqlab.decoding.step import Interruptible, StepDecoder


def search(
    model: StepDecoder[Any], src: torch.Tensor, options: DecodeOptions, default_max: int, need_weights: bool = False,
    stop: Callable[[], bool] | None = None,
) -> list[list[Hypothesis]]:
    """src (batch, src_len) -> for every sentence its hypotheses, best first (nbest, or num_samples when sampling).
    ``stop``: asked before every step; once it is true the search raises ``Cancelled``."""
    limits = options.limits(src, default_max)
    if options.constrained():
        model = Constrained(model, options)
    if stop is not None:
        model = Interruptible(model, stop)
    if options.sample:
        return sample(model, src, limits, options.num_samples, options.temperature, options.top_k, options.top_p,
                      options.seed, need_weights)
    if options.beam > 1:
        return beam_search(model, src, limits, options.beam, options.nbest, options.length_penalty,
                           options.normalize, need_weights)
    return [[h] for h in greedy_decode(model, src, limits, need_weights)]
