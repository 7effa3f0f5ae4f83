"""A seqlab Transformer for CTranslate2, the engine production NMT decodes with, and seqlab's path through it.

``export_ctranslate2(RUN, OUT)`` (``seqlab export RUN --to ctranslate2 --out OUT``) writes a CTranslate2
``TransformerSpec`` weight for weight: pre- or post-LN, LayerNorm ε 1e-6, ReLU, embeddings × √d_model plus
seqlab's sinusoidal table, the output projection (the target embedding when ``tie_output``), and the two
vocabularies as seqlab's token pieces, the special tokens at seqlab's ids under CTranslate2's names. The run's
config and tokenizers are copied beside it, so the directory alone translates: ``CT2Translator`` is seqlab's
``Translator`` (the same source encoding, n-best and detokenisation) whose search is CTranslate2's.

CTranslate2 is an optional dependency: ``pip install -e '.[export]'``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from seqlab.config import ConfigError
from seqlab.decoding import Cancelled, DecodeOptions, Hypothesis
from seqlab.model.transformer import Transformer, TransformerConfig
from seqlab.predictors.translator import Translator, load
from seqlab.rundir import RunDir
from seqlab.runtime import CPU_FP32
from seqlab.specials import EOS, PAD, SOS, UNK
from seqlab.tokenizer import Tokenizer

if TYPE_CHECKING:
    import ctranslate2

NAMES = {PAD: "<blank>", SOS: "<s>", EOS: "</s>", UNK: "<unk>"}  # CTranslate2's special tokens at seqlab's ids
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16")


def _ctranslate2() -> Any:
    try:
        import ctranslate2
    except ImportError:
        raise ConfigError("CTranslate2 is not installed: pip install -e '.[export]'") from None
    return ctranslate2


def vocabulary(tokenizer: Tokenizer) -> list[str]:
    """Token strings by id: seqlab's pieces, the specials under CTranslate2's names (unique, as CTranslate2
    looks tokens up by name)."""
    pieces = tokenizer.tokens_from_ids(list(range(tokenizer.vocab_size)))
    names = [NAMES.get(i, piece) for i, piece in enumerate(pieces)]
    if len(set(names)) != len(names):
        raise ValueError("the vocabulary has two tokens of the same name: CTranslate2 cannot tell them apart")
    return names


def export_ctranslate2(run_dir: str | Path, out: str | Path, quantization: str = "float32") -> Path:
    """Convert the run's best model into a CTranslate2 model directory ``out`` (weights stored as
    ``quantization``), with the run's config and tokenizers beside it."""
    ct2 = _ctranslate2()
    translator = load(run_dir)
    translator.model.cpu()  # its weights are read as NumPy arrays, whatever train.device placed it on
    if not isinstance(translator.model, Transformer):
        raise ConfigError(f"CTranslate2 runs Transformers; this run is a model.type {translator.config.model.type}")
    if translator.config.data.source_width is not None:
        raise ConfigError("data.source_width pads RNN sources; not a Transformer's")
    if translator.config.data.target_width is not None:
        raise ConfigError("data.target_width: CTranslate2 ends every output at <eos>, and these answers have none "
                          "(export it to ONNX, whose decoding is seqlab's)")
    spec = _spec(ct2, translator)
    out = Path(out)
    if RunDir(out).has_run():
        raise ValueError(f"{out} already holds a model: choose another --out")

    class _Converter(ct2.converters.Converter):  # type: ignore[name-defined]
        def _load(self) -> Any:
            return spec

    _Converter().convert(str(out), quantization=None if quantization == "float32" else quantization, force=True)
    RunDir(out).save_model_info(RunDir(run_dir).model_info() | {"engine": "ctranslate2", "quantization": quantization})
    RunDir(run_dir).copy_model_files(RunDir(out))  # the config last: only a whole directory is a model
    return out


def _spec(ct2: Any, translator: Translator) -> Any:
    """The TransformerSpec of a seqlab Transformer, weight for weight."""
    cfg = translator.config.model
    assert isinstance(cfg, TransformerConfig)
    w = {name: t.detach().float().numpy() for name, t in translator.model.state_dict().items()}
    w["positional_table"] = translator.model.encoder.embed.positions.table[0].numpy()  # type: ignore[union-attr, index]
    specs = ct2.specs
    spec = specs.TransformerSpec.from_config(cfg.num_layers, cfg.num_heads, pre_norm=cfg.norm == "pre",
                                             activation=specs.Activation.RELU)
    spec.config.layer_norm_epsilon = 1e-6
    for side, stack in (("encoder", spec.encoder), ("decoder", spec.decoder)):
        embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        embeddings.weight = w[f"{side}.embed.embedding.weight"]
        stack.scale_embeddings = True  # × √d_model, as seqlab's Embedder
        stack.position_encodings.encodings = w["positional_table"]
        if cfg.norm == "pre":
            _norm(stack.layer_norm, w, f"{side}.final_norm")
    for i, layer in enumerate(spec.encoder.layer):
        _attention(layer.self_attention, w, f"encoder.layers.{i}.self_attn", fused=True)
        _norm(layer.self_attention.layer_norm, w, f"encoder.layers.{i}.attn_block.norm")
        _ffn(layer.ffn, w, f"encoder.layers.{i}")
    for i, layer in enumerate(spec.decoder.layer):
        _attention(layer.self_attention, w, f"decoder.layers.{i}.self_attn", fused=True)
        _norm(layer.self_attention.layer_norm, w, f"decoder.layers.{i}.self_block.norm")
        _attention(layer.attention, w, f"decoder.layers.{i}.cross_attn", fused=False)
        _norm(layer.attention.layer_norm, w, f"decoder.layers.{i}.cross_block.norm")
        _ffn(layer.ffn, w, f"decoder.layers.{i}")
    _linear(spec.decoder.projection, w, "generator")
    spec.register_source_vocabulary(vocabulary(translator.source))
    spec.register_target_vocabulary(vocabulary(translator.target))
    return spec


def _attention(spec: Any, w: dict[str, np.ndarray], scope: str, fused: bool) -> None:
    """seqlab's w_q, w_k, w_v, w_o: one fused QKV projection (self-attention), or Q and a fused KV (cross)."""
    names = ["w_q", "w_k", "w_v"] if fused else ["w_k", "w_v"]
    if not fused:
        _linear(spec.linear[0], w, f"{scope}.w_q")
    spec.linear[0 if fused else 1].weight = np.concatenate([w[f"{scope}.{n}.weight"] for n in names])
    spec.linear[0 if fused else 1].bias = np.concatenate([w[f"{scope}.{n}.bias"] for n in names])
    _linear(spec.linear[-1], w, f"{scope}.w_o")


def _ffn(spec: Any, w: dict[str, np.ndarray], layer: str) -> None:
    _linear(spec.linear_0, w, f"{layer}.ffn.w_1")
    _linear(spec.linear_1, w, f"{layer}.ffn.w_2")
    _norm(spec.layer_norm, w, f"{layer}.ffn_block.norm")


def _linear(spec: Any, w: dict[str, np.ndarray], scope: str) -> None:
    spec.weight, spec.bias = w[f"{scope}.weight"], w[f"{scope}.bias"]


def _norm(spec: Any, w: dict[str, np.ndarray], scope: str) -> None:
    spec.gamma, spec.beta = w[f"{scope}.weight"], w[f"{scope}.bias"]


class CT2Translator(Translator):
    """seqlab's Translator whose search is CTranslate2's: greedy, beam search (no length penalty, or the
    length-normalised score) and sampling, over sources that seqlab encodes."""

    def __init__(self, engine: ctranslate2.Translator, source: Tokenizer, target: Tokenizer, config: Any) -> None:
        runtime = replace(CPU_FP32, workers=engine.num_translators)  # its translators take batches side by side
        super().__init__(None, source, target, config, runtime)  # type: ignore[arg-type]  # no PyTorch model
        self.engine = engine
        self.source_names, self.target_names = vocabulary(source), vocabulary(target)
        self.target_ids = {name: i for i, name in enumerate(self.target_names)}

    def run_search(self) -> dict[str, Any]:
        """The run's beam, without its GNMT length penalty, which CTranslate2 cannot apply (one given is refused:
        ``check_options``)."""
        return super().run_search() | {"length_penalty": 0.0}

    def check_options(self, options: DecodeOptions, need_weights: bool = False) -> None:
        if need_weights:
            raise ValueError("the CTranslate2 engine does not return attention")
        if options.length_penalty:
            raise ValueError("CTranslate2 divides scores by length^α, not by GNMT's penalty: use normalize "
                             "(α = 1) or no length penalty with the ct2 engine")
        if options.length_ratio is not None:
            raise ValueError("length_ratio is not available with the ct2 engine")

    def search_ids(self, src: Sequence[Sequence[int]], options: DecodeOptions, need_weights: bool = False,
                   stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """CTranslate2 decodes the sources in one call, which cannot be stopped: ``stop`` is asked before it."""
        self.check_options(options, need_weights)
        if stop is not None and stop():
            raise Cancelled("decoding stopped before CTranslate2 started")
        tokens = [[self.source_names[i] for i in ids] for ids in src]  # <eos> included, as seqlab feeds it
        common = {"max_batch_size": self.runtime.batch_size(len(src), self.config.eval.batch_size), "return_scores": True,
                  "max_decoding_length": options.max_length or self.config.eval.max_output_length,
                  "suppress_sequences": [["<blank>"], ["<s>"]], "min_decoding_length": options.min_length,
                  "no_repeat_ngram_size": options.no_repeat_ngram_size,
                  "repetition_penalty": options.repetition_penalty}
        if options.sample and options.temperature > 0:  # temperature 0 is greedy, as in seqlab's sampling
            _ctranslate2().set_random_seed(options.seed)
            results = self.engine.translate_batch(
                tokens, beam_size=1, sampling_topk=options.top_k or len(self.target_names),
                sampling_topp=options.top_p, sampling_temperature=max(options.temperature, 1e-6),
                num_hypotheses=options.num_samples, **common)
        else:
            results = self.engine.translate_batch(
                tokens, beam_size=options.beam, num_hypotheses=options.nbest,
                length_penalty=1.0 if options.normalize else 0.0, **common)
        return [[self._hypothesis(h, s, options.normalize) for h, s in zip(r.hypotheses, r.scores)] for r in results]

    def _hypothesis(self, pieces: list[str], score: float, normalized: bool) -> Hypothesis:
        ids = [self.target_ids[p] for p in pieces]
        log_prob = score * (len(ids) + 1) if normalized else score  # CTranslate2 counts </s> in the length
        return Hypothesis(ids, log_prob, score)


def load_ct2(export_dir: str | Path, threads: int | None = None, workers: int = 1) -> CT2Translator:
    """A directory of ``export_ctranslate2`` as a translator (``seqlab translate DIR --engine ct2``) on ``threads``
    (torch's count by default): ``workers`` batches at a time (CTranslate2's ``inter_threads``), each on its share."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    ct2 = _ctranslate2()
    run = RunDir(export_dir)
    if not (Path(export_dir) / "model.bin").exists():
        raise FileNotFoundError(f"{export_dir}: no CTranslate2 model (make one with seqlab export RUN --to ctranslate2)")
    source, target = run.tokenizers()
    engine = ct2.Translator(str(export_dir), device="cpu", compute_type="default", inter_threads=workers,
                            intra_threads=max(1, (threads or torch.get_num_threads()) // workers))
    return CT2Translator(engine, source, target, run.config())
