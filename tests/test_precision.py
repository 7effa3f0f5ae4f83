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


def test_explicit_bf16_is_kept_with_a_warning_where_it_is_emulated(monkeypatch, caplog):
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    precision._warn_emulated.cache_clear()
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        assert precision.resolve("bf16") == "bf16"
    assert "no native bf16" in caplog.text
    with precision.autocast("bf16"):
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
