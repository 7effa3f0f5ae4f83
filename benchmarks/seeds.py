"""One config trained from several seeds, as a user runs it: the spread of its valid and test scores and its time.

    python benchmarks/seeds.py configs/date.yaml [--seeds 1 2 3] [--precisions auto] [--set KEY=VALUE ...] \
        [--data-dir ../shared/data] [--race NAME] [--results DIR]

For each seed, each precision in turn (``auto`` is what the machine runs by default; ``fp32`` or ``bf16`` force one
with SEQLAB_PRECISION; taking turns, so that a slow spell of the machine falls on all of them): ``seqlab train CONFIG
--set seed=S`` in a process of its own (wall time measured around it, training seconds from its log), then ``seqlab
eval``'s scoring (in this process) of its best model, picked on valid by the trainer, decoded as ``seqlab eval``
decodes the run (its config's ``eval.beam`` and ``eval.length_penalty``: greedy unless it says so): on valid, and
once on test with the test subsets whose source (and, for the date task, whose day: the target) no training pair has
(``seqlab.metrics.seen_form``). The table gives each score as mean ± sd and range over the seeds; the runs go to the
scoreboard (benchmarks/results/, docs/results.md).

The config is a final choice: its recipe was chosen on valid before this script scores it on test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from report import seqlab_train
from scoreboard import RESULTS, Result, Table, command, record, spread

from seqlab import precision
from seqlab.registry import kind_of_run
from seqlab.rundir import RunDir

SCORES = {"exact_match": "exact match %", "bleu": "BLEU", "accuracy": "accuracy %", "perplexity": "perplexity",
          "perplexity_per_character": "perplexity per character"}  # the last compares models of other vocabularies


@contextlib.contextmanager
def environment(changes: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``changes`` for the length of a block."""
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _scores(run_dir: Path, split: str, changes: dict[str, str]) -> dict[str, Any]:
    """``seqlab eval RUN --split SPLIT``'s metrics, computed in this process with the run's environment."""
    with environment(changes):
        return kind_of_run(run_dir).evaluate(run_dir, split, None)


def train_and_score(config: Path, seed: int, precision_name: str, overrides: list[str], work: Path,
                    data_dir: str | None) -> dict[str, Any]:
    """One seed of the config in one precision: trained in its own process, then scored on valid and test."""
    changes = {"SEQLAB_DATA": data_dir} if data_dir else {}
    if precision_name != "auto":
        changes[precision.ENV] = precision_name
    run_dir = work / f"{precision_name}-seed{seed}"
    wall = seqlab_train(config, run_dir, [f"seed={seed}", *overrides], changes, quiet=True)
    run = RunDir(run_dir)
    log, info, search = run.log(), run.model_info(), run.config().eval
    return {"seed": seed, "precision": precision_name,
            "search": {"beam": search.beam, "length_penalty": search.length_penalty},  # what seqlab eval decodes with
            "resolved": info.get("precision", precision_name),  # what the run trained in (auto: what it chose)
            "best_epoch": info["epoch"], "epochs": len(log),
            "train_s": run.training_seconds(), "wall_s": wall,
            "valid": _scores(run_dir, "valid", changes), "test": _scores(run_dir, "test", changes)}


def table(runs: list[dict[str, Any]], title: str) -> Table:
    """A row per precision: each score's spread over the seeds, valid then test, then the times."""
    first = runs[0]
    scores = [key for key in SCORES if key in first["valid"]]
    unseen = [key for key in ("exact_match_unseen", "exact_match_unseen_target") if key in first["test"]]
    columns = ["precision", "seeds", *(f"valid {SCORES[key]}" for key in scores),
               *(f"test {SCORES[key]}" for key in scores),
               *(f"test {key.removeprefix('exact_match_').replace('_', ' ')} exact match %" for key in unseen),
               "training s", "wall s"]
    rows = []
    for name in dict.fromkeys(run["precision"] for run in runs):
        mine = [run for run in runs if run["precision"] == name]
        label = name if name != "auto" else f"auto ({' '.join(dict.fromkeys(run['resolved'] for run in mine))})"
        rows.append([label, " ".join(str(run["seed"]) for run in mine),
                     *(spread([run["valid"][key] for run in mine]) for key in scores),
                     *(spread([run["test"][key] for run in mine]) for key in scores),
                     *(spread([run["test"][key] for run in mine]) for key in unseen),
                     spread([run["train_s"] for run in mine], 1), spread([run["wall_s"] for run in mine], 1)])
    return Table(title, columns, rows)


def described_search(search: dict[str, Any]) -> str:
    """How the scores were decoded: the run's own search, as ``seqlab eval`` takes it from the config."""
    if search["beam"] == 1:
        return "decoded greedily, as seqlab eval decodes a run whose config gives no search"
    return (f"decoded as seqlab eval decodes the run: its config's beam {search['beam']}, length penalty "
            f"α {search['length_penalty']:g}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--precisions", nargs="+", default=["auto"], choices=["auto", "fp32", "bf16"])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--data-dir")
    parser.add_argument("--race", help="the scoreboard's name for these runs (default: seeds-CONFIG)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the scoreboard's JSON goes")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="seqlab-seeds-"))
    runs = [train_and_score(args.config, seed, name, args.overrides, work, args.data_dir)
            for seed in args.seeds for name in args.precisions]
    title = f"`{args.config.as_posix()}`" + "".join(f" `--set {item}`" for item in args.overrides)
    result = Result(args.race or f"seeds-{args.config.stem}", f"{title}, seeds {', '.join(map(str, args.seeds))}",
                    command(__file__, sys.argv[1:] if argv is None else argv), [table(runs, "Scores and times")],
                    runs, notes=["test scored once per run, on its best model as chosen on valid by the trainer",
                                 described_search(runs[0]["search"])])
    path = record(result, args.results)
    print("\n\n".join([f"| {' | '.join(row)} |" for row in result.tables[0].rows]))
    print(f"recorded in {path}")


if __name__ == "__main__":
    main()
