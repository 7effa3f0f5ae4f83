"""What every benchmark script does with its tables (print them as markdown, record them in the scoreboard, or, for
the reliability scripts, append them to a markdown file on request) and with its timed runs (each in a process of its
own, so that its time and peak memory are its own): ``seqlab`` and ``seqlab_train`` run seqlab's commands as a user
runs them."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from scoreboard import AVX2_LIMITS, EMULATED_AVX2, RESULTS, Result, Table, cpu_kind, record

from seqlab import precision
from seqlab.data.splits import SELECTION_ENV
from seqlab.precision import cpu_flags


def choose_on_valid() -> None:
    """Make this process, and every process it starts (``seqlab train``, a peer), part of a selection run: the test
    split is withheld from all of them (``SEQLAB_SELECTION=1``; seqlab.data.splits). Every script that chooses calls
    it first, before it reads its arguments."""
    os.environ[SELECTION_ENV] = "1"


def run_worker(script: str | Path, kind: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """Run ``script --worker KIND SPEC RESULT`` in a fresh interpreter: ``spec`` goes in as a JSON file, the
    worker's result comes back from one."""
    spec_path = work / f"spec-{kind}-{time.monotonic_ns()}.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    result = work / (spec_path.stem + "-result.json")
    subprocess.run([sys.executable, str(Path(script).resolve()), "--worker", kind, str(spec_path), str(result)],
                   check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(result.read_text(encoding="utf-8"))


def seqlab(args: Sequence[str | Path], env: Mapping[str, str] | None = None, capture: bool = False,
           quiet: bool = False) -> str:
    """``seqlab ARGS`` as a user runs it, in a process of its own (the seqlab of this interpreter), its environment
    this one's with ``env``'s changes. Returns its standard output where ``capture`` (``eval --json`` and the like),
    else "" (the output shown, or dropped where ``quiet``); its log and progress bars on standard error are shown."""
    stdout = subprocess.PIPE if capture else subprocess.DEVNULL if quiet else None
    done = subprocess.run([sys.executable, "-m", "seqlab", *map(str, args)], check=True, env=os.environ | dict(env or {}),
                          stdout=stdout, text=True)
    return done.stdout or ""


def seqlab_train(config: str | Path, run_dir: Path, overrides: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, options: Sequence[str] = (), quiet: bool = False) -> float:
    """``seqlab train CONFIG --out RUN_DIR``, ``--set`` before each of ``overrides``, then ``options`` (``seqlab``'s
    ``env`` and ``quiet``). Returns the wall seconds around the command."""
    started = time.perf_counter()
    seqlab(["train", config, "--out", run_dir, *(arg for item in overrides for arg in ("--set", item)), *options], env,
           quiet=quiet)
    return time.perf_counter() - started


def add_results_option(parser: argparse.ArgumentParser) -> None:
    """``--results DIR``: where a race's scoreboard JSON goes (``publish``)."""
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="DIR",
                        help="where the scoreboard's JSON goes (default benchmarks/results/)")


def markdown(table: Table) -> str:
    """A table's header, rule and rows as markdown lines (the scoreboard's cells as they are)."""
    lines = [f"| {' | '.join(table.columns)} |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + [f"| {' | '.join(row)} |" for row in table.rows])


def publish(result: Result, results: Path) -> None:
    """Record ``result`` in the scoreboard under ``results`` and say where."""
    print(f"recorded in {record(result, results)}")


def add_record_option(parser: argparse.ArgumentParser) -> None:
    """``--record FILE``, for the reliability scripts, whose tables go to docs/reliability.md."""
    parser.add_argument("--record", metavar="FILE", help="also append the tables to this markdown file "
                        "(docs/benchmarks.md)")


def emit(text: str, record: str | None) -> None:
    """Print ``text``; with ``record``, append it to that file after a blank line."""
    print(text)
    if record:
        with open(record, "a", encoding="utf-8") as f:
            f.write("\n" + text.strip("\n") + "\n")


def machine() -> str:
    """The CPU, its vector extensions that matter here, threads and torch: one line for a table's caption."""
    name, vector = precision.cpu_name(), cpu_flags(precision.SPEED_FLAGS)
    if vector is not None:
        name += f" ({', '.join(vector) or 'no AVX2'})"
    if cpu_kind() == EMULATED_AVX2:
        name += f" held to AVX2 by {', '.join(AVX2_LIMITS)}"
    return f"{name}, {torch.get_num_threads()} threads, torch {torch.__version__}, {precision_note()}"


def precision_note() -> str:
    """What ``precision: auto`` runs in here, and whether SEQLAB_PRECISION forced it."""
    forced = " (SEQLAB_PRECISION)" if precision.forced() else ""
    return f"precision auto = {precision.auto_meaning()}{forced}"


def peak_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run a seqlab command (``python -m seqlab ARGV``) in its own process: its wall seconds and peak resident
    memory (MiB, ``wait4``'s ``ru_maxrss``: the process's own high-water mark)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "seqlab", *argv], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"seqlab {' '.join(argv)} failed ({code})")
    return time.perf_counter() - started, usage.ru_maxrss / 1024  # Linux: KiB


def rounds_ratio(ratios: list[float]) -> str:
    """The ratio of one round, or the rounds' median and range."""
    if len(ratios) == 1:
        return f"{ratios[0]:.3f}"
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}, {len(ratios)} rounds)"


def add_scale_options(parser: argparse.ArgumentParser, scales: list[int], example: str) -> None:
    """A scaling benchmark's options: ``--scales`` (the corpus repeated so many times), ``--memory-scales`` (also
    run from the corpus in memory), ``--rounds`` (each way, taking turns), ``--set`` (``example`` says one) and
    ``--results``."""
    parser.add_argument("--scales", type=int, nargs="+", default=scales)
    parser.add_argument("--memory-scales", type=int, nargs="*", default=[1, 10],
                        help="the scales also run with the corpus in memory")
    parser.add_argument("--rounds", type=int, default=1, help="runs each way at each scale, taking turns")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help=f"a config override for every command, e.g. {example}")
    add_results_option(parser)
