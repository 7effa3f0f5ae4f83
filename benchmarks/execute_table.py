"""Programs to execute (S104) by length and nesting: a model trained on Zaremba and Sutskever's task, scored on fresh
programs of each length and nesting that are in none of its splits.

    python benchmarks/execute_table.py configs/execute.yaml [--seeds 1] [--size 500] [--seed 2026]
    python benchmarks/execute_table.py --run RUN_DIR [--size 500]

For each seed, one after the other: ``seqlab train CONFIG --set seed=S`` in a process of its own (wall time
measured around it; the epoch is picked on valid by the trainer), then, for every length 1..L and nesting 1..N of
the config's corpus, ``--size`` programs drawn by seqlab's generator (data/programs.py) with ``--seed``, none of
them in the run's corpus (train, valid or test), scored two ways:

- exact match of the greedy output, as ``seqlab eval`` scores the task;
- the paper's measure, accuracy per target character under teacher forcing (each character predicted from the
  program and the true characters before it; the end of the output counts as one character).

The tables give each cell's mean ± sd over the seeds, the runs go to the scoreboard (benchmarks/results/). The
paper (Zaremba and Sutskever 2014, arXiv:1410.4615) reports the teacher-forced measure for its 2-layer LSTM on a
GPU, by strategy; its figures are not in this repository's sources, so the comparison is the measure, not a copy.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from report import add_results_option, machine, markdown, publish, seqlab_train
from scoreboard import Result, Table, command, spread

from seqlab.corpora import TaskCorpus
from seqlab.data import Pair, load_splits, resolve_data_dir
from seqlab.data.programs import program
from seqlab.evaluate import EncodedSplit, teacher_forced
from seqlab.metrics import exact_match, seen_form
from seqlab.predictors.translator import Translator, load
from seqlab.specials import PAD

BATCH_TOKENS = 4096  # teacher-forced batches (padded source + target tokens)
TRIES = 50  # draws per wanted program before a cell settles for fewer (length 1, nesting 1 has ~34,000 programs)


def train(config: Path, seed: int, work: Path, data_dir: str | None) -> tuple[Path, float]:
    """``seqlab train CONFIG --set seed=SEED``: the run directory and the wall seconds around the command."""
    run_dir = work / f"seed{seed}"
    env = {"SEQLAB_DATA": str(Path(data_dir).resolve())} if data_dir else {}
    return run_dir, seqlab_train(config, run_dir, [f"seed={seed}"], env)


def fresh_programs(length: int, nesting: int, size: int, seed: int, known: set[str]) -> list[Pair]:
    """Up to ``size`` programs of exactly ``length`` and ``nesting``, none twice and none in ``known`` (seen forms)."""
    rng = random.Random(f"{seed}-{length}-{nesting}")
    pairs: list[Pair] = []
    taken = set(known)
    for _ in range(size * TRIES):
        source, value = program(rng, length, nesting)
        if seen_form(source) not in taken:
            taken.add(seen_form(source))
            pairs.append((source, str(value)))
            if len(pairs) == size:
                break
    return pairs


@torch.no_grad()
def character_accuracy(translator: Translator, split: EncodedSplit) -> float:
    """% of target characters (and ends) that the model ranks first given the program and the true ones before."""
    right = total = 0
    for logits, targets in teacher_forced(translator, split, BATCH_TOKENS):
        real = targets != PAD  # (batch, len)
        right += int(((logits.argmax(-1) == targets) & real).sum())
        total += int(real.sum())
    return 100 * right / max(total, 1)


def score_cells(run_dir: Path, size: int, seed: int, data_dir: str | None) -> dict[str, Any]:
    """Every (length, nesting) cell of the run's corpus scored on fresh programs."""
    translator = load(run_dir)
    corpus = translator.config.data.corpus
    if not isinstance(corpus, TaskCorpus) or corpus.task != "execute":
        raise SystemExit(f"{run_dir}: not trained on the execute task")
    splits = load_splits(translator.config.data, resolve_data_dir(data_dir))
    known = {seen_form(source) for pairs in splits.values() for source, _ in pairs}
    cells = []
    for nesting in range(1, corpus.nesting + 1):
        for length in range(1, corpus.length + 1):
            split = EncodedSplit.build(translator, fresh_programs(length, nesting, size, seed, known), "fresh")
            cells.append({"length": length, "nesting": nesting, "programs": len(split.src),
                          "exact_match": exact_match(translator.translate_ids(split.src), split.references),
                          "character_accuracy": character_accuracy(translator, split)})
    return {"run": str(run_dir), "length": corpus.length, "nesting": corpus.nesting, "cells": cells}


def grid(runs: list[dict[str, Any]], metric: str, title: str) -> Table:
    """Rows by nesting, columns by length: the metric's spread over the runs (one run: its value)."""
    length, nesting = runs[0]["length"], runs[0]["nesting"]
    table = Table(title, ["nesting \\ length", *(str(n) for n in range(1, length + 1))], [])
    for depth in range(1, nesting + 1):
        row = [str(depth)]
        for digits in range(1, length + 1):
            values = [cell[metric] for run in runs for cell in run["cells"]
                      if (cell["length"], cell["nesting"]) == (digits, depth)]
            row.append(spread(values) if len(values) > 1 else f"{values[0]:.2f}")
        table.rows.append(row)
    return table


def main(argv: list[str] | None = None) -> None:
    """Train (or take) the runs, score them cell by cell, print the tables and record them."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path, nargs="?", help="a config of the execute task, trained once per seed")
    parser.add_argument("--run", type=Path, help="score this trained run instead of training")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--size", type=int, default=500, help="fresh programs per cell")
    parser.add_argument("--seed", type=int, default=2026, help="the fresh programs' seed")
    parser.add_argument("--data-dir", help="the data directory (default: $SEQLAB_DATA, else ./data)")
    add_results_option(parser)
    args = parser.parse_args(argv)
    if (args.config is None) == (args.run is None):
        parser.error("give a config to train, or --run RUN_DIR")

    runs = []
    if args.run is not None:
        runs.append(score_cells(args.run, args.size, args.seed, args.data_dir) | {"seed": None, "wall_s": None})
    else:
        work = Path(tempfile.mkdtemp(prefix="seqlab-execute-"))
        for seed in args.seeds:
            run_dir, wall = train(args.config, seed, work, args.data_dir)
            runs.append(score_cells(run_dir, args.size, args.seed, args.data_dir) | {"seed": seed, "wall_s": wall})
            print(f"seed {seed}: trained in {wall:.1f} s (wall)", flush=True)
    name = args.config.stem if args.config else args.run.name
    tables = [grid(runs, "exact_match", f"`{name}`: exact match % on fresh programs, by nesting and length"),
              grid(runs, "character_accuracy", f"`{name}`: character accuracy % under teacher forcing (the paper's "
                                                "measure), by nesting and length")]
    sizes = sorted({cell["programs"] for run in runs for cell in run["cells"]})
    print(f"### {tables[0].title}\n\n{machine()}; {sizes[0]:,}–{sizes[-1]:,} fresh programs per cell (seed "
          f"{args.seed}), none in the run's corpus; seeds {', '.join(str(run['seed']) for run in runs)}.\n\n"
          + "\n\n".join(f"{table.title}:\n\n{markdown(table)}" for table in tables) + "\n")
    given = command(__file__, argv)
    publish(Result(f"execute_table-{name}", tables[0].title, given, tables, runs,
                   notes=["fresh programs: none is in the run's corpus (train, valid or test); greedy decoding",
                          "the paper's own table is not reproduced here: its figures are not in this repository's "
                          "sources"]), args.results)


if __name__ == "__main__":
    main()
