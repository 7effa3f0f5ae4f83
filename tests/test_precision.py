"""Precision: ``auto`` follows the CPU; bf16 autocast really runs matrix products in bf16."""

import logging

import pytest
import torch

from seqlab import precision


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
