"""Checkpoint averaging against the best single checkpoint, on one trained run.

    python benchmarks/checkpoint_average.py RUN_DIR --data-dir ../shared/data [--last 5] [--record FILE]

RUN_DIR was trained with ``train.keep_checkpoints`` of at least ``--last`` (e.g. ``seqlab train
configs/multi30k_de_en.yaml --set train.keep_checkpoints=5``). The script runs, as a user would,
``seqlab average RUN_DIR --last N --out RUN_DIR-avgN`` and then ``seqlab eval --json`` of both models on the valid
and test splits: the best checkpoint (picked by valid during training) against the mean of the last N epochs'
weights (no choice made on test: N is the Transformer paper's 5 by default, fixed before the run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from report import add_record_option, emit, machine

from seqlab.rundir import RunDir


def scores(run_dir: Path, split: str, data_dir: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "seqlab", "eval", str(run_dir), "--split", split, "--json"],
                          check=True, capture_output=True, text=True, env=os.environ | {"SEQLAB_DATA": data_dir})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--last", type=int, default=5)
    add_record_option(parser)
    args = parser.parse_args()
    data_dir = str(Path(args.data_dir).resolve())
    averaged = args.run_dir.with_name(f"{args.run_dir.name}-avg{args.last}")
    if not RunDir(averaged).has_run():
        subprocess.run([sys.executable, "-m", "seqlab", "average", str(args.run_dir), "--last", str(args.last),
                        "--out", str(averaged)], check=True, env=os.environ | {"SEQLAB_DATA": data_dir})
    best, mean = RunDir(args.run_dir).model_info(), RunDir(averaged).model_info()
    rows = [(f"best checkpoint (epoch {best['epoch']}, by valid)", args.run_dir),
            (f"mean of epochs {', '.join(map(str, mean['averaged']))}", averaged)]
    lines = [f"#### Checkpoint averaging: `{args.run_dir.name}`", "",
             f"{time.strftime('%Y-%m-%d')}, {machine()}. Command: `python benchmarks/checkpoint_average.py "
             f"{' '.join(sys.argv[1:])}`", "",
             "| model | valid BLEU | valid ppl | **test BLEU** | test ppl | test exact match % |", "|---|---|---|---|---|---|"]
    for name, run in rows:
        valid, test = scores(run, "valid", data_dir), scores(run, "test", data_dir)
        lines.append(f"| {name} | {valid['bleu']:.2f} | {valid['perplexity']:.2f} | **{test['bleu']:.2f}** | "
                     f"{test['perplexity']:.2f} | {test['exact_match']:.2f} |")
    emit("\n".join(lines) + "\n", args.record)


if __name__ == "__main__":
    main()
