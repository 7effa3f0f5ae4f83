"""Moved to ``seqlab.predictors.masked_lm``; this name keeps code written before working, and says so once."""

import warnings

from seqlab.predictors.masked_lm import Filled, MaskedLanguageModel, load

__all__ = ["Filled", "MaskedLanguageModel", "load"]

warnings.warn("seqlab.masked_lm is now seqlab.predictors.masked_lm", FutureWarning, stacklevel=2)
