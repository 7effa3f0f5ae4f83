"""Moved to ``seqlab.predictors.classifier``; this name keeps code written before working, and says so once."""

import warnings

from seqlab.predictors.classifier import Classifier, Prediction, class_labels, load

__all__ = ["Classifier", "Prediction", "class_labels", "load"]

warnings.warn("seqlab.classifier is now seqlab.predictors.classifier", FutureWarning, stacklevel=2)
