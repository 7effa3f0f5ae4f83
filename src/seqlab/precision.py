"""Numeric precision: bf16 autocast where the CPU multiplies bf16 natively, fp32 elsewhere.

Under bf16 autocast (``train.precision: bf16``) matrix products run in bfloat16 while
the master weights, the optimizer and the loss stay in float32. On CPUs with AVX-512
BF16 or AMX that is 1.2-1.8× faster than fp32 for training and decoding, with the same
loss curves (docs/benchmarks.md). On CPUs without them (AVX2-only machines) PyTorch
emulates bf16: on an AVX2 EPYC a 1024² bf16 product ran at 1 GFLOP/s against 150 for
fp32, and a bf16 training step was 25× *slower* than fp32 (docs/benchmarks.md, "bf16 on a
CPU without it").

So bf16 runs only where it is native: ``auto`` (the default) and ``bf16`` both mean
bf16 there and fp32 elsewhere (``bf16`` says so in a warning), ``fp32`` means fp32.
It is decided on the machine that runs the model, not stored: a run trained in bf16
decodes in fp32 on a CPU without native bf16, and the other way round.

For decoding only, ``quantize_int8`` gives a copy of a model whose linear layers hold
int8 weights (dynamic quantisation: activations are quantised on the fly, per batch).
It changes outputs slightly; docs/benchmarks.md reports speed and accuracy before and
after, measured in the same run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings

import torch
from torch import nn

log = logging.getLogger("seqlab")


@functools.cache
def native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX)."""
    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(cpu, name, lambda: False)() for name in checks)


def resolve(precision: str) -> str:
    """What ``auto``, ``bf16`` or ``fp32`` means on this CPU: ``bf16`` or ``fp32``."""
    if precision == "fp32":
        return "fp32"
    if native_bf16():
        return "bf16"
    if precision == "bf16":
        _warn_not_native()
    return "fp32"


@functools.cache
def _warn_not_native() -> None:
    log.warning("precision bf16: this CPU has no native bf16 (AVX-512 BF16 or AMX), where emulated bf16 is many "
                "times slower than fp32; running in fp32")


def autocast(precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast on the CPU when ``precision`` resolves to bf16, else a no-op."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=resolve(precision) == "bf16")


def quantize_int8(model: nn.Module) -> nn.Module:
    """A copy of ``model`` for CPU inference with int8 weights in every ``nn.Linear`` (per-tensor scales)
    and activations quantised on the fly; everything else (embeddings, attention products, norms) stays fp32."""
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao, not yet removed
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
