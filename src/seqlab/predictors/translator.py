"""A trained seq2seq model with its tokenizers: text in, text out.

This is the one tokenize → decode → detokenize path, shared by training-time
validation, ``seqlab eval``, ``seqlab translate`` and ``seqlab.load(...)``, so
the same input always gives the same output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from seqlab.config import Config
from seqlab.data.batching import pad
from seqlab.data.inputs import check_texts, source_ids, truncate
from seqlab.decoding import DecodeOptions, Hypothesis, NoEnd, search
from seqlab.model import Seq2seq, build_model
from seqlab.predictors.base import Predictor
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.specials import PAD
from seqlab.tokenizer import Tokenizer


class Translator(Predictor):
    model: Seq2seq
    kind = "seq2seq"

    def __init__(self, model: Seq2seq, source: Tokenizer, target: Tokenizer, config: Config,
                 runtime: Runtime | None = None) -> None:
        super().__init__(model, config, runtime)
        self.source = source
        self.target = target

    @classmethod
    def from_run(cls, run: RunDir, config: Config, runtime: Runtime) -> Translator:
        source, target = run.tokenizers()
        model = build_model(config.model, source.vocab_size, target.vocab_size)
        run.load_model(model)
        return cls(runtime.place(model), source, target, config, runtime)

    def encode_sources(self, texts: Sequence[str], what: str = "input") -> list[list[int]]:
        """Token ids + <eos>, cut to ``data.max_source_length`` (a warning counts the cuts); or as
        ``data.source_eos`` and ``data.source_width`` say: no <eos>, padded with spaces to a fixed width."""
        return self._encode_sources(texts, what)[0]

    def _encode_sources(self, texts: Sequence[str], what: str) -> tuple[list[list[int]], list[bool]]:
        """``encode_sources``, and whether each source was cut."""
        check_texts(texts, "translate")
        data, fill = self.config.data, self.fill
        kept, cut = self.cut(self.source.encode(texts), self.max_source_tokens, f"{what} sources")
        return [source_ids(ids, data.source_eos, data.source_width, fill) for ids in kept], cut

    @property
    def max_source_tokens(self) -> int:
        """The most tokens of a source the model reads (room left for <eos>); a longer source is cut."""
        data = self.config.data
        return (data.source_width or data.max_source_length) - data.source_eos

    @property
    def fill(self) -> int:
        """What pads a source to ``data.source_width``: the space character (<pad> where there is no width)."""
        if self.config.data.source_width is None:
            return PAD
        return _space(self.source, "source")

    def encode_targets(self, texts: Sequence[str], what: str = "input") -> list[list[int]]:
        """Token ids, cut to ``data.max_target_length - 1`` (room for <sos>/<eos>); the book's fixed-width answers
        (``data.target_width``): cut to that width and padded to it with spaces."""
        width = self.config.data.target_width
        if width is None:
            return truncate(self.target.encode(texts), self.config.data.max_target_length - 1, f"{what} targets")
        space = _space(self.target, "target")
        return [ids + [space] * (width - len(ids)) for ids in truncate(self.target.encode(texts), width, f"{what} targets")]

    @property
    def target_eos(self) -> bool:
        """Whether the decoder ends its outputs with <eos>: all but the book's fixed-width answers, which it writes
        to ``data.target_width`` characters instead."""
        return self.config.data.target_width is None

    def normalize_target(self, text: str) -> str:
        """A reference as the model can produce it (Unicode NFC, lower-cased if so configured)."""
        return self.target.normalize(text)

    def translate(self, texts: Sequence[str], options: DecodeOptions | None = None, **kwargs: Any) -> list[str]:
        """The best output for every input text (an empty or whitespace-only text: an empty output). As the run's
        ``eval.beam`` and ``eval.length_penalty`` say (greedy unless its config says otherwise), or as the options of
        ``DecodeOptions`` say, e.g. ``translate(texts, beam=5, length_penalty=0.6)`` (``Predictor.decoding``)."""
        options = self.decoding(options, **kwargs)
        return self.each_text(texts, lambda kept: self.translate_ids(self.encode_sources(kept), options), "",
                              "translate")

    def generate(
        self, texts: Sequence[str], options: DecodeOptions | None = None, need_weights: bool = False,
        stop: Callable[[], bool] | None = None, **kwargs: Any,
    ) -> list[list[Translation]]:
        """Every input's outputs, best first: ``nbest`` of a beam search, ``num_samples`` samples, or the
        greedy one; with ``need_weights``, the cross-attention of each output word over the source tokens. An
        empty or whitespace-only text has one empty output. ``stop``: asked between decoding steps; once it is
        true decoding ends with ``seqlab.decoding.Cancelled``."""
        options = self.decoding(options, **kwargs)
        empty = [Translation("", 0.0, 0.0, [], [])]
        return self.each_text(texts, lambda kept: self._generate(kept, options, need_weights, stop), empty,
                              "translate")

    def _generate(self, texts: Sequence[str], options: DecodeOptions, need_weights: bool,
                  stop: Callable[[], bool] | None) -> list[list[Translation]]:
        src, cut = self._encode_sources(texts, "input")
        decoded = self.search_ids(src, options, need_weights, stop)
        outputs = iter(self.target.decode([h.tokens for hypotheses in decoded for h in hypotheses]))
        return [
            [Translation(next(outputs), h.score, h.log_prob, self.source.tokens_from_ids(source),
                         self.target.tokens_from_ids(h.tokens), h.attention, truncated) for h in hypotheses]
            for source, hypotheses, truncated in zip(src, decoded, cut)
        ]

    def check_options(self, options: DecodeOptions, need_weights: bool = False) -> None:
        """A ValueError naming what this translator's search cannot do (every option works here; an exported
        model's engine may lack some)."""

    def translate_ids(self, ids: Sequence[Sequence[int]], options: DecodeOptions | None = None) -> list[str]:
        """The best output text for sources already encoded by ``encode_sources`` (options as ``translate`` takes
        them)."""
        best = [hypotheses[0].tokens for hypotheses in self.search_ids(ids, self.decoding(options))]
        return self.target.decode(best)

    def search_ids(
        self, src: Sequence[Sequence[int]], options: DecodeOptions, need_weights: bool = False,
        stop: Callable[[], bool] | None = None,
    ) -> list[list[Hypothesis]]:
        """Decode encoded sources in batches of similar length (``Predictor.batched``); ``stop`` as in
        ``generate``."""
        width = self.config.data.target_width
        model: Any = self.model if width is None else NoEnd(self.model)  # the book's answers: width characters
        if width is not None:
            options = options.model_copy(update={"max_length": width, "length_ratio": None})

        def decode_in(runtime: Runtime, batch: list[int], halt: Callable[[], bool] | None) -> list[list[Hypothesis]]:
            with runtime.autocast(len(batch) * options.rows_per_input):  # thread-local: set on the decoding thread
                return search(model, pad([src[i] for i in batch]).to(self.device), options,
                              self.config.eval.max_output_length, need_weights, halt)

        lengths = [len(ids) for ids in src]
        longest = sorted(range(len(src)), key=lengths.__getitem__)[-self.config.eval.batch_size:]  # a whole batch's
        runtime = self.search_runtime(longest, options, decode_in)  # worth of the longest, whatever the workers

        def decode(batch: list[int]) -> list[list[Hypothesis]]:
            return decode_in(runtime, batch, stop)

        outputs: list[list[Hypothesis]] = [[] for _ in src]
        for batch, of_batch in self.batched(lengths, decode):
            for index, hypotheses in zip(batch, of_batch):
                outputs[index] = hypotheses
        return outputs


@dataclass
class Translation:
    """One output of ``Translator.generate``."""

    text: str
    score: float  # what the decoder ranked by (log_prob, or log_prob / length penalty)
    log_prob: float  # the model's log-probability of the output
    source_tokens: list[str]  # the model's input pieces, <eos> included
    tokens: list[str]  # the output pieces
    attention: torch.Tensor | None = None  # (output pieces + <eos>, layers, heads, source pieces)
    truncated: bool = False  # the source was longer than the model reads (``max_source_tokens``) and was cut


load = Translator.load  # seqlab.load(RUN_DIR)


def _space(tokenizer: Tokenizer, side: str) -> int:
    """The space character's id, which pads the book's fixed-width questions and answers."""
    try:
        return tokenizer.token_id(" ")
    except ValueError:
        raise ValueError(f"data.{side}_width pads {side}s with spaces, but the {side} vocabulary has no space (a run "
                         "trained before seqlab learnt it for them)") from None
