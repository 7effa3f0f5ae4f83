"""The device a model runs on, and its numeric precision there: bf16 autocast where the CPU multiplies bf16
natively, fp32 elsewhere; on a CUDA GPU bf16, or fp16 with a gradient scaler where the GPU has no bf16.

``train.device`` (``auto``, ``cpu``, ``cuda``) is decided where the model runs, as the precision is: ``auto`` is
the GPU ``torch.cuda`` sees (under ``torchrun`` the one of the process's ``LOCAL_RANK``), else the CPU; a run
trained on a GPU decodes on a machine without one, on its CPU.

Under bf16 autocast (``train.precision: bf16``) matrix products run in bfloat16 while
the master weights, the optimizer and the loss stay in float32. Whether that is faster
than fp32 depends on the CPU, even among those with AVX-512 BF16 (an AMD EPYC Zen 5 ran
it faster, an Intel Xeon without AMX slower): ``python benchmarks/throughput.py CONFIG``
measures both on the machine at hand. On CPUs without native bf16 (AVX2-only machines)
PyTorch emulates it, many times slower than fp32.

So bf16 runs only where it is native: ``bf16`` means bf16 there and fp32 elsewhere (with a warning), ``fp32``
means fp32, and ``auto`` (the default) means fp32 where bf16 is not native and, where it is, the faster of the two
for the model at hand: training starts by timing the model's own step in each (``probed``;
``seqlab.runtime.measure_precision``, kept per machine, model and seqlab's code in
~/.cache/seqlab/precision.json: ``choices_file``), says the choice and why in its first line, records it in its checkpoints (a
resumed run keeps it) and with the best model (a loaded run computes in it, but for a search of fewer than
``seqlab.runtime.SMALL_SEARCH_ROWS`` rows or an encoder's pass over fewer than ``SMALL_PASS_TOKENS`` tokens, which
it runs in fp32: ``Runtime.autocast``, and a search of more rows, whose precision is measured for it:
``Runtime.searching``). It is decided on the machine that runs the model: a run trained in bf16 decodes in fp32 on
a CPU without native bf16.

``SEQLAB_PRECISION=fp32|bf16`` in the environment replaces the CPU's answer for a whole
process: ``auto`` and ``bf16`` then mean what it says, emulated bf16 included. The tests
use it to run the end-to-end tests in both precisions on any CPU, and benchmarks to
measure both on one machine.

``seqlab.runtime.Runtime`` holds the answer for a model once it is resolved: its device, its precision there
(autocast, the gradient scaler) and int8 decoding.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from seqlab.config import ConfigError
from seqlab.files import atomic_write

log = logging.getLogger("seqlab")

ENV = "SEQLAB_PRECISION"
PRECISIONS = ("fp32", "bf16")
# /proc/cpuinfo flags of hardware bf16 products: AVX-512 BF16 (vdpbf16ps) and AMX tiles.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile")


# oneDNN's instruction sets without bf16 products: ``ONEDNN_MAX_CPU_ISA`` set to one of them (as when a machine of
# the AVX2 kind is emulated on a newer one) leaves oneDNN, behind bf16 autocast's products, to emulate bf16
ISAS_WITHOUT_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI")


@functools.cache
def native_bf16() -> bool:
    """True when this CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX), as PyTorch detects it, and oneDNN may
    use it (``ONEDNN_MAX_CPU_ISA`` does not hold it to an instruction set without bf16)."""
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ISAS_WITHOUT_BF16:
        return False
    cpu = torch.cpu
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(cpu, name, lambda: False)() for name in checks)


def native_precisions() -> list[str]:
    """The CPU precisions worth timing side by side here: fp32, and bf16 where the CPU has it natively, unless
    ``SEQLAB_PRECISION`` forces fp32 (``resolve`` would then run the bf16 run in fp32: fp32 timed twice)."""
    return ["fp32"] + (["bf16"] if native_bf16() and forced() != "fp32" else [])


@functools.cache
def cuda_bf16() -> bool:
    """True when the CUDA GPU multiplies bf16 in hardware (Ampere and later); PyTorch's default answer also counts
    emulated bf16, which is slower than fp16 with a scaler."""
    return torch.cuda.is_bf16_supported(including_emulation=False)


SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # what decides how fast fp32 and bf16 multiply


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name (the platform's processor where there is no /proc/cpuinfo)."""
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags(wanted: tuple[str, ...] = BF16_FLAGS, cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str] | None:
    """Which of the ``wanted`` flags the kernel lists for this CPU (the bf16 ones by default); None where there
    is no /proc/cpuinfo."""
    if not cpuinfo.exists():
        return None
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return [flag for flag in wanted if flag in flags]
    return []


# --- choices measured on this machine, kept ------------------------------------------------------------------
# What is decided by timing (``auto``'s precision for a model: ``seqlab.runtime.measure_precision``; whether oneDNN's
# fp32 products pay: ``onednn_fp32_pays``) is measured once per machine and kept in one file, so that a run started
# again, the next process and every worker of a benchmark decide alike, without measuring.


def choices_file() -> Path:
    """Where the measured choices are kept: $XDG_CACHE_HOME (or ~/.cache)/seqlab/precision.json."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seqlab" / "precision.json"


def kept_choices() -> dict[str, Any]:
    """The kept choices by ``choice_entry``; none where the file is missing or unreadable (it is only a cache)."""
    try:
        choices = json.loads(choices_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return choices if isinstance(choices, dict) else {}


def keep_choice(entry: str, choice: Mapping[str, Any]) -> None:
    """``choice`` kept under ``entry`` beside the others (written whole and atomically); where the file cannot be
    written (a read-only home), nothing is kept and the next process measures again."""
    try:
        atomic_write(choices_file(), json.dumps(kept_choices() | {entry: dict(choice)}, indent=1, ensure_ascii=False))
    except OSError as error:
        log.debug("a measured choice was not kept in %s: %s", choices_file(), error)


def choice_entry(key: Mapping[str, Any]) -> str:
    """This machine (its CPU, flags, threads, torch), this seqlab (``code_version``) and ``key``, hashed."""
    described = json.dumps({"cpu": cpu_name(), "flags": cpu_flags(SPEED_FLAGS), "threads": torch.get_num_threads(),
                            "torch": torch.__version__, "seqlab": code_version(), **key}, sort_keys=True)
    return hashlib.sha256(described.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of seqlab's own source files: a kept choice was measured on the code that computes the step, so an
    update that changes any of it measures again (the package's version number stays the same between releases).
    About 300 small files, read once per process in a few milliseconds."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def forced() -> str | None:
    """``SEQLAB_PRECISION`` (fp32 or bf16) when set; it replaces the CPU's answer for ``auto`` and ``bf16``."""
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return None
    if value not in PRECISIONS:
        raise ConfigError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(PRECISIONS)}")
    return value


def device(name: str) -> torch.device:
    """What ``train.device`` ``auto``, ``cpu`` or ``cuda`` means here: ``auto`` is CUDA where PyTorch sees a GPU;
    a CUDA device is the one of this process's ``LOCAL_RANK`` (torchrun), else the first."""
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("train.device cuda: PyTorch sees no CUDA device here (torch.cuda.is_available() is False); "
                          "use train.device auto or cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def resolve(precision: str, device_type: str = "cpu") -> str:
    """What ``auto``, ``bf16`` or ``fp32`` means on this CPU (or as ``SEQLAB_PRECISION`` forces it), or on a CUDA
    GPU: bf16 where it has bf16, else fp16 (trained with a gradient scaler)."""
    if precision == "fp32":
        return "fp32"
    if device_type == "cuda":
        return forced() or ("bf16" if cuda_bf16() else "fp16")
    choice = forced() or ("bf16" if native_bf16() else "fp32")
    if precision == "bf16" and choice == "fp32":
        _warn_not_bf16(forced() is not None)
    return choice


def probed(precision: str, device_type: str = "cpu") -> bool:
    """Whether ``auto`` is decided by measuring the model's training step in fp32 and in bf16
    (``seqlab.runtime.measure_precision``) rather than by the CPU's flags alone: on a CPU that multiplies bf16
    natively, where ``SEQLAB_PRECISION`` forces nothing. There bf16 is not always the faster: on a 2-core Xeon with
    AMX the main job's date model trained at 0.93× fp32's speed in bf16, a d512 6+6 Transformer at 1.92× (benchmarks/
    throughput.py); elsewhere bf16 is emulated, many times slower, and not measured."""
    return precision == "auto" and device_type == "cpu" and forced() is None and native_bf16()


@functools.cache
def onednn_bf16_lstm() -> bool:
    """Whether oneDNN builds its LSTM kernel in bf16 on this CPU, probed once with a tiny LSTM under bf16
    autocast. Where bf16 is emulated (an AVX2-only CPU with ``SEQLAB_PRECISION=bf16``) it does not: the call fails
    with "could not create a primitive descriptor for the LSTM forward propagation primitive"."""
    lstm = torch.nn.LSTM(2, 2, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 1, 2))
    except RuntimeError:
        return False
    return True


PACKED_WORK = 600_000  # multiply-adds (rows × in × out) of a product from which oneDNN's prepacked fp32 product is
# used where it pays (below)
_PACKED_LAYOUT_ROWS = 256  # the rows oneDNN picks a packed weight's layout for (any number of rows computes the same)
_PROBE_SHAPE, _PROBE_ROUNDS, _PROBE_CALLS = (256, 128, 384), 9, 32  # a date-model search step's W_Q, W_K, W_V
ONEDNN_PAYS_BELOW = 0.8  # oneDNN's time ÷ torch.addmm's from which it is chosen (a clear win: a VM's noise is ±10 %)


def onednn_packed(weight: torch.Tensor) -> torch.Tensor:
    """W (out, in) in oneDNN's own blocked layout, for ``onednn_product``: packed once, read at every call."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), _PACKED_LAYOUT_ROWS)


def onednn_product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (..., in) -> x W^T + b (..., out) through oneDNN, W given by ``onednn_packed``."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def large_product(rows: int, weights: int) -> bool:
    """Whether ``rows`` rows times a weight of ``weights`` elements make ``PACKED_WORK`` multiply-adds or more: a
    product large enough for oneDNN's, where it pays (``onednn_fp32_pays``)."""
    return rows * weights >= PACKED_WORK


@functools.cache
def onednn_fp32_pays() -> bool:
    """Whether oneDNN's prepacked fp32 product (``torch.ops.mkldnn._linear_pointwise``, the weight reordered once)
    beats ``torch.addmm`` (MKL's sgemm on x86) on this CPU, for inference's products of ``PACKED_WORK`` multiply-adds
    or more: the median ratio of ``_PROBE_ROUNDS`` rounds on a search step's size (``_onednn_time_ratio``) below
    ``ONEDNN_PAYS_BELOW``, measured once per machine and kept (``keep_choice``; about 0.1 s), so that every process
    on a machine multiplies alike: measured afresh in each process, in rounds of a few milliseconds, the answer
    differed between processes on a 2-core Zen 4, where the two libraries are close. MKL runs its AVX2 code on AMD's
    CPUs: on a 2-core Zen 5 with AVX-512 (``benchmarks/fp32_products.py``, its record) addmm's products of 64-1,280
    rows ran at 79-95 GFLOP/s on one thread against oneDNN's 89-221, 0.42-0.90× the time, and the date model's test
    split decoded at beam 5 in 0.81× the time with one worker, 0.72× with two (greedy 1.07× and 0.88×: one worker's
    two threads share its products), the same outputs; on an AVX2-only Zen 3 oneDNN's d_model-sized products cost
    more than they saved. Small products are addmm's: in that record oneDNN took 1.28-2.41× its time up to 524,288
    multiply-adds (5-32 rows of 128 inputs, one sentence's beams and more on the date model; 5 × 256 → 256) and
    0.51-1.10× from 655,360 (5 × 256 → 512, one sentence's beams on the Multi30k model, 0.60×; 16 × 128 → 384 and
    32 × 128 → 256 about even, 1.10× and 1.06×), hence ``PACKED_WORK``: a row count would have sent 32 × 128 → 128
    (1.41×) to oneDNN and kept 5 × 256 → 512 from it."""
    if not torch.backends.mkldnn.is_available():
        return False
    entry = choice_entry({"choice": "onednn_fp32", "shape": _PROBE_SHAPE, "rounds": _PROBE_ROUNDS,
                          "calls": _PROBE_CALLS})
    known = kept_choices().get(entry)
    if isinstance(known, dict) and isinstance(known.get("onednn_fp32"), bool):
        return known["onednn_fp32"]
    ratio = _onednn_time_ratio()
    pays = ratio < ONEDNN_PAYS_BELOW
    keep_choice(entry, {"onednn_fp32": pays, "reason": f"oneDNN took {ratio:.2f}× addmm's time"})
    return pays


def _onednn_time_ratio() -> float:
    """oneDNN's prepacked product's time ÷ ``torch.addmm``'s on ``_PROBE_SHAPE``, the median of ``_PROBE_ROUNDS``
    rounds of ``_PROBE_CALLS`` calls each, the two taking turns (a slow spell of the machine falls on both)."""
    rows, inputs, outputs = _PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    x, weight = (torch.randn(n, inputs, generator=generator) for n in (rows, outputs))  # (rows, in), (out, in)
    bias, weight_t = torch.zeros(outputs), weight.t().contiguous()
    packed = onednn_packed(weight)

    def seconds(product: Callable[[], torch.Tensor]) -> float:
        start = time.perf_counter()
        for _ in range(_PROBE_CALLS):
            product()
        return time.perf_counter() - start

    def mkl() -> torch.Tensor:
        return torch.addmm(bias, x, weight_t)

    def onednn() -> torch.Tensor:
        return onednn_product(x, packed, bias)

    with torch.inference_mode():
        seconds(mkl), seconds(onednn)  # warm: kernels made, caches filled
        return statistics.median(seconds(onednn) / seconds(mkl) for _ in range(_PROBE_ROUNDS))


def recurrent_kernels() -> contextlib.AbstractContextManager:
    """Wrapped around a recurrent layer's call: under CPU bf16 autocast where oneDNN has no bf16 LSTM kernel
    (``onednn_bf16_lstm``), oneDNN is switched off for the call and PyTorch's own kernels run the layer; nothing
    changes elsewhere (fp32, native bf16, CUDA)."""
    bf16_on_cpu = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    return _without_onednn() if bf16_on_cpu and not onednn_bf16_lstm() else contextlib.nullcontext()


@contextlib.contextmanager
def _without_onednn() -> Iterator[None]:
    """oneDNN switched off for a block (only it: ``torch.backends.mkldnn.flags`` also resets its other flags)."""
    saved = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]  # a module property, typed as its descriptor
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = saved


def auto_meaning() -> str:
    """What ``auto`` trains in here: ``fp32 or bf16, measured per model`` where it is measured (``probed``), else
    what the CPU's flags (or ``SEQLAB_PRECISION``) make it."""
    return "fp32 or bf16, measured per model" if probed("auto") else resolve("auto")


def describe() -> str:
    """One line for logs and test headers: the CPU's bf16 flags and what ``auto`` means here, and why."""
    flags = cpu_flags()
    listed = "unknown (no /proc/cpuinfo)" if flags is None else ", ".join(flags) or "none"
    why = f"forced by {ENV}" if forced() else ("native bf16" if native_bf16() else "no native bf16")
    return f"CPU bf16 flags: {listed}; precision auto -> {auto_meaning()} ({why})"


@functools.cache
def _warn_not_bf16(by_environment: bool) -> None:
    if by_environment:
        log.warning("precision bf16: %s=fp32 forces fp32", ENV)
    else:
        log.warning("precision bf16: this CPU has no native bf16 (AVX-512 BF16 or AMX), where emulated bf16 is many "
                    "times slower than fp32; running in fp32")
