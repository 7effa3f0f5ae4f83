"""Greedy decoding (seed 003; seed 000 ``evaluate``): start from <sos>, feed back the argmax, stop at <eos>.

Batched: every sentence of the batch advances one token per step; sentences
that have produced <eos> are padded until the whole batch is done or
``max_length`` tokens are out.
"""

from __future__ import annotations

import torch

from seqlab.model import Seq2seq
from seqlab.tokenizer import EOS, PAD, SOS


@torch.no_grad()
def greedy_decode(model: Seq2seq, src: torch.Tensor, max_length: int) -> list[list[int]]:
    """src (batch, src_len) -> one id list per sentence, without <sos>/<eos>."""
    memory, src_mask = model.encode(src)
    batch = src.size(0)
    ys = torch.full((batch, 1), SOS, dtype=torch.long)  # (batch, 1 + steps)
    finished = torch.zeros(batch, dtype=torch.bool)
    for _ in range(max_length):
        logits, _ = model.decode(ys, memory, src_mask)  # (batch, steps, vocab)
        next_ids = logits[:, -1].argmax(dim=-1).masked_fill(finished, PAD)
        ys = torch.cat([ys, next_ids[:, None]], dim=1)
        finished |= next_ids == EOS
        if finished.all():
            break
    return [_strip(row) for row in ys[:, 1:].tolist()]


def _strip(ids: list[int]) -> list[int]:
    """Cut at the first <eos>."""
    return ids[: ids.index(EOS)] if EOS in ids else ids
