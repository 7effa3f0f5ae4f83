"""Moved to ``seqlab.predictors.translator``; this name keeps code written before working, and says so once."""

import warnings

from seqlab.predictors.translator import Translation, Translator, load

__all__ = ["Translation", "Translator", "load"]

warnings.warn("seqlab.translator is now seqlab.predictors.translator", FutureWarning, stacklevel=2)
