"""Training throughput of a config in fp32 and bf16, and its model FLOP utilisation.

Builds the config's model and real batches (data, tokenizers and the token
budget of the config), runs the same training steps in fp32 and, where the CPU
has native bf16, under bf16 autocast (elsewhere emulated bf16 is 25× slower than
fp32 and the row is skipped), and reports target tokens/s and the model FLOP
utilisation: the FLOPs of the matrix products a training step must do (forward +
backward = 3 × forward, i.e. 6 · parameters · tokens plus the attention products,
on padded lengths, as the hardware computes them) divided by the time, as a
fraction of this machine's fp32 and bf16 matmul peaks, measured in the same run by ``benchmarks/peaks.py``.
``--rounds N`` (3 by default) measures the peaks and then every row N times over, taking turns, each round's MFU
against its own peaks (the VM moves both by 10-25 % from minute to minute); a row gives the mean ± sd and the range.
``--compile`` adds each precision's row with the forward pass and loss compiled by ``torch.compile`` (inductor's CPU
backend, dynamic shapes, as the batches' lengths vary); every row also gives the seconds of its first pass over the
batches, which hold the compilation for the compiled rows.

    SEQLAB_DATA=../shared/data python benchmarks/throughput.py configs/book/date-transformer.yaml

Prints a markdown table and records it with the runs in the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from peaks import Peaks
from peaks import measure as measure_peaks
from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command, spread
from torch.optim.lr_scheduler import LambdaLR
from torch.profiler import record_function

from seqlab.config import Config, load_config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate, length_batches
from seqlab.data.inputs import source_ids
from seqlab.loss import token_nll_sum
from seqlab.model import build_model, num_parameters
from seqlab.model.transformer import TransformerConfig
from seqlab.runtime import Runtime
from seqlab.sections import TrainConfig
from seqlab.specials import PAD
from seqlab.tokenizer import learn_tokenizers
from seqlab.train.optimizer import apply_gradients, build_optimizer


def step_flops(model: TransformerConfig, batch: Batch, trg_vocab: int) -> float:
    """Matmul FLOPs of one training step (forward + backward) of a Transformer on padded shapes."""
    d, ff, layers = model.d_model, model.d_ff, model.num_layers
    b, ls = batch.src.shape
    lt = batch.trg_in.size(1)
    src_tokens, trg_tokens = b * ls, b * lt
    forward = layers * (
        2 * src_tokens * (4 * d * d + 2 * d * ff)  # encoder: W_Q,K,V,O and the FFN
        + 2 * trg_tokens * (4 * d * d + 2 * d * d + 2 * d * ff)  # decoder: self W_QKVO, cross W_Q,O, FFN
        + 2 * src_tokens * 2 * d * d  # cross-attention W_K, W_V on the memory
        + 4 * b * d * (ls * ls + lt * lt + lt * ls)  # QK^T and weights·V of the three attentions
    ) + 2 * trg_tokens * d * trg_vocab  # output projection
    return 3.0 * forward


def make_batches(cfg: Config, steps: int | None = None) -> tuple[list[Batch], int, int]:
    """The first ``steps`` batches of the config's training split (its tokenizers learnt on it, its token budget;
    every batch of the epoch where ``steps`` is None), and the source and target vocabulary sizes."""
    pairs = load_splits(cfg.data, resolve_data_dir())["train"]
    source, target = learn_tokenizers(pairs, cfg.tokens)
    src = [source_ids(ids) for ids in source.encode([s for s, _ in pairs])]
    trg = target.encode([t for _, t in pairs])
    order = length_batches([len(s) for s in src], [len(t) for t in trg], cfg.train.batch_tokens, seed=0)[:steps]
    return [collate([src[i] for i in ix], [trg[i] for i in ix]) for ix in order], source.vocab_size, target.vocab_size


def padding(batches: list[Batch]) -> tuple[float, float]:
    """The share of the source and of the target positions (``trg_out``) of ``batches`` that are padding: what the
    model computes and the loss masks."""
    def share(tensors: list[torch.Tensor]) -> float:
        return 1 - sum(int((t != PAD).sum()) for t in tensors) / sum(t.numel() for t in tensors)

    return share([b.src for b in batches]), share([b.trg_out for b in batches])


PHASES = ("forward", "backward", "optimizer")  # a step's parts, named for torch.profiler (profile_ops.py)


def training_step(model: torch.nn.Module, bf16: bool = False, compiled: bool = False) -> Callable[[Batch], None]:
    """One training step as the trainer takes it, in the trainer's runtime (``Runtime.for_training``: its
    precision, and glibc keeping freed memory for the next step's tensors): forward and masked loss, backward, then
    clipping, fused Adam and the schedule (``PHASES``, each a ``record_function`` region); ``compiled``: the forward
    pass and loss through ``torch.compile`` (backward too, as AOTAutograd traces it)."""
    runtime = Runtime.for_training("cpu", "bf16" if bf16 else "fp32")
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = LambdaLR(optimizer, lambda step: 1e-4)

    def summed_loss(src: torch.Tensor, trg_in: torch.Tensor, trg_out: torch.Tensor) -> torch.Tensor:
        return token_nll_sum(model(src, trg_in), trg_out)

    forward = torch.compile(summed_loss, dynamic=True) if compiled else summed_loss

    def step(batch: Batch) -> None:
        with record_function("forward"), runtime.autocast():
            loss = forward(batch.src, batch.trg_in, batch.trg_out) / batch.num_target_tokens
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            apply_gradients(model, optimizer, scheduler, 1.0)

    return step


def measure(config: TransformerConfig, batches: list[Batch], src_vocab: int, trg_vocab: int,
            bf16: bool, compiled: bool = False) -> dict[str, float]:
    """Target tokens/s and model GFLOP/s of training steps on ``batches`` (after a warm-up pass over the same
    batches: a training run meets its batch shapes again and again, so oneDNN's kernels for them are made once, and a
    compiled step compiles then), the warm-up pass's seconds, and the model's parameters."""
    torch.manual_seed(0)
    model = build_model(config, src_vocab, trg_vocab).train()
    step = training_step(model, bf16, compiled)
    start = time.perf_counter()
    for batch in batches:  # warm-up
        step(batch)
    first_pass = time.perf_counter() - start
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    seconds = time.perf_counter() - start
    tokens = sum(b.num_target_tokens for b in batches)
    flops = sum(step_flops(config, b, trg_vocab) for b in batches)
    return {"tokens_per_s": tokens / seconds, "gflops": flops / seconds / 1e9, "params": num_parameters(model),
            "first_pass_s": first_pass}


def measure_rounds(model: TransformerConfig, batches: list[Batch], src_vocab: int, trg_vocab: int, rounds: int,
                   peak_seconds: float, compile_too: bool) -> tuple[list[dict[str, Any]], list[Peaks]]:
    """Every row (precision, compiled or not) ``rounds`` times over, taking turns, with the peaks measured afresh
    before each round: the runs, each with its round, its peak and its MFU of both peaks; and each round's peaks."""
    runs, every_peak = [], []
    for round_ in range(rounds):
        peaks = measure_peaks(peak_seconds)
        every_peak.append(peaks)
        for p in peaks.gflops:
            for compiled in [False, True] if compile_too else [False]:
                r = measure(model, batches, src_vocab, trg_vocab, p == "bf16", compiled)
                runs.append({"round": round_, "precision": p, "compiled": compiled, **r, "peak_gflops": peaks.gflops[p],
                             "mfu_fp32": r["gflops"] / peaks.gflops["fp32"],
                             "mfu_bf16": r["gflops"] / peaks.gflops["bf16"] if "bf16" in peaks.gflops else None,
                             "steps": len(batches)})
    return runs, every_peak


def _label(run: dict[str, Any]) -> str:
    """A run's row: its precision, and whether it was compiled."""
    return f"{run['precision']} compiled" if run["compiled"] else run["precision"]


def rows_of(runs: list[dict[str, Any]]) -> list[list[str]]:
    """A table row per precision (and compiled): each column's spread over the rounds."""
    rows = []
    for label in dict.fromkeys(map(_label, runs)):
        mine = [r for r in runs if _label(r) == label]
        bf16 = [100 * r["mfu_bf16"] for r in mine if r["mfu_bf16"] is not None]
        rows.append([label, str(len(mine)), spread([r["tokens_per_s"] for r in mine], 0),
                     spread([r["gflops"] for r in mine], 1), spread([100 * r["mfu_fp32"] for r in mine], 1, "%"),
                     spread(bf16, 1, "%") if bf16 else "— (bf16 emulated)", spread([r["first_pass_s"] for r in mine], 1)])
    return rows


def peaks_note(every_peak: list[Peaks]) -> str:
    """The first round's caption sentence, with every round's peaks where there were several."""
    if len(every_peak) == 1:
        return every_peak[0].note()
    each = "; ".join(f"{p} " + ", ".join(f"{peaks.gflops[p]:.0f}" for peaks in every_peak) for p in every_peak[0].gflops)
    return f"{every_peak[0].note()} Each round's peaks (GFLOP/s): {each}."


def main(argv: list[str] | None = None) -> None:
    """Measure the peaks and the config's training steps, print the table and record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="the peaks and every row measured this many times over")
    parser.add_argument("--peak-seconds", type=float, default=1.0, help="timing per path, size and precision of the "
                        "matmul peaks (benchmarks/peaks.py)")
    parser.add_argument("--compile", action="store_true", help="also time each precision with the forward pass and "
                        "loss compiled (torch.compile)")
    add_results_option(parser)
    args = parser.parse_args(argv)

    cfg = load_config(args.config, args.overrides)
    if not isinstance(cfg.model, TransformerConfig):
        parser.error(f"model.type {cfg.model.type}: the FLOP count is a Transformer's")
    epoch, src_vocab, trg_vocab = make_batches(cfg)
    batches, (src_padding, trg_padding) = epoch[: args.steps], padding(epoch)
    runs, every_peak = measure_rounds(cfg.model, batches, src_vocab, trg_vocab, args.rounds, args.peak_seconds, args.compile)
    m = cfg.model
    caption = (f"d_model {m.d_model}, {m.num_layers}+{m.num_layers} layers, d_ff {m.d_ff}, dropout {m.dropout}, "
               f"{runs[0]['params']:,} parameters, {len(batches)} batches of ≤{cfg.train.batch_tokens} tokens; the "
               f"epoch's length-sorted batches are {100 * src_padding:.1f} % padding on the source side and "
               f"{100 * trg_padding:.1f} % on the target side")
    peak_note = peaks_note(every_peak)
    table = Table(f"Training throughput: `{args.config}` {' '.join(args.overrides)}".strip(),
                  ["precision", "rounds", "target tokens/s", "model GFLOP/s", "MFU of the fp32 peak",
                   "MFU of the bf16 peak", "first pass s"], rows_of(runs))
    speeds = {p: statistics.mean(r["tokens_per_s"] for r in runs if r["precision"] == p and not r["compiled"])
              for p in every_peak[0].gflops}
    if "bf16" in speeds:
        ratio = f"bf16 / fp32 speed: {speeds['bf16'] / speeds['fp32']:.2f}× (means over the rounds)"
    else:
        ratio = "No bf16 row: this CPU has no native bf16 (see docs/benchmarks.md, \"bf16 on a CPU without it\")."
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    print(f"### {table.title}\n\n{datetime.date.today()}, {machine()}; {caption}. Command: `{given}`\n\n{peak_note}\n\n"
          f"{markdown(table)}\n\n{ratio}")
    publish(Result(race_name(args.config, args.overrides), table.title, given, [table], runs,
                   notes=[caption, peak_note, ratio]), args.results)


def race_name(config: str, overrides: list[str]) -> str:
    """One scoreboard entry per config and overrides: throughput-date, throughput-multi30k_de_en-<their hash>."""
    name = f"throughput-{Path(config).stem}"
    return f"{name}-{hashlib.sha256(' '.join(overrides).encode()).hexdigest()[:8]}" if overrides else name

if __name__ == "__main__":
    main()
