"""Precision: ``auto`` follows the CPU (or SEQLAB_PRECISION); bf16 autocast really runs matrix products in bf16;
a ``Runtime`` holds the answer once it is resolved, and how many batches it computes side by side."""

import gc
import logging
import os
import platform
import re
import resource
import sys
import threading
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from seqlab import precision
from seqlab import runtime as runtime_module
from seqlab.config import ConfigError
from seqlab.model import build_model
from seqlab.model.lm import RNNLM
from seqlab.model.rnn import RNNConfig, RNNSeq2seq
from seqlab.model.transformer import TransformerConfig
from seqlab.runtime import Int8Linear, Runtime, quantize_int8
from seqlab.specials import EOS, PAD


@pytest.fixture
def cpu_decides(monkeypatch):
    """No SEQLAB_PRECISION: the CPU's answer (monkeypatched by the test) decides."""
    monkeypatch.delenv(precision.ENV, raising=False)
    precision._warn_not_bf16.cache_clear()


@pytest.mark.parametrize("native", [True, False])
def test_auto_picks_bf16_only_where_the_cpu_has_it(monkeypatch, cpu_decides, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    assert precision.resolve("auto") == ("bf16" if native else "fp32")
    assert precision.resolve("fp32") == "fp32"
    with Runtime.for_inference("cpu", "auto").autocast():
        product = torch.ones(2, 3) @ torch.ones(3, 2)
    assert product.dtype == (torch.bfloat16 if native else torch.float32)


def test_bf16_falls_back_to_fp32_with_a_warning_where_it_is_not_native(monkeypatch, cpu_decides, caplog):
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        assert precision.resolve("bf16") == "fp32"
    assert "no native bf16" in caplog.text
    with Runtime.for_inference("cpu", "bf16").autocast():
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    assert precision.resolve("bf16") == "bf16" and precision.resolve("fp32") == "fp32"


@pytest.mark.parametrize("native", [True, False])
def test_the_precisions_timed_side_by_side_are_those_resolve_runs_as_themselves(monkeypatch, cpu_decides, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    assert precision.native_precisions() == (["fp32", "bf16"] if native else ["fp32"])
    for forced, expected in (("fp32", ["fp32"]), ("bf16", ["fp32", "bf16"] if native else ["fp32"])):
        monkeypatch.setenv(precision.ENV, forced)
        assert precision.native_precisions() == expected
        assert [precision.resolve(p) for p in expected] == expected  # each timed in the precision it names


@pytest.mark.parametrize("native", [True, False])
def test_the_environment_forces_what_auto_means_on_any_cpu(monkeypatch, cpu_decides, caplog, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    monkeypatch.setenv(precision.ENV, "bf16")
    assert precision.resolve("auto") == precision.resolve("bf16") == "bf16"  # emulated where not native
    assert precision.resolve("fp32") == "fp32"  # a config's explicit fp32 stands
    with Runtime.for_inference("cpu", "auto").autocast():
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
    assert "forced by SEQLAB_PRECISION" in precision.describe()
    monkeypatch.setenv(precision.ENV, "FP32")
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        assert precision.resolve("auto") == precision.resolve("bf16") == "fp32"
    assert "SEQLAB_PRECISION=fp32 forces fp32" in caplog.text
    monkeypatch.setenv(precision.ENV, "fp16")
    with pytest.raises(ConfigError, match="SEQLAB_PRECISION=.fp16.: expected one of fp32, bf16"):
        precision.resolve("auto")


@pytest.mark.parametrize(("native", "forced", "measured"), [(True, None, True), (False, None, False),
                                                            (True, "bf16", False)])
def test_auto_is_measured_only_where_bf16_is_native_and_nothing_forces_it(monkeypatch, cpu_decides, native, forced,
                                                                        measured):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    if forced:
        monkeypatch.setenv(precision.ENV, forced)
    assert precision.probed("auto") is measured
    assert not any([precision.probed("fp32"), precision.probed("bf16"), precision.probed("auto", "cuda")])


@pytest.mark.parametrize("native", [True, False])
def test_a_loaded_model_decodes_in_what_auto_chose_when_it_trained(monkeypatch, cpu_decides, native):
    """Where ``auto`` is measured, a loaded run decodes in the precision it recorded when it trained; a run that
    recorded none (before seqlab measured), a precision named outright, SEQLAB_PRECISION and a CPU without native
    bf16 go by the flags as before."""
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    flags = "bf16" if native else "fp32"
    assert Runtime.for_inference("cpu", "auto", trained="fp32").precision == ("fp32" if native else flags)
    assert Runtime.for_inference("cpu", "auto", trained=None).precision == flags
    assert Runtime.for_inference("cpu", "bf16", trained="fp32").precision == flags
    monkeypatch.setenv(precision.ENV, "bf16")
    assert Runtime.for_inference("cpu", "auto", trained="fp32").precision == "bf16"


def test_only_autos_bf16_leaves_small_searches_to_fp32(monkeypatch, cpu_decides):
    """A runtime knows whether its bf16 is ``auto``'s choice (``precision.probed``: bf16 native, nothing forced) or
    was asked for: only the first computes a search of fewer than SMALL_SEARCH_ROWS rows, and one pass over fewer
    than SMALL_PASS_TOKENS tokens, in fp32 (``Runtime.autocast(rows, tokens)``; neither given: training, scoring)."""
    from seqlab.runtime import SMALL_PASS_TOKENS, SMALL_SEARCH_ROWS

    def autocast_on(runtime: Runtime, rows: int | None) -> bool:
        with runtime.autocast(rows):
            return torch.is_autocast_enabled("cpu")

    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    chosen, asked = Runtime.for_inference("cpu", "auto", trained="bf16"), Runtime.for_inference("cpu", "bf16")
    assert chosen.precision == asked.precision == "bf16" and chosen.auto and not asked.auto
    assert Runtime.for_inference("cpu", "auto", trained=None).auto
    rows = [None, 1, SMALL_SEARCH_ROWS - 1, SMALL_SEARCH_ROWS]
    assert [autocast_on(chosen, n) for n in rows] == [True, False, False, True]
    assert [autocast_on(asked, n) for n in rows] == [True] * 4
    assert not any(autocast_on(Runtime.for_inference("cpu", "auto", trained="fp32"), n) for n in rows)
    tokens = [1, SMALL_PASS_TOKENS - 1, SMALL_PASS_TOKENS]  # one pass of an encoder: its inputs × padded length

    def pass_on(runtime: Runtime, n: int) -> bool:
        with runtime.autocast(tokens=n):
            return torch.is_autocast_enabled("cpu")

    assert [pass_on(chosen, n) for n in tokens] == [False, False, True]
    assert [pass_on(asked, n) for n in tokens] == [True] * 3
    monkeypatch.setenv(precision.ENV, "bf16")
    assert not Runtime.for_inference("cpu", "auto", trained="bf16").auto  # forced: bf16 for every search
    monkeypatch.delenv(precision.ENV)
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    assert not Runtime.for_inference("cpu", "auto").auto  # fp32 by the flags: nothing chosen between


def virtual_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """The probe's clock made a counter that only the fake steps move (``spend(seconds)``), so that what the
    probe measures is what a test says the steps take, however busy the machine running the suite is (real sleeps
    of a millisecond or two were outrun by the scheduler on a loaded CI machine)."""
    now = [0.0]

    def spend(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr("seqlab.runtime.time", SimpleNamespace(perf_counter=lambda: now[0]))
    return spend


def test_onednns_fp32_products_are_chosen_where_measured_clearly_faster_and_kept_per_machine(monkeypatch, tmp_path):
    """``precision.onednn_fp32_pays``: oneDNN's prepacked product against ``addmm``; chosen where it takes under
    ``ONEDNN_PAYS_BELOW`` of addmm's time (made 0.5× and 1.0× here by a stand-in clock), never without oneDNN. The
    answer is kept per machine (``choices_file``): the next process takes it without measuring, whatever a new
    measurement would say, until seqlab's code changes."""
    import json

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    now, spans = [0.0], {"mkl": 2.0}  # a stand-in clock that each product moves on by its span
    calls: list[str] = []

    def timed(name: str, product: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def call(*args: object) -> torch.Tensor:
            now[0] += spans[name]
            calls.append(name)
            return product(*args)
        return call

    def pays(onednn: float) -> bool:  # a fresh process's answer, oneDNN's product taking ``onednn``
        spans["onednn"] = onednn
        calls.clear()
        precision.onednn_fp32_pays.cache_clear()
        return precision.onednn_fp32_pays()

    monkeypatch.setattr(precision.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(torch, "addmm", timed("mkl", torch.addmm))
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", timed("onednn", torch.ops.mkldnn._linear_pointwise))
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: True)
    assert pays(1.0) is True and calls.count("onednn") == calls.count("mkl") > precision._PROBE_ROUNDS
    (kept,) = json.loads(precision.choices_file().read_text()).values()
    assert kept == {"onednn_fp32": True, "reason": "oneDNN took 0.50× addmm's time"}
    assert pays(2.0) is True and calls == []  # kept: not measured again
    monkeypatch.setattr(precision, "code_version", lambda: "another seqlab")
    assert pays(2.0) is False and calls  # other code: measured again, and kept beside the first
    assert pays(1.0) is False and calls == []
    assert sorted(c["onednn_fp32"] for c in json.loads(precision.choices_file().read_text()).values()) == [False, True]
    precision.choices_file().write_text("{", encoding="utf-8")  # a damaged file is only a cache
    assert pays(1.0) is True and calls
    monkeypatch.setenv("XDG_CACHE_HOME", str(precision.choices_file()))  # a file where a directory should be
    assert pays(2.0) is False and calls and pays(1.0) is True and calls  # nothing kept: measured in every process
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert pays(1.0) is False and calls == []
    monkeypatch.undo()
    precision.onednn_fp32_pays.cache_clear()  # the real answer again for the tests after this one


def test_the_faster_precision_is_measured_once_per_machine_and_model(monkeypatch, tmp_path):
    """``measure_precision`` warms the step up in each precision, then times it in rounds of PROBE_STEPS in fp32 and
    PROBE_STEPS in bf16, takes the faster per token by the rounds' median ratio, and keeps the answer per machine and
    key in $XDG_CACHE_HOME/seqlab/precision.json: the same key is not measured again, another is, and so is the same
    key under other code (``code_version``); a damaged file is only a cache that is measured again."""
    import json

    from seqlab.precision import choices_file
    from seqlab.runtime import PROBE_ROUNDS, PROBE_STEPS, PROBE_WARMUP, measure_precision

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[str] = []
    spend = virtual_clock(monkeypatch)

    def step(slow: str):
        def run(rt: Runtime) -> int:
            calls.append(rt.precision)
            spend(0.004 if rt.precision == slow else 0.001)
            return 10
        return run

    start = Runtime(torch.device("cpu"), "bf16")
    chosen = measure_precision(step("bf16"), start, {"model": "a"})
    rounds = (["fp32"] * PROBE_STEPS + ["bf16"] * PROBE_STEPS) * PROBE_ROUNDS
    assert chosen.precision == "fp32" and calls == ["fp32"] * PROBE_WARMUP + ["bf16"] * PROBE_WARMUP + rounds
    assert re.fullmatch(r"auto: bf16 took [2-5]\.\d\d× fp32's time per token on this machine", chosen.reason)
    calls.clear()
    again = measure_precision(step("fp32"), start, {"model": "a"})
    assert calls == [] and again.precision == "fp32" and again.reason.endswith(", measured earlier")
    assert measure_precision(step("fp32"), start, {"model": "b"}).precision == "bf16" and calls
    assert measure_precision(step("fp32"), start, {"model": "c"}, "text").reason.endswith("per text on this machine")
    assert choices_file() == tmp_path / "seqlab" / "precision.json"
    assert [c["precision"] for c in json.loads(choices_file().read_text()).values()] == ["fp32", "bf16", "bf16"]
    choices_file().write_text("{", encoding="utf-8")
    calls.clear()
    assert measure_precision(step("bf16"), start, {"model": "a"}).precision == "fp32" and calls
    calls.clear()
    monkeypatch.setattr(precision, "code_version", lambda: "another seqlab")  # an update of the code: measured again
    assert measure_precision(step("fp32"), start, {"model": "a"}).precision == "bf16" and calls


def test_one_slow_spell_of_the_machine_does_not_decide_the_precision(monkeypatch, tmp_path):
    """The rounds take turns and the median of their ratios decides: where bf16 is the faster, a slow spell that
    falls on bf16's steps of one round (the machine busy elsewhere for a moment) leaves the choice as it is; the
    reason gives the median ratio."""
    from seqlab.runtime import PROBE_STEPS, PROBE_WARMUP, measure_precision

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[str] = []
    spend = virtual_clock(monkeypatch)

    def step(rt: Runtime) -> int:
        calls.append(rt.precision)
        timed_bf16 = calls.count("bf16") - PROBE_WARMUP
        slow_spell = rt.precision == "bf16" and 0 < timed_bf16 <= PROBE_STEPS  # the first round's bf16 steps
        spend(0.02 if slow_spell else 0.002 if rt.precision == "fp32" else 0.001)
        return 10

    chosen = measure_precision(step, Runtime(torch.device("cpu"), "fp32"), {"model": "a"})
    assert chosen.precision == "bf16"
    assert re.fullmatch(r"auto: bf16 took 0\.\d\d× fp32's time per token on this machine", chosen.reason)


def test_native_bf16_is_what_the_kernel_lists_for_this_cpu():
    """... unless oneDNN is held to an instruction set without bf16 (the AVX2 kind emulated on a newer CPU)."""
    flags = precision.cpu_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo to compare PyTorch's CPU detection with")
    held = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in precision.ISAS_WITHOUT_BF16
    assert precision.native_bf16() == (bool(flags) and not held)


def test_onednn_held_to_an_isa_without_bf16_makes_bf16_not_native(monkeypatch):
    """``ONEDNN_MAX_CPU_ISA=AVX2`` (how a machine of the AVX2 kind is emulated on a newer one): oneDNN then emulates
    bf16, so ``auto`` trains in fp32 without timing bf16, as on an AVX2 machine; a limit that keeps bf16 changes
    nothing."""
    monkeypatch.delenv(precision.ENV, raising=False)  # the CPU decides, not SEQLAB_PRECISION
    precision.native_bf16.cache_clear()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    assert not precision.native_bf16() and precision.resolve("auto") == "fp32" and not precision.probed("auto")
    precision.native_bf16.cache_clear()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert precision.native_bf16() == bool(precision.cpu_flags())
    precision.native_bf16.cache_clear()
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path, monkeypatch, cpu_decides):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_tile\n"
                       "processor\t: 1\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_tile\n")
    assert precision.cpu_flags(cpuinfo=cpuinfo) == ["avx512_bf16", "amx_tile"]
    assert precision.cpu_flags(("avx2", "avx512f", "amx_bf16"), cpuinfo) == ["avx2", "avx512f"]
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2\n")
    assert precision.cpu_flags(cpuinfo=cpuinfo) == []
    assert precision.cpu_flags(cpuinfo=tmp_path / "absent") is None
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    assert precision.describe().endswith("precision auto -> fp32 (no native bf16)")


def test_int8_quantises_every_linear_layer_and_stays_close_to_fp32():
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=32, num_layers=2, num_heads=4, d_ff=64, dropout=0.0, max_length=20)
    model = build_model(cfg, 20, 20).eval()
    int8 = quantize_int8(model)
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    quantised = [m for m in int8.modules() if isinstance(m, Int8Linear)]
    assert len(quantised) == len(linear) == 2 * (4 + 2) + 2 * (4 + 4 + 2) + 1  # attention W_QKVO, FFN, output
    assert not any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.modules())  # a copy
    src, trg = torch.randint(3, 20, (4, 7)), torch.randint(3, 20, (4, 5))
    with torch.no_grad():
        full, small = model(src, trg), int8(src, trg)
    assert not torch.equal(full, small)
    assert (full - small).abs().max() < 0.05 * full.abs().max()


def test_int8_inputs_take_all_8_bits_only_where_the_cpu_sums_in_32_bits(monkeypatch):
    """Inputs that would saturate 16-bit sums of int8 products (large and positive, against positive weights) stay
    close to fp32 in the range this CPU is given; where it has VNNI, all 8 bits come closer than 7."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(512, 16)
    with torch.no_grad():
        layer.weight.uniform_(0.5, 1.0)
        layer.bias.zero_()
    x = torch.rand(64, 512) * 10
    int8 = quantize_int8(torch.nn.Sequential(layer))
    with torch.no_grad():
        exact = layer(x)

        def error() -> float:
            return ((int8(x) - exact).abs().max() / exact.abs().max()).item()

        here = error()
        assert here < 0.01  # saturated sums would be off by up to half
        if runtime_module.int8_full_range():
            monkeypatch.setattr(runtime_module, "int8_full_range", lambda: False)
            assert here < error()


def test_a_runtime_is_resolved_once_and_runs_the_model_as_it_says(monkeypatch, cpu_decides):
    """Training asks for train.device and train.precision (the NumPy engine computes on the CPU); inference may
    ask for int8, which computes in fp32 between its int8 layers, on the CPU. ``place`` puts the model in eval
    mode where the runtime runs it."""
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    runtime = Runtime.for_training("auto", "auto", numpy_engine=True)
    assert (runtime.device, runtime.precision, runtime.int8) == (torch.device("cpu"), "bf16", False)
    monkeypatch.setattr(precision, "native_bf16", lambda: False)  # resolved once: the runtime keeps its answer
    with runtime.autocast():
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
    int8 = Runtime.for_inference("auto", "bf16", int8=True)
    assert (int8.device, int8.precision, int8.int8) == (torch.device("cpu"), "fp32", True)
    with int8.autocast():
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Dropout(0.5)).train()
    placed = int8.place(model)
    assert isinstance(placed[0], torch.ao.nn.quantized.dynamic.Linear) and not placed.training
    assert Runtime.for_inference("cpu", "fp32").place(model) is model and not model.training
    assert int8.describe() == "int8 on cpu" and runtime.describe() == "bf16 on cpu"


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_models_train_under_bf16_autocast_on_any_cpu(bidirectional):
    """An LSTM seq2seq model (its encoder's padded and packed paths and its decoder) and an LSTM language model
    run forward and backward under the bf16 runtime's autocast, whether oneDNN has a bf16 LSTM on this CPU or
    not (AVX2 with SEQLAB_PRECISION=bf16 has none, and used to fail "could not create a primitive descriptor")."""
    torch.manual_seed(0)
    attention = "general" if bidirectional else "dot"  # dot needs equal encoder and decoder sizes
    config = RNNConfig(cell="lstm", embedding_size=8, hidden_size=12, attention=attention, bidirectional=bidirectional)
    seq2seq = RNNSeq2seq(config, 20, 15)
    lm = RNNLM(20, "lstm", 8, 8, num_layers=2, dropout=0.0)
    src = torch.tensor([[5, 6, 7, EOS, PAD], [5, 6, 7, 8, EOS]])
    with Runtime(precision="bf16").autocast():
        loss = seq2seq(src, torch.randint(4, 15, (2, 4))).float().square().mean()
        loss = loss + lm(torch.randint(4, 20, (2, 6)))[0].float().square().mean()
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in [*seq2seq.parameters(), *lm.parameters()] if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("has_kernel", [False, True])
def test_recurrent_kernels_switch_onednn_off_only_under_bf16_autocast_without_its_lstm(monkeypatch, has_kernel):
    monkeypatch.setattr(precision, "onednn_bf16_lstm", lambda: has_kernel)
    enabled = torch.backends.mkldnn.enabled
    with precision.recurrent_kernels():  # no autocast: nothing changes
        assert torch.backends.mkldnn.enabled == enabled
    with torch.autocast("cpu", dtype=torch.bfloat16), precision.recurrent_kernels():
        assert torch.backends.mkldnn.enabled == (enabled and has_kernel)
    assert torch.backends.mkldnn.enabled == enabled  # switched back on after the call


def test_the_onednn_lstm_probe_agrees_with_a_real_call():
    """``onednn_bf16_lstm`` is what an LSTM under bf16 autocast does on this CPU: it runs, or oneDNN refuses it."""
    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.randn(2, 5, 3))
        runs = True
    except RuntimeError as error:
        assert "primitive descriptor" in str(error)
        runs = False
    assert precision.onednn_bf16_lstm() == runs


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_a_resolved_runtime_keeps_freed_memory_for_the_next_tensors():
    """After ``Runtime.for_inference``, a large tensor freed and asked for again comes back without a page fault
    per 4 KiB (glibc's default maps and unmaps each one)."""
    from seqlab.runtime import keep_freed_memory

    Runtime.for_inference("cpu")
    assert keep_freed_memory()
    for _ in range(4):  # 64 MiB, freed at once: once the heap has grown to it, the process holds it
        torch.ones(16 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        torch.ones(16 << 20)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 1000  # unmapped each time: 5 × 16,384


def test_workers_take_batches_side_by_side_on_their_share_of_the_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        both_running = threading.Barrier(2, timeout=10)  # the first two batches wait for each other: side by side

        def work(batch: int) -> tuple[int, int, int]:
            if batch < 2:
                both_running.wait()
            return batch, threading.get_ident(), torch.get_num_threads()

        done = Runtime(workers=2).map(work, list(range(5)))
        assert [batch for batch, _, _ in done] == list(range(5))  # in the batches' order
        assert len({thread for _, thread, _ in done} - {threading.get_ident()}) == 2
        assert {share for _, _, share in done} == {2}
        assert torch.get_num_threads() == 4  # this thread's count, and the process's, as they were

        def fails(batch: int) -> int:
            if batch == 1:
                raise ValueError("batch 1 is bad")
            return batch

        with pytest.raises(ValueError, match="batch 1 is bad"):
            Runtime(workers=2).map(fails, list(range(4)))
        assert torch.get_num_threads() == 4
        assert Runtime().map(lambda b: (b, threading.get_ident()), [0, 1]) == [(0, threading.get_ident()),
                                                                              (1, threading.get_ident())]
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        Runtime(workers=0)


def test_batches_run_with_the_cyclic_collector_paused_and_leave_it_as_it_was():
    """``Runtime.map`` pauses Python's cyclic garbage collector over its batches, on every worker's thread, and
    leaves it as it found it: on again after the batches (also after one failed), off where it was off; nested
    pauses (a text-level call around the batches) turn it on only when the outermost one ends."""
    assert gc.isenabled()
    assert Runtime().map(lambda b: gc.isenabled(), [0, 1]) == [False, False]
    assert Runtime(workers=2).map(lambda b: gc.isenabled(), [0, 1, 2]) == [False, False, False]
    assert gc.isenabled()

    def fails(batch: int) -> None:
        raise ValueError(f"batch {batch} is bad")

    with pytest.raises(ValueError, match="is bad"):
        Runtime(workers=2).map(fails, [0, 1])
    assert gc.isenabled()
    with runtime_module.collector_paused():
        assert Runtime().map(lambda b: gc.isenabled(), [0]) == [False]
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        Runtime().map(lambda b: b, [0])
        assert not gc.isenabled()  # the caller's choice kept
    finally:
        gc.enable()


def test_workers_get_batches_enough_to_stay_busy_to_the_end():
    two = Runtime(workers=2)
    assert two.batch_size(1000, 256) == 125  # 8 batches: 4 a worker, not 4 of 256 for both
    assert two.batch_size(5000, 256) == 256  # 20 batches of the most already
    assert two.batch_size(3, 256) == 1 and Runtime().batch_size(1000, 256) == 256


@pytest.mark.parametrize("kind", ["classifier", "answerer"])
def test_one_text_passes_in_fp32_where_bf16_is_autos_choice(kind, tiny_classifier, tiny_reader, monkeypatch):
    """An encoder's pass over fewer than SMALL_PASS_TOKENS tokens (one question from the page or the server) runs
    without autocast where ``auto`` chose bf16, its output exactly fp32's; a batch of more tokens under bf16
    autocast (``Runtime.autocast(tokens=...)``)."""
    from seqlab.predictors.answerer import load as load_answerer
    from seqlab.predictors.base import Predictor
    from seqlab.predictors.classifier import load as load_classifier
    from seqlab.runtime import SMALL_PASS_TOKENS

    predictor: Predictor
    if kind == "classifier":
        classifier = predictor = load_classifier(tiny_classifier)
        texts = [["사랑 요즘 궁금해"]] * 2 + [["주말 이별 힘들어"] * (SMALL_PASS_TOKENS // 4)]

        def use(batch: list[str]) -> list:
            return [p.probabilities for p in classifier.classify(batch)]
    else:
        answerer = predictor = load_answerer(tiny_reader)
        context = "Ana lives in Borland and eats apples."
        texts = [["Where does Ana live?"]] * 2 + [["What does Ana eat?"] * (SMALL_PASS_TOKENS // 8)]

        def use(batch: list[str]) -> list:
            return [(a.text, a.probability) for a in answerer.answer(batch, [context] * len(batch))]
    seen: list[bool] = []
    forward = predictor.model.forward

    def recording(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return forward(*args, **kwargs)

    monkeypatch.setattr(predictor.model, "forward", recording)
    predictor.runtime = Runtime(torch.device("cpu"), "fp32")
    in_fp32 = use(texts[0])
    predictor.runtime = Runtime(torch.device("cpu"), "bf16", auto=True)
    assert use(texts[1]) == in_fp32
    use(texts[2])
    assert seen[:2] == [False, False] and all(seen[2:])
