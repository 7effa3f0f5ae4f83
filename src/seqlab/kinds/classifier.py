"""Text classifiers (seed 001, S106): a Transformer encoder pooled into one label per text, from scratch or from
a pretrained BERT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.corpora import PAIRS
from seqlab.registry import InferenceOptions, Kind, register


class Classifiers(Kind):
    name = "classifier"
    noun = "a classifier"
    use = "seqlab classify"
    model_types = ("encoder",)
    formats = PAIRS  # texts with their labels
    metrics = ("accuracy", "macro_f1", "loss")
    best_metric = "macro_f1"
    prepares = True

    def sections(self) -> dict[str, type[Any]]:
        from seqlab.model.classifier import EncoderConfig

        return {"encoder": EncoderConfig}

    def family(self) -> Any:
        from seqlab.train.family.classification import Classification

        return Classification

    def predictor(self) -> Any:
        from seqlab.predictors.classifier import Classifier

        return Classifier

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """Loss, accuracy, macro and micro precision, recall and F1, per class, and the confusion matrix."""
        from seqlab.data import load_splits, resolve_data_dir
        from seqlab.evaluate import LabelledSplit, evaluate_classifier

        classifier = self.load(run_dir, how)
        pairs = load_splits(classifier.config.data, resolve_data_dir(data_dir)).require(split)
        return evaluate_classifier(classifier, LabelledSplit.build(classifier, pairs, split))

    def page(self) -> Any:
        from seqlab.server import classify

        return classify

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import classify

        return [("classify", classify.classify)]


register(Classifiers())
