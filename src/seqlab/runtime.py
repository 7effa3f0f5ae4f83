"""Where a model runs and in what numbers: its device, the precision autocast computes in there, and int8.

A ``Runtime`` is resolved once, when training starts (``Runtime.for_training``) or a model is loaded
(``Runtime.for_inference``), and handed down to everything that runs the model: the training step, validation,
decoding, the server. Nothing below it asks the config again, so a faster way of running a model (a compiled
step, a new kernel, another device) plugs in here, in one place.

What ``auto``, ``bf16`` and ``fp32`` mean on a machine is ``seqlab.precision``'s answer (bf16 only where the CPU
multiplies it natively, ``SEQLAB_PRECISION`` to force it); where bf16 is native, ``auto`` is measured on the model
(``measure_precision``, which the trainer calls once its model and batches exist). A model loaded for inference
runs where and as its run trained unless the caller says otherwise (``seqlab.load(RUN, device=..., precision=...,
int8=...)``), on the CPU where the GPU it trained on is not there. ``workers`` says how a loaded model spends the
machine's threads on many batches: all of them on one batch at a time, or a share each on batches side by side.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import gc
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from seqlab import precision

M = TypeVar("M", bound=nn.Module)
B = TypeVar("B")
R = TypeVar("R")

BATCHES_PER_WORKER = 4  # at least, where the items allow (``Runtime.batch_size``)
# A search of fewer rows (inputs × beams or samples) computes in fp32 where ``auto`` chose bf16 on the CPU
# (``Runtime.autocast``): bf16's products of a few rows cost oneDNN's call more than they save. One sentence at beam 5,
# median latency on a Zen 4 with AVX-512 BF16: the date model 10.8 ms in fp32 against 20.3 in bf16, the Multi30k
# model 40.9 against 53.9; per sentence, in batches of 4 sentences at beam 5 bf16 took 1.24-1.44× fp32's time, of 16
# greedy 1.20-1.60×; from 128 sentences at beam 5 bf16 is the faster on both (0.97×, 0.80×), where the Multi30k
# model's crossed at about 16.
SMALL_SEARCH_ROWS = 64
# One pass of an encoder (a classifier's, a span extractor's, BERT's fill-mask) over fewer tokens (inputs × padded
# length) likewise: a pass casts every weight to bf16 again, where a search casts them once, so its products must
# be taller before bf16 pays. On the same Zen 4, bf16 ÷ fp32 time per batch, the two taking turns: ChatbotData's
# label classifier 1.99× for one question (0.75 against 1.50 ms), 1.24× at 195 tokens, 1.09× at 312, 0.98× at 421,
# 0.84× at 660, 0.75× at 256 questions; chatbot_ko_bert.yaml's encoder and masked-LM head 1.66× at 12 tokens, 1.28×
# at 192, 0.93× at 384, 0.67× at 768. (A language model's score is left to autocast: its LSTM was slower in fp32.)
SMALL_PASS_TOKENS = 384
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}  # autocast's lower precisions (fp16: CUDA without bf16)


class _CollectorPause:
    """``collector_paused``'s count of those inside, shared by every thread: the collector is one per process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.was_on = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.inside == 0:
                self.was_on = gc.isenabled()
                gc.disable()
            self.inside += 1
        try:
            yield
        finally:
            with self.lock:
                self.inside -= 1
                if self.inside == 0 and self.was_on:
                    gc.enable()


collector_paused = _CollectorPause()
"""Python's cyclic garbage collector off while any thread is inside, on again when the last one leaves (where it was on
before the first came in): around a model's batches (``Runtime.map``) and the text-level calls around them
(``Predictor.each_text``: the texts' ids, the outputs made of them). They make tens of thousands of objects that
outlive many of the collector's passes (tensors, a search's steps, its hypotheses, the outputs) and hardly any
garbage cycles (the date test split's 5,000 translations, greedy or at beam 5: 0-10 objects found in them), so the
passes free next to nothing, and each full one walks every object the process holds (torch's, numba's: some 280,000
with a model loaded). Greedy translation of 20,000 dates in one call spent 1.2-1.3 s of its 10.6-11.1 s in the
collector (3 full passes); paused, one pass of 49-64 ms as the call returned, and 0.90× the time; the test split
alone, greedy or at beam 5, 0.94× (``benchmarks/collector.py``, AMD EPYC with AVX2, in turns). Reference counting
still frees everything a batch drops."""


@dataclass(frozen=True)
class Runtime:
    """Where a model runs (``device``), what autocast computes in there (``precision``: ``fp32``, ``bf16`` or
    ``fp16``, already resolved for this machine), whether its linear layers hold int8 weights, and on how many
    batches at once it works (``workers``, ``map``)."""

    device: torch.device = torch.device("cpu")  # noqa: RUF009 (a frozen, immutable value)
    precision: str = "fp32"
    int8: bool = False
    reason: str = ""  # how ``auto`` was decided where it was measured (``measure_precision``) or recorded
    auto: bool = False  # the precision is ``auto``'s choice here, none asked for (``autocast``'s small searches)
    workers: int = 1  # batches computed side by side, each on its share of torch's threads (``map``)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")

    @classmethod
    def for_training(cls, device: str, precision_name: str, numpy_engine: bool = False) -> Runtime:
        """``train.device`` and ``train.precision`` on this machine; a CUDA device that is not there is a
        ConfigError. The NumPy engine computes on the CPU, its PyTorch twin too."""
        where = torch.device("cpu") if numpy_engine else precision.device(device)
        keep_freed_memory()
        return cls(where, precision.resolve(precision_name, where.type))

    @classmethod
    def for_inference(cls, device: str = "auto", precision_name: str = "auto", int8: bool = False,
                      trained: str | None = None, workers: int = 1) -> Runtime:
        """A loaded model's runtime: ``device`` ``cpu``, or ``auto``/``cuda`` for the GPU where PyTorch sees one
        and the CPU elsewhere (a run trained on a GPU decodes on a machine without one); int8 layers compute on
        the CPU, in fp32 between them. ``auto`` where it is measured (``precision.probed``) is the precision the
        run ``trained`` in, where the run recorded it."""
        keep_freed_memory()
        if int8:
            return cls(torch.device("cpu"), "fp32", True, workers=workers)
        where = precision.device("cpu" if device == "cpu" else "auto")
        chosen = precision.probed(precision_name, where.type)  # auto's to decide: bf16 native, nothing forced
        if trained in ("fp32", "bf16") and chosen:
            return cls(where, trained, reason="auto: as the run trained", workers=workers, auto=True)
        return cls(where, precision.resolve(precision_name, where.type), workers=workers, auto=chosen)

    def batch_size(self, items: int, most: int) -> int:
        """How many of ``items`` to put in a batch: ``most``; with workers, fewer where that would leave fewer than
        ``BATCHES_PER_WORKER`` batches a worker, so that no worker ends alone on a last long batch (the Multi30k
        test split's 1,000 sentences: 8 batches of 125 instead of 4 of 256 for 2 workers)."""
        if self.workers == 1:
            return most
        return max(1, min(most, -(-items // (BATCHES_PER_WORKER * self.workers))))

    def map(self, work: Callable[[B], R], batches: Sequence[B]) -> list[R]:
        """``work(batch)`` for every batch, the results in the batches' order: one batch after another on all of
        torch's threads, or (``workers`` > 1) that many batches at a time, each on a thread of its own computing with
        its share of torch's threads, as CTranslate2's ``inter_threads`` does. On the CPU, where a small model's
        operations each fork and join the threads for a few hundred microseconds of work, batches side by side
        waste less of them: with 2 workers of 1 thread on 2 cores the date model's test split (20 batches) took
        0.87× the time greedy and 0.86× at beam 5; the Multi30k model's (1,000 sentences of longer, wider steps, in
        8 batches: ``batch_size``) 1.01× greedy and 0.98× at beam 5 (``benchmarks/peer_decoding.py``, AMD EPYC with
        AVX2); on a Zen 4 with AVX-512, 0.69× and 0.76× on the dates, 0.98× and 0.88× on Multi30k, whose threads
        each ran 8–17 % slower beside the other than alone (two processes did not).
        ``work`` runs on the workers' threads: what is thread-local in torch (grad mode, autocast) it must set
        itself. Python's cyclic garbage collector is paused meanwhile (``collector_paused``)."""
        with collector_paused():
            if self.workers == 1 or len(batches) < 2:
                return [work(batch) for batch in batches]
            threads = torch.get_num_threads()
            pool = ThreadPoolExecutor(min(self.workers, len(batches)), initializer=torch.set_num_threads,
                                      initargs=(max(1, threads // self.workers),))
            try:
                return list(pool.map(work, batches))
            finally:
                pool.shutdown(cancel_futures=True)  # a batch that failed (or was stopped) stops those not yet begun
                torch.set_num_threads(threads)  # the count a new thread starts with is the process's: this one's

    def autocast(self, rows: int | None = None, tokens: int | None = None) -> contextlib.AbstractContextManager:
        """Autocast in ``precision`` on the device; a no-op for fp32 (and int8, whose layers take fp32 inputs), and,
        where the precision is ``auto``'s choice on the CPU, for a search of fewer than ``SMALL_SEARCH_ROWS``
        ``rows`` (inputs × beams or samples) or one pass over fewer than ``SMALL_PASS_TOKENS`` ``tokens`` (inputs ×
        padded length): one text from the page, the chat or the server, where fp32 is the faster."""
        small = (rows is not None and rows < SMALL_SEARCH_ROWS) or (tokens is not None and tokens < SMALL_PASS_TOKENS)
        return torch.autocast(self.device.type, dtype=DTYPES.get(self.precision, torch.bfloat16),
                              enabled=self.precision != "fp32" and not (small and self.auto and self.device.type == "cpu"))

    def searching(self, rows: int, probe: Probe, key: Mapping[str, Any]) -> Runtime:
        """The runtime a search of ``rows`` rows a batch (inputs × beams or samples) runs in: this one, except where
        its precision is ``auto``'s choice on the CPU and the rows are not few (``SMALL_SEARCH_ROWS``: fp32 there in
        any case). There the faster of fp32 and bf16 for this search is measured (``measure_precision``: ``probe``
        searches one batch, on a worker's share of the threads, ``SEARCH_PROBE_ROUNDS`` times in each) and kept per
        machine and ``key``, as for training; the choice training measured does not carry over, for a training
        step and a search are not alike. On a 2-core Xeon with AMX the main job's date model
        trained in bf16 at 0.95× fp32's time per token and searched its test split in bf16 at 1.19-1.23× fp32's
        time greedy and 1.03-1.12× at beam 5 (``benchmarks/peer_decoding.py``, two races); on a Zen 4 with AVX-512
        BF16 the same searches took 1.02× and 0.86×."""
        if not (self.auto and self.device.type == "cpu") or rows < SMALL_SEARCH_ROWS:
            return self
        bucket = 1 << (rows - 1).bit_length()  # searches of 65-128 rows a batch share one measurement, and so on
        with torch_threads(max(1, torch.get_num_threads() // self.workers)):
            return measure_precision(probe, self, {"search": dict(key), "rows": bucket, "workers": self.workers},
                                     "input", SEARCH_PROBE_STEPS, SEARCH_PROBE_ROUNDS)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """The gradient scaler fp16 training needs (its small range underflows gradients); disabled, and a no-op,
        for bf16 and fp32."""
        return torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")

    def place(self, model: M) -> M:
        """``model`` in eval mode where it runs: on the device, or as its int8 copy (``quantize_int8``); on the CPU
        in fp32, or in ``auto``'s bf16, whose small searches compute in fp32 (``autocast``), its large linear layers
        prepacked, and every one where oneDNN's fp32 products pay (``pack_linears``; ``PackedLinear``, which
        autocast's products bypass)."""
        if self.int8:
            return quantize_int8(model.eval())
        model = model.eval().to(self.device)
        fp32_there = self.precision == "fp32" or self.auto
        if self.device.type == "cpu" and fp32_there and torch.backends.mkldnn.is_available():
            pack_linears(model)
        return model

    def describe(self) -> str:
        """For logs: ``bf16 on cpu``, ``int8 on cpu``."""
        return f"{'int8' if self.int8 else self.precision} on {self.device}"

    def named(self) -> str:
        """The precision and, where ``auto`` was measured or recorded, why: ``fp32 (auto: ...)``."""
        return f"{self.precision} ({self.reason})" if self.reason else self.precision


# PROBE_WARMUP steps in each precision (on as many batches: kernels made for their shapes, weights cast), then
# PROBE_ROUNDS rounds that time PROBE_STEPS steps in fp32 and then in bf16 over the same batches (or PROBE_SECONDS a
# round), the faster precision by the median of the rounds' ratios. Timed on shapes it has not seen, bf16 paid oneDNN's
# kernel making at every step: 2.68× fp32's time per token on the date model, where whole runs took 1.08×. Timed in
# one round of 4 steps each, one slow moment of the machine decided for good: the date-fast model's kept answer on a
# Zen 4 was "bf16 took 1.01×" where whole runs in bf16 took 0.80× fp32's time, and fresh probes said 0.80-0.87×.
PROBE_WARMUP, PROBE_STEPS, PROBE_ROUNDS, PROBE_SECONDS = 2, 2, 3, 1.0
# A search's probe (``Runtime.searching``) times one batch's search a round, in more rounds: the date model at beam 5
# on the AMX Xeon measured bf16 at 1.11-1.15× fp32's time so (whole test splits: 1.12-1.16×), and at 1.02-1.09× in
# PROBE_ROUNDS rounds of PROBE_STEPS batches, once at 0.97× in benchmarks/peer_decoding.py's workers (bf16 chosen).
SEARCH_PROBE_STEPS, SEARCH_PROBE_ROUNDS = 1, 7
Probe = Callable[[Runtime], int]  # one training step (or one batch's search) in a runtime -> the units it covered


def measure_precision(step: Probe, runtime: Runtime, key: Mapping[str, Any], unit: str = "token",
                      steps: int = PROBE_STEPS, rounds: int = PROBE_ROUNDS) -> Runtime:
    """``auto`` where bf16 is native (``precision.probed``): ``runtime`` in the faster of fp32 and bf16 for this
    model on this machine. ``step`` (which cycles over ``PROBE_WARMUP`` batches) is warmed up in each, then timed in
    ``rounds`` rounds, each over up to ``steps`` steps or ``PROBE_SECONDS`` in fp32 and then in bf16, by
    its time per ``unit`` (what its count counts: a token, a classifier's text); bf16 is taken where the median of
    the rounds' ratios (bf16's time over fp32's, side by side, so that a slow spell of the machine falls on both) is
    below 1. The answer is kept per machine and ``key`` (the model's config and batch size: ``precision.choices_file``), so
    that a run started again, or the next one of the same model, takes it without measuring."""
    entry = precision.choice_entry({**key, "warmup": PROBE_WARMUP, "steps": steps, "rounds": rounds})
    known = precision.kept_choices().get(entry)
    if isinstance(known, dict) and known.get("precision") in precision.PRECISIONS:
        return replace(runtime, precision=known["precision"], reason=f"auto: {known['reason']}, measured earlier")
    runtimes = [replace(runtime, precision=name) for name in ("fp32", "bf16")]
    for each in runtimes:
        for _ in range(PROBE_WARMUP):
            step(each)
    ratios = []
    for _ in range(rounds):
        fp32, bf16 = (_seconds_per_unit(step, each, steps) for each in runtimes)
        ratios.append(bf16 / fp32)
    ratio = statistics.median(ratios)
    choice = "bf16" if ratio < 1 else "fp32"
    reason = f"bf16 took {ratio:.2f}× fp32's time per {unit} on this machine"
    precision.keep_choice(entry, {"precision": choice, "reason": reason})
    return replace(runtime, precision=choice, reason=f"auto: {reason}")


def _seconds_per_unit(step: Probe, runtime: Runtime, steps: int) -> float:
    """The time per unit of up to ``steps`` steps in ``runtime``, or of those begun within ``PROBE_SECONDS``."""
    units, start = 0, time.perf_counter()
    for _ in range(steps):
        units += step(runtime)
        if time.perf_counter() - start > PROBE_SECONDS:
            break
    return (time.perf_counter() - start) / max(units, 1)


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)
TRIM_THRESHOLD = 1 << 30  # free memory at the top of the heap beyond 1 GiB still goes back to the system


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """PyTorch's intra-op threads on this thread (its OpenMP count is the calling thread's) set to ``count`` for the
    block, then as they were."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def keep_freed_memory() -> bool:
    """On Linux with glibc, freed memory stays in the process for the next tensor (``mallopt``: no ``mmap`` per
    large block, no trimming below 1 GiB); elsewhere nothing changes. Returns whether it was set.

    Every decoding or training step frees tensors and asks for ones of the same sizes again. glibc's defaults give
    a large block its own ``mmap`` and hand it back when freed, so each step takes its pages back one fault at a
    time: producing and reducing logits of a beam-5 step's size on the Multi30k model (1,280 rows × 8,000 words)
    took 100–108 ms with its 20,000 faults and 63–69 ms without; the date model's beam search over its test split
    4.9–5.3 s instead of 5.5–6.9 s (AVX2, 2 cores; issue 37). As with jemalloc or tcmalloc, which PyTorch's CPU
    guides recommend, the process keeps what it had at its peak.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl)
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


PACK_FROM = 1 << 20  # weights (out × in) from which a prepacked matrix product pays on any CPU (PackedLinear)


class PackedLinear(nn.Module):
    """An ``nn.Linear`` for CPU inference in fp32 whose weight oneDNN keeps in its own blocked layout, packed once
    rather than at every call, as ONNX Runtime does with its constant weights.

    It pays for large weights, which each call streams from memory: a Multi30k-sized output projection (8,000 ×
    256) took 0.37 ms instead of 1.44 ms for 5 rows (one sentence's beams), 8.6 ms instead of 13.5 ms for 256 and
    39 ms instead of 47 ms for 1,280 (AVX2, 2 cores, issue 37). For the d_model-sized layers it pays only where
    oneDNN's fp32 products beat MKL's (``precision.onednn_fp32_pays``: AMD's CPUs with AVX-512), and only for
    products of ``precision.PACKED_WORK`` multiply-adds or more: smaller ones go through ``F.linear``. The weight
    and bias stay this module's parameters (a tied weight stays tied, the state dict is unchanged); in training
    mode, with gradients, under autocast or while traced (an export) it is ``F.linear``; the packed copy is made
    again after training or a change to the weight.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._packed: tuple[tuple[int, int], torch.Tensor] | None = None  # (the weight's version and address, packed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., in_features) -> (..., out_features)
        if self._plain(x):
            return F.linear(x, self.weight, self.bias)
        return precision.onednn_product(x, self._packed_weight(), self.bias)

    def _plain(self, x: torch.Tensor) -> bool:
        """Whether ``x`` goes through ``F.linear``: in training, with gradients, traced, not fp32 on the CPU, or a
        product too small for oneDNN to pay (its size read only outside a trace, where it is a number)."""
        if (self.training or torch.is_grad_enabled() or torch.compiler.is_compiling() or torch.compiler.is_exporting()
                or x.dtype != torch.float32 or x.device.type != "cpu" or torch.is_autocast_enabled("cpu")):
            return True
        return self.weight.numel() < PACK_FROM and not precision.large_product(x.numel() // self.in_features,
                                                                                self.weight.numel())

    def _packed_weight(self) -> torch.Tensor:
        key = (self.weight._version, self.weight.data_ptr())
        if self._packed is None or self._packed[0] != key:
            self._packed = key, precision.onednn_packed(self.weight)
        return self._packed[1]

    def train(self, mode: bool = True) -> PackedLinear:
        self._packed = None  # an optimiser's step leaves no trace on the weight that ``_packed_weight`` would see
        return super().train(mode)

    def unpacked(self) -> nn.Linear:
        """The plain ``nn.Linear`` of the same weight and bias (the parameters themselves, shared)."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="meta")
        linear.weight, linear.bias = self.weight, self.bias
        return linear.train(self.training)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed"


def pack_linears(model: nn.Module) -> None:
    """Every ``nn.Linear`` of ``model`` with at least ``PACK_FROM`` weights becomes a ``PackedLinear``, in place;
    every one where oneDNN's fp32 products pay on this CPU (``precision.onednn_fp32_pays``)."""
    every = precision.onednn_fp32_pays()
    _swap_layers(model, lambda layer: PackedLinear(layer).train(layer.training)
                 if type(layer) is nn.Linear and (every or layer.weight.numel() >= PACK_FROM) else None)


def unpack_linears(model: nn.Module) -> None:
    """Every ``PackedLinear`` of ``model`` back to the ``nn.Linear`` it was, sharing its parameters, in place: the
    model as its config builds it, the same on every machine (``seqlab plot model`` draws it so)."""
    _swap_layers(model, lambda layer: layer.unpacked() if isinstance(layer, PackedLinear) else None)


def _swap_layers(model: nn.Module, swap: Callable[[nn.Module], nn.Module | None]) -> None:
    """Every layer of ``model`` for which ``swap`` gives a replacement replaced by it, in place."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            replacement = swap(child)
            if replacement is not None:
                setattr(module, name, replacement)


CPU_FP32 = Runtime()  # what an exported graph runs in: ONNX Runtime and CTranslate2 compute in their own precision


VNNI_FLAGS = ("avx512_vnni",)  # /proc/cpuinfo: int8 products summed in 32 bits (vpdpbusd), as fbgemm uses them


@functools.cache
def int8_full_range() -> bool:
    """Whether int8 layers may quantise their inputs to all 8 bits here: where the CPU sums int8 products in 32 bits
    (AVX-512 VNNI). Elsewhere fbgemm sums pairs of them in 16 bits first (AVX2's vpmaddubsw), which saturate unless
    the inputs keep to 7 bits, PyTorch's default everywhere."""
    return bool(precision.cpu_flags(VNNI_FLAGS))


class Int8Linear(torch.ao.nn.quantized.dynamic.Linear):
    """PyTorch's dynamically quantised linear layer (int8 weights, a scale per output row; the inputs quantised at
    every call, a scale per call), its inputs in all 8 bits where ``int8_full_range``: on the Multi30k model's
    valid split greedy BLEU 39.92 against fp32's 40.03 (39.74 in 7 bits), 40.60 at beam 5 against 40.65 (40.36),
    at the same speed (AMD EPYC Zen 4)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._packed_params._packed_params
        return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=not int8_full_range()).to(x.dtype)


def quantize_int8(model: M) -> M:
    """A copy of ``model`` for CPU inference with int8 weights in every ``nn.Linear`` (a ``PackedLinear`` of a model
    already placed in fp32 too), a scale per output row (as CTranslate2 and the ONNX export quantise), and activations
    quantised on the fly (``Int8Linear``); everything else (embeddings, attention products, norms) stays fp32. It
    changes outputs slightly; ``benchmarks/peer_decoding.py`` measures speed and accuracy before and after."""
    model = copy.deepcopy(model)  # tied weights stay tied in the copy
    unpack_linears(model)
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao, not yet removed
        warnings.simplefilter("ignore")
        qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
        return cast(M, torch.ao.quantization.quantize_dynamic(model, {nn.Linear: qconfig}, mapping={nn.Linear: Int8Linear},
                                                              inplace=True))
