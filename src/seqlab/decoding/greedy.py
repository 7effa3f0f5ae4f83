"""Greedy decoding (seed 003; seed 000 ``evaluate``): start from <sos>, feed back the argmax, stop at <eos>.

``decode_left_to_right`` is the loop greedy decoding and sampling share: every
sentence of the batch advances one word per step through the model's
``step`` (cached: the prefix is never recomputed); a sentence is done at
<eos> or at its length limit, and the batch when all are. Done sentences leave
the batch (``state.select``) once they are a quarter of its rows, so that one
long output does not keep the whole batch decoding, without paying for a copy
of the cache at every step where some sentence ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from seqlab.decoding.hypothesis import Hypothesis, best_words, chosen_log_probs
from seqlab.decoding.step import StepDecoder
from seqlab.specials import EOS, PAD, SOS

Step = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]  # rows, words, log-probs, weights
Pick = Callable[[torch.Tensor], torch.Tensor]  # logits (batch, vocab) -> the next ids (batch,), never <pad>/<sos>


@torch.inference_mode()  # no autograd bookkeeping at all (views, version counters): a tenth off one sentence's time
def decode_left_to_right(
    model: StepDecoder[Any], src: torch.Tensor, limits: torch.Tensor, pick: Pick, need_weights: bool = False
) -> list[Hypothesis]:
    """src (batch, src_len), limits (batch,): the most words each sentence may produce.
    Returns one hypothesis per sentence; its score is the model's log-probability."""
    batch, device = src.size(0), src.device  # every tensor lives where the model's input does
    limits = limits.to(device)
    state = model.start(src)
    rows = torch.arange(batch, device=device)  # the sentence in each row of the state
    ids = torch.full((batch,), SOS, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # per row
    total = torch.zeros(batch, device=device)  # per sentence: summed log-probabilities of the chosen words
    steps: list[Step] = []  # per step: the sentences still going, their words and log-probabilities (live,), weights
    for t in range(int(limits.max())):
        logits, state, w = model.step(ids, state, need_weights)  # (rows, vocab)
        ids = pick(logits)  # (rows,)
        live = ~done
        chosen = chosen_log_probs(logits, ids)[live]  # (live,)
        total[rows[live]] += chosen
        steps.append((rows[live], ids[live], chosen, None if w is None else w[live]))
        done |= (ids == EOS) | (t + 1 >= limits[rows])
        if done.all():
            break
        if 4 * int(done.sum()) >= done.numel():  # done sentences leave once they are a quarter of the rows
            keep = (~done).nonzero().squeeze(1)
            state, rows, ids, done = state.select(keep), rows[keep], ids[keep], done[keep]
    return _hypotheses(batch, steps, total)


def _hypotheses(batch: int, steps: list[Step], total: torch.Tensor) -> list[Hypothesis]:
    """The steps' words, log-probabilities and weights of each sentence, joined once at the end."""
    device = total.device
    words = torch.full((batch, len(steps)), PAD, dtype=torch.long, device=device)  # (batch, steps), PAD after the end
    word_log_probs = torch.zeros(batch, len(steps), device=device)
    attention = None
    for t, (live, chosen, their_log_probs, w) in enumerate(steps):
        words[live, t] = chosen
        word_log_probs[live, t] = their_log_probs
        if w is not None:
            if attention is None:
                attention = torch.zeros(batch, len(steps), *w.shape[1:], device=device)  # (batch, steps, layers, heads, src)
            attention[live, t] = w.float()
    hypotheses = []  # from Python lists made once, not a tensor indexed twice per sentence
    for i, (row, lps, score) in enumerate(zip(words.tolist(), word_log_probs.tolist(), total.tolist())):
        length = row.index(PAD) if PAD in row else len(row)  # steps taken, <eos> included
        tokens = row[: length - 1] if row[length - 1] == EOS else row[:length]
        weights = None if attention is None else attention[i, :length].cpu()
        hypotheses.append(Hypothesis(tokens, score, score, weights, lps[:length]))
    return hypotheses


def greedy_decode(
    model: StepDecoder[Any], src: torch.Tensor, limits: torch.Tensor, need_weights: bool = False
) -> list[Hypothesis]:
    """The most probable next word at every step."""
    return decode_left_to_right(model, src, limits, best_words, need_weights)
