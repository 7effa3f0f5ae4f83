"""Language models (seed 002 ch. 5–6): an LSTM (the book's Rnnlm / BetterRnnlm) or a causal Transformer over one
token stream, scored by perplexity and used to score and continue texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.corpora import PAIRS
from seqlab.registry import InferenceOptions, Kind, register


class LanguageModels(Kind):
    name = "lm"
    noun = "a language model"
    use = "seqlab generate or seqlab score"
    model_types = ("lm", "transformer_lm")
    formats = (*PAIRS, "lines")  # sentences: the lines of a lines corpus, or both sides of a pair corpus
    prepares = True

    def sections(self) -> dict[str, type[Any]]:
        from seqlab.model.lm import LMConfig
        from seqlab.model.transformer_lm import TransformerLMConfig

        return {"lm": LMConfig, "transformer_lm": TransformerLMConfig}

    def family(self) -> Any:
        from seqlab.train.family.stream import StreamLM

        return StreamLM

    def predictor(self) -> Any:
        from seqlab.predictors.language_model import LanguageModel

        return LanguageModel

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """Loss and perplexity over the split's whole token stream."""
        from seqlab.data import load_sentence_splits, resolve_data_dir

        lm = self.load(run_dir, how)
        return lm.perplexity(load_sentence_splits(lm.config.data, resolve_data_dir(data_dir)).require(split))

    def page(self) -> Any:
        from seqlab.server import lm

        return lm

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import lm

        return [("generate", lm.generate), ("score", lm.score)]


register(LanguageModels())
