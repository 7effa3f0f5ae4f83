"""A trained span extractor and its tokenizer: a question and a context in, the answer cut out of the context
(BERT's question answering, seed 002 §10.1, S102–S103).

The model reads ``<sos> question <eos> context <eos>`` (``[CLS] question [SEP] context [SEP]``), the question in
segment 0 and the context in segment 1; the question is cut to half of ``data.max_source_length`` and the context
to what is left. Each context token keeps its span of characters in the context as given (the tokenizer's
offset mapping, ``Tokenizer.encode_offsets``), so the best token span (``model.span.best_spans``) maps back to the
context's own text. ``seqlab.predictors.answerer.load(RUN_DIR)`` rebuilds an answerer from a run directory; training-time
validation, ``seqlab eval``, ``seqlab answer`` and the server all go through it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data.batching import pad
from seqlab.data.inputs import truncate
from seqlab.data.squad import Question
from seqlab.model.span import EncoderSpan, SpanConfig, best_spans
from seqlab.predictors.base import TextPredictor
from seqlab.specials import EOS, SOS
from seqlab.text import Span

log = logging.getLogger("seqlab")


@dataclass
class Encoded:
    """One question about one context as the model reads it."""

    ids: list[int]  # <sos> question <eos> context <eos>
    segments: list[int]  # 0 for <sos> question <eos>, 1 after
    offsets: list[Span]  # of the context's tokens: their characters in the context
    first: int  # the position of the context's first token

    def token_span(self, start: int, end: int) -> tuple[int, int] | None:
        """The context tokens (positions in ``ids``) covering characters [start, end) of the context, or None
        when they were cut off."""
        inside = [k for k, (a, b) in enumerate(self.offsets) if a < end and b > start and b > a]
        return (self.first + inside[0], self.first + inside[-1]) if inside else None


@dataclass
class Answer:
    """One result of ``Answerer.answer``."""

    text: str  # the context's text from ``start`` to ``end``
    start: int  # characters in the context
    end: int
    probability: float  # p(start) · p(end) of the span
    tokens: list[str]  # the model's input pieces
    start_probabilities: np.ndarray  # (pieces,) that the answer starts there (0 outside the context)
    end_probabilities: np.ndarray  # (pieces,) that it ends there


class Answerer(TextPredictor):
    model: EncoderSpan
    kind = "span"

    @classmethod
    def build(cls, config: Config, vocab_size: int) -> EncoderSpan:
        """The span extractor of a ``seqlab train`` run whose ``model.type`` is ``span``."""
        assert isinstance(config.model, SpanConfig)
        return EncoderSpan(config.model, vocab_size)

    def encode(self, questions: Sequence[str], contexts: Sequence[str], what: str = "input") -> list[Encoded]:
        """Each (question, context) as the model's input; a warning counts the contexts cut to fit."""
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions for {len(contexts)} contexts")
        limit = self.config.data.max_source_length
        questions_ids = truncate(self.tokenizer.encode(list(questions)), limit // 2 - 2, f"{what} questions")
        unique = list(dict.fromkeys(contexts))  # SQuAD asks several questions about each context
        encoded = dict(zip(unique, self.tokenizer.encode_offsets(unique)))
        out, cut = [], 0
        for question, context in zip(questions_ids, contexts):
            ids, offsets = encoded[context]
            room = limit - len(question) - 3
            cut += len(ids) > room
            first = len(question) + 2
            out.append(Encoded([SOS, *question, EOS, *ids[:room], EOS], [0] * first + [1] * (min(len(ids), room) + 1),
                               offsets[:room], first))
        if cut:
            log.warning("%d of %d %s contexts were cut to fit data.max_source_length (%d tokens with the question)",
                        cut, len(out), what, limit)
        return out

    def batch(self, rows: Sequence[Encoded]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids, segments and the context mask (batch, len) of encoded inputs."""
        ids = pad([row.ids for row in rows])
        segments = pad([row.segments for row in rows])
        positions = torch.arange(ids.size(1))
        firsts = torch.tensor([row.first for row in rows]).unsqueeze(1)
        lasts = torch.tensor([row.first + len(row.offsets) for row in rows]).unsqueeze(1)
        context = (positions >= firsts) & (positions < lasts)
        return ids.to(self.device), segments.to(self.device), context.to(self.device)

    def log_probabilities(self, rows: Sequence[Encoded]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each input's start and end log-probabilities (len,), in batches of similar length
        (``Predictor.batched``)."""

        def log_probabilities(batch: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
            inputs = self.batch([rows[i] for i in batch])  # ids, segments, the context mask: (batch, len) each
            with torch.no_grad(), self.autocast(tokens=inputs[0].numel()):  # thread-local: set where it computes
                start, end = self.model(*inputs)  # (batch, len)
            return start.log_softmax(-1), end.log_softmax(-1)

        out: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * len(rows)
        for batch, (start, end) in self.batched([len(row.ids) for row in rows], log_probabilities):
            for k, i in enumerate(batch):
                length = len(rows[i].ids)
                out[i] = start[k, :length].cpu().numpy(), end[k, :length].cpu().numpy()
        return out

    def spans(self, rows: Sequence[Encoded], probabilities: Sequence[tuple[np.ndarray, np.ndarray]]
              ) -> list[tuple[int, int, float]]:
        """The best span of each encoded input, from its ``log_probabilities``: its characters [start, end) in the
        context and its probability; (0, 0, 0.0) for an empty context."""
        assert isinstance(self.config.model, SpanConfig)
        longest = self.config.model.max_answer_tokens
        out = []
        for row, (start, end) in zip(rows, probabilities):
            if not row.offsets:
                out.append((0, 0, 0.0))
                continue
            s, e, score = best_spans(torch.from_numpy(start)[None], torch.from_numpy(end)[None], longest)
            out.append((row.offsets[int(s) - row.first][0], row.offsets[int(e) - row.first][1], float(np.exp(float(score)))))
        return out

    def answer(self, questions: Sequence[str], contexts: Sequence[str]) -> list[Answer]:
        """The answer to each question, cut out of its context, with the input's pieces and every piece's
        probabilities of starting and of ending it."""
        if isinstance(questions, str) or isinstance(contexts, str):
            raise TypeError("answer() takes a list of questions and a list of contexts, not strings")
        rows = self.encode(questions, contexts)
        probabilities = self.log_probabilities(rows)
        return [Answer(context[a:b], a, b, p, self.tokenizer.tokens_from_ids(row.ids), np.exp(start), np.exp(end))
                for row, context, (start, end), (a, b, p)
                in zip(rows, contexts, probabilities, self.spans(rows, probabilities))]

def answer_spans(rows: Sequence[Encoded], questions: Sequence[Question]) -> np.ndarray:
    """(questions, 2) the first reference answer's first and last token positions; -1 where the context was cut
    before it."""
    out = np.full((len(rows), 2), -1, dtype=np.int64)
    for k, (row, question) in enumerate(zip(rows, questions)):
        text, start = question.answers[0]
        span = row.token_span(start, start + len(text))
        if span is not None:
            out[k] = span
    return out


load = Answerer.load
