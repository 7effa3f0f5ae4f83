"""Precision: ``auto`` follows the CPU; bf16 autocast really runs matrix products in bf16."""

import logging

import pytest
import torch

from seqlab import precision
from seqlab.config import TransformerConfig
from seqlab.model import build_model


@pytest.mark.parametrize("native", [True, False])
def test_auto_picks_bf16_only_where_the_cpu_has_it(monkeypatch, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    assert precision.resolve("auto") == ("bf16" if native else "fp32")
    assert precision.resolve("fp32") == "fp32"
    with precision.autocast("auto"):
        product = torch.ones(2, 3) @ torch.ones(3, 2)
    assert product.dtype == (torch.bfloat16 if native else torch.float32)


def test_bf16_falls_back_to_fp32_with_a_warning_where_it_is_not_native(monkeypatch, caplog):
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    precision._warn_not_native.cache_clear()
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        assert precision.resolve("bf16") == "fp32"
    assert "no native bf16" in caplog.text
    with precision.autocast("bf16"):
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    assert precision.resolve("bf16") == "bf16" and precision.resolve("fp32") == "fp32"


def test_int8_quantises_every_linear_layer_and_stays_close_to_fp32():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=32, num_layers=2, num_heads=4, d_ff=64, dropout=0.0, max_length=20)
    model = build_model(cfg, 20, 20).eval()
    int8 = precision.quantize_int8(model)
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    quantised = [m for m in int8.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert len(quantised) == len(linear) == 2 * (4 + 2) + 2 * (4 + 4 + 2) + 1  # attention W_QKVO, FFN, output
    assert not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.modules())  # a copy
    src, trg = torch.randint(3, 20, (4, 7)), torch.randint(3, 20, (4, 5))
    with torch.no_grad():
        full, small = model(src, trg), int8(src, trg)
    assert not torch.equal(full, small)
    assert (full - small).abs().max() < 0.05 * full.abs().max()
