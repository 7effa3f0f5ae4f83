"""A trained language model and its tokenizer: the one text -> probabilities path (seed 002 ch. 5–6).

A text is read as the book reads PTB: its words, then ``<eos>``; a corpus is its lines one after the other,
one token stream (``stream``). ``perplexity(texts)`` is ``exp`` of the mean cross-entropy over every token of
that stream, the first word predicted from a leading ``<eos>`` (S39); ``score(texts)`` gives each line its own
log-probability, the line read from a fresh state (S33: ``log P(w_1..w_m) = Σ_t log P(w_t | w_<t)``).
``generate(starts, options)`` continues each start with the decoding strategies of ``seqlab.decoding``
(greedy, beam search, sampling with temperature, top-k, top-p and a seed), stopping at ``<eos>`` (S47); each
continuation comes with every token's log-probability given everything before it (``token_log_probs``), as the
search computed it.
``seqlab.predictors.language_model.load(RUN_DIR)`` rebuilds it from a run directory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from seqlab.config import Config
from seqlab.data.batching import pad
from seqlab.decoding import DecodeOptions, Hypothesis, search
from seqlab.model import RNNLM, TransformerLM, build_lm
from seqlab.model.kneser_ney import Interpolated, KneserNey
from seqlab.model.lm import LMConfig
from seqlab.model.transformer_lm import TransformerLMConfig
from seqlab.predictors.base import TextPredictor, saved_ngrams
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.specials import EOS
from seqlab.tokenizer import Tokenizer


class LanguageModel(TextPredictor):
    model: RNNLM | TransformerLM
    kind = "lm"

    def __init__(self, model: RNNLM | TransformerLM, tokenizer: Tokenizer, config: Config,
                 runtime: Runtime | None = None, ngrams: KneserNey | None = None) -> None:
        super().__init__(model, tokenizer, config, runtime)
        self.ngrams = ngrams  # model.ngrams' Kneser-Ney model, fitted (training sets it once it is)

    @classmethod
    def from_run(cls, run: RunDir, config: Config, runtime: Runtime) -> LanguageModel:
        """The language model of a ``seqlab train`` run, with its n-gram model where the config has one."""
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        tokenizer, _ = run.tokenizers()
        model = cls.build(config, tokenizer.vocab_size)
        run.load_model(model)
        ngrams = None if config.model.ngrams is None else saved_ngrams(run, KneserNey, config.model.ngrams)
        return cls(runtime.place(model), tokenizer, config, runtime, ngrams)

    @classmethod
    def build(cls, config: Config, vocab_size: int) -> RNNLM | TransformerLM:
        """The language model of a ``seqlab train`` run whose ``model.type`` is ``lm`` or ``transformer_lm``."""
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        return build_lm(config.model, vocab_size)

    def stream(self, texts: Sequence[str]) -> np.ndarray:
        """The texts as one stream of ids: ``<eos>``, then each text's tokens followed by ``<eos>``."""
        pieces = [[EOS], *sentence_pieces(self.tokenizer, texts)]
        return np.fromiter((i for ids in pieces for i in ids), dtype=np.int64)

    @torch.no_grad()
    def perplexity(self, texts: Sequence[str], chunk: int = 256) -> dict[str, Any]:
        """{'loss' (nats per token), 'perplexity', 'tokens'} over the whole stream of ``texts`` (``log_probs``)."""
        log_probs = self.log_probs(self.stream(texts), chunk)
        tokens = len(log_probs)
        loss = -float(log_probs.sum()) / max(tokens, 1)
        return {"loss": loss, "perplexity": math.exp(loss), "tokens": tokens}

    @torch.no_grad()
    def log_probs(self, stream: np.ndarray, chunk: int = 256) -> np.ndarray:
        """(n - 1,) float64: the natural log of each next id's probability in ``stream`` (n,), read in one row with
        the RNN's state carried from chunk to chunk (nothing dropped, nothing cut); a Transformer reads it in
        windows of ``train.time_size``, the context it was trained with, each window from its start. With
        ``model.ngrams``, the probabilities are the network's interpolated with the n-gram model's."""
        ids = torch.from_numpy(stream).to(self.device)
        if isinstance(self.model, TransformerLM):
            chunk = self.config.train.time_size
        self.model.eval()
        parts, state = [], None
        for start in range(0, len(ids) - 1, chunk):
            x = ids[start : start + chunk][None]  # (1, T)
            t = ids[start + 1 : start + chunk + 1][None]
            x = x[:, : t.size(1)]
            with self.autocast():
                logits, state = self.model(x, state)  # (1, T, V)
            parts.append(torch.log_softmax(logits[0].float(), -1).gather(1, t[0, :, None])[:, 0].double().cpu())
        net = torch.cat(parts).numpy() if parts else np.zeros(0)
        return net if self.ngrams is None else self.ngrams.interpolate(net, stream)

    def generate(self, starts: Sequence[str], options: DecodeOptions | None = None,
                 stop: Callable[[], bool] | None = None, **kwargs: Any) -> list[list[Generation]]:
        """Every start's continuations, best first (``nbest`` of a beam search, ``num_samples`` samples, or the
        greedy one; options as ``Predictor.decoding`` completes them with the run's search); ``max_length`` words
        at most (default ``eval.max_output_length``). ``stop``: asked between decoding steps; once it is true
        decoding ends with ``seqlab.decoding.Cancelled``."""
        options = self.decoding(options, **kwargs)
        prompts = [[EOS, *ids] for ids in self.tokenizer.encode(list(starts))]
        self.model.eval()

        def continue_in(runtime: Runtime, group: list[int], halt: Callable[[], bool] | None) -> list[list[Hypothesis]]:
            with torch.no_grad(), runtime.autocast(len(group) * options.rows_per_input):  # thread-local: set where it decodes
                return search(self.decoder, pad([prompts[i] for i in group]).to(self.device), options,
                              self.config.eval.max_output_length, stop=halt)

        # a batch of prompts of one length (the Transformer's cache), as many at once as the runtime's workers
        groups = [[i for i, p in enumerate(prompts) if len(p) == length] for length in sorted({len(p) for p in prompts})]
        runtime = self.search_runtime(max(groups, key=len, default=[]), options, continue_in)

        def continue_group(group: list[int]) -> list[list[Hypothesis]]:
            return continue_in(runtime, group, stop)

        found: list[list[Hypothesis]] = [[] for _ in prompts]
        for group, of_group in zip(groups, self.runtime.map(continue_group, groups)):
            for i, hypotheses in zip(group, of_group):
                found[i] = hypotheses
        results = []
        for prompt, hypotheses in zip(prompts, found):
            texts = self.tokenizer.decode([prompt[1:] + h.tokens for h in hypotheses])
            continuations = self.tokenizer.decode([h.tokens for h in hypotheses])
            row = []
            for text, continuation, h in zip(texts, continuations, hypotheses):
                per_token = h.token_log_probs or []  # the search gives them, one more than tokens where it ended
                row.append(Generation(text, continuation, h.log_prob, self.tokenizer.tokens_from_ids(h.tokens),
                                      per_token, len(per_token) > len(h.tokens)))
            results.append(row)
        return results

    def score(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """Per text: {'log_prob' (natural log of P(text, <eos>)), 'tokens' (its tokens and <eos>), 'perplexity'}."""
        results = []
        for ids in self.tokenizer.encode(list(texts)):
            log_prob = float(self.log_probs(np.array([EOS, *ids, EOS])).sum())
            results.append({"log_prob": log_prob, "tokens": len(ids) + 1,
                            "perplexity": math.exp(-log_prob / (len(ids) + 1))})
        return results

    @property
    def decoder(self) -> Any:
        """The model under the step contract, as every search strategy decodes it: with ``model.ngrams``, its
        next-word probabilities interpolated with the n-gram model's (``kneser_ney.Interpolated``)."""
        return self.model if self.ngrams is None else Interpolated(self.model, self.ngrams)


@dataclass(frozen=True)
class Generation:
    """One continuation of a start. ``token_log_probs`` has one entry per token of ``tokens`` and, when the
    continuation ended (stopped at ``<eos>`` before its length limit), one more for that ``<eos>``; each is the
    natural log of the token's probability given the start and the tokens before it, and they sum to
    ``log_prob``."""

    text: str  # the start and its continuation
    continuation: str
    log_prob: float  # of the continuation (and its <eos>, when it ended) given the start
    tokens: list[str]  # the continuation's tokens
    token_log_probs: list[float] = field(default_factory=list)  # per token (+ <eos> when it ended)
    ended: bool = False  # stopped at <eos> (not at its length limit)


def sentence_pieces(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Each text's token ids followed by ``<eos>``: what a stream of texts is made of, after its first ``<eos>``."""
    return [ids + [EOS] for ids in tokenizer.encode(list(texts))]


load = LanguageModel.load
