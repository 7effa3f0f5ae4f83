"""The padding-masked cross-entropy (seed 000 ``loss_function``; docs/seeds.md).

The seed multiplies the per-token loss by ``mask = (y_true != 0)`` and then averages over *all*
positions, pads included; seqlab sums over the real tokens and divides by their number instead, so
the loss does not shrink as padding grows (a known slip in the seed). A classifier's loss is the plain
cross-entropy of one class per input (``class_nll_sum``).

The token loss is computed a block of rows at a time (``SmoothedNll``): under bf16 autocast,
``F.cross_entropy(logits.float())`` copies the whole (tokens, vocab) logits to float32, keeps their log-softmax for
the backward pass and casts the gradient back, three passes over tens of megabytes that took about a third of a
Multi30k training step; a block of rows stays in the CPU's cache instead. It equals ``F.cross_entropy`` with
``ignore_index`` and ``label_smoothing`` (tested against it, values and gradients).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from seqlab.specials import PAD

BLOCK_ELEMENTS = 1 << 18  # logits per block of rows (1 MiB of float32): a block's temporaries stay in the cache


class SmoothedNll(torch.autograd.Function):
    """The summed label-smoothed cross-entropy of the rows whose target is not ``ignore``, in float32 or wider
    whatever the logits' dtype, a block of rows at a time. With log-sum-exp ``m_i = log Σ_j exp z_ij``, smoothing ε
    and V classes, a row's loss is ``(1 − ε)(m_i − z_iy) + ε(m_i − mean_j z_ij)`` (``F.cross_entropy``'s
    ``label_smoothing``) and its gradient ``softmax(z_i) − (1 − ε)·onehot(y_i) − ε/V``. Only the logits (in their
    own dtype) and each row's ``m_i`` are kept for the backward pass; the gradient is written in the logits'
    dtype."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, targets: torch.Tensor, smoothing: float,
                ignore: int) -> torch.Tensor:
        # logits (rows, vocab), targets (rows,)
        keep = targets != ignore
        picked = targets.masked_fill(~keep, 0).unsqueeze(1)  # (rows, 1): any class for an ignored row
        rows = max(1, BLOCK_ELEMENTS // logits.size(1))
        wide = torch.promote_types(logits.dtype, torch.float32)
        lse = torch.empty(len(logits), dtype=wide, device=logits.device)
        losses = torch.empty_like(lse)
        for a in range(0, len(logits), rows):
            z = logits[a:a + rows].to(wide)  # (block, vocab)
            lse[a:a + rows] = m = torch.logsumexp(z, 1)
            loss = m - (1 - smoothing) * z.gather(1, picked[a:a + rows]).squeeze(1)
            losses[a:a + rows] = loss - smoothing * z.mean(1) if smoothing else loss
        ctx.save_for_backward(logits, picked, keep, lse)
        ctx.smoothing, ctx.rows = smoothing, rows
        return (losses * keep).sum()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        logits, picked, keep, lse = ctx.saved_tensors
        smoothing, rows = ctx.smoothing, ctx.rows
        out = torch.empty_like(logits)
        scale = keep.to(lse.dtype) * grad  # (rows,): 0 for an ignored row
        onehot = torch.full((min(rows, len(logits)), 1), smoothing - 1, dtype=lse.dtype, device=logits.device)
        for a in range(0, len(logits), rows):
            p = (logits[a:a + rows].to(lse.dtype) - lse[a:a + rows, None]).exp_()  # softmax (block, vocab)
            p.sub_(smoothing / logits.size(1)).scatter_add_(1, picked[a:a + rows], onehot[:len(p)])
            out[a:a + rows] = p.mul_(scale[a:a + rows, None])
        return out, None, None, None


def token_nll_sum(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-PAD targets (``SmoothedNll``). logits (batch, len, vocab), targets (batch,
    len)."""
    result: torch.Tensor = SmoothedNll.apply(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                                             label_smoothing, PAD)
    return result


def class_nll_sum(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy of one class per input. logits (batch, classes), labels (batch,) class indices."""
    return F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, reduction="sum")
