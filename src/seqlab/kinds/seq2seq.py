"""Seq2seq models (seed 002 ch. 7–8, seed 003): a Transformer or an RNN encoder-decoder that turns a source text
into a target text, trained on pairs by teacher forcing and used by decoding (greedy, beam search, sampling)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.corpora import PAIRS
from seqlab.registry import InferenceOptions, Kind, register


class Seq2seqModels(Kind):
    name = "seq2seq"
    noun = "a seq2seq model"
    use = "seqlab translate or seqlab chat"
    model_types = ("transformer", "rnn")
    formats = PAIRS
    metrics = ("exact_match", "bleu", "loss")
    best_metric = "bleu"
    shapes_sources = True
    prepares = True
    cleans = True

    def sections(self) -> dict[str, type[Any]]:
        from seqlab.model.rnn import RNNConfig
        from seqlab.model.transformer import TransformerConfig

        return {"transformer": TransformerConfig, "rnn": RNNConfig}

    def family(self) -> Any:
        from seqlab.train.family.seq2seq import Transduction

        return Transduction

    def load(self, run_dir: Path, how: InferenceOptions = InferenceOptions()) -> Any:  # noqa: B008 (frozen)
        """A run directory's model, or the directory of ``seqlab export`` for ``how.engine`` (``ct2``, ``onnx``)."""
        from seqlab.export import load_translator

        return load_translator(run_dir, how.engine, how.int8, how.workers)  # type: ignore[arg-type]

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        """Loss, perplexity, exact match (also over sources and targets unseen in training) and sacreBLEU."""
        from seqlab.data import load_splits, resolve_data_dir
        from seqlab.evaluate import EncodedSplit, evaluate
        from seqlab.metrics import bleu_signature

        translator = self.load(run_dir, how)
        splits = load_splits(translator.config.data, resolve_data_dir(data_dir))
        encoded = EncodedSplit.build(translator, splits.require(split), split)
        seen = None if split == "train" else splits["train"]
        metrics = evaluate(translator, encoded, translator.config.train.batch_tokens, options=options, seen=seen)
        return metrics | {"bleu_signature": bleu_signature(), "bleu_lowercase_signature": bleu_signature(lowercase=True)}

    def page(self) -> Any:
        from seqlab.server import translate

        return translate

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import export, use

        return [("translate", use.translate), ("chat", use.chat), ("export", export.export)]


register(Seq2seqModels())
