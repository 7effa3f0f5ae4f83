"""Data-parallel training's throughput: the same optimisation steps taken by one process or by two under torchrun.

    python benchmarks/ddp_throughput.py --data-dir ../shared/data [--configs configs/date.yaml ...] \
        [--epochs 1] [--threads 1] [--json FILE] [--results DIR]

For each config, one after the other on one machine, as a user runs the commands (``--epochs`` epochs each):

* ``seqlab train CONFIG --set train.accumulate=2 --set train.threads=T``: one process, T threads;
* the same with 2T threads (where the machine has them): one process using the cores two processes would;
* ``torchrun --standalone --nproc-per-node 2 -m seqlab train CONFIG --set train.threads=T``: two processes of T
  threads each, DDP over gloo. Two processes take the steps one process takes with ``train.accumulate: 2`` (the
  same batches, gradients averaged: tests/test_distributed.py), so the three rows train the same model.

Timed: the training seconds in each run's log (validation excluded) and the input units a second
(``train_tokens_per_s`` or ``train_texts_per_s``, all processes together). The scaling from 1 to 2 processes is
the first row's seconds over the third's; on a 2-core machine with T = 1 the second row is the other use of
the same 2 cores (1 × 2 threads against 2 × 1 thread). The table and every run go to the scoreboard
(benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = [ROOT / "configs" / "date.yaml", ROOT / "configs" / "chatbot_ko_labels.yaml",
                   ROOT / "configs" / "multi30k_de_en.yaml"]


def timed_run(command: list[str], data_dir: str, out: Path, omp_threads: int) -> dict[str, Any]:
    """Run one training command; its log's seconds, throughput and last valid metrics."""
    env = os.environ | {"SEQLAB_DATA": data_dir, "OMP_NUM_THREADS": str(omp_threads)}
    started = time.perf_counter()
    subprocess.run([*command, "--out", str(out)], check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    log = RunDir(out).log()
    unit = next(key for key in log[-1] if key.startswith("train_") and key.endswith("_per_s"))
    seconds = sum(record["train_seconds"] for record in log)
    units = sum(record[unit] * record["train_seconds"] for record in log)
    return {"train_s": seconds, "wall_s": wall, "unit": unit[len("train_"):-len("_per_s")],
            "per_s": units / seconds, "steps": log[-1]["step"], "valid": log[-1]["valid"]}


def race(config: Path, epochs: int, threads: int, data_dir: str, work: Path) -> list[dict[str, Any]]:
    """The rows of one config: one process, one process with twice the threads (where the machine has them), two
    processes under torchrun."""
    sets = ["--set", f"train.epochs={epochs}", "--set", f"train.threads={threads}"]
    name = config.stem
    one = [sys.executable, "-m", "seqlab", "train", str(config), *sets, "--set", "train.accumulate=2"]
    rows = [{"setup": f"1 process × {threads} thread{'s' * (threads > 1)}, accumulate 2",
             **timed_run(one, data_dir, work / f"{name}-1x{threads}", threads)}]
    if (os.cpu_count() or 1) >= 2 * threads:
        wide = [*one[:-2], "--set", f"train.threads={2 * threads}", "--set", "train.accumulate=2"]
        rows.append({"setup": f"1 process × {2 * threads} threads, accumulate 2",
                     **timed_run(wide, data_dir, work / f"{name}-1x{2 * threads}", 2 * threads)})
    ddp = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "seqlab",
           "train", str(config), *sets]
    rows.append({"setup": f"2 processes × {threads} thread{'s' * (threads > 1)} (torchrun, gloo)",
                 **timed_run(ddp, data_dir, work / f"{name}-2x{threads}", threads)})
    return rows


def valid_score(valid: dict[str, float]) -> str:
    """A run's main valid score, by its kind."""
    for key, label in (("bleu", "BLEU"), ("macro_f1", "macro-F1"), ("exact_match", "exact")):
        if key in valid:
            return f"{label} {valid[key]:.2f}"
    return f"ppl {valid['perplexity']:.2f}"


def table(results: dict[str, list[dict[str, Any]]], epochs: int) -> Table:
    """Every config's rows."""
    columns = ["config", "setup", "optimizer steps", "training s", "units/s", "× the first row",
               f"valid after {epochs} epoch{'s' * (epochs > 1)}"]
    return Table("Data-parallel training: one process against two under torchrun", columns, [
        [config, row["setup"], f"{row['steps']:,}", f"{row['train_s']:.1f}", f"{row['per_s']:,.0f} {row['unit']}",
         f"{rows[0]['train_s'] / row['train_s']:.2f}", valid_score(row["valid"])]
        for config, rows in results.items() for row in rows])

def main(argv: list[str] | None = None) -> None:
    """Race every config, print the table and record it, write the JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="../shared/data, laid out as the configs expect")
    parser.add_argument("--configs", type=Path, nargs="+", default=DEFAULT_CONFIGS)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="threads of each process (T)")
    parser.add_argument("--json", help="also write every number here")
    add_results_option(parser)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    data_dir = str(Path(args.data_dir).resolve())
    work = Path(tempfile.mkdtemp(prefix="ddp-throughput-"))
    results = {config.name: race(config.resolve(), args.epochs, args.threads, data_dir, work) for config in args.configs}
    made = table(results, args.epochs)
    print(f"#### {made.title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{command(__file__, given)}`\n\n"
          f"{markdown(made)}\n")
    runs = [{"config": config, **row} for config, rows in results.items() for row in rows]
    publish(Result("ddp_throughput", made.title, command(__file__, given), [made], runs,
                   notes=["the rows of a config take the same optimisation steps (accumulate 2 = 2 processes)",
                          "training seconds from each run's log, validation excluded"]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
