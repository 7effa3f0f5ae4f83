"""Span extraction (seed 002 §10.1, S102–S103): a Transformer encoder that answers a question by cutting the answer
out of its context (SQuAD's files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.registry import InferenceOptions, Kind, register


class SpanExtractors(Kind):
    name = "span"
    noun = "a span extractor"
    use = "seqlab answer"
    model_types = ("span",)
    formats = ("squad",)
    metrics = ("exact_match", "f1", "loss")
    best_metric = "f1"

    def sections(self) -> dict[str, type[Any]]:
        from seqlab.model.span import SpanConfig

        return {"span": SpanConfig}

    def family(self) -> Any:
        from seqlab.train.family.span import SpanExtraction

        return SpanExtraction

    def predictor(self) -> Any:
        from seqlab.predictors.answerer import Answerer

        return Answerer

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """The loss and SQuAD's exact match and F1."""
        from seqlab.data import resolve_data_dir
        from seqlab.data.splits import load_question_splits
        from seqlab.evaluate import QuestionSplit, evaluate_answerer

        answerer = self.load(run_dir, how)
        questions = load_question_splits(answerer.config.data, resolve_data_dir(data_dir)).require(split)
        return evaluate_answerer(answerer, QuestionSplit.build(answerer, questions, split))

    def page(self) -> Any:
        from seqlab.server import answer

        return answer

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import classify

        return [("answer", classify.answer)]


register(SpanExtractors())
