"""seqlab's Dropout: the distribution, scaling and gradient of torch.nn.Dropout, from cheaper random numbers."""

import pytest
import torch

from seqlab.model.dropout import Dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_a_fraction_p_and_scales_the_rest(p):
    torch.manual_seed(0)
    x = torch.ones(400, 1000)
    y = Dropout(p).train()(x)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.003  # 400k draws: the standard error is below 0.001
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
    assert abs(y.mean().item() - 1.0) < 0.01  # unbiased, like torch.nn.Dropout


def test_masks_are_independent_across_elements_and_the_three_quarters_of_a_draw():
    torch.manual_seed(1)
    m = keep_mask(torch.Size([300_000]), 0.5, torch.float32) > 0
    thirds = [m[i::3].float() for i in range(3)]  # the three 16-bit quarters of each 64-bit draw
    assert all(abs(t.mean().item() - 0.5) < 0.01 for t in thirds)
    correlations = torch.corrcoef(torch.stack(thirds))
    assert correlations.fill_diagonal_(0).abs().max().item() < 0.01
    first = thirds[0]
    assert abs(torch.corrcoef(torch.stack([first[:-1], first[1:]]))[0, 1].item()) < 0.01  # draw to draw


def test_evaluation_and_p_zero_pass_through():
    x = torch.randn(3, 5)
    assert Dropout(0.3).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_gradient_is_the_mask():
    torch.manual_seed(2)
    x = torch.randn(50, 40, requires_grad=True)
    y = Dropout(0.2).train()(x)
    y.sum().backward()
    kept = y.detach() != 0
    assert x.grad is not None and torch.allclose(x.grad, kept.float() / 0.8)


def test_seeded_masks_repeat():
    x = torch.ones(7, 9)
    torch.manual_seed(3)
    a = Dropout(0.4).train()(x)
    torch.manual_seed(3)
    b = Dropout(0.4).train()(x)
    assert torch.equal(a, b)
    assert not torch.equal(a, Dropout(0.4).train()(x))


def test_odd_sizes_and_bf16():
    y = Dropout(0.25).train()(torch.ones(3, 5, 7, dtype=torch.bfloat16))
    assert y.shape == (3, 5, 7) and y.dtype == torch.bfloat16


def test_rejects_bad_probabilities():
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.0)
