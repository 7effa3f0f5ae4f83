"""Decoding: from a trained model and source ids to output ids, with greedy search, beam search or sampling.

``decode(model, src, options)`` picks the strategy that ``DecodeOptions`` asks
for; each strategy talks to the model only through the step contract in
``hypothesis.py``.
"""

from seqlab.decoding.beam import beam_search
from seqlab.decoding.greedy import greedy_decode
from seqlab.decoding.hypothesis import Hypothesis
from seqlab.decoding.options import DecodeOptions, decode
from seqlab.decoding.prefix import PrefixDecoder
from seqlab.decoding.sampling import sample

__all__ = ["DecodeOptions", "Hypothesis", "PrefixDecoder", "beam_search", "decode", "greedy_decode", "sample"]
