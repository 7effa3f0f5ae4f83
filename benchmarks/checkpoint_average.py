"""Checkpoint averaging against the best single checkpoint, on one trained run.

    python benchmarks/checkpoint_average.py RUN_DIR --data-dir ../shared/data [--last 5] [--results DIR]

RUN_DIR was trained with ``train.keep_checkpoints`` of at least ``--last`` (e.g. ``seqlab train
configs/multi30k_de_en.yaml --set train.keep_checkpoints=5``). The script averages, as ``seqlab average RUN_DIR
--last N --out RUN_DIR-avgN`` does, and scores both models as ``seqlab eval`` does (the same functions, in this
process) on the valid and test splits: the best checkpoint (picked by valid during training) against the mean of
the last N epochs' weights (no choice made on test: N is the Transformer paper's 5 by default, fixed before the run).
Prints the table and records it with the scores in the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab.registry import kind_of_run
from seqlab.rundir import RunDir
from seqlab.train.average import average_run


def main(argv: list[str] | None = None) -> None:
    """Average the run's last epochs (once), score both models, print the table and record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--last", type=int, default=5)
    add_results_option(parser)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    data_dir = Path(args.data_dir).resolve()
    averaged = args.run_dir.with_name(f"{args.run_dir.name}-avg{args.last}")
    if not RunDir(averaged).has_run():
        average_run(RunDir(args.run_dir), args.last, RunDir(averaged), data_dir)
    best, mean = RunDir(args.run_dir).model_info(), RunDir(averaged).model_info()
    rows = [(f"best checkpoint (epoch {best['epoch']}, by valid)", args.run_dir),
            (f"mean of epochs {', '.join(map(str, mean['averaged']))}", averaged)]
    runs: list[dict[str, Any]] = [
        {"model": name, "valid": kind_of_run(run).evaluate(run, "valid", data_dir),
         "test": kind_of_run(run).evaluate(run, "test", data_dir)}
        for name, run in rows]
    table = Table(f"Checkpoint averaging: `{args.run_dir.name}`",
                  ["model", "valid BLEU", "valid ppl", "**test BLEU**", "test ppl", "test exact match %"],
                  [[run["model"], f"{run['valid']['bleu']:.2f}", f"{run['valid']['perplexity']:.2f}",
                    f"**{run['test']['bleu']:.2f}**", f"{run['test']['perplexity']:.2f}",
                    f"{run['test']['exact_match']:.2f}"] for run in runs])
    print(f"#### {table.title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{command(__file__, given)}`\n\n"
          f"{markdown(table)}\n")
    publish(Result(f"checkpoint_average-{args.run_dir.name}", table.title, command(__file__, given), [table], runs,
                   notes=[f"the last {args.last} epochs averaged, fixed before the run; test scored once per model"]),
            args.results)

if __name__ == "__main__":
    main()
