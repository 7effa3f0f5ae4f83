"""Greedy decoding (seed 003; seed 000 ``evaluate``): start from <sos>, feed back the argmax, stop at <eos>.

``decode_left_to_right`` is the loop greedy decoding and sampling share: every
sentence of the batch advances one word per step through the model's
``step`` (cached: the prefix is never recomputed); a sentence is done at
<eos> or at its length limit, and the batch when all are.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from seqlab.decoding.hypothesis import Hypothesis, StepDecoder, log_probs
from seqlab.tokenizer import EOS, PAD, SOS

Pick = Callable[[torch.Tensor], torch.Tensor]  # log-probabilities (batch, vocab) -> the next ids (batch,)


@torch.no_grad()
def decode_left_to_right(
    model: StepDecoder, src: torch.Tensor, limits: torch.Tensor, pick: Pick, need_weights: bool = False
) -> list[Hypothesis]:
    """src (batch, src_len), limits (batch,): the most words each sentence may produce.
    Returns one hypothesis per sentence; its score is the model's log-probability."""
    batch = src.size(0)
    state = model.start(src)
    ids = torch.full((batch,), SOS, dtype=torch.long)
    total = torch.zeros(batch)  # summed log-probabilities of the chosen words
    finished = torch.zeros(batch, dtype=torch.bool)
    outputs, weights = [], []  # per step: (batch,) ids, (batch, layers, heads, src_len)
    for t in range(int(limits.max())):
        logits, state, w = model.step(ids, state, need_weights)
        scores = log_probs(logits)  # (batch, vocab)
        ids = pick(scores).masked_fill(finished, PAD)  # (batch,)
        total += scores.gather(1, ids[:, None]).squeeze(1).masked_fill(finished, 0.0)
        outputs.append(ids)
        weights.append(w)
        finished |= (ids == EOS) | (t + 1 >= limits)
        if finished.all():
            break
    rows = torch.stack(outputs, dim=1).tolist()  # (batch, steps)
    hypotheses = []
    for i, row in enumerate(rows):
        steps = row.index(PAD) if PAD in row else len(row)  # steps taken, <eos> included
        tokens = row[: steps - 1] if row[steps - 1] == EOS else row[:steps]
        attention = torch.stack([w[i] for w in weights[:steps]]).float() if need_weights and weights[0] is not None else None
        hypotheses.append(Hypothesis(tokens, float(total[i]), float(total[i]), attention))
    return hypotheses


def greedy_decode(model: StepDecoder, src: torch.Tensor, limits: torch.Tensor, need_weights: bool = False) -> list[Hypothesis]:
    """The most probable next word at every step."""
    return decode_left_to_right(model, src, limits, lambda scores: scores.argmax(dim=-1), need_weights)
