"""The token loss, a block of rows at a time (``seqlab.loss.SmoothedNll``), against ``F.cross_entropy``."""

import pytest
import torch
import torch.nn.functional as F

from seqlab import loss
from seqlab.loss import SmoothedNll, token_nll_sum
from seqlab.specials import PAD


def reference(logits: torch.Tensor, targets: torch.Tensor, smoothing: float) -> torch.Tensor:
    """What token_nll_sum replaced: PyTorch's cross-entropy of the float32 logits."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=PAD,
                           label_smoothing=smoothing, reduction="sum")


def loss_and_grad(fn, logits: torch.Tensor, targets: torch.Tensor, smoothing: float) -> tuple[float, torch.Tensor]:
    x = logits.clone().requires_grad_()
    value = fn(x, targets, smoothing)
    (value * 0.5).backward()  # an upstream gradient other than 1
    assert x.grad is not None and x.grad.dtype == logits.dtype
    return float(value.detach()), x.grad.float()


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.bfloat16, 1e-2)])
def test_the_blocked_loss_equals_cross_entropy(monkeypatch, smoothing, dtype, tol):
    monkeypatch.setattr(loss, "BLOCK_ELEMENTS", 3 * 50)  # blocks of 3 rows: 17 rows end in a part block
    generator = torch.Generator().manual_seed(0)
    logits = (4 * torch.randn(1, 17, 50, generator=generator)).to(dtype)
    targets = torch.randint(1, 50, (1, 17), generator=generator)
    targets[0, ::4] = PAD  # ignored rows: no loss, no gradient
    value, grad = loss_and_grad(token_nll_sum, logits, targets, smoothing)
    expected, expected_grad = loss_and_grad(reference, logits, targets, smoothing)
    assert value == pytest.approx(expected, rel=1e-5)
    assert torch.allclose(grad, expected_grad, atol=tol, rtol=0)
    assert grad[0, ::4].abs().max() == 0


def test_the_blocked_loss_passes_gradcheck(monkeypatch):
    monkeypatch.setattr(loss, "BLOCK_ELEMENTS", 2 * 7)
    logits = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([3, 0, 6, 1, 2])
    torch.autograd.gradcheck(lambda z: SmoothedNll.apply(z, targets, 0.2, 0), (logits,))


def test_all_padding_gives_zero_loss_and_gradient():
    logits = torch.randn(2, 3, 11, requires_grad=True)
    value = token_nll_sum(logits, torch.full((2, 3), PAD), 0.1)
    value.backward()
    assert float(value.detach()) == 0.0 and logits.grad is not None and logits.grad.abs().max() == 0
