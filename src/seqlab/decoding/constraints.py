"""What users of the peers (CTranslate2, Hugging Face) expect on top of a search: a minimum output length, no
repeated n-grams and a repetition penalty. Each changes the logits of every step before the strategy sees them, so
greedy, beam search and sampling, on every model and on the ONNX engine, get them from one place:

* ``min_length`` m: <eos> cannot be chosen while the output has fewer than m words (its logit −inf);
* ``no_repeat_ngram_size`` n: a word that would complete an n-gram already in the output cannot be chosen: for
  every earlier position i where the output's last n − 1 words occur, word i + n − 1 (n = 1: every word used);
* ``repetition_penalty`` θ (CTRL, Keskar et al. 2019, §4.1): the logit x of every word already in the output
  becomes x / θ where x > 0 and x · θ where x ≤ 0, so that θ > 1 makes it less likely either way.

Scores are then those of the changed distribution (as CTranslate2's and Hugging Face's): a hypothesis's
log-probability is no longer the model's where a constraint acted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

import torch

from seqlab.decoding.options import DecodeOptions
from seqlab.decoding.step import State, StepDecoder
from seqlab.specials import EOS


@dataclass(frozen=True)
class ConstrainedState(Generic[State]):
    """The model's state and, per row, the words it has chosen so far (rows, words)."""

    inner: State
    words: torch.Tensor
    started: bool = False  # after the first step, whose ids are <sos> rather than a chosen word

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> ConstrainedState[State]:
        return ConstrainedState(self.inner.select(rows, same_sources), self.words.index_select(0, rows), self.started)

    def beams(self, k: int) -> ConstrainedState[State]:
        rows = torch.arange(self.words.size(0), device=self.words.device).repeat_interleave(k)
        return ConstrainedState(self.inner.beams(k), self.words.index_select(0, rows), self.started)


class Constrained(Generic[State]):
    """``model`` under the step contract, each step's logits changed by the options' constraints."""

    def __init__(self, model: StepDecoder[State], options: DecodeOptions) -> None:
        self.model = model
        self.min_length = options.min_length
        self.ngram = options.no_repeat_ngram_size
        self.penalty = options.repetition_penalty

    def start(self, src: torch.Tensor) -> ConstrainedState[State]:
        return ConstrainedState(self.model.start(src), torch.zeros(src.size(0), 0, dtype=torch.long, device=src.device))

    def step(
        self, ids: torch.Tensor, state: ConstrainedState[State], need_weights: bool = False
    ) -> tuple[torch.Tensor, ConstrainedState[State], torch.Tensor | None]:
        words = torch.cat([state.words, ids[:, None]], dim=1) if state.started else state.words  # (rows, words)
        logits, inner, weights = self.model.step(ids, state.inner, need_weights)
        return self.constrain(logits, words), ConstrainedState(inner, words, True), weights

    def constrain(self, logits: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """logits (rows, vocab) of the word after ``words`` (rows, words so far) -> a changed copy."""
        logits = logits.float().clone()
        if words.size(1) < self.min_length:
            logits[:, EOS] = -torch.inf
        if self.penalty != 1.0 and words.size(1):
            used = logits.gather(1, words)  # (rows, words)
            logits.scatter_(1, words, torch.where(used > 0, used / self.penalty, used * self.penalty))
        if self.ngram and words.size(1) >= self.ngram:
            windows = words.unfold(1, self.ngram, 1)  # (rows, windows, n): every n-gram of the output
            tail = words[:, words.size(1) - self.ngram + 1 :]  # (rows, n - 1): the last n - 1 words
            repeats = (windows[:, :, :-1] == tail[:, None, :]).all(dim=-1)  # (rows, windows)
            banned = torch.where(repeats, windows[:, :, -1], -1)  # the word that would repeat, -1 for none
            rows, index = (banned >= 0).nonzero(as_tuple=True)
            logits[rows, banned[rows, index]] = -torch.inf
        return logits
