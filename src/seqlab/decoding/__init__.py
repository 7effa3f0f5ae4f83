"""Decoding: from a trained model and source ids to output ids, with greedy search, beam search or sampling.

``search(model, src, options)`` runs the strategy that ``DecodeOptions`` asks
for; each strategy talks to the model only through the step contract of
``step.py``. The names are imported when first used, so that the command line
reads ``DecodeOptions`` (``options.py``) without loading PyTorch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seqlab.decoding.beam import beam_search
    from seqlab.decoding.greedy import greedy_decode
    from seqlab.decoding.hypothesis import Hypothesis
    from seqlab.decoding.options import DecodeOptions
    from seqlab.decoding.prefix import PrefixDecoder
    from seqlab.decoding.run import search
    from seqlab.decoding.sampling import sample
    from seqlab.decoding.step import Cancelled, NoEnd

__all__ = ["Cancelled", "DecodeOptions", "Hypothesis", "NoEnd", "PrefixDecoder", "beam_search", "greedy_decode",
           "sample", "search"]

_WHERE = {"Cancelled": "step", "DecodeOptions": "options", "Hypothesis": "hypothesis", "NoEnd": "step",
          "PrefixDecoder": "prefix",
          "beam_search": "beam", "greedy_decode": "greedy", "sample": "sampling", "search": "run"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'seqlab.decoding' has no attribute {name!r}")
    return getattr(importlib.import_module(f"seqlab.decoding.{_WHERE[name]}"), name)
