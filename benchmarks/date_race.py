"""Time to 99.9 % on the book's date task: seqlab, JoeyNMT and the book's NumPy code, one after the other.

    python benchmarks/date_race.py --data-dir ../shared/data --book-repo /tmp/dlfs2 [--record docs/benchmarks.md]

1. seqlab: ``seqlab train configs/book/date-fast.yaml`` as a user runs it (wall time measured around
   the command; training seconds from its log, validation excluded), then ``seqlab eval --split test``;
   then the same with character-level sources, the data as JoeyNMT reads it, for the throughput ratio.
2. JoeyNMT 2.3.0, installed into a virtual environment of its own on first use (``--peer-venv``, shared
   with ``peer_decoding.py``), trains a Transformer of the same size and shape (layers, d_model, heads,
   d_ff, pre-LN, dropout) on the same 44,500 training pairs, exported as plain files, with its recipe
   from ``anchors-bench.md`` (Adam 5e-4, batches of 128 sentences); it validates on the test split
   after every epoch and is stopped after the first epoch at ≥ 99.9 % or after ``--joey-epochs``.
3. The book's ch08 AttentionSeq2seq (``book_numpy.py``, the book's code read from ``--book-repo``) for
   ``--book-epochs``, scoring the test split after every epoch as the book does.

For each system: the training seconds (validation excluded) until the first test score of at least
99.9 %, and target tokens per training second. The book's code is not a Transformer, so only the
time to the accuracy compares with it. Prints a markdown table; ``--record`` appends it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from book_tasks import run_book, run_seqlab
from peer_decoding import peer_python
from report import add_record_option, emit, machine

from seqlab.config import load_config
from seqlab.data import load_splits
from seqlab.model import num_parameters
from seqlab.translator import load

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "book" / "date-fast.yaml"
JOEY_TEMPLATE = ROOT / "benchmarks" / "peers" / "joeynmt_date.yaml"
TARGET = 99.9


def run_joeynmt(python: Path, data_dir: Path, epochs: int) -> dict:
    """Train JoeyNMT on seqlab's split with a model of seqlab's size; per-epoch seconds and test accuracy."""
    work = Path(tempfile.mkdtemp(prefix="joey-date-"))
    config = load_config(CONFIG)
    splits = load_splits(config.data, data_dir)
    for name, pairs in (("train", splits["train"]), ("dev", splits["test"]), ("test", splits["test"])):
        (work / f"{name}.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (work / f"{name}.trg").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")

    m = config.model
    cfg = yaml.safe_load(JOEY_TEMPLATE.read_text(encoding="utf-8"))
    for split in ("train", "dev", "test"):
        cfg["data"][split] = str(work / split)
    steps_per_epoch = math.ceil(len(splits["train"]) / cfg["training"]["batch_size"])
    cfg["training"] |= {"epochs": epochs, "validation_freq": steps_per_epoch, "logging_freq": steps_per_epoch,
                        "model_dir": str(work / "model")}
    cfg["testing"]["eval_metrics"] = ["sequence_accuracy"]
    for side in ("encoder", "decoder"):
        cfg["model"][side] |= {"num_layers": m.num_layers, "num_heads": m.num_heads, "hidden_size": m.d_model,
                               "ff_size": m.d_ff, "dropout": m.dropout, "layer_norm": m.norm}
        cfg["model"][side]["embeddings"]["embedding_dim"] = m.d_model
    (work / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")

    log, validations = work / "model" / "train.log", work / "model" / "validations.txt"
    process = subprocess.Popen([str(python), "-m", "joeynmt", "train", str(work / "config.yaml"), "--skip-test"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows: list[dict] = []
    while process.poll() is None:
        time.sleep(2)
        rows = _joey_epochs(log, validations, steps_per_epoch)
        if rows and rows[-1]["acc"] >= TARGET:
            process.terminate()
    process.wait()
    rows = _joey_epochs(log, validations, steps_per_epoch)
    if not rows:
        raise RuntimeError(f"JoeyNMT produced no epoch; see {log}")
    params = re.search(r"Total params: (\d+)", log.read_text(encoding="utf-8"))
    return {"rows": rows, "params": int(params.group(1)) if params else None, "dir": str(work)}


def _joey_epochs(log: Path, validations: Path, steps_per_epoch: int) -> list[dict]:
    """Finished epochs with their training seconds, target tokens and the test accuracy validated at their end."""
    if not (log.exists() and validations.exists()):
        return []
    epochs = re.findall(r"Epoch\s+(\d+), total training loss: [\d.]+, num. of seqs: \d+, num. of tokens: (\d+), "
                        r"([\d.]+)\[sec\]", log.read_text(encoding="utf-8"))
    accuracy = {int(steps) // steps_per_epoch: float(acc) for steps, acc in
                re.findall(r"Steps: (\d+).*?sequence_accuracy: ([\d.]+)", validations.read_text(encoding="utf-8"))}
    return [{"epoch": int(e), "tokens": int(tokens), "train_s": float(s), "acc": accuracy[int(e)]}
            for e, tokens, s in epochs if int(e) in accuracy]


def time_to_target(rows: list[tuple[float, float]]) -> float | None:
    """(seconds, accuracy %) per epoch -> the cumulative seconds at the first accuracy ≥ TARGET."""
    total = 0.0
    for seconds, acc in rows:
        total += seconds
        if acc >= TARGET:
            return total
    return None


def table(ours: dict, chars: dict, joey: dict | None, book: dict | None, command: str) -> str:
    """``ours``: date-fast.yaml as it is; ``chars``: the same with character-level sources, as JoeyNMT reads them."""
    m = load_config(CONFIG).model
    ours_s = ours["train_s"] if ours["test"]["exact_match"] >= TARGET else None
    rows = [_seqlab_row("seqlab (`configs/book/date-fast.yaml`: BPE sources)", ours, ours_s),
            _seqlab_row("seqlab, the same with character sources", chars, ours_s)]
    after = []
    if joey:
        epochs = joey["rows"]
        seconds = time_to_target([(r["train_s"], r["acc"]) for r in epochs])
        spent = sum(r["train_s"] for r in epochs)
        tokens = sum(r["tokens"] for r in epochs) / spent
        rows.append(f"| JoeyNMT 2.3.0 (character sources) | {joey['params'] or 0:,} | {len(epochs)} | "
                    f"{_accuracies([r['acc'] for r in epochs])} | {_s(seconds)} | {tokens:,.0f} | "
                    f"{_ratio(seconds, ours_s, spent)} |")
        after.append(f"Training throughput on the same model size and the same data (character sources): seqlab / "
                     f"JoeyNMT = **{_tokens_per_s(chars) / tokens:.2f}×** target tokens per second.")
    if book:
        epochs = book["rows"]
        seconds = time_to_target([(r["train_s"], r["acc"] * 100) for r in epochs])
        rows.append(f"| book NumPy (ch08 AttentionSeq2seq) | — | {len(epochs)} | "
                    f"{_accuracies([r['acc'] * 100 for r in epochs])} | {_s(seconds)} | — | "
                    f"{_ratio(seconds, ours_s, book['total_train_s'])} |")
    lines = [
        f"### Date task: time to {TARGET} % test exact match, side by side ({datetime.date.today()})",
        "",
        f"Command: `{command}`. {machine()}. seqlab and JoeyNMT: Transformer, {m.num_layers}+{m.num_layers} "
        f"layers, d_model {m.d_model}, {m.num_heads} heads, d_ff {m.d_ff}, {m.norm}-LN, dropout {m.dropout}, "
        "on the 44,500 training pairs of the book's split; book: ch08 AttentionSeq2seq (LSTM 256) on its "
        "45,000. All are scored on the same 5,000 test pairs; training seconds exclude validation. "
        f"`seqlab train configs/book/date-fast.yaml` wall time, everything included: {ours['wall_s']:.1f} s.",
        "",
        "| system | parameters | epochs | test exact match % per epoch | training s to ≥ 99.9 % | "
        "target tokens/s | time ÷ seqlab's |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    return "\n".join(lines + [""] + after) + "\n"


def _seqlab_row(name: str, run: dict, fastest: float | None) -> str:
    seconds = run["train_s"] if run["test"]["exact_match"] >= TARGET else None
    ratio = f"{seconds / fastest:.2f}" if seconds and fastest else "—"
    return (f"| {name} | {run['params']:,} | {len(run['epochs'])} | {run['test']['exact_match']:.2f} (after the last) "
            f"| {_s(seconds)} | {_tokens_per_s(run):,.0f} | {ratio} |")


def _tokens_per_s(run: dict) -> float:
    return sum(e["train_tokens_per_s"] * e["train_seconds"] for e in run["epochs"]) / run["train_s"]


def _accuracies(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _s(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"**{seconds:.1f}**"


def _ratio(seconds: float | None, ours: float | None, spent: float) -> str:
    if ours is None:
        return "—"
    return f"**{seconds / ours:.1f}×**" if seconds is not None else f"> {spent / ours:.1f}× (not reached)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="holds dlfs2/date.txt")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2 (skipped if absent)")
    parser.add_argument("--book-epochs", type=int, default=3)
    parser.add_argument("--joey-epochs", type=int, default=5, help="0 skips JoeyNMT")
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    parser.add_argument("--json", help="also write every number here")
    add_record_option(parser)
    args = parser.parse_args()

    data_dir = args.data_dir.resolve()
    ours = run_seqlab("date", "fast", str(data_dir), [])
    chars = run_seqlab("date", "fast", str(data_dir), ["tokens.source.level=char"])
    for run in (ours, chars):
        run["params"] = num_parameters(load(run["run_dir"]).model)
        print(f"seqlab: test {run['test']['exact_match']:.2f} % after {run['train_s']:.1f} s of training", flush=True)
    joey = run_joeynmt(peer_python(args.peer_venv), data_dir, args.joey_epochs) if args.joey_epochs else None
    book = run_book("date", "attention", args.book_repo, args.book_epochs) if args.book_repo else None
    command = "python benchmarks/date_race.py " + " ".join(sys.argv[1:])
    emit(table(ours, chars, joey, book, command), args.record)
    if args.json:
        Path(args.json).write_text(json.dumps({"seqlab": ours, "seqlab_chars": chars, "joeynmt": joey, "book": book},
                                              indent=1))


if __name__ == "__main__":
    main()
