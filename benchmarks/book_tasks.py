"""The book's tasks (date, addition) on the book's files and split: seqlab against the book's NumPy code.

For each variant of the task (addition: baseline, reverse, peeky, attention,
transformer, and fixed-baseline, fixed-reverse, fixed-peeky in the book's own
fixed-width format; date: attention, transformer), one after the other on the
same machine:

1. ``seqlab train configs/book/<task>-<variant>.yaml`` as a user would (a
   subprocess, wall time measured around it), then ``seqlab eval --split test``
   of the best model (picked on the 500 valid pairs), its exact match also over the test pairs
   whose source is not a training source (the book's date.txt split repeats 28 % of its test
   sources in training);
2. with ``--book-repo``, the book's own NumPy code for the same variant
   (``benchmarks/book_numpy.py``; the Transformer has no book counterpart)
   for the book's number of epochs, testing on the 5,000 test pairs after
   every epoch as the book does.

The race (issue 19: faster than the book's code to 99.9 % test exact match) compares the training time of
seqlab's model picked on valid, if its test score reaches 99.9 %, with the book's time to its first epoch that
does; both are models whose test score is shown. With ``--set train.stop_at=99.9`` seqlab stops at its first
epoch of 99.9 % valid, so its picked model is the one at the time the clock stops:

    python benchmarks/book_tasks.py --task date --variants attention --seeds 1 2 3 --data-dir ../shared/data \
        --book-repo /tmp/dlfs2 --book-epochs 6 --set train.engine=numpy --set train.stop_at=99.9

    python benchmarks/book_tasks.py --task addition --data-dir ../shared/data --book-repo /tmp/dlfs2

``--seeds 1 2 3`` trains seqlab once per seed, and runs the book's code once per seed (``book_numpy.py --seed``:
the book's scripts draw their first weights from the state ``load_data`` leaves, the same in every run; a seed
gives them other ones) and once more as published, with its own first weights. Prints markdown tables (summary,
then, with several seeds, each variant's spread over them: mean ± sd and range, then accuracy per epoch) and
records them with every run in the scoreboard (``--results``, benchmarks/results/).
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
from pathlib import Path
from typing import Any

from report import add_results_option, markdown, publish, seqlab, seqlab_train
from scoreboard import Result, Table, command, ratio_range, spread

from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"addition": ["baseline", "reverse", "peeky", "attention", "transformer", "fixed-baseline", "fixed-reverse",
                         "fixed-peeky"], "date": ["attention", "transformer"]}
BOOK_VARIANTS = {"baseline", "reverse", "peeky", "attention"}
FIXED = "fixed-"  # configs/book/addition-fixed-*.yaml: the book's own format (S53), raced against the same book variant
TARGET = 99.9  # test exact match %, the race's (issue 19)
# per variant (and seed): seqlab's run, the book's; the book as published has no seqlab run beside it
Results = dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]


def book_variant(variant: str) -> str | None:
    """The book's script that a variant races: its own name, or the book's format's (``fixed-peeky``: peeky)."""
    name = variant.removeprefix(FIXED)
    return name if name in BOOK_VARIANTS else None


def run_seqlab(task: str, variant: str, data_dir: str, overrides: list[str]) -> dict[str, Any]:
    """``seqlab train`` of the variant's config (timed around the command), ``seqlab eval --split test`` of its best
    model, and the run's log."""
    config = ROOT / "configs" / "book" / f"{task}-{variant}.yaml"
    run_dir = Path(tempfile.mkdtemp(prefix=f"seqlab-{task}-{variant}-")) / "run"
    env = {"SEQLAB_DATA": data_dir}
    wall = seqlab_train(config, run_dir, overrides, env)
    test = json.loads(seqlab(["eval", run_dir, "--split", "test", "--json"], env, capture=True))
    epochs = RunDir(run_dir).log()
    best = RunDir(run_dir).model_info()["epoch"]
    return {"config": str(config.relative_to(ROOT)), "run_dir": str(run_dir), "wall_s": wall, "test": test, "epochs": epochs,
            "best_epoch": best, "train_s": RunDir(run_dir).training_seconds(),
            "train_s_to_best": sum(e["train_seconds"] for e in epochs[:best])}


def run_book(task: str, variant: str, book_repo: str, epochs: int | None, seed: int | None) -> dict[str, Any]:
    """``book_numpy.py`` in a process of its own (the book's default epochs where ``epochs`` is None, its own first
    weights where ``seed`` is None); its JSON record."""
    out = Path(tempfile.mkdtemp(prefix="book-")) / "book.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "book_numpy.py"), "--book-repo", book_repo, "--task", task,
               "--variant", variant, "--json", str(out), "--quiet"]
    command += (["--epochs", str(epochs)] if epochs else []) + ([] if seed is None else ["--seed", str(seed)])
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def summary(task: str, results: Results) -> Table:
    """A row per variant (and seed): seqlab's test scores and times, the book's, and their times to the target."""
    table = Table(f"Book task `{task}`: seqlab vs the book's NumPy code", [
        "variant", "seqlab test exact match (best valid epoch)", "on test sources unseen in training (pairs)",
        "seqlab training s (to the best epoch)", "seqlab `train` wall s", "book test acc, last / best epoch",
        "book training s (to its first epoch ≥ 99.9 %)", "time to ≥ 99.9 % test: seqlab (to its model picked on "
        "valid), book (to its first such epoch), book / seqlab"], [])
    for name, (ours, book) in results.items():
        row, ours_reached = [name, "—", "—", "—", "—"], None
        if ours is not None:
            test = ours["test"]
            row = [name, f"**{test['exact_match']:.2f} %** ({ours['best_epoch']})",
                   f"{test['exact_match_unseen']:.2f} % ({test['unseen_sentences']:,})",
                   f"{ours['train_s']:.1f} ({ours['train_s_to_best']:.1f})", f"{ours['wall_s']:.1f}"]
            ours_reached = ours["train_s_to_best"] if test["exact_match"] >= TARGET else None
        if book:
            accs = [r["acc"] * 100 for r in book["rows"]]
            best = max(range(len(accs)), key=accs.__getitem__)
            reached = book["reach"][str(TARGET)]["train_s_cum"]
            ratio = f"**{reached / ours_reached:.2f}×**" if reached and ours_reached else "—"
            row += [f"{accs[-1]:.2f} % / {accs[best]:.2f} % ({best + 1})",
                    f"{book['total_train_s']:.1f} ({'not reached' if reached is None else f'{reached:.1f}'})",
                    f"{_seconds(ours_reached)}, {_seconds(reached)}, {ratio}"]
        else:
            row += ["—", "—", f"{_seconds(ours_reached)}, —, —"]
        table.rows.append(row)
    return table


def spreads(results: Results, variants: list[str], seeds: list[int]) -> Table:
    """Each variant's spread over the seeds: seqlab's test exact match and training seconds, the book's last test
    accuracy and training seconds."""
    table = Table(f"Over seeds {', '.join(map(str, seeds))}", [
        "variant", "seqlab test exact match %", "seqlab training s", "book test acc % (last epoch)",
        "book training s", "time to ≥ 99.9 % test, book as published ÷ seqlab (seqlab's runs that reach it)"], [])
    for variant in variants:
        runs = [results[f"{variant} (seed {seed})"] for seed in seeds]
        books = [book for _, book in runs if book]
        ours_runs = [ours for ours, _ in runs if ours]
        table.rows.append([variant, spread([ours["test"]["exact_match"] for ours in ours_runs]),
                           spread([ours["train_s"] for ours in ours_runs], 1),
                           spread([book["rows"][-1]["acc"] * 100 for book in books]) if books else "—",
                           spread([book["total_train_s"] for book in books], 1) if books else "—",
                           _published_ratio(results.get(f"{variant} (book as published)"), ours_runs)])
    return table


def _published_ratio(published: tuple[Any, Any] | None, ours_runs: list[dict[str, Any]]) -> str:
    """The book as published against seqlab's runs, each timed to its first model that is ≥ 99.9 % on test."""
    reached = [ours["train_s_to_best"] for ours in ours_runs if ours["test"]["exact_match"] >= TARGET]
    book = published[1]["reach"][str(TARGET)]["train_s_cum"] if published and published[1] else None
    if not reached or book is None:
        return "— (not reached)" if published else "—"
    return f"{ratio_range([book], reached)} ({len(reached)} of {len(ours_runs)})"

def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.1f} s"


def curves(results: Results) -> Table:
    """Accuracy per epoch of every run: seqlab's on valid, the book's on its test pairs."""
    epochs = max(max(len(ours["epochs"]) if ours else 0, len(book["rows"]) if book else 0)
                 for ours, book in results.values())
    table = Table("Accuracy per epoch: seqlab on the 500 valid pairs, the book on the 5,000 test pairs",
                  ["epoch", *(str(e) for e in range(1, epochs + 1))], [])
    for name, (ours, book) in results.items():
        if ours is not None:
            table.rows.append([f"seqlab {name}", *(f"{e['valid']['exact_match']:.1f}" for e in ours["epochs"])])
        if book:
            table.rows.append([f"book {name}", *(f"{r['acc'] * 100:.1f}" for r in book["rows"])])
    return table

def _torch_version() -> str:
    import torch

    return torch.__version__


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(VARIANTS), required=True)
    parser.add_argument("--variants", nargs="+", help="default: all of the task's")
    parser.add_argument("--data-dir", required=True, help="holds dlfs2/<task>.txt")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="seqlab config override")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2")
    parser.add_argument("--book-epochs", type=int, help="default: the book's")
    parser.add_argument("--seeds", type=int, nargs="+", help="train seqlab, and run the book's code, once per seed")
    add_results_option(parser)
    parser.add_argument("--json", help="also write every number here")
    args = parser.parse_args(argv)

    variants = args.variants or VARIANTS[args.task]
    unknown = set(variants) - set(VARIANTS[args.task])
    if unknown:
        parser.error(f"task {args.task} has variants {', '.join(VARIANTS[args.task])}")
    data_dir = str(Path(args.data_dir).resolve())
    results: Results = {}
    for variant in variants:
        theirs = book_variant(variant)
        for seed in args.seeds or [None]:
            name = variant if seed is None else f"{variant} (seed {seed})"
            ours = run_seqlab(args.task, variant, data_dir, args.overrides + ([] if seed is None else [f"seed={seed}"]))
            book = (run_book(args.task, theirs, args.book_repo, args.book_epochs, seed)
                    if args.book_repo and theirs else None)
            results[name] = (ours, book)
            print(f"{name}: seqlab test {ours['test']['exact_match']:.2f} %, {ours['train_s']:.1f} s training",
                  flush=True)
        if args.seeds and args.book_repo and theirs:  # reseeded runs beside the book as published
            results[f"{variant} (book as published)"] = (None, run_book(args.task, theirs, args.book_repo,
                                                                         args.book_epochs, None))
    made = [summary(args.task, results)] + ([spreads(results, variants, args.seeds)] if args.seeds else [])
    made.append(curves(results))
    given = command(__file__, argv)
    print(f"### {made[0].title}\n\n{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores, one job at "
          f"a time, torch {_torch_version()}. Command: `{given}`\n\n"
          + "\n\n".join(f"{table.title}:\n\n{markdown(table)}" if i else markdown(table) for i, table in enumerate(made))
          + "\n")
    runs = [{"run": name, "seqlab": ours, "book": book} for name, (ours, book) in results.items()]
    publish(Result(f"book_tasks-{args.task}", made[0].title, given, made, runs,
                   notes=["one job at a time; seqlab's time to the target is to its model picked on valid"]),
            args.results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
