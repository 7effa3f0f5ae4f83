"""The padding-masked cross-entropy (seed 000 ``loss_function``).

The seed multiplies the per-token loss by ``mask = (y_true != 0)`` and then
averages over *all* positions, pads included; we divide by the number of real
tokens instead, so the loss does not shrink as padding grows (a known slip in
the seed; see ../shared/docs/seed-inventory.md, appendix 15).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seqlab.tokenizer import PAD


def token_nll_sum(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over non-PAD targets. logits (batch, len, vocab), targets (batch, len)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        targets.reshape(-1),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy per real (non-PAD) target token; 0 for an all-PAD batch."""
    num_tokens = (targets != PAD).sum().clamp(min=1)
    return token_nll_sum(logits, targets, label_smoothing) / num_tokens
