"""Scores of a model on a split. A seq2seq model: teacher-forced loss and perplexity, then decoded outputs
(greedy unless asked otherwise) scored by exact match and BLEU against the references. A classifier: loss,
accuracy, precision, recall, F1 and the confusion matrix of its most probable labels. A span extractor: loss,
SQuAD's exact match and F1 of its best spans."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.data import Pair
from seqlab.data.batching import collate, length_batches
from seqlab.data.prepared import Prepared
from seqlab.data.squad import Question
from seqlab.decoding import DecodeOptions
from seqlab.loss import token_nll_sum
from seqlab.metrics import classification_scores, corpus_bleu, exact_match, seen_form, span_scores
from seqlab.model import evaluating
from seqlab.predictors.answerer import Answerer, Encoded, answer_spans
from seqlab.predictors.classifier import Classifier
from seqlab.predictors.translator import Translator
from seqlab.specials import PAD


@dataclass
class EncodedSplit:
    """A split's text and its token ids, encoded once through the translator's tokenizers."""

    sources: Sequence[str]
    references: Sequence[str]  # normalised as the model would write them
    src: Sequence[Sequence[int]]  # lists, or a prepared directory's rows read a window at a time (``prepared.Rows``)
    trg: Sequence[Sequence[int]]

    @classmethod
    def build(cls, translator: Translator, pairs: list[Pair], name: str) -> EncodedSplit:
        sources = [s for s, _ in pairs]
        targets = [t for _, t in pairs]
        return cls(
            sources=sources,
            references=[translator.normalize_target(t) for t in targets],
            src=translator.encode_sources(sources, name),
            trg=translator.encode_targets(targets, name),
        )

    @classmethod
    def prepared(cls, translator: Translator, prepared: Prepared, name: str, window: int = 4) -> EncodedSplit:
        """The split as ``seqlab data prepare`` encoded it (``build``'s ids and texts), memory-mapped, ``window``
        chunks of ids read at a time; a text made a string (a reference normalised) when it is read."""
        return cls(prepared.texts(name, "source"), prepared.texts(name, "target", translator.normalize_target),
                   prepared.ids(name, "src", window), prepared.ids(name, "trg", window))


@torch.no_grad()
def teacher_forced(translator: Translator, split: EncodedSplit, batch_tokens: int
                   ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The split in batches of ``batch_tokens``, each read with teacher forcing (the decoder given the true target
    before every position): its logits (batch, len, vocab) and the targets they predict (batch, len), PAD after."""
    model = translator.model
    with evaluating(model):
        for indices in length_batches([len(s) for s in split.src], [len(t) for t in split.trg], batch_tokens, seed=0):
            batch = collate([split.src[i] for i in indices], [split.trg[i] for i in indices],
                            translator.target_eos).to(translator.device)
            with translator.autocast():
                logits = model(batch.src, batch.trg_in)
            yield logits, batch.trg_out


def teacher_forced_loss(translator: Translator, split: EncodedSplit, batch_tokens: int) -> float:
    """Mean cross-entropy per target token (no label smoothing)."""
    total, tokens = 0.0, 0
    for logits, targets in teacher_forced(translator, split, batch_tokens):
        total += float(token_nll_sum(logits, targets))
        tokens += int((targets != PAD).sum())
    return total / max(tokens, 1)


def evaluate(
    translator: Translator,
    split: EncodedSplit,
    batch_tokens: int,
    decode_limit: int | None = None,
    options: DecodeOptions | None = None,
    seen: Sequence[Pair] | None = None,
) -> dict:
    """{'loss', 'perplexity', 'perplexity_per_character', 'exact_match', 'bleu', 'bleu_lowercase', 'sentences'};
    ``decode_limit`` caps the decoded sentences, ``options`` chooses how to decode them (by default as the run's
    ``eval.beam`` and ``eval.length_penalty`` say: ``Predictor.decoding``).

    Perplexity per character, ``exp(total NLL / characters)`` with one end of sentence counted per reference,
    does not depend on the tokenizer, so it compares models with different vocabularies (perplexity per token
    does not).

    With ``seen`` (the training pairs) also 'exact_match_unseen' over the 'unseen_sentences' whose source is not a
    training source, and 'exact_match_unseen_target' over the 'unseen_target_sentences' whose reference is not a
    training target (the date task: days that training wrote in no format), both compared in
    :func:`~seqlab.metrics.seen_form`. The book's date.txt split repeats 28 % of its test sources in training."""
    loss = teacher_forced_loss(translator, split, batch_tokens)
    n = len(split.src) if decode_limit is None else min(decode_limit, len(split.src))
    hypotheses = translator.translate_ids(split.src[:n], options)
    references = split.references[:n]
    tokens = sum(len(t) + translator.target_eos for t in split.trg)  # + <eos>, as the loss counts them
    characters = sum(len(r) + 1 for r in split.references)  # + one end of sentence
    metrics = {
        "loss": loss,
        "perplexity": math.exp(min(loss, 50.0)),
        "perplexity_per_character": math.exp(min(loss * tokens / max(characters, 1), 50.0)),
        "exact_match": exact_match(hypotheses, references),
        "bleu": corpus_bleu(hypotheses, references),
        "bleu_lowercase": corpus_bleu(hypotheses, references, lowercase=True),
        "sentences": n,
    }
    if seen is not None:
        metrics |= _unseen("", split.sources[:n], {seen_form(source) for source, _ in seen}, hypotheses, references)
        metrics |= _unseen("_target", references, {seen_form(target) for _, target in seen}, hypotheses, references)
    return metrics


def _unseen(name: str, texts: Sequence[str], seen: set[str], hypotheses: Sequence[str],
            references: Sequence[str]) -> dict[str, float | int]:
    """Exact match over the sentences whose text (source or reference) is not in ``seen``, and how many there are."""
    unseen = [i for i, text in enumerate(texts) if seen_form(text) not in seen]
    return {f"exact_match_unseen{name}": exact_match([hypotheses[i] for i in unseen], [references[i] for i in unseen]),
            f"unseen{name}_sentences": len(unseen)}


@dataclass
class LabelledSplit:
    """A classification split: texts, their encoded inputs and their class indices, encoded once."""

    texts: Sequence[str]
    src: Sequence[Sequence[int]]  # lists, or a prepared directory's rows (``prepared.Rows``)
    labels: np.ndarray  # (inputs,) class indices

    @classmethod
    def build(cls, classifier: Classifier, pairs: list[Pair], name: str) -> LabelledSplit:
        texts = [text for text, _ in pairs]
        return cls(texts, classifier.encode(texts, name),
                   np.asarray(classifier.label_ids([label for _, label in pairs], f"the {name} split"), dtype=np.int64))

    @classmethod
    def prepared(cls, prepared: Prepared, name: str, window: int = 4) -> LabelledSplit:
        """The split as ``seqlab data prepare`` encoded it: texts memory-mapped, ids read ``window`` chunks at a
        time, the class indices in memory."""
        return cls(prepared.texts(name, "text"), prepared.ids(name, "src", window),
                   prepared.values(name, "label").astype(np.int64))


def evaluate_classifier(classifier: Classifier, split: LabelledSplit) -> dict:
    """{'loss' (mean cross-entropy, nats), 'accuracy', 'macro_f1', ... (``metrics.classification_scores``),
    'sentences'}."""
    probabilities = classifier.probabilities(split.texts, split.src)  # (inputs, classes)
    picked = probabilities[np.arange(len(split.labels)), split.labels]
    loss = float(-np.log(np.maximum(picked, 1e-12)).mean()) if len(picked) else 0.0
    scores = classification_scores(split.labels.tolist(), probabilities.argmax(1).tolist(), classifier.labels)
    return {"loss": loss, **scores, "sentences": len(split.labels)}


@dataclass
class QuestionSplit:
    """A span-extraction split: its questions, their encoded inputs and the first answer's token span (-1 where
    the context was cut before it), encoded once."""

    questions: list[Question]
    rows: list[Encoded]
    spans: np.ndarray  # (questions, 2)

    @classmethod
    def build(cls, answerer: Answerer, questions: list[Question], name: str) -> QuestionSplit:
        rows = answerer.encode([q.question for q in questions], [q.context for q in questions], name)
        return cls(questions, rows, answer_spans(rows, questions))


def evaluate_answerer(answerer: Answerer, split: QuestionSplit) -> dict:
    """{'loss' (mean of the start and end cross-entropies, nats, over the questions whose answer is in the
    context as read), 'exact_match', 'f1' (SQuAD's, percent, over all questions), 'questions'}."""
    probabilities = answerer.log_probabilities(split.rows)
    kept = [(start[s], end[e]) for (start, end), (s, e) in zip(probabilities, split.spans) if s >= 0]
    loss = -float(np.mean([(a + b) / 2 for a, b in kept])) if kept else 0.0
    texts = [q.context[a:b] for q, (a, b, _) in zip(split.questions, answerer.spans(split.rows, probabilities))]
    scores = span_scores(texts, [[text for text, _ in q.answers] for q in split.questions])
    return {"loss": loss, **scores, "questions": len(split.questions)}
