"""A seqlab Transformer as two ONNX graphs, and seqlab's decoding driving them in ONNX Runtime.

``export_onnx(RUN, OUT)`` (``seqlab export RUN --to onnx --out OUT``) traces the model's step contract
(``decoding/step.py``) into

* ``encoder.onnx``: ``src`` (batch, src_len) -> ``memory_kv`` (layers, 2, batch, heads, src_len, depth), the
  encoder output already projected by every decoder layer's cross-attention W_K and W_V (``Transformer.start``);
* ``decoder_step.onnx``: ``ids`` (batch,), ``src`` (batch, src_len), ``memory_kv`` and ``past`` (layers, 2,
  batch, heads, steps, depth), the self-attention keys and values of the positions decoded so far ->
  ``logits`` (batch, vocab) of the next word, ``present`` (``past`` with this position appended) and
  ``attention`` (batch, layers, heads, src_len), the cross-attention weights (``Transformer.step``).

The graphs take tensors only and every size but the model's is dynamic. ``OnnxSeq2seq`` implements the step
contract over two ONNX Runtime sessions, so that seqlab's own greedy, beam and sampled decoding (all options,
attention too) run on them; ``load_onnx`` wraps it in seqlab's ``Translator`` (the same source encoding,
n-best and detokenisation) from the export directory alone, which also holds the run's config and tokenizers.
``quantization="int8"``: ONNX Runtime's dynamic quantisation of the matrix products (int8 weights, per output
channel).

onnx, onnxscript (the exporter's) and onnxruntime are optional dependencies: ``pip install -e '.[export]'``.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from seqlab.config import ConfigError
from seqlab.model.masks import padding_mask
from seqlab.model.transformer import Transformer, TransformerConfig, TransformerState
from seqlab.predictors.translator import Translator, load
from seqlab.rundir import RunDir
from seqlab.runtime import CPU_FP32

ENCODER, STEP = "encoder.onnx", "decoder_step.onnx"
QUANTIZATIONS = ("float32", "int8")
OPSET = 18


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError("ONNX Runtime is not installed: pip install -e '.[export]'") from None
    return onnxruntime


def _stack(kvs: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Per layer (K, V), each (batch, heads, length, depth) -> (layers, 2, batch, heads, length, depth)."""
    return torch.stack([torch.stack(kv) for kv in kvs])


def _unstack(kv: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The inverse of ``_stack``."""
    return [(layer[0], layer[1]) for layer in kv.unbind(0)]


class EncoderGraph(nn.Module):
    """``Transformer.start`` with tensors in and out: src -> memory_kv."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> torch.Tensor:  # src: (batch, src_len)
        return _stack(self.model.start(src).memory_kv)  # (layers, 2, batch, heads, src_len, depth)


class StepGraph(nn.Module):
    """``Transformer.step`` with tensors in and out: ids, src, memory_kv, past -> logits, present, attention."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, ids: torch.Tensor, src: torch.Tensor, memory_kv: torch.Tensor, past: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        state = TransformerState(padding_mask(src), _unstack(memory_kv), _unstack(past))
        logits, state, weights = self.model.step(ids, state, need_weights=True)
        assert weights is not None
        return logits, _stack(state.past), weights  # (batch, vocab), (layers, 2, batch, heads, steps + 1, depth), ...


def export_onnx(run_dir: str | Path, out: str | Path, quantization: str = "float32") -> Path:
    """Trace the run's best model into ``out/encoder.onnx`` and ``out/decoder_step.onnx`` (``quantization``:
    float32, or int8 matrix products), with the run's config and tokenizers beside them."""
    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"ONNX export quantises as {' or '.join(QUANTIZATIONS)}, not {quantization}")
    _onnxruntime()
    translator = load(run_dir)
    model = translator.model.cpu()  # traced on the CPU, whatever train.device placed it on
    if not isinstance(model, Transformer):
        raise ConfigError(f"the ONNX export traces a Transformer's step; this run is a model.type "
                          f"{translator.config.model.type}")
    out = Path(out)
    if RunDir(out).has_run():
        raise ValueError(f"{out} already holds a model: choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        traced = Path(scratch)
        _trace(model, traced)
        for name in (ENCODER, STEP):
            if quantization == "int8":
                _quantize(traced / name, out / name)
            else:
                (traced / name).replace(out / name)
    RunDir(out).save_model_info(RunDir(run_dir).model_info() | {"engine": "onnxruntime", "quantization": quantization})
    RunDir(run_dir).copy_model_files(RunDir(out))  # the config last: only a whole directory is a model
    return out


def _trace(model: Transformer, out: Path) -> None:
    """The two graphs, traced from example inputs of every dynamic size >= 2 (torch.export fixes sizes 0 and 1)."""
    cfg = model.cfg
    assert isinstance(cfg, TransformerConfig)
    depth = cfg.d_model // cfg.num_heads
    batch, src_len, steps = torch.export.Dim("batch"), torch.export.Dim("src_len"), torch.export.Dim("steps")
    src = torch.tensor([[4, 5, 6, 2, 0], [7, 8, 9, 10, 2]]).clamp(max=model.encoder.embed.embedding.num_embeddings - 1)
    past = torch.zeros(cfg.num_layers, 2, 2, cfg.num_heads, 3, depth)
    with torch.no_grad():
        memory_kv = EncoderGraph(model)(src)
    with _quiet():
        torch.onnx.export(EncoderGraph(model), (src,), out / ENCODER, input_names=["src"], output_names=["memory_kv"],
                          dynamic_shapes=({0: batch, 1: src_len},), opset_version=OPSET, dynamo=True,
                          external_data=False, verbose=False)
        torch.onnx.export(StepGraph(model), (torch.tensor([1, 1]), src, memory_kv, past), out / STEP,
                          input_names=["ids", "src", "memory_kv", "past"],
                          output_names=["logits", "present", "attention"],
                          dynamic_shapes=({0: batch}, {0: batch, 1: src_len}, {2: batch, 4: src_len},
                                          {2: batch, 4: steps}),
                          opset_version=OPSET, dynamo=True, external_data=False, verbose=False)


@contextlib.contextmanager
def _quiet() -> Any:
    """The exporter's progress lines and its warnings about packages seqlab does not use, silenced."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "onnxscript")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(None), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _quantize(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic quantisation: int8 weights per output channel, activations quantised per call;
    after its pre-processing (shape inference, graph optimisation), as ONNX Runtime asks."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = source.with_suffix(".prepared.onnx")
    quant_pre_process(source, prepared, auto_merge=True)
    quantize_dynamic(prepared, target, weight_type=QuantType.QInt8, per_channel=True)


@dataclass(frozen=True)
class OnnxState:
    """The step contract's state of ``OnnxSeq2seq``: what ``TransformerState`` holds, as the graphs take it."""

    src: torch.Tensor  # (batch, src_len): the padding mask's source
    memory_kv: torch.Tensor  # (layers, 2, batch, heads, src_len, depth)
    past: torch.Tensor  # (layers, 2, batch, heads, steps, depth)

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> OnnxState:
        """Row i of the result is row ``rows[i]``; with ``same_sources`` the per-source parts stay in place."""
        past = self.past.index_select(2, rows)
        if same_sources:
            return OnnxState(self.src, self.memory_kv, past)
        return OnnxState(self.src.index_select(0, rows), self.memory_kv.index_select(2, rows), past)

    def beams(self, k: int) -> OnnxState:
        """Each sentence's row k times in a row (the graph takes K, V per row)."""
        return self.select(torch.arange(self.src.size(0)).repeat_interleave(k))


class OnnxSeq2seq:
    """The step contract (``start``, ``step``, ``state.select``, ``state.beams``) over the exported graphs in ONNX
    Runtime."""

    def __init__(self, export_dir: Path, threads: int | None = None) -> None:
        ort = _onnxruntime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        self.encoder = ort.InferenceSession(str(export_dir / ENCODER), options, providers=["CPUExecutionProvider"])
        self.decoder = ort.InferenceSession(str(export_dir / STEP), options, providers=["CPUExecutionProvider"])

    def start(self, src: torch.Tensor) -> OnnxState:
        src = src.contiguous()
        memory_kv = torch.from_numpy(self.encoder.run(None, {"src": src.numpy()})[0])
        layers, _, batch, heads, _, depth = memory_kv.shape
        return OnnxState(src, memory_kv, memory_kv.new_zeros(layers, 2, batch, heads, 0, depth))

    def step(
        self, ids: torch.Tensor, state: OnnxState, need_weights: bool = False
    ) -> tuple[torch.Tensor, OnnxState, torch.Tensor | None]:
        logits, present, weights = self.decoder.run(None, {
            "ids": ids.contiguous().numpy(), "src": state.src.numpy(),
            "memory_kv": state.memory_kv.numpy(), "past": np.ascontiguousarray(state.past.numpy())})
        state = OnnxState(state.src, state.memory_kv, torch.from_numpy(present))
        return torch.from_numpy(logits), state, torch.from_numpy(weights) if need_weights else None


def load_onnx(export_dir: str | Path, threads: int | None = None) -> Translator:
    """A directory of ``export_onnx`` as a translator (``seqlab translate DIR --engine onnx``): seqlab's
    Translator (every decoding option, attention too) over the exported graphs, which ONNX Runtime computes in
    their own precision (no autocast)."""
    export_dir = Path(export_dir)
    if not (export_dir / STEP).exists():
        raise FileNotFoundError(f"{export_dir}: no ONNX model (make one with seqlab export RUN --to onnx)")
    run = RunDir(export_dir)
    source, target = run.tokenizers()
    return Translator(OnnxSeq2seq(export_dir, threads), source, target, run.config(), CPU_FP32)  # type: ignore[arg-type]
