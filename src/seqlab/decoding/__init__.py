"""Decoding: from a trained model and source ids to output ids, with greedy search, beam search or sampling.

``search(model, src, options)`` runs the strategy that ``DecodeOptions`` asks
for; each strategy talks to the model only through the step contract of
``step.py``.
"""

from seqlab.decoding.beam import beam_search
from seqlab.decoding.greedy import greedy_decode
from seqlab.decoding.hypothesis import Hypothesis
from seqlab.decoding.options import DecodeOptions, search
from seqlab.decoding.prefix import PrefixDecoder
from seqlab.decoding.sampling import sample
from seqlab.decoding.step import Cancelled

__all__ = ["Cancelled", "DecodeOptions", "Hypothesis", "PrefixDecoder", "beam_search", "greedy_decode", "sample",
           "search"]
