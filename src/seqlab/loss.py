"""The padding-masked cross-entropy (seed 000 ``loss_function``; docs/seeds.md).

The seed multiplies the per-token loss by ``mask = (y_true != 0)`` and then averages over *all*
positions, pads included; seqlab sums over the real tokens and divides by their number instead, so
the loss does not shrink as padding grows (a known slip in the seed). A classifier's loss is the plain
cross-entropy of one class per input (``class_nll_sum``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seqlab.specials import PAD


def token_nll_sum(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-PAD targets. logits (batch, len, vocab), targets (batch, len)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def class_nll_sum(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy of one class per input. logits (batch, classes), labels (batch,) class indices."""
    return F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, reduction="sum")
