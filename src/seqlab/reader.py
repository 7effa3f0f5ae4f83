"""Moved to ``seqlab.predictors.answerer``; this name keeps code written before working, and says so once."""

import warnings

from seqlab.predictors.answerer import Answer, Answerer, load

Reader = Answerer  # its name before

__all__ = ["Answer", "Answerer", "load", "Reader"]

warnings.warn("seqlab.reader is now seqlab.predictors.answerer", FutureWarning, stacklevel=2)
