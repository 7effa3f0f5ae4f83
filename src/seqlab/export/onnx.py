"""A seqlab Transformer as two ONNX graphs, and seqlab's decoding driving them in ONNX Runtime.

``export_onnx(RUN, OUT)`` (``seqlab export RUN --to onnx --out OUT``) traces the model's step contract
(``decoding/step.py``) into

* ``encoder.onnx``: ``src`` (sources, src_len) -> ``src_mask`` (sources, 1, 1, src_len), its padding, and
  ``memory_k0``, ``memory_v0``, ``memory_k1``, ... (sources, heads, src_len, depth), the encoder output already
  projected by every decoder layer's cross-attention W_K and W_V (``Transformer.start``);
* ``decoder_step.onnx``: ``ids`` (rows,), ``src_mask``, the memory K, V (a source's rows in a row: its beams
  read its one K, V) and ``past_k0``, ``past_v0``, ... (rows, heads, steps, depth), the self-attention keys and
  values of the positions decoded so far -> ``logits`` (rows, vocab) of the next word, ``attention`` (rows,
  layers, heads, src_len), the cross-attention weights, and ``present_k0``, ... (the past with this position
  appended) (``Transformer.step``). One input and output per layer's K and per V: no step stacks the cache.

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
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.config import ConfigError
from seqlab.model.cache import KVCache
from seqlab.model.transformer import KV, Transformer, TransformerConfig, TransformerState
from seqlab.predictors.translator import Translator, load
from seqlab.rundir import RunDir
from seqlab.runtime import CPU_FP32, keep_freed_memory

ENCODER, STEP = "encoder.onnx", "decoder_step.onnx"
QUANTIZATIONS = ("float32", "int8")
OPSET = 18


def _onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError("ONNX Runtime is not installed: pip install -e '.[export]'") from None
    return onnxruntime


def _flat(kvs: list[KV]) -> list[torch.Tensor]:
    """Per layer (K, V) -> K_0, V_0, K_1, V_1, ...: one graph input or output each, so that no step stacks or
    splits the cache."""
    return [t for kv in kvs for t in kv]


def _pairs(tensors: list[torch.Tensor]) -> list[KV]:
    """The inverse of ``_flat``."""
    return list(zip(tensors[::2], tensors[1::2]))


def _caches(tensors: list[torch.Tensor]) -> list[KVCache]:
    """K_0, V_0, K_1, ... of the positions so far -> per layer, the cache that grows by exactly each appended
    position (the graph's ``present``, a pure function of its inputs)."""
    return [KVCache.of(k, v, spare=False) for k, v in _pairs(tensors)]


def _cached(caches: list[KVCache]) -> list[torch.Tensor]:
    """The inverse of ``_caches``."""
    return _flat([(cache.keys, cache.values) for cache in caches])


def _names(prefix: str, layers: int) -> list[str]:
    """``_flat``'s names: memory_k0, memory_v0, memory_k1, ..."""
    return [f"{prefix}_{kv}{i}" for i in range(layers) for kv in "kv"]


class EncoderGraph(nn.Module):
    """``Transformer.start`` with tensors in and out: src -> the padding mask and every layer's memory K, V."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:  # src: (sources, src_len)
        state = self.model.start(src)
        return state.src_mask, *_flat(state.memory_kv)  # (sources, 1, 1, src_len), each (sources, heads, src_len, d)


class StepGraph(nn.Module):
    """``Transformer.step`` with tensors in and out: ids (rows,), the source mask and memory K, V (per source: a
    source's rows in a row) and the cached K, V (per row) -> logits, the K, V with this position, attention."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, ids: torch.Tensor, src_mask: torch.Tensor, memory_kv: list[torch.Tensor], past: list[torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        state = TransformerState(src_mask, _pairs(memory_kv), _caches(past), self.model.decoder.projections())
        logits, state, weights = self.model.step(ids, state, need_weights=True)
        assert weights is not None
        return logits, weights, *_cached(state.past)  # (rows, vocab), (rows, layers, heads, src_len), each (rows, ...)


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
    """The two graphs, traced from example inputs of every dynamic size >= 2 (torch.export fixes sizes 0 and 1);
    the step's rows are two per source, so that its attention groups them (``one_query_attention``)."""
    cfg = model.cfg
    assert isinstance(cfg, TransformerConfig)
    layers, depth = cfg.num_layers, cfg.d_model // cfg.num_heads
    sources, rows = torch.export.Dim("sources"), torch.export.Dim("rows")
    src_len, steps = torch.export.Dim("src_len"), torch.export.Dim("steps")
    src = torch.tensor([[4, 5, 6, 2, 0], [7, 8, 9, 10, 2]]).clamp(max=model.encoder.embed.embedding.num_embeddings - 1)
    past = [torch.zeros(4, cfg.num_heads, 3, depth) for _ in range(2 * layers)]
    with torch.no_grad():
        src_mask, *memory_kv = EncoderGraph(model)(src)
    with _quiet():
        torch.onnx.export(EncoderGraph(model), (src,), out / ENCODER, input_names=["src"],
                          output_names=["src_mask", *_names("memory", layers)],
                          dynamic_shapes=({0: sources, 1: src_len},), opset_version=OPSET, dynamo=True,
                          external_data=False, verbose=False)
        torch.onnx.export(StepGraph(model), (torch.tensor([1, 1, 1, 1]), src_mask, memory_kv, past), out / STEP,
                          input_names=["ids", "src_mask", *_names("memory", layers), *_names("past", layers)],
                          output_names=["logits", "attention", *_names("present", layers)],
                          dynamic_shapes=({0: rows}, {0: sources, 3: src_len},
                                          [{0: sources, 2: src_len}] * len(memory_kv),
                                          [{0: rows, 2: steps}] * len(past)),
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


class OnnxSeq2seq:
    """The step contract (``start``, ``step``, ``state.select``, ``state.beams``) over the exported graphs in ONNX
    Runtime. Its state is the model's own ``TransformerState`` (the graphs take and give its tensors), so that
    beams share their source's K, V and reorder the cache lazily, as in seqlab's own engine."""

    def __init__(self, export_dir: Path, threads: int | None = None) -> None:
        ort = _onnxruntime()
        keep_freed_memory()  # the search's tensors and the graphs' outputs are freed and asked for at every step
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        # its threads sleep when a graph is done rather than spin: between two steps PyTorch's threads do the search
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.encoder = ort.InferenceSession(str(export_dir / ENCODER), options, providers=["CPUExecutionProvider"])
        self.decoder = ort.InferenceSession(str(export_dir / STEP), options, providers=["CPUExecutionProvider"])
        self.layers = sum(name.startswith("past_k") for name in (i.name for i in self.decoder.get_inputs()))
        if self.layers == 0:
            raise ConfigError(f"{export_dir}: an ONNX export of an earlier seqlab, which this one cannot run: "
                              f"export the run again (seqlab export RUN --to onnx)")

    def start(self, src: torch.Tensor) -> TransformerState:
        src_mask, *memory_kv = (torch.from_numpy(a) for a in self.encoder.run(None, {"src": src.contiguous().numpy()}))
        empty = memory_kv[0][:, :, :0]  # (sources, heads, 0, depth)
        return TransformerState(src_mask, _pairs(memory_kv), _caches([empty, empty] * self.layers), [])  # the graph projects

    def step(
        self, ids: torch.Tensor, state: TransformerState, need_weights: bool = False
    ) -> tuple[torch.Tensor, TransformerState, torch.Tensor | None]:
        inputs = {"ids": ids.contiguous(), "src_mask": state.src_mask}
        inputs |= zip(_names("memory", self.layers), _flat(state.memory_kv))
        inputs |= zip(_names("past", self.layers), _cached(state.selected_past()))
        logits, weights, *present = self.decoder.run(None, {k: v.contiguous().numpy() for k, v in inputs.items()})
        state = TransformerState(state.src_mask, state.memory_kv, _caches([torch.from_numpy(a) for a in present]),
                                 [], state.group)
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
