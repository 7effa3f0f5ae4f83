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
It also writes ``search.onnx``, ONNX Runtime's own beam search over two subgraphs of the model (``SearchEncoder``,
``SearchDecoder``), and ``search.json``, the limits seqlab's translator reads from the config, for
``seqlab.export.onnx_search``: one sentence at a time, decoded in ONNX Runtime without PyTorch. ``load_onnx``'s
translator decodes a single sentence with it where it decodes as seqlab does, and everything else (batches, the
options it lacks) with seqlab's search over the step graphs.
``quantization="int8"``: ONNX Runtime's dynamic quantisation of the matrix products (int8 weights, per output
channel), in every graph.

onnx, onnxscript (the exporter's) and onnxruntime are optional dependencies: ``pip install -e '.[export]'``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.config import ConfigError
from seqlab.decoding import DecodeOptions, Hypothesis
from seqlab.export.onnx_search import MANIFEST, SEARCH, OnnxSearch, unserved
from seqlab.files import atomic_write
from seqlab.model.cache import Cache, KVCache
from seqlab.model.transformer import KV, Transformer, TransformerConfig, TransformerState
from seqlab.predictors.translator import Translator, load
from seqlab.rundir import SOURCE_TOKENIZER, TARGET_TOKENIZER, RunDir
from seqlab.runtime import CPU_FP32, keep_freed_memory, torch_threads
from seqlab.specials import EOS, PAD, SOS

ENCODER, STEP = "encoder.onnx", "decoder_step.onnx"
SEARCH_ENCODER, SEARCH_DECODER = "search_encoder.onnx", "search_decoder.onnx"  # traced, then joined into SEARCH
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


def _cached(caches: Sequence[Cache]) -> list[torch.Tensor]:
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
        state = self.model.start(src, padded=False)
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


class SearchEncoder(nn.Module):
    """ONNX Runtime's encoder subgraph (the T5 form of its ``BeamSearch``): the sources and their mask (batch,
    src_len) and <sos> (batch, 1) -> the first step's logits (batch, 1, vocab), a placeholder for the encoder's
    output (which the decoder subgraph does not read: it reads the memory K, V), each layer's self-attention K, V
    after that step and its memory K, V (``Transformer.start``, then ``step``)."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, encoder_input_ids: torch.Tensor, encoder_attention_mask: torch.Tensor,
                decoder_input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        state = self.model.start(encoder_input_ids.long(), padded=False)
        logits, state, _ = self.model.step(decoder_input_ids[:, 0].long(), state)
        hidden = encoder_attention_mask[:, :, None].float()  # (batch, src_len, 1): the placeholder
        return logits[:, None, :], hidden, *_cached(state.past), *_flat(state.memory_kv)


class SearchDecoder(nn.Module):
    """ONNX Runtime's decoder subgraph: the previous words (rows, 1), the source mask (rows, src_len; 1 = a
    token), each layer's self-attention K, V so far and its memory K, V (one copy per row) -> the next word's
    logits (rows, 1, vocab) and the self-attention K, V with this position (``Transformer.step``)."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, encoder_attention_mask: torch.Tensor, past: list[torch.Tensor],
                memory_kv: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        src_mask = (encoder_attention_mask == 0)[:, None, None, :]  # (rows, 1, 1, src_len), True = padding
        state = TransformerState(src_mask, _pairs(memory_kv), _caches(past), self.model.decoder.projections())
        logits, state, _ = self.model.step(input_ids[:, 0].long(), state)
        return logits[:, None, :], *_cached(state.past)


def _search_names(prefix: str, attention: str, layers: int) -> list[str]:
    """ONNX Runtime's names of the caches: past_key_self_0, past_value_self_0, past_key_self_1, ..."""
    return [f"{prefix}_{kv}_{attention}_{i}" for i in range(layers) for kv in ("key", "value")]


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
        _trace_search(model, traced)
        graphs = {name: traced / name for name in (ENCODER, STEP, SEARCH_ENCODER, SEARCH_DECODER)}
        if quantization == "int8":
            graphs = {name: _quantize(path) for name, path in graphs.items()}
        _join_search(graphs[SEARCH_ENCODER], graphs[SEARCH_DECODER], traced / SEARCH)
        for name, path in ((ENCODER, graphs[ENCODER]), (STEP, graphs[STEP]), (SEARCH, traced / SEARCH)):
            path.replace(out / name)
    atomic_write(out / MANIFEST, json.dumps(_manifest(translator), indent=1) + "\n")
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
    src = _example_sources(model)
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


def _example_sources(model: Transformer) -> torch.Tensor:
    """Two sources of different lengths, one padded (2, 5): example inputs whose sizes stay dynamic in the trace."""
    return torch.tensor([[4, 5, 6, 2, 0], [7, 8, 9, 10, 2]]).clamp(max=model.encoder.embed.embedding.num_embeddings - 1)


def _trace_search(model: Transformer, out: Path) -> None:
    """``SearchEncoder`` and ``SearchDecoder``, traced as ``_trace`` does (batch, src_len, steps dynamic)."""
    cfg = model.cfg
    assert isinstance(cfg, TransformerConfig)
    layers = cfg.num_layers
    batch, src_len, steps = torch.export.Dim("batch"), torch.export.Dim("src_len"), torch.export.Dim("steps")
    src = _example_sources(model).int()  # ONNX Runtime's search hands its subgraphs int32 ids
    mask, sos = (src != PAD).int(), torch.full((2, 1), SOS, dtype=torch.int32)
    with torch.no_grad():
        first = SearchEncoder(model)(src, mask, sos)
    past, memory_kv = list(first[2 : 2 + 2 * layers]), list(first[2 + 2 * layers :])
    past = [torch.cat([k, k], dim=2) for k in past]  # two steps so far: a size torch.export keeps dynamic
    with _quiet():
        torch.onnx.export(SearchEncoder(model), (src, mask, sos), out / SEARCH_ENCODER,
                          input_names=["encoder_input_ids", "encoder_attention_mask", "decoder_input_ids"],
                          output_names=["logits", "encoder_hidden_states", *_search_names("present", "self", layers),
                                        *_search_names("present", "cross", layers)],
                          dynamic_shapes=({0: batch, 1: src_len}, {0: batch, 1: src_len}, {0: batch}),
                          opset_version=OPSET, dynamo=True, external_data=False, verbose=False)
        torch.onnx.export(SearchDecoder(model), (sos, mask, past, memory_kv), out / SEARCH_DECODER,
                          input_names=["input_ids", "encoder_attention_mask", *_search_names("past", "self", layers),
                                       *_search_names("past", "cross", layers)],
                          output_names=["logits", *_search_names("present", "self", layers)],
                          dynamic_shapes=({0: batch}, {0: batch, 1: src_len}, [{0: batch, 2: steps}] * len(past),
                                          [{0: batch, 2: src_len}] * len(memory_kv)),
                          opset_version=OPSET, dynamo=True, external_data=False, verbose=False)


def _join_search(encoder: Path, decoder: Path, out: Path) -> None:
    """``search.onnx``: one ``BeamSearch`` node (``com.microsoft``) over the two subgraphs, its inputs those of
    ``OnnxSearch._search``; <eos> ends an output, <pad> fills after it, <sos> starts the decoder."""
    import onnx
    from onnx import TensorProto, helper

    first, step = onnx.load(str(encoder)), onnx.load(str(decoder))
    first.graph.name, step.graph.name = "encoder", "decoder"
    vocab = first.graph.output[0].type.tensor_type.shape.dim[2].dim_value
    scalars = [("max_length", TensorProto.INT32), ("min_length", TensorProto.INT32), ("num_beams", TensorProto.INT32),
               ("num_return_sequences", TensorProto.INT32), ("length_penalty", TensorProto.FLOAT),
               ("repetition_penalty", TensorProto.FLOAT)]
    node = helper.make_node(
        "BeamSearch", ["input_ids", *(name for name, _ in scalars), "vocab_mask", "", "attention_mask"],
        ["sequences", "sequences_scores"], domain="com.microsoft", name="search", model_type=1,
        eos_token_id=EOS, pad_token_id=PAD, decoder_start_token_id=SOS, no_repeat_ngram_size=0, early_stopping=0,
        encoder=first.graph, decoder=step.graph)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "src_len"]),
              *(helper.make_tensor_value_info(name, kind, [1]) for name, kind in scalars),
              helper.make_tensor_value_info("vocab_mask", TensorProto.INT32, [vocab]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "src_len"])]
    outputs = [helper.make_tensor_value_info("sequences", TensorProto.INT32, ["batch", "nbest", "length"]),
               helper.make_tensor_value_info("sequences_scores", TensorProto.FLOAT, ["batch", "nbest"])]
    opsets = {o.domain: o.version for graph in (first, step) for o in graph.opset_import} | {"com.microsoft": 1}
    model = helper.make_model(helper.make_graph([node], "seqlab-search", inputs, outputs),
                              opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets.items()])
    model.ir_version = first.ir_version
    onnx.save(model, str(out))


def _manifest(translator: Translator) -> dict[str, Any]:
    """What ``OnnxSearch`` reads instead of the run's config: how a source is cut, ended and padded, and how long
    an output may be, as the translator has them."""
    data = translator.config.data
    return {"source_tokenizer": SOURCE_TOKENIZER, "target_tokenizer": TARGET_TOKENIZER,
            "max_source_tokens": translator.max_source_tokens, "source_eos": data.source_eos,
            "source_width": data.source_width, "fill": translator.fill, "target_width": data.target_width,
            "max_output_length": translator.config.eval.max_output_length}


@contextlib.contextmanager
def _quiet() -> Any:
    """The exporter's and the quantiser's progress lines, and their warnings about packages seqlab does not use,
    silenced (the quantiser logs to the root logger)."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export", "onnxscript", "onnx_ir", "")]
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


def _quantize(source: Path) -> Path:
    """ONNX Runtime's dynamic quantisation: int8 weights per output channel, activations quantised per call;
    after its pre-processing (shape inference, graph optimisation), as ONNX Runtime asks. Returns the int8 graph's
    path, beside ``source``. The weights take 7 bits (``reduce_range``, ONNX Runtime's advice for CPUs without
    VNNI), because an export may run on any CPU: on AVX2 alone its kernels add the products of uint8 activations
    and 8-bit weights in pairs into 16 bits, which saturate. Measured on a 2-core AMD EPYC with AVX2 only, the
    int8 graphs of two small date models agreed with fp32 on 96.6 and 98.4 % of 2,800 sources with 8-bit weights,
    on 99.3 and 99.6 % with 7."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = source.with_suffix(".prepared.onnx")
    with _quiet():
        quant_pre_process(source, prepared, auto_merge=True)
        quantize_dynamic(prepared, target := source.with_suffix(".int8.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, reduce_range=True)
    return target


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


class OnnxTranslator(Translator):
    """seqlab's translator over an ONNX export: a single sentence by ONNX Runtime's own search (``OnnxSearch``)
    where it decodes as seqlab does; batches, and the options it lacks, by seqlab's search over the step graphs."""

    def __init__(self, export_dir: Path, threads: int | None = None, workers: int = 1) -> None:
        run = RunDir(export_dir)
        source, target = run.tokenizers()
        runtime = replace(CPU_FP32, workers=workers)  # batches side by side, each graph run on its share of threads
        share = max(1, (threads or torch.get_num_threads()) // workers)
        super().__init__(OnnxSeq2seq(export_dir, share), source, target, run.config(), runtime)  # type: ignore[arg-type]
        self.search_graph = OnnxSearch(export_dir, threads) if (export_dir / SEARCH).exists() else None  # None: older

    def search_ids(
        self, src: Sequence[Sequence[int]], options: DecodeOptions, need_weights: bool = False,
        stop: Callable[[], bool] | None = None,
    ) -> list[list[Hypothesis]]:
        """As ``Translator.search_ids``. ONNX Runtime's search runs to its end once started (at most the length
        limit's steps of one sentence); ``stop`` is asked before it starts (seqlab's search raises ``Cancelled``).

        seqlab's search runs its small operations between two graphs on one PyTorch thread: the graphs compute on
        ONNX Runtime's threads, and PyTorch's, spinning for a while after each operation they share, took the cores
        from them (the date model's test split at beam 5, 3 rounds taking turns in one process, 2 cores: 3.2-3.4 s
        against 3.6-3.7 s)."""
        if self.search_graph is None or len(src) != 1 or unserved(options, need_weights) or (stop is not None and stop()):
            with torch_threads(1):
                return super().search_ids(src, options, need_weights, stop)
        return [[Hypothesis(tokens, score, score) for tokens, score in self.search_graph.search_ids(src, options)[0]]]


def load_onnx(export_dir: str | Path, threads: int | None = None, workers: int = 1) -> Translator:
    """A directory of ``export_onnx`` as a translator (``seqlab translate DIR --engine onnx``): seqlab's
    Translator (every decoding option, attention too) over the exported graphs, which ONNX Runtime computes in
    their own precision (no autocast); one sentence at a time by ONNX Runtime's search where it can. ``workers``:
    batches decoded side by side (``Runtime.map``), the graphs of each on its share of ``threads``."""
    export_dir = Path(export_dir)
    if not (export_dir / STEP).exists():
        raise FileNotFoundError(f"{export_dir}: no ONNX model (make one with seqlab export RUN --to onnx)")
    return OnnxTranslator(export_dir, threads, workers)
