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
"""

from __future__ import annotations

from typing import Any

import torch

from seqlab.decoding.hypothesis import Hypothesis, log_probs
from seqlab.decoding.step import StepDecoder
from seqlab.specials import EOS, SOS


def length_penalty(length: torch.Tensor | int, alpha: float, normalize: bool) -> torch.Tensor:
    """The divisor of the log-probability: GNMT's ((5 + len) / 6)^α, len itself (``normalize``), or 1."""
    length = torch.as_tensor(length, dtype=torch.float32)
    if normalize:
        return length
    return ((5.0 + length) / 6.0) ** alpha


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
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    alive = torch.arange(batch, device=device)  # the sentences still searched, in the order of the rows below
    state = model.start(src).select(alive.repeat_interleave(k))  # row b·k + j: beam j of sentence b
    ids = torch.full((batch * k,), SOS, dtype=torch.long, device=device)
    scores = torch.full((batch, k), -torch.inf, device=device)  # (alive, k) log-probabilities of the beams, best first
    scores[:, 0] = 0.0  # at the start only one beam is real
    history = torch.zeros(batch, k, 0, dtype=torch.long, device=device)  # (alive, k, steps): the beams' words
    attention = None  # (alive, k, steps, layers, heads, src_len) when need_weights
    for t in range(int(limits.max())):
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
            w = w.float().view(n, k, 1, *w.shape[1:])
            attention = w if attention is None else torch.cat([attention, w], dim=2)
        at_limit = t + 1 >= limits[alive]  # (alive,)

        # finished: <eos> among the best k, or every one of the best k at the length limit
        ends = (word == EOS) | at_limit[:, None]
        ends[:, k:] = False
        for i, j in (ends & (top > -torch.inf)).nonzero().tolist():
            b, source = int(alive[i]), int(beam[i, j])
            tokens = history[i, source].tolist() + ([] if word[i, j] == EOS else [int(word[i, j])])
            log_prob = float(top[i, j])
            finished[b].append(Hypothesis(
                tokens, log_prob, log_prob / float(length_penalty(t + 1, alpha, normalize)),
                None if attention is None else attention[i, source].cpu(),
            ))

        # the next beams: the best k candidates that do not end in <eos>
        go_on = (word != EOS).long()
        keep = go_on.argsort(dim=-1, descending=True, stable=True)[:, :k]  # (alive, k), still best first
        scores, beam, word = top.gather(1, keep), beam.gather(1, keep), word.gather(1, keep)
        history = torch.cat([history.gather(1, beam[:, :, None].expand(-1, -1, t)), word[:, :, None]], dim=2)
        if attention is not None:
            attention = attention[torch.arange(n, device=device)[:, None], beam]

        # done: at the limit, or nbest finished and no beam can beat the worst of them
        best_possible = scores[:, 0] / length_penalty(limits[alive], alpha, normalize)
        done = at_limit.clone()
        for i in range(n):
            have = finished[int(alive[i])]
            if len(have) >= nbest:
                done[i] |= sorted(h.score for h in have)[-nbest] >= float(best_possible[i])
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
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]
