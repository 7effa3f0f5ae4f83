"""Peer benchmark: the NumPy seq2seq code of "Deep Learning from Scratch 2".

What it measures
----------------
The book's own code (oreilly-japan/deep-learning-from-scratch-2, MIT licence;
not vendored here) trained exactly as its scripts do, so seqlab's numbers can
be put side by side with it:

* ``--task date``     -> ch08/train.py: AttentionSeq2seq on dataset/date.txt,
  input reversed, wordvec 16, hidden 256, batch 128, Adam(), max_grad 5.0,
  10 epochs by default.
* ``--task addition`` -> ch07/train_seq2seq.py: wordvec 16, hidden 128,
  batch 128, Adam(), max_grad 5.0, 25 epochs by default, with
  ``--variant baseline`` (Seq2seq), ``reverse`` (Seq2seq, ``is_reverse=True``),
  ``peeky`` (PeekySeq2seq + reversed input) or ``attention`` (ch08's
  AttentionSeq2seq + reversed input: the book does not run this pairing, the
  code runs it unchanged).

Data come from the book's ``sequence.load_data`` (shuffle seed 1984, last 10 %
is the test split). Each epoch is one ``Trainer.fit(..., max_epoch=1)`` call
followed by the book's ``eval_seq2seq`` over the whole test split, one sentence
at a time (greedy decoding), exactly as the book's loop. Training and
evaluation are timed separately with ``time.perf_counter``. The book's own
progress prints (loss every 20 iterations, the first 10 test sentences) are
kept unless ``--quiet``. The model is not saved and nothing is plotted; the
book's modules are imported unchanged (only ``sys.path`` is set), and no seed
is set beyond the one ``load_data`` sets, so runs match the book's scripts: the
model's initial weights are drawn right after ``load_data``'s shuffle from numpy's
global generator (seed 1984), so every run of a script starts from the same
weights. ``--seed N`` reseeds that generator after ``load_data`` (before the model
is built), to see the book's code from other starting weights.

Output: one line per epoch (epoch, train s, eval s, test accuracy %), the
cumulative training seconds at the first epoch reaching >= 99 % and >= 99.9 %
test accuracy, and with ``--json OUT`` a JSON record (task, variant,
per-epoch rows, numpy/BLAS version, thread settings, date, machine).

Requirements: numpy, and matplotlib because the book's ``common/trainer.py``
imports ``matplotlib.pyplot`` at module level (the Agg backend is selected
here). NumPy's default threading is used; no thread variable is changed.

Example (book checkout at /tmp/dlfs2 with dataset/date.txt and addition.txt):

    python benchmarks/book_numpy.py --book-repo /tmp/dlfs2 --task date \\
        --epochs 10 --json /tmp/book_date.json
    python benchmarks/book_numpy.py --book-repo /tmp/dlfs2 --task addition \\
        --variant peeky --epochs 25 --quiet
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy


@dataclass(frozen=True)
class BookScript:
    """A book script: its data file, hyperparameters, default epochs and the variants it trains."""

    script: str
    data: str
    wordvec: int
    hidden: int
    batch: int
    max_grad: float
    epochs: int
    variants: tuple[str, ...]


TASKS = {
    "date": BookScript("ch08/train.py", "date.txt", wordvec=16, hidden=256, batch=128, max_grad=5.0, epochs=10,
                       variants=("attention",)),
    "addition": BookScript("ch07/train_seq2seq.py", "addition.txt", wordvec=16, hidden=128, batch=128, max_grad=5.0,
                           epochs=25, variants=("baseline", "reverse", "peeky", "attention")),
}


def import_book(book_repo: str) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """Put the book on sys.path as its scripts expect and import its modules: (sequence, Adam, Trainer,
    eval_seq2seq, the model class of each variant)."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # common/trainer.py imports pyplot
    root = os.path.abspath(book_repo)
    # ch08/train.py runs from ch08/ with '..' and '../ch07' on the path;
    # ch07/train_seq2seq.py runs from ch07/ with '..' on the path.
    # ch08's attention model is also offered for addition, so ch08 is always on the path.
    chapter_dirs = ["ch08", "ch07"]
    for path in [root] + [os.path.join(root, d) for d in chapter_dirs]:
        if path not in sys.path:
            sys.path.insert(0, path)
    from attention_seq2seq import AttentionSeq2seq
    from common.optimizer import Adam
    from common.trainer import Trainer
    from common.util import eval_seq2seq
    from dataset import sequence
    from peeky_seq2seq import PeekySeq2seq
    from seq2seq import Seq2seq
    models = {"baseline": Seq2seq, "reverse": Seq2seq, "peeky": PeekySeq2seq, "attention": AttentionSeq2seq}
    return sequence, Adam, Trainer, eval_seq2seq, models


def blas_info() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        cfg = numpy.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        info = {k: blas.get(k) for k in ("name", "version", "openblas configuration")}
    except Exception:  # older numpy: no dict mode
        pass
    try:
        import threadpoolctl
        info["threadpools"] = threadpoolctl.threadpool_info()
    except ImportError:
        pass
    return info


def first_epoch_reaching(rows: list[dict[str, float]], threshold: float) -> tuple[int | None, float | None]:
    for row in rows:
        if row["acc"] >= threshold:
            return int(row["epoch"]), row["train_s_cum"]
    return None, None


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--book-repo", required=True, help="checkout of oreilly-japan/deep-learning-from-scratch-2")
    ap.add_argument("--task", choices=sorted(TASKS), default="date")
    ap.add_argument("--variant", help="date: attention; addition: baseline|reverse|peeky|attention "
                    "(default: first of these)")
    ap.add_argument("--epochs", type=int, help="default: the book's max_epoch")
    ap.add_argument("--json", metavar="OUT", help="write the JSON record here")
    ap.add_argument("--seed", type=int, help="reseed numpy's global generator before the model is built "
                    "(default: the book's scripts' state)")
    ap.add_argument("--quiet", action="store_true", help="hide the book's own progress prints")
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = arguments()
    args = ap.parse_args(argv)
    cfg = TASKS[args.task]
    variant = args.variant or cfg.variants[0]
    if variant not in cfg.variants:
        ap.error(f"task {args.task} has variants {', '.join(cfg.variants)}")
    epochs = args.epochs or cfg.epochs
    is_reverse = variant != "baseline"  # ch08 and reverse/peeky reverse input

    sequence, Adam, Trainer, eval_seq2seq, models = import_book(args.book_repo)

    # --- same statements, same order as the book's script ---
    (x_train, t_train), (x_test, t_test) = sequence.load_data(cfg.data)
    char_to_id, id_to_char = sequence.get_vocab()
    if is_reverse:
        x_train, x_test = x_train[:, ::-1], x_test[:, ::-1]
    if args.seed is not None:
        numpy.random.seed(args.seed)
    model = models[variant](len(char_to_id), cfg.wordvec, cfg.hidden)
    optimizer = Adam()
    trainer = Trainer(model, optimizer)

    book_out = io.StringIO() if args.quiet else sys.stdout
    load_start = os.getloadavg()  # other CPU users skew BLAS-threaded timings
    print(f"book {cfg.script} task={args.task} variant={variant} train={len(x_train)} test={len(x_test)} "
          f"vocab={len(char_to_id)} epochs={epochs} seed={args.seed} loadavg={load_start[0]:.2f}", flush=True)
    rows: list[dict[str, float]] = []
    train_cum = 0.0
    for epoch in range(1, epochs + 1):
        with contextlib.redirect_stdout(book_out):
            t0 = time.perf_counter()
            trainer.fit(x_train, t_train, max_epoch=1, batch_size=cfg.batch, max_grad=cfg.max_grad)
            t1 = time.perf_counter()
            correct_num = 0
            for i in range(len(x_test)):
                question, correct = x_test[[i]], t_test[[i]]
                verbose = i < 10
                correct_num += eval_seq2seq(model, question, correct, id_to_char, verbose, is_reverse)
            t2 = time.perf_counter()
        if args.quiet:
            book_out.seek(0)
            book_out.truncate()
        acc = correct_num / len(x_test)
        train_cum += t1 - t0
        rows.append({"epoch": epoch, "train_s": t1 - t0, "eval_s": t2 - t1, "train_s_cum": train_cum, "acc": acc})
        print(f"epoch {epoch:3d}  train {t1 - t0:8.2f} s  eval {t2 - t1:7.2f} s  test acc {acc * 100:7.3f} %",
              flush=True)

    reach = {}
    for name, thr in (("99", 0.99), ("99.9", 0.999)):
        ep, secs = first_epoch_reaching(rows, thr)
        reach[name] = {"epoch": ep, "train_s_cum": secs}
        print(f">= {name} % test acc: "
              + ("not reached" if ep is None else f"epoch {ep}, {secs:.2f} s cumulative training"))

    if args.json:
        sizes = {"n_train": len(x_train), "n_test": len(x_test), "vocab": len(char_to_id)}
        with open(args.json, "w") as f:
            json.dump(record(args, variant, epochs, is_reverse, sizes, rows, reach, load_start), f, indent=2,
                      default=str)
        print("wrote", args.json)


def record(args: argparse.Namespace, variant: str, epochs: int, is_reverse: bool, sizes: dict[str, int],
           rows: list[dict[str, float]], reach: dict[str, dict[str, Any]],
           load_start: tuple[float, float, float]) -> dict[str, Any]:
    """The JSON record of a run: its settings and data sizes, the rows per epoch, the machine."""
    cfg = TASKS[args.task]
    return {
        "benchmark": "book_numpy", "book_script": cfg.script, "book_repo": os.path.abspath(args.book_repo),
        "task": args.task, "variant": variant, "epochs": epochs, "seed": args.seed,
        "hyperparams": {"wordvec_size": cfg.wordvec, "hidden_size": cfg.hidden, "batch_size": cfg.batch,
                        "max_grad": cfg.max_grad, "optimizer": "Adam(lr=0.001)", "reversed_input": is_reverse},
        "data": {"file": cfg.data, "seed": 1984, **sizes},
        "rows": rows, "reach": reach,
        "total_train_s": sum(r["train_s"] for r in rows), "total_eval_s": sum(r["eval_s"] for r in rows),
        "numpy": numpy.__version__, "blas": blas_info(),
        "threads": {"cpu_count": os.cpu_count(),
                    "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}},
        "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(),
                    "python": platform.python_version()},
    }


if __name__ == "__main__":
    main()
