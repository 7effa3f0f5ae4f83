"""What Python's cyclic garbage collector costs a model's batches: a run's ``generate`` over its split's sources
(repeated ``--times`` over, one call, as ``seqlab translate --input`` makes it), with the collector paused as seqlab
pauses it (``seqlab.runtime.collector_paused``: over a call's texts and its batches) and with it running, in turns.

    python benchmarks/collector.py RUN_DIR --data-dir ../shared/data [--split test] [--times 4] [--beam 1]
        [--rounds 3]

Both settings run in this process, one after the other and then the other way round (``--rounds`` each), so a slow
spell of the machine falls on both. For each call: its seconds, the collector's passes during it by generation
(0, 1, 2: a pass of generation 2 walks every object the process holds), their milliseconds and the objects they
found unreachable (in garbage cycles), from ``gc.callbacks``; and the first pass after it (paused: the objects the
call left to the collector, at the next allocation). Prints one row per call and the median of each setting's times.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
from typing import Any

import seqlab.runtime
from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.predictors.translator import load

SETTINGS = ("paused", "running")


class Passes:
    """The collector's passes and their time by generation, from ``gc.callbacks`` while ``with`` it."""

    def __init__(self) -> None:
        self.count, self.ms, self.began, self.collected = [0, 0, 0], [0.0, 0.0, 0.0], 0.0, 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.began = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            self.ms[info["generation"]] += (time.perf_counter() - self.began) * 1e3
            self.collected += info["collected"]

    def __enter__(self) -> Passes:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def describe(self) -> str:
        passes = [f"{n} × gen {g} ({ms:.0f} ms)" for g, (n, ms) in enumerate(zip(self.count, self.ms)) if n]
        return f"{', '.join(passes)}; {self.collected:,} objects collected" if passes else ""


def one_call(translator: Any, lines: list[str], options: DecodeOptions, setting: str) -> tuple[float, str, str]:
    """``generate`` over ``lines`` in ``setting``: its seconds, the passes during it and the first pass after it."""
    pause = type(seqlab.runtime.collector_paused)
    pausing = pause.__call__
    if setting == "running":
        pause.__call__ = lambda self: contextlib.nullcontext()  # type: ignore[method-assign,assignment,return-value]
    try:
        with Passes() as during:
            started = time.perf_counter()
            translator.generate(lines, options)
            seconds = time.perf_counter() - started
        with Passes() as after:
            kept = [[i] for i in range(1_000)]  # the next allocations, as whatever comes next makes them
        del kept
    finally:
        pause.__call__ = pausing  # type: ignore[method-assign]
    return seconds, during.describe() or "none", after.describe() or "none"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--data-dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--times", type=int, default=4, help="the split's sources this many times over, in one call")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    translator = load(args.run_dir)
    sources = [source for source, _ in load_splits(translator.config.data, resolve_data_dir(args.data_dir))[args.split]]
    lines, options = sources * args.times, DecodeOptions(beam=args.beam)
    translator.generate(lines[: translator.config.eval.batch_size], options)  # warm-up: kernels made, caches filled
    times: dict[str, list[float]] = {setting: [] for setting in SETTINGS}
    print(f"{len(lines):,} sentences a call, beam {args.beam}, gc thresholds {gc.get_threshold()}\n")
    print("| round | collector | seconds | passes during the call | first pass after it |\n|---|---|---|---|---|")
    for round_ in range(args.rounds):
        for setting in SETTINGS if round_ % 2 == 0 else SETTINGS[::-1]:
            seconds, during, after = one_call(translator, lines, options, setting)
            times[setting].append(seconds)
            print(f"| {round_ + 1} | {setting} | {seconds:.2f} | {during} | {after} |")
    medians = {setting: statistics.median(values) for setting, values in times.items()}
    print(f"\nmedian seconds: paused {medians['paused']:.2f}, running {medians['running']:.2f} "
          f"({medians['paused'] / medians['running']:.2f}× the time)")


if __name__ == "__main__":
    main()
