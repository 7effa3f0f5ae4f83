"""A trained language model and its tokenizer: the one text -> probabilities path (seed 002 ch. 5–6).

A text is read as the book reads PTB: its words, then ``<eos>``; a corpus is its lines one after the other,
one token stream (``stream``). ``perplexity(texts)`` is ``exp`` of the mean cross-entropy over every token of
that stream, the first word predicted from a leading ``<eos>`` (S39); ``score(texts)`` gives each line its own
log-probability, the line read from a fresh state (S33: ``log P(w_1..w_m) = Σ_t log P(w_t | w_<t)``).
``generate(starts, options)`` continues each start with the decoding strategies of ``seqlab.decoding``
(greedy, beam search, sampling with temperature, top-k, top-p and a seed), stopping at ``<eos>`` (S47).
``seqlab.language_model.load(RUN_DIR)`` rebuilds it from a run directory.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seqlab import precision
from seqlab.config import Config, LMConfig
from seqlab.data.batching import pad
from seqlab.decoding import DecodeOptions, search
from seqlab.loss import token_nll_sum
from seqlab.model.lm import RNNLM
from seqlab.rundir import RunDir
from seqlab.specials import EOS
from seqlab.tokenizer import Tokenizer


class LanguageModel:
    def __init__(self, model: RNNLM, tokenizer: Tokenizer, config: Config) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config

    def autocast(self) -> contextlib.AbstractContextManager:
        return precision.autocast(self.config.train.precision)

    def stream(self, texts: Sequence[str]) -> np.ndarray:
        """The texts as one stream of ids: ``<eos>``, then each text's tokens followed by ``<eos>``."""
        pieces = [[EOS]] + [ids + [EOS] for ids in self.tokenizer.encode(list(texts))]
        return np.fromiter((i for ids in pieces for i in ids), dtype=np.int64)

    @torch.no_grad()
    def perplexity(self, texts: Sequence[str], chunk: int = 256) -> dict[str, Any]:
        """{'loss' (nats per token), 'perplexity', 'tokens'} over the whole stream of ``texts``, read in one row
        with the state carried from chunk to chunk (nothing dropped, nothing cut)."""
        stream = torch.from_numpy(self.stream(texts))
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
    def generate(self, starts: Sequence[str], options: DecodeOptions | None = None, **kwargs: Any) -> list[list[Generation]]:
        """Every start's continuations, best first (``nbest`` of a beam search, ``num_samples`` samples, or the
        greedy one); ``max_length`` words at most (default ``eval.max_output_length``)."""
        options = options or DecodeOptions(**kwargs)
        prompts = [[EOS, *ids] for ids in self.tokenizer.encode(list(starts))]
        self.model.eval()
        with self.autocast():
            found = search(self.model, pad(prompts), options, self.config.eval.max_output_length)
        results = []
        for prompt, hypotheses in zip(prompts, found):
            texts = self.tokenizer.decode([prompt[1:] + h.tokens for h in hypotheses])
            continuations = self.tokenizer.decode([h.tokens for h in hypotheses])
            results.append([Generation(text, continuation, h.log_prob, self.tokenizer.tokens_from_ids(h.tokens))
                            for text, continuation, h in zip(texts, continuations, hypotheses)])
        return results

    @torch.no_grad()
    def score(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """Per text: {'log_prob' (natural log of P(text, <eos>)), 'tokens' (its tokens and <eos>), 'perplexity'}."""
        self.model.eval()
        results = []
        for ids in self.tokenizer.encode(list(texts)):
            x = torch.tensor([[EOS, *ids]])
            t = torch.tensor([[*ids, EOS]])
            with self.autocast():
                logits, _ = self.model(x)
            log_prob = -float(token_nll_sum(logits, t))
            results.append({"log_prob": log_prob, "tokens": len(ids) + 1,
                            "perplexity": math.exp(-log_prob / (len(ids) + 1))})
        return results


@dataclass(frozen=True)
class Generation:
    text: str  # the start and its continuation
    continuation: str
    log_prob: float  # of the continuation (and its <eos>, when it ended) given the start
    tokens: list[str]  # the continuation's tokens


def load(run_dir: str | Path) -> LanguageModel:
    """The language model of a ``seqlab train`` run whose ``model.type`` is ``lm``."""
    run = RunDir(run_dir)
    config = run.config()
    if not isinstance(config.model, LMConfig):
        raise ValueError(f"{run_dir}: not a language model (model.type {config.model.type})")
    tokenizer, _ = run.tokenizers()
    model = RNNLM.from_config(config.model, tokenizer.vocab_size)
    run.load_model(model)
    return LanguageModel(model.eval(), tokenizer, config)
