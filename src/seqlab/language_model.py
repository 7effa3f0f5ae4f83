"""Moved to ``seqlab.predictors.language_model``; this name keeps code written before working, and says so once."""

import warnings

from seqlab.predictors.language_model import Generation, LanguageModel, load

__all__ = ["Generation", "LanguageModel", "load"]

warnings.warn("seqlab.language_model is now seqlab.predictors.language_model", FutureWarning, stacklevel=2)
