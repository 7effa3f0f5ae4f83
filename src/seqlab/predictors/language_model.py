"""A trained language model and its tokenizer: the one text -> probabilities path (seed 002 ch. 5–6).

A text is read as the book reads PTB: its words, then ``<eos>``; a corpus is its lines one after the other,
one token stream (``stream``). ``perplexity(texts)`` is ``exp`` of the mean cross-entropy over every token of
that stream, the first word predicted from a leading ``<eos>`` (S39); ``score(texts)`` gives each line its own
log-probability, the line read from a fresh state (S33: ``log P(w_1..w_m) = Σ_t log P(w_t | w_<t)``).
``generate(starts, options)`` continues each start with the decoding strategies of ``seqlab.decoding``
(greedy, beam search, sampling with temperature, top-k, top-p and a seed), stopping at ``<eos>`` (S47); each
continuation comes with every token's log-probability given everything before it (``token_log_probs``), read
back by one teacher-forced pass over ``<eos>``, the start, the continuation (and its ``<eos>``, when it ended).
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
from seqlab.loss import token_nll_sum
from seqlab.model import RNNLM, TransformerLM, build_lm
from seqlab.model.lm import LMConfig
from seqlab.model.transformer_lm import TransformerLMConfig
from seqlab.predictors.base import TextPredictor
from seqlab.specials import EOS


class LanguageModel(TextPredictor):
    model: RNNLM | TransformerLM
    kind = "lm"

    @classmethod
    def build(cls, config: Config, vocab_size: int) -> RNNLM | TransformerLM:
        """The language model of a ``seqlab train`` run whose ``model.type`` is ``lm`` or ``transformer_lm``."""
        assert isinstance(config.model, LMConfig | TransformerLMConfig)
        return build_lm(config.model, vocab_size)

    def stream(self, texts: Sequence[str]) -> np.ndarray:
        """The texts as one stream of ids: ``<eos>``, then each text's tokens followed by ``<eos>``."""
        pieces = [[EOS]] + [ids + [EOS] for ids in self.tokenizer.encode(list(texts))]
        return np.fromiter((i for ids in pieces for i in ids), dtype=np.int64)

    @torch.no_grad()
    def perplexity(self, texts: Sequence[str], chunk: int = 256) -> dict[str, Any]:
        """{'loss' (nats per token), 'perplexity', 'tokens'} over the whole stream of ``texts``, read in one row
        with the RNN's state carried from chunk to chunk (nothing dropped, nothing cut). A Transformer reads it
        in windows of ``train.time_size``, the context it was trained with, each window from its start."""
        stream = torch.from_numpy(self.stream(texts)).to(self.device)
        if isinstance(self.model, TransformerLM):
            chunk = self.config.train.time_size
        self.model.eval()
        total, state = 0.0, None
        for start in range(0, len(stream) - 1, chunk):
            x = stream[start : start + chunk][None]  # (1, T)
            t = stream[start + 1 : start + chunk + 1][None]
            x = x[:, : t.size(1)]
            with self.autocast():
                logits, state = self.model(x, state)
            total += float(token_nll_sum(logits, t))
        tokens = len(stream) - 1
        loss = total / max(tokens, 1)
        return {"loss": loss, "perplexity": math.exp(loss), "tokens": tokens}

    @torch.no_grad()
    def generate(self, starts: Sequence[str], options: DecodeOptions | None = None,
                 stop: Callable[[], bool] | None = None, **kwargs: Any) -> list[list[Generation]]:
        """Every start's continuations, best first (``nbest`` of a beam search, ``num_samples`` samples, or the
        greedy one); ``max_length`` words at most (default ``eval.max_output_length``). ``stop``: asked between
        decoding steps; once it is true decoding ends with ``seqlab.decoding.Cancelled``."""
        options = options or DecodeOptions(**kwargs)
        prompts = [[EOS, *ids] for ids in self.tokenizer.encode(list(starts))]
        src = pad(prompts)
        limits = options.limits(src, self.config.eval.max_output_length).tolist()
        self.model.eval()
        found: list[list[Hypothesis]] = [[] for _ in prompts]
        with self.autocast():
            for length in sorted({len(p) for p in prompts}):  # a batch of prompts of one length (the Transformer's cache)
                group = [i for i, p in enumerate(prompts) if len(p) == length]
                searched = search(self.model, pad([prompts[i] for i in group]).to(self.device), options,
                                  self.config.eval.max_output_length, stop=stop)
                for i, hypotheses in zip(group, searched):
                    found[i] = hypotheses
        # A hypothesis shorter than its length limit stopped at <eos> (whose probability its log_prob includes).
        ended = [[len(h.tokens) < limit for h in hypotheses] for hypotheses, limit in zip(found, limits)]
        per_token = iter(self.token_log_probs([prompt[1:] for prompt, hypotheses in zip(prompts, found) for _ in hypotheses],
                                              [h.tokens for hypotheses in found for h in hypotheses],
                                              [end for row in ended for end in row]))
        results = []
        for prompt, hypotheses, ends in zip(prompts, found, ended):
            texts = self.tokenizer.decode([prompt[1:] + h.tokens for h in hypotheses])
            continuations = self.tokenizer.decode([h.tokens for h in hypotheses])
            results.append([Generation(text, continuation, h.log_prob, self.tokenizer.tokens_from_ids(h.tokens),
                                       next(per_token), end)
                            for text, continuation, h, end in zip(texts, continuations, hypotheses, ends)])
        return results

    @torch.no_grad()
    def token_log_probs(self, starts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]],
                        ended: Sequence[bool], rows: int = 16) -> list[list[float]]:
        """For each start (token ids) and its continuation (ids): the natural log-probability of every token
        of the continuation, and of ``<eos>`` after it where ``ended``, given everything before it; read as
        ``<eos>`` + start + continuation (+ ``<eos>``) from a fresh state, ``rows`` sequences at a time.
        Their sum is the continuation's log-probability given the start (``Generation.log_prob``)."""
        sequences = [[EOS, *start, *continuation, *([EOS] if end else [])]
                     for start, continuation, end in zip(starts, continuations, ended, strict=True)]
        self.model.eval()
        results: list[list[float]] = []
        for first in range(0, len(sequences), rows):
            chunk = sequences[first : first + rows]
            x = pad([s[:-1] or [EOS] for s in chunk]).to(self.device)  # (B, T); the end's padding changes nothing
            t = pad([s[1:] for s in chunk]).to(self.device)
            with self.autocast():
                logits, _ = self.model(x)
            picked = torch.log_softmax(logits.float(), dim=-1)[:, : t.size(1)].gather(2, t[:, :, None]).squeeze(2)
            for i, s in enumerate(chunk):
                skip = len(starts[first + i])  # the start's own tokens are given, not predicted
                results.append(picked[i, skip : len(s) - 1].tolist())
        return results

    @torch.no_grad()
    def score(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """Per text: {'log_prob' (natural log of P(text, <eos>)), 'tokens' (its tokens and <eos>), 'perplexity'}."""
        self.model.eval()
        results = []
        for ids in self.tokenizer.encode(list(texts)):
            x = torch.tensor([[EOS, *ids]], device=self.device)
            t = torch.tensor([[*ids, EOS]], device=self.device)
            with self.autocast():
                logits, _ = self.model(x)
            log_prob = -float(token_nll_sum(logits, t))
            results.append({"log_prob": log_prob, "tokens": len(ids) + 1,
                            "perplexity": math.exp(-log_prob / (len(ids) + 1))})
        return results


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


load = LanguageModel.load
