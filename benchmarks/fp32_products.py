"""oneDNN's fp32 products against MKL's (``torch.addmm``) on this CPU: each product shape alone, then a trained run's
split decoded with every product through each, taking turns in one process.

    python benchmarks/fp32_products.py runs/main-job-seed1 --data-dir ../shared/data [--split test] \\
        [--beams 1 5] [--workers 1 2] [--rounds 5]

``precision.onednn_fp32_pays`` decides once per machine (kept: ``precision.choices_file``) whether CPU inference in
fp32 multiplies through oneDNN's prepacked products (``runtime.PackedLinear``, ``attention.frozen``); this script
times what that decision is about.
First the products alone, on one thread: for each rows × inputs → outputs of ``SHAPES`` (a search step's layers of
the date and Multi30k models, one sentence's beams to a large batch's), microseconds a call and GFLOP/s through
``torch.addmm`` and through oneDNN with the weight packed once. Then the run's split, as ``seqlab eval`` batches it,
in fp32: for each ``--workers`` count and beam size, ``--rounds`` rounds that decode it once with the decision
forced to "no" (MKL's products, the large output projection prepacked as before) and once "yes", the order
alternating; the median time of each, the median and range of the rounds' ratios, and the share of outputs that
are the same. The machine's own answer is printed beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch
from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab import precision
from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit
from seqlab.predictors.translator import Translator, load
from seqlab.runtime import Runtime, torch_threads

SHAPES = [(rows, inputs, outputs) for rows in (5, 16, 32, 64, 256, 1280)
          for inputs, outputs in ((128, 384), (128, 128), (128, 256), (256, 768), (256, 512), (512, 256), (256, 256))]
CALLS = 200  # a shape's calls per way, after 20 to warm up


def call_seconds(product: Callable[[], torch.Tensor], calls: int) -> float:
    """Seconds a call of ``product``, over ``calls`` calls after a warm-up."""
    for _ in range(calls // 10):
        product()
    start = time.perf_counter()
    for _ in range(calls):
        product()
    return (time.perf_counter() - start) / calls


def shape_row(rows: int, inputs: int, outputs: int, calls: int) -> list[str]:
    """One product shape through addmm and through oneDNN: a table row."""
    x, weight, bias = torch.randn(rows, inputs), torch.randn(outputs, inputs), torch.randn(outputs)
    weight_t = weight.t().contiguous()
    packed = precision.onednn_packed(weight)
    mkl = call_seconds(lambda: torch.addmm(bias, x, weight_t), calls)
    onednn = call_seconds(lambda: precision.onednn_product(x, packed, bias), calls)
    flops = 2 * rows * inputs * outputs
    return [f"{rows} × {inputs} → {outputs}", f"{mkl * 1e6:.1f}", f"{flops / mkl / 1e9:.1f}", f"{onednn * 1e6:.1f}",
            f"{flops / onednn / 1e9:.1f}", f"{onednn / mkl:.2f}×"]


def products(calls: int) -> Table:
    """Every shape of ``SHAPES`` through addmm and through oneDNN, on one thread."""
    table = Table("fp32 products on one thread: torch.addmm (MKL) against oneDNN with the weight packed once",
                  ["rows × in → out", "addmm µs", "addmm GFLOP/s", "oneDNN µs", "oneDNN GFLOP/s", "oneDNN ÷ addmm"],
                  [])
    with torch_threads(1), torch.inference_mode():
        table.rows += [shape_row(rows, inputs, outputs, calls) for rows, inputs, outputs in SHAPES]
    return table


@contextlib.contextmanager
def deciding(pays: bool) -> Iterator[None]:
    """``precision.onednn_fp32_pays`` answering ``pays`` within the block (placing a model and a search's start
    read it), the measured answer again after it."""
    measured = precision.onednn_fp32_pays
    setattr(precision, "onednn_fp32_pays", lambda: pays)  # noqa: B010 (a module's function stood in for)
    try:
        yield
    finally:
        setattr(precision, "onednn_fp32_pays", measured)  # noqa: B010


def decoders(run_dir: str, workers: int) -> Iterator[tuple[bool, Translator]]:
    """The run placed in fp32 with the decision each way (placing reads it: which layers are packed)."""
    for pays in (False, True):
        with deciding(pays):
            loaded, runtime = load(run_dir), Runtime(precision="fp32", workers=workers)
            yield pays, Translator(runtime.place(loaded.model), loaded.source, loaded.target, loaded.config, runtime)


def decode(translator: Translator, pays: bool, src: Sequence[Sequence[int]], beam: int) -> tuple[float, list[list[int]]]:
    """Seconds to decode ``src`` and the outputs, with the decision ``pays`` (a search's start reads it)."""
    with deciding(pays):
        start = time.perf_counter()
        outputs = [hypotheses[0].tokens for hypotheses in translator.search_ids(src, DecodeOptions(beam=beam))]
        return time.perf_counter() - start, outputs


def rounds(ways: dict[bool, Translator], src: Sequence[Sequence[int]], beam: int, count: int) -> list[str]:
    """``count`` rounds of both ways, the order alternating: a table row."""
    seconds: dict[bool, list[float]] = {False: [], True: []}
    outputs: dict[bool, list[list[int]]] = {}
    for pays in (False, True):
        decode(ways[pays], pays, src[:64], beam)  # warm-up
    for turn in range(count):
        for pays in ((False, True) if turn % 2 == 0 else (True, False)):
            took, outputs[pays] = decode(ways[pays], pays, src, beam)
            seconds[pays].append(took)
    ratios = [yes / no for no, yes in zip(seconds[False], seconds[True])]
    same = sum(a == b for a, b in zip(outputs[False], outputs[True])) / len(src)
    return ["greedy" if beam == 1 else f"beam {beam}", f"{statistics.median(seconds[False]):.3f}",
            f"{statistics.median(seconds[True]):.3f}",
            f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}×)", f"{100 * same:.1f}"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--split", default="test")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=CALLS, help="calls a product shape, each way")
    add_results_option(parser)
    args = parser.parse_args(argv)
    shapes = products(args.calls)
    loaded = load(args.run_dir)
    pairs = load_splits(loaded.config.data, resolve_data_dir(args.data_dir))[args.split]
    src = EncodedSplit.build(loaded, pairs, args.split).src
    search = Table(f"`{args.run_dir}`, {args.split} split in fp32: MKL's products against oneDNN's, taking turns",
                   ["workers", "search", "MKL s", "oneDNN s", "oneDNN ÷ MKL (rounds)", "same output %"], [])
    for workers in args.workers:
        ways = dict(decoders(args.run_dir, workers))
        search.rows += [[str(workers), *rounds(ways, src, beam, args.rounds)] for beam in args.beams]
    answer = f"this machine's answer (precision.onednn_fp32_pays): {'oneDNN' if precision.onednn_fp32_pays() else 'MKL'}"
    notes = [machine(), f"{len(src):,} sentences; {args.rounds} rounds", answer]
    print("\n\n".join(f"#### {table.title}\n\n{markdown(table)}" for table in (shapes, search)))
    print("\n".join(notes))
    given = sys.argv[1:] if argv is None else argv
    publish(Result(f"fp32_products-{Path(args.run_dir).name}", search.title, command(__file__, given), [shapes, search],
                   [{"table": table.title, "rows": table.rows} for table in (shapes, search)], notes=notes),
            args.results)


if __name__ == "__main__":
    main()
