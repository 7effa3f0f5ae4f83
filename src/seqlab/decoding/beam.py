"""Beam search (seed 003): keep the k best partial outputs by accumulated log-probability.

At every step each of the k hypotheses of a sentence is extended by every
word; of the k × vocab candidates the best 2k are looked at: one ending in
<eos> among the best k becomes a finished hypothesis, and the best k that do
not end become the next beams. (Taking 2k makes sure k survive even when
every beam's best word is <eos>.)

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

from seqlab.decoding.hypothesis import Hypothesis, log_probs
from seqlab.decoding.step import StepDecoder
from seqlab.specials import EOS, PAD, SOS


def length_penalty(length: torch.Tensor | int, alpha: float, normalize: bool) -> torch.Tensor:
    """The divisor of the log-probability: GNMT's ((5 + len) / 6)^α, len itself (``normalize``), or 1."""
    length = torch.as_tensor(length, dtype=torch.float32)
    if normalize:
        return length
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Finished:
    """Each sentence's ``nbest`` best finished hypotheses so far, best first, in tensors: their scores (batch,
    nbest), -inf where there is none yet; log-probabilities (batch, nbest); lengths in words and in steps
    (words, and <eos> where it ended there) (batch, nbest); words (batch, nbest, max_len), PAD after the end; and
    attention (batch, nbest, max_len, layers, heads, src_len) when it is asked for."""

    score: torch.Tensor
    log_prob: torch.Tensor
    length: torch.Tensor
    steps: torch.Tensor
    words: torch.Tensor
    attention: torch.Tensor | None = None

    @classmethod
    def empty(cls, batch: int, nbest: int, max_len: int, device: torch.device) -> Finished:
        counts = torch.zeros(batch, nbest, dtype=torch.long, device=device)
        return cls(torch.full((batch, nbest), -torch.inf, device=device), torch.zeros(batch, nbest, device=device),
                   counts, counts.clone(), torch.full((batch, nbest, max_len), PAD, dtype=torch.long, device=device))

    def take(self, rows: torch.Tensor, score: torch.Tensor, log_prob: torch.Tensor, length: torch.Tensor,
             steps: int, words: torch.Tensor, attention: torch.Tensor | None) -> None:
        """Sentences ``rows`` (n,) take in their new hypotheses of ``steps`` steps: score, log_prob, length (n, k),
        -inf scores for none; words (n, k, max_len); attention (n, k, max_len, ...). Ties keep the earlier first
        (a stable sort: those already kept, then the new ones in the order of k), as a sort of all would."""
        nbest = self.score.size(1)
        scores = torch.cat([self.score[rows], score], dim=1)  # (n, nbest + k)
        order = scores.sort(dim=1, descending=True, stable=True).indices[:, :nbest]  # (n, nbest)
        self.score[rows] = scores.gather(1, order)
        self.log_prob[rows] = torch.cat([self.log_prob[rows], log_prob], dim=1).gather(1, order)
        self.length[rows] = torch.cat([self.length[rows], length], dim=1).gather(1, order)
        self.steps[rows] = torch.cat([self.steps[rows], torch.full_like(length, steps)], dim=1).gather(1, order)
        self.words[rows] = _pick(torch.cat([self.words[rows], words], dim=1), order)
        if attention is not None:
            if self.attention is None:
                self.attention = attention.new_zeros(self.score.shape + attention.shape[2:])
            self.attention[rows] = _pick(torch.cat([self.attention[rows], attention], dim=1), order)

    def hypotheses(self) -> list[list[Hypothesis]]:
        """Every sentence's finished hypotheses, best first, as ``Hypothesis`` objects."""
        out: list[list[Hypothesis]] = []
        scores, log_probs_, lengths, steps, words = (self.score.tolist(), self.log_prob.tolist(),
                                                     self.length.tolist(), self.steps.tolist(), self.words.tolist())
        for b in range(len(scores)):
            out.append([
                Hypothesis(words[b][j][: lengths[b][j]], log_probs_[b][j], scores[b][j],
                           None if self.attention is None else self.attention[b, j, : steps[b][j]].cpu())
                for j in range(len(scores[b])) if scores[b][j] > -torch.inf
            ])
        return out


def _pick(values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """values (n, m, *rest) -> (n, nbest, *rest): the entries ``order`` (n, nbest) names, per row."""
    index = order.view(*order.shape, *([1] * (values.dim() - 2))).expand(-1, -1, *values.shape[2:])
    return values.gather(1, index)


@torch.no_grad()
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
    finished = Finished.empty(batch, nbest, max_len, device)
    alive = torch.arange(batch, device=device)  # the sentences still searched, in the order of the rows below
    state = model.start(src).beams(k)  # row b·k + j: beam j of sentence b
    ids = torch.full((batch * k,), SOS, dtype=torch.long, device=device)
    scores = torch.full((batch, k), -torch.inf, device=device)  # (alive, k) log-probabilities of the beams, best first
    scores[:, 0] = 0.0  # at the start only one beam is real
    history = torch.full((batch, k, max_len), PAD, dtype=torch.long, device=device)  # (alive, k, max_len): words
    attention = None  # (alive, k, max_len, layers, heads, src_len) when need_weights
    for t in range(max_len):
        logits, state, w = model.step(ids, state, need_weights)
        n = alive.numel()
        # The best 2k of a sentence's k × vocab candidates are among each beam's own best 2k words,
        # so the (alive, k, vocab) sum is never formed: cheaper by a vocabulary-sized pass per step.
        word_logp, words = log_probs(logits).topk(min(2 * k, logits.size(-1)), dim=-1)  # (alive·k, width)
        width = words.size(-1)
        candidates = scores[:, :, None] + word_logp.view(n, k, width)  # (alive, k, width)
        top, index = candidates.view(n, -1).topk(min(2 * k, k * width), dim=-1)  # (alive, 2k), best first
        beam, word = index // width, words.view(n, -1).gather(1, index)
        if need_weights:
            assert w is not None  # asked for
            if attention is None:
                attention = torch.zeros(n, k, max_len, *w.shape[1:], device=device)
            attention[:, :, t] = w.float().view(n, k, *w.shape[1:])
        at_limit = t + 1 >= limits[alive]  # (alive,)

        # finished: <eos> among the best k, or every one of the best k at the length limit
        _finish(finished, alive, t, top[:, :k], beam[:, :k], word[:, :k], at_limit, history, attention,
                length_penalty(t + 1, alpha, normalize))

        # the next beams: the best k candidates that do not end in <eos>
        keep = (word != EOS).long().argsort(dim=-1, descending=True, stable=True)[:, :k]  # (alive, k), best first
        scores, beam, word = top.gather(1, keep), beam.gather(1, keep), word.gather(1, keep)
        history = _pick(history, beam)
        history[:, :, t] = word
        if attention is not None:
            attention = _pick(attention, beam)

        # done: at the limit, or nbest finished and no beam can beat the worst of them
        best_possible = scores[:, 0] / length_penalty(limits[alive], alpha, normalize)
        worst_kept = finished.score[alive, -1]  # the nbest-th best finished hypothesis, -inf while there are fewer
        done = at_limit | ((worst_kept >= best_possible) & (worst_kept > -torch.inf))
        keep_rows = (~done).nonzero().squeeze(1)  # (still alive,)
        if keep_rows.numel() == 0:
            break
        alive, scores, history = alive[keep_rows], scores[keep_rows], history[keep_rows]
        beam, word = beam[keep_rows], word[keep_rows]
        if attention is not None:
            attention = attention[keep_rows]
        rows = (keep_rows[:, None] * k + beam).view(-1)  # the rows of the state that the new beams extend
        state = state.select(rows, same_sources=keep_rows.numel() == n)  # the beams of a sentence share its source
        ids = word.view(-1)
    return finished.hypotheses()


def _finish(finished: Finished, alive: torch.Tensor, t: int, top: torch.Tensor, beam: torch.Tensor,
            word: torch.Tensor, at_limit: torch.Tensor, history: torch.Tensor, attention: torch.Tensor | None,
            penalty: torch.Tensor) -> None:
    """Step t's best k candidates (alive, k) that end (<eos>, or any at the length limit) join ``finished``:
    the words of the beam they extend, then theirs unless it is <eos>."""
    ends = ((word == EOS) | at_limit[:, None]) & (top > -torch.inf)  # (alive, k)
    rows = ends.any(dim=1).nonzero().squeeze(1)  # the sentences with a hypothesis that ends
    if rows.numel() == 0:
        return
    ends, top, beam, word = ends[rows], top[rows], beam[rows], word[rows]
    eos = word == EOS
    words = _pick(history[rows], beam)  # (rows, k, max_len): the beams' words before step t
    words[:, :, t] = word.masked_fill(eos, PAD)
    length = torch.full_like(word, t + 1) - eos.long()
    weights = None if attention is None else _pick(attention[rows], beam)
    finished.take(alive[rows], (top / penalty).masked_fill(~ends, -torch.inf), top, length, t + 1, words, weights)
