"""BERT's pretraining (seed 002 §10.1): masked tokens and, optionally, next sentences; a classifier or a span
extractor then starts from the run (``model.init_from``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.corpora import PAIRS
from seqlab.registry import InferenceOptions, Kind, register


class Bert(Kind):
    name = "bert"
    noun = "a pretrained BERT"
    use = "seqlab fill-mask"
    model_types = ("bert",)
    trained_by = "pretrain"
    formats = (*PAIRS, "lines")  # lines only without next-sentence prediction (BertConfig.check)
    prepares = True

    def sections(self) -> dict[str, type[Any]]:
        from seqlab.model.bert import BertConfig

        return {"bert": BertConfig}

    def family(self) -> Any:
        from seqlab.train.family.masked import MaskedLM

        return MaskedLM

    def predictor(self) -> Any:
        from seqlab.predictors.masked_lm import MaskedLanguageModel

        return MaskedLanguageModel

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """The masked tokens' loss, perplexity and accuracy (masks from a fixed seed), and next-sentence accuracy."""
        import numpy as np

        from seqlab.data import load_sentence_splits, load_splits, resolve_data_dir

        mlm = self.load(run_dir, how)
        data = resolve_data_dir(data_dir)
        texts: list[str] | list[tuple[str, str]] = (
            load_splits(mlm.config.data, data).require(split) if mlm.bert.next_sentence
            else load_sentence_splits(mlm.config.data, data).require(split))
        return mlm.scores(mlm.examples(texts, np.random.default_rng(0)))

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import classify

        return [("fill-mask", classify.fill_mask)]


register(Bert())
