"""The written-out LSTM layer (``seqlab.model.lstm``) against torch.nn.LSTM: the same outputs, state and gradients
in fp32 to rounding, within bf16's rounding under autocast, and where a language model's training step uses it."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from seqlab import precision
from seqlab.model import lm as lm_module
from seqlab.model import lstm as lstm_module
from seqlab.model.lm import RNNLM
from seqlab.model.lstm import LSTMFunction, lstm_layer, written_out_pays


def _run(layer: nn.LSTM, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], written: bool,
         autocast: bool) -> tuple[torch.Tensor, ...]:
    """Outputs, h_T, c_T and the gradients of x, the weights and the biases of a weighted sum of all three."""
    x = x.detach().clone().requires_grad_()
    layer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y, (h, c) = lstm_layer(layer, x, state) if written else layer(x, state)
    torch.manual_seed(5)
    ((y.float() * torch.randn(y.shape)).sum() + 0.3 * h.float().sum() + 0.7 * c.float().sum()).backward()
    assert x.grad is not None
    return (y.float(), h.float(), c.float(), x.grad, *(p.grad for p in layer.parameters() if p.grad is not None))


@pytest.mark.parametrize("state", [False, True])
def test_the_written_out_layer_is_torchs_lstm_forward_and_backward_in_fp32(state):  # S42, S43
    torch.manual_seed(0)
    layer = nn.LSTM(4, 6, batch_first=True)
    x = torch.randn(3, 5, 4)
    carried = (torch.randn(1, 3, 6), torch.randn(1, 3, 6)) if state else None
    ours, torchs = (_run(layer, x, carried, written, autocast=False) for written in (True, False))  # type: ignore[arg-type]
    names = ["y", "h", "c", "dx", "dW_x", "dW_h", "db_x", "db_h"]
    for name, a, b in zip(names, ours, torchs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_under_bf16_autocast_it_stays_within_bf16s_rounding_of_fp32():
    torch.manual_seed(1)
    layer = nn.LSTM(16, 32, batch_first=True)
    x = torch.randn(4, 12, 16)
    bf16, fp32 = (_run(layer, x, None, True, autocast) for autocast in (True, False))  # type: ignore[arg-type]
    for a, b in zip(bf16, fp32):
        assert (a - b).abs().max() <= 0.03 * b.abs().max()  # bf16 keeps 8 bits: products rounded once each
    assert bf16[0].dtype == torch.float32  # the comparison above read the bf16 outputs as floats


def test_its_gradient_checks_in_float64():  # S42: "a gradient check passes"
    torch.manual_seed(2)
    x, h0, c0 = (torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True),
                 torch.randn(2, 4, dtype=torch.float64, requires_grad=True),
                 torch.randn(2, 4, dtype=torch.float64, requires_grad=True))
    w_x, w_h, b = (torch.randn(16, n, dtype=torch.float64, requires_grad=True) for n in (3, 4, 1))

    def layer(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return LSTMFunction.apply(args[0], args[1], args[2], args[3], args[4], args[5][:, 0], torch.float64)

    with torch.autocast("cpu", enabled=False):
        assert torch.autograd.gradcheck(layer, (x, h0, c0, w_x, w_h, b))


def test_a_language_models_bf16_training_step_runs_it_and_only_there(monkeypatch):
    if not precision.onednn_bf16_lstm():
        pytest.skip("oneDNN has no bf16 LSTM on this CPU: the fused kernel it replaces is not there")
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(1)
        return lstm_layer(*args)

    monkeypatch.setattr(lm_module, "lstm_layer", counted)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # too narrow to pay: the fused kernel
        RNNLM(50, "lstm", 16, 16, num_layers=1)(torch.randint(0, 50, (4, 7)))
    assert not calls
    monkeypatch.setattr(lstm_module, "WRITTEN_OUT_HIDDEN", 16)
    torch.manual_seed(3)
    model = RNNLM(50, "lstm", 16, 16, num_layers=2, dropout=0.0, weight_drop=0.2)
    ids = torch.randint(0, 50, (4, 7))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, state = model(ids)
    assert len(calls) == 2 and logits.shape == (4, 7, 50)
    logits.float().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids, state)
    model(ids)
    assert len(calls) == 2  # evaluation, and fp32, stay with torch's fused kernel
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert written_out_pays(torch.zeros(4, 7, 16), 16)
        assert not written_out_pays(torch.zeros(lstm_module.WRITTEN_OUT_ROWS + 1, 7, 16), 16)  # many rows: fused
