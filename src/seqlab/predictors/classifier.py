"""A trained text classifier and its tokenizer: text in, a label and its probabilities out (seed 001, S106).

An input is read as BERT reads one sentence: ``<sos> tokens <eos>`` (``[CLS] … [SEP]``), its tokens cut to
``data.max_source_length - 2``. ``classify(texts)`` gives each text its most probable label, the softmax over
the classes (averaged with the n-gram head's where the config has ``model.ngrams``) and, if asked, the encoder's
self-attention; ``seqlab.predictors.classifier.load(RUN_DIR)`` rebuilds it from a
run directory. Training-time validation, ``seqlab eval``, ``seqlab classify`` and the server all go through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data.batching import pad
from seqlab.data.inputs import check_texts
from seqlab.model import EncoderClassifier, build_classifier, evaluating
from seqlab.model.classifier import EncoderConfig
from seqlab.model.ngrams import NgramHead
from seqlab.predictors.base import Predictor, saved_ngrams
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.specials import EOS, SOS
from seqlab.tokenizer import Tokenizer


@dataclass
class Prediction:
    """One input's result of ``Classifier.classify``."""

    label: str  # the most probable class
    probabilities: dict[str, float]  # every class's probability, in the order of the labels
    tokens: list[str]  # the model's input pieces, <sos> and <eos> included
    attention: torch.Tensor | None = None  # (layers, heads, tokens, tokens) when asked for
    truncated: bool = False  # the text was longer than the model reads (``max_tokens``) and was cut


class Classifier(Predictor):
    model: EncoderClassifier
    kind = "classifier"

    def __init__(self, model: EncoderClassifier, tokenizer: Tokenizer, labels: Sequence[str], config: Config,
                 runtime: Runtime | None = None, ngrams: NgramHead | None = None) -> None:
        super().__init__(model, config, runtime)
        self.tokenizer = tokenizer
        self.labels = list(labels)
        self.ngrams = ngrams  # model.ngrams' head, fitted (training sets it once it is)

    @classmethod
    def from_run(cls, run: RunDir, config: Config, runtime: Runtime) -> Classifier:
        """The classifier of a ``seqlab train`` run whose ``model.type`` is ``encoder``."""
        assert isinstance(config.model, EncoderConfig)
        tokenizer, _ = run.tokenizers()
        labels = run.labels()
        model = build_classifier(config.model, tokenizer.vocab_size, len(labels))
        run.load_model(model)
        ngrams = None if config.model.ngrams is None else saved_ngrams(run, NgramHead, config.model.ngrams)
        return cls(runtime.place(model), tokenizer, labels, config, runtime, ngrams)

    def encode(self, texts: Sequence[str], what: str = "input") -> list[list[int]]:
        """``<sos>`` + token ids + ``<eos>``, the tokens cut to ``max_tokens`` (with a warning)."""
        return self._encode(texts, what)[0]

    def _encode(self, texts: Sequence[str], what: str) -> tuple[list[list[int]], list[bool]]:
        """``encode``, and whether each text was cut."""
        check_texts(texts, "classify")
        kept, cut = self.cut(self.tokenizer.encode(list(texts)), self.max_tokens, f"{what} texts")
        return [[SOS, *ids, EOS] for ids in kept], cut

    @property
    def max_tokens(self) -> int:
        """The most tokens of a text the model reads (``data.max_source_length`` less <sos> and <eos>)."""
        return self.config.data.max_source_length - 2

    def label_ids(self, labels: Sequence[str], what: str) -> list[int]:
        """Class indices of label strings; a label the model does not know is an error naming it."""
        index = {label: i for i, label in enumerate(self.labels)}
        unknown = sorted(set(labels) - index.keys())
        if unknown:
            raise ValueError(f"{what}: label {unknown[0]!r} is not one of the model's classes ({', '.join(self.labels)})")
        return [index[label] for label in labels]

    def probabilities(self, texts: Sequence[str], ids: Sequence[Sequence[int]]) -> np.ndarray:
        """(texts, classes) class probabilities of ``texts``, encoded as ``ids``: the encoder's, averaged with the
        n-gram head's where the model has one (``NgramHead.average``)."""
        return self._with_head(self.probabilities_ids(ids), texts)

    def _with_head(self, encoder: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """The encoder's (texts, classes) probabilities, averaged with the n-gram head's where there is one."""
        return encoder if self.ngrams is None else self.ngrams.average(encoder, texts)

    def probabilities_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """(inputs, classes) the encoder's softmax of encoded inputs, in batches of similar length
        (``Predictor.batched``)."""

        def probabilities(batch: list[int]) -> np.ndarray:
            inputs = pad([ids[i] for i in batch])  # (batch, len)
            with torch.no_grad(), self.autocast(tokens=inputs.numel()):  # thread-local: set on the thread that computes
                logits = self.model(inputs.to(self.device))  # (batch, classes)
            return torch.softmax(logits.float(), -1).cpu().numpy()

        out = np.zeros((len(ids), len(self.labels)), dtype=np.float64)
        for batch, of_batch in self.batched([len(x) for x in ids], probabilities):
            out[batch] = of_batch
        return out

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable label of every text."""
        return [self.labels[i] for i in self.probabilities(texts, self.encode(texts)).argmax(1)]

    def classify(self, texts: Sequence[str], need_weights: bool = False) -> list[Prediction]:
        """Every text's label and class probabilities; with ``need_weights``, the self-attention of every layer
        (then one text at a time, so that the maps hold no padding). An empty or whitespace-only text has no
        label: its prediction is empty (label "", no probabilities, no tokens)."""
        return self.each_text(texts, lambda kept: self._classify(kept, need_weights), Prediction("", {}, []),
                              "classify")

    @torch.no_grad()
    def _classify(self, texts: Sequence[str], need_weights: bool) -> list[Prediction]:
        ids, cut = self._encode(texts, "input")
        if need_weights:
            encoder, weights = self._with_weights(ids)
            probabilities = self._with_head(encoder, texts)
        else:
            probabilities, weights = self.probabilities(texts, ids), [None] * len(ids)
        return [Prediction(self.labels[int(p.argmax())], dict(zip(self.labels, map(float, p))),
                           self.tokenizer.tokens_from_ids(row), w, truncated)
                for row, p, w, truncated in zip(ids, probabilities, weights, cut)]

    def _with_weights(self, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[torch.Tensor | None]]:
        """(inputs, classes) softmax and each input's attention (layers, heads, len, len), one input at a time."""
        probabilities = np.zeros((len(ids), len(self.labels)), dtype=np.float64)
        weights: list[torch.Tensor | None] = []
        with evaluating(self.model):
            for i, row in enumerate(ids):
                with self.autocast(tokens=len(row)):
                    logits, layers = self.model.classify(torch.tensor([row], device=self.device),
                                                         need_weights=True)  # (1, classes)
                probabilities[i] = torch.softmax(logits[0].float(), -1).cpu().numpy()
                weights.append(torch.stack([w[0].float() for w in layers]).cpu())
        return probabilities, weights


def class_labels(labels: Sequence[str]) -> list[str]:
    """The classes of a training split's labels, in a fixed order: numbers by value ("2" before "10"), then the
    rest alphabetically."""
    return sorted(set(labels), key=lambda label: (0, int(label), "") if label.isdigit() else (1, 0, label))


load = Classifier.load
