"""The book's tasks (date, addition) on the book's files and split: seqlab against the book's NumPy code.

Runs, one after the other on the same machine:

1. ``seqlab train configs/book/<task>-transformer.yaml`` as a user would (a
   subprocess, wall time measured around it), then ``seqlab eval --split test``;
2. with ``--book-repo``, the book's own NumPy code through
   ``benchmarks/book_numpy.py`` (ch08 attention seq2seq for date, ch07
   Peeky + Reverse for addition) for ``--book-epochs`` epochs.

    python benchmarks/book_tasks.py --task date --data-dir ../shared/data --book-repo /tmp/dlfs2

Prints a markdown table; ``--record docs/benchmarks.md`` appends it there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK_VARIANT = {"date": "attention", "addition": "peeky"}


def run_seqlab(task: str, data_dir: str, overrides: list[str]) -> dict:
    config = ROOT / "configs" / "book" / f"{task}-transformer.yaml"
    run_dir = Path(tempfile.mkdtemp(prefix=f"seqlab-{task}-")) / "run"
    env = os.environ | {"SEQLAB_DATA": data_dir}
    command = ["seqlab", "train", str(config), "--out", str(run_dir)]
    for item in overrides:
        command += ["--set", item]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    wall = time.perf_counter() - start
    test = json.loads(
        subprocess.run(["seqlab", "eval", str(run_dir), "--split", "test", "--json"], check=True, env=env,
                       capture_output=True, text=True).stdout
    )
    epochs = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return {"command": " ".join(command[:3] + command[5:]), "wall_s": wall, "test": test, "epochs": epochs}


def run_book(task: str, book_repo: str, epochs: int) -> dict:
    out = Path(tempfile.mkdtemp(prefix="book-")) / "book.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "book_numpy.py"), "--book-repo", book_repo, "--task", task,
         "--variant", BOOK_VARIANT[task], "--epochs", str(epochs), "--json", str(out), "--quiet"],
        check=True,
    )
    return json.loads(out.read_text())


def table(task: str, ours: dict, book: dict | None) -> str:
    lines = [
        f"### Book task `{task}`: seqlab vs the book's NumPy code",
        "",
        f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, one job at a time. "
        f"Command: `python benchmarks/book_tasks.py --task {task} ...`",
        "",
        "| system | epoch | train s (cumulative) | accuracy % |",
        "|---|---|---|---|",
    ]
    total = 0.0
    for e in ours["epochs"]:
        total += e["train_seconds"]
        lines.append(f"| seqlab (valid 500) | {e['epoch']} | {total:.1f} | {e['valid']['exact_match']:.2f} |")
    if book:
        for e in book["rows"]:
            lines.append(f"| book NumPy (test 5,000) | {e['epoch']} | {e['train_s_cum']:.1f} | {e['acc'] * 100:.2f} |")
    lines += [
        "",
        f"seqlab: `{ours['command']}` took **{ours['wall_s']:.1f} s** wall (data, tokenizers, training, "
        f"validation, checkpoints); test exact match **{ours['test']['exact_match']:.2f} %** "
        f"(BLEU {ours['test']['bleu']:.2f}, perplexity {ours['test']['perplexity']:.4f}) on {ours['test']['sentences']:,} "
        "test sentences.",
    ]
    if book:
        lines.append(f"book: {book['epochs']} epochs, {book['total_train_s']:.1f} s training + "
                     f"{book['total_eval_s']:.1f} s evaluation (one test sentence at a time, as the book does).")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=["date", "addition"], required=True)
    parser.add_argument("--data-dir", required=True, help="holds dlfs2/<task>.txt")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="seqlab config override")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2")
    parser.add_argument("--book-epochs", type=int, default=3)
    parser.add_argument("--record", help="append the table to this markdown file")
    args = parser.parse_args()

    ours = run_seqlab(args.task, str(Path(args.data_dir).resolve()), args.overrides)
    book = run_book(args.task, args.book_repo, args.book_epochs) if args.book_repo else None
    text = table(args.task, ours, book)
    print(text)
    if args.record:
        with open(args.record, "a", encoding="utf-8") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
