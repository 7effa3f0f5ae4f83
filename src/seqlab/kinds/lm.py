"""Language models (seed 002 ch. 5–6): an LSTM (the book's Rnnlm / BetterRnnlm) or a causal Transformer over one
token stream, scored by perplexity and used to score and continue texts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqlab.registry import Kind, register


class LanguageModels(Kind):
    name = "lm"
    noun = "a language model"
    use = "seqlab generate or seqlab score"
    model_types = ("lm", "transformer_lm")

    def family(self) -> Any:
        from seqlab.train.family.stream import StreamLM

        return StreamLM

    def load(self, run_dir: Path, int8: bool = False) -> Any:
        from seqlab.predictors.language_model import LanguageModel

        return LanguageModel.load(run_dir)

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 int8: bool = False) -> dict[str, Any]:
        """Loss and perplexity over the split's whole token stream."""
        from seqlab.data import load_sentence_splits, resolve_data_dir

        lm = self.load(run_dir)
        return lm.perplexity(load_sentence_splits(lm.config.data, resolve_data_dir(data_dir)).require(split))

    def serve(self, run_dir: Path, limits: Any, engine: str) -> tuple[dict[str, Any], Callable[[Any, Any], None]]:
        from seqlab.server import lm as page

        lm = self.load(run_dir)
        return page.info(run_dir, lm, limits), lambda app, worker: page.add_routes(app, worker, lm)

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import lm

        return [("generate", lm.generate), ("score", lm.score)]


register(LanguageModels())
