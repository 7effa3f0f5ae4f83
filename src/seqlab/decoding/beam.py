"""Beam search (seed 003): keep the k best partial outputs by accumulated log-probability.

At every step each of the k hypotheses of a sentence is extended by every
word; of the k × vocab candidates the best 2k are looked at: one ending in
<eos> among the best k becomes a finished hypothesis, and the best k that do
not end become the next beams. (Taking 2k makes sure k survive even when
every beam's best word is <eos>.) The first step has one beam per sentence (nothing
else is real yet), so it runs on one row per sentence; the k beams start after it (``state.beams(k)``).

Finished hypotheses are ranked by

    score = log P(y | x) / lp(|y|),   lp = ((5 + |y|) / 6)^α   (GNMT, Wu et al. 2016; α = 0: no penalty)

or, with ``normalize``, by the average log-probability per word, where |y|
counts the output words and <eos>. A sentence is done when it has ``nbest``
finished hypotheses and none of its beams can still beat the worst of them:
log-probabilities only fall as words are added, so a beam's best possible
score is its log-probability so far divided by the largest penalty it could
reach (at its length limit). Done sentences leave the batch, so the others
run on without them.

The search stays on tensors: the beams' words are written into a buffer sized by the length limit, and each
sentence's ``nbest`` best finished hypotheses are kept in tensors (``Finished``) that take in a step's endings by
one stable sort; they become ``Hypothesis`` objects once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from seqlab.decoding.hypothesis import Hypothesis, top_words
from seqlab.decoding.step import StepDecoder
from seqlab.specials import EOS, PAD, SOS


def length_penalty(length: torch.Tensor | int, alpha: float, normalize: bool) -> torch.Tensor:
    """The divisor of the log-probability: GNMT's ((5 + len) / 6)^α, len itself (``normalize``), or 1."""
    length = torch.as_tensor(length, dtype=torch.float32)
    if normalize:
        return length
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Paths:
    """Per sentence and hypothesis, what was chosen at every step: the words (n, m, max_len), PAD after the end;
    their log-probabilities (n, m, max_len); and the attention (n, m, max_len, layers, heads, src_len) when it
    is asked for."""

    words: torch.Tensor
    log_probs: torch.Tensor
    attention: torch.Tensor | None = None

    @classmethod
    def empty(cls, n: int, m: int, max_len: int, device: torch.device) -> Paths:
        return cls(torch.full((n, m, max_len), PAD, dtype=torch.long, device=device),
                   torch.zeros(n, m, max_len, device=device))

    def pick(self, order: torch.Tensor) -> Paths:
        """(n, m') ``order``: per sentence, the paths it names, in its order."""
        return Paths(_pick(self.words, order), _pick(self.log_probs, order),
                     None if self.attention is None else _pick(self.attention, order))

    def sentences(self, rows: torch.Tensor) -> Paths:
        return Paths(self.words[rows], self.log_probs[rows], None if self.attention is None else self.attention[rows])

    def write(self, t: int, words: torch.Tensor, log_probs: torch.Tensor) -> None:
        """Step t's words and their log-probabilities (n, m)."""
        self.words[:, :, t], self.log_probs[:, :, t] = words, log_probs

    def attend(self, t: int, weights: torch.Tensor) -> None:
        """Step t's attention weights (n·m, layers, heads, src_len), row b·m + j for path j of sentence b."""
        if self.attention is None:
            self.attention = weights.new_zeros(*self.words.shape, *weights.shape[1:], dtype=torch.float32)
        self.attention[:, :, t] = weights.float().view(*self.words.shape[:2], *weights.shape[1:])

    def joined(self, other: Paths) -> Paths:
        """These paths and ``other``'s, side by side (n, m + m', ...)."""
        attention = None
        if other.attention is not None:
            mine = self.attention if self.attention is not None else other.attention.new_zeros(
                *self.words.shape, *other.attention.shape[3:])
            attention = torch.cat([mine, other.attention], dim=1)
        return Paths(torch.cat([self.words, other.words], dim=1), torch.cat([self.log_probs, other.log_probs], dim=1),
                     attention)

    def assign(self, rows: torch.Tensor, paths: Paths) -> None:
        """Sentences ``rows`` take ``paths``."""
        self.words[rows], self.log_probs[rows] = paths.words, paths.log_probs
        if paths.attention is not None:
            if self.attention is None:
                self.attention = paths.attention.new_zeros(*self.words.shape, *paths.attention.shape[3:])
            self.attention[rows] = paths.attention


@dataclass
class Finished:
    """Each sentence's ``nbest`` best finished hypotheses so far, best first, in tensors: their scores (batch,
    nbest), -inf where there is none yet; log-probabilities (batch, nbest); lengths in words and in steps
    (words, and <eos> where it ended there) (batch, nbest); and their ``Paths``."""

    score: torch.Tensor
    log_prob: torch.Tensor
    length: torch.Tensor
    steps: torch.Tensor
    paths: Paths

    @classmethod
    def empty(cls, batch: int, nbest: int, max_len: int, device: torch.device) -> Finished:
        counts = torch.zeros(batch, nbest, dtype=torch.long, device=device)
        return cls(torch.full((batch, nbest), -torch.inf, device=device), torch.zeros(batch, nbest, device=device),
                   counts, counts.clone(), Paths.empty(batch, nbest, max_len, device))

    def take(self, rows: torch.Tensor, score: torch.Tensor, log_prob: torch.Tensor, length: torch.Tensor,
             steps: int, paths: Paths) -> None:
        """Sentences ``rows`` (n,) take in their new hypotheses of ``steps`` steps: score, log_prob, length (n, k),
        -inf scores for none, and their paths (n, k, ...). Ties keep the earlier first (a stable sort: those
        already kept, then the new ones in the order of k), as a sort of all would."""
        nbest = self.score.size(1)
        scores = torch.cat([self.score[rows], score], dim=1)  # (n, nbest + k)
        order = scores.sort(dim=1, descending=True, stable=True).indices[:, :nbest]  # (n, nbest)
        self.score[rows] = scores.gather(1, order)
        self.log_prob[rows] = torch.cat([self.log_prob[rows], log_prob], dim=1).gather(1, order)
        self.length[rows] = torch.cat([self.length[rows], length], dim=1).gather(1, order)
        self.steps[rows] = torch.cat([self.steps[rows], torch.full_like(length, steps)], dim=1).gather(1, order)
        self.paths.assign(rows, self.paths.sentences(rows).joined(paths).pick(order))

    def hypotheses(self) -> list[list[Hypothesis]]:
        """Every sentence's finished hypotheses, best first, as ``Hypothesis`` objects."""
        out: list[list[Hypothesis]] = []
        scores, log_probs_, lengths, steps, words, word_log_probs = (
            self.score.tolist(), self.log_prob.tolist(), self.length.tolist(), self.steps.tolist(),
            self.paths.words.tolist(), self.paths.log_probs.tolist())
        attention = self.paths.attention
        for b in range(len(scores)):
            out.append([
                Hypothesis(words[b][j][: lengths[b][j]], log_probs_[b][j], scores[b][j],
                           None if attention is None else attention[b, j, : steps[b][j]].cpu(),
                           word_log_probs[b][j][: steps[b][j]])
                for j in range(len(scores[b])) if scores[b][j] > -torch.inf
            ])
        return out


def _pick(values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """values (n, m, *rest) -> (n, m', *rest): the entries ``order`` (n, m') names, per row."""
    index = order.view(*order.shape, *([1] * (values.dim() - 2))).expand(-1, -1, *values.shape[2:])
    return values.gather(1, index)


@torch.inference_mode()  # no autograd bookkeeping at all (views, version counters): a tenth off one sentence's time
def beam_search(
    model: StepDecoder[Any],
    src: torch.Tensor,
    limits: torch.Tensor,
    beam_size: int,
    nbest: int = 1,
    alpha: float = 0.0,
    normalize: bool = False,
    need_weights: bool = False,
) -> list[list[Hypothesis]]:
    """src (batch, src_len), limits (batch,) -> the ``nbest`` best hypotheses of every sentence, best first."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest ({nbest}) must be between 1 and the beam size ({beam_size})")
    batch, k, device = src.size(0), beam_size, src.device  # every tensor lives where the model's input does
    limits = limits.to(device)
    max_len = int(limits.max())
    penalties = length_penalty(torch.arange(max_len + 1, device=device), alpha, normalize)  # (max_len + 1,) by length
    finished = Finished.empty(batch, nbest, max_len, device)
    alive = torch.arange(batch, device=device)  # the sentences still searched, in the order of the rows below
    state = model.start(src)  # one row per sentence: at the start only one beam is real
    ids = torch.full((batch,), SOS, dtype=torch.long, device=device)
    scores = torch.zeros(batch, 1, device=device)  # (alive, beams) log-probabilities of the beams, best first
    paths = Paths.empty(batch, 1, max_len, device)  # (alive, beams, ...) what the beams chose
    for t in range(max_len):
        logits, state, w = model.step(ids, state, need_weights)
        n, beams = scores.shape  # beams: 1 at the first step, k after it
        # The best 2k of a sentence's beams × vocab candidates are among each beam's own best 2k words,
        # so the (alive, beams, vocab) sum is never formed: cheaper by a vocabulary-sized pass per step.
        word_logp, words = top_words(logits, 2 * k)  # (alive·beams, width)
        width = words.size(-1)
        candidates = scores[:, :, None] + word_logp.view(n, beams, width)  # (alive, beams, width)
        top, index = candidates.view(n, -1).topk(min(2 * k, beams * width), dim=-1)  # (alive, 2k), best first
        beam, word, word_lp = index // width, words.view(n, -1).gather(1, index), word_logp.view(n, -1).gather(1, index)
        if top.size(1) < k:  # a first step with fewer words than beams: the beams past them are not real yet
            top, beam, word, word_lp = (F.pad(x, (0, k - x.size(1)), value=fill)
                                        for x, fill in ((top, -torch.inf), (beam, 0), (word, PAD), (word_lp, 0.0)))
        if need_weights:
            assert w is not None  # asked for
            paths.attend(t, w)
        at_limit = t + 1 >= limits[alive]  # (alive,)

        # finished: <eos> among the best k, or every one of the best k at the length limit
        _finish(finished, alive, t, top[:, :k], beam[:, :k], word[:, :k], word_lp[:, :k], at_limit, paths,
                penalties[t + 1])

        # the next beams: the best k candidates that do not end in <eos>
        keep = (word != EOS).long().argsort(dim=-1, descending=True, stable=True)[:, :k]  # (alive, k), best first
        scores, beam, word, word_lp = (x.gather(1, keep) for x in (top, beam, word, word_lp))
        paths = paths.pick(beam)
        paths.write(t, word, word_lp)

        # done: at the limit, or nbest finished and no beam can beat the worst of them
        best_possible = scores[:, 0] / penalties[limits[alive]]
        worst_kept = finished.score[alive, -1]  # the nbest-th best finished hypothesis, -inf while there are fewer
        done = at_limit | ((worst_kept >= best_possible) & (worst_kept > -torch.inf))
        keep_rows = (~done).nonzero().squeeze(1)  # (still alive,)
        if keep_rows.numel() == 0:
            break
        alive, scores, beam, word = alive[keep_rows], scores[keep_rows], beam[keep_rows], word[keep_rows]
        paths = paths.sentences(keep_rows)
        if beams == 1:
            state = state.beams(k)  # row b·k + j: beam j of sentence b, each a copy of its one row so far
        rows = (keep_rows[:, None] * k + beam).view(-1)  # the rows of the state that the new beams extend
        state = state.select(rows, same_sources=keep_rows.numel() == n)  # the beams of a sentence share its source
        ids = word.view(-1)
    return finished.hypotheses()


def _finish(finished: Finished, alive: torch.Tensor, t: int, top: torch.Tensor, beam: torch.Tensor,
            word: torch.Tensor, word_lp: torch.Tensor, at_limit: torch.Tensor, paths: Paths,
            penalty: torch.Tensor) -> None:
    """Step t's best k candidates (alive, k) that end (<eos>, or any at the length limit) join ``finished``:
    the words of the beam they extend, then theirs unless it is <eos> (whose log-probability is kept)."""
    ends = ((word == EOS) | at_limit[:, None]) & (top > -torch.inf)  # (alive, k)
    rows = ends.any(dim=1).nonzero().squeeze(1)  # the sentences with a hypothesis that ends
    if rows.numel() == 0:
        return
    ends, top, beam, word, word_lp = ends[rows], top[rows], beam[rows], word[rows], word_lp[rows]
    eos = word == EOS
    ended = paths.sentences(rows).pick(beam)  # (rows, k, ...): the beams' paths before step t
    ended.write(t, word.masked_fill(eos, PAD), word_lp)
    length = torch.full_like(word, t + 1) - eos.long()
    finished.take(alive[rows], (top / penalty).masked_fill(~ends, -torch.inf), top, length, t + 1, ended)
