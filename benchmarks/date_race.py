"""Time to 99.9 % on the book's date task: seqlab, JoeyNMT and the book's NumPy code, one after the other.

    python benchmarks/date_race.py --data-dir ../shared/data [--joey-best NAME] [--book-repo /tmp/dlfs2]
                                   [--results DIR]

1. seqlab: ``seqlab train configs/book/date-fast.yaml`` as a user runs it (wall time measured around the
   command; training seconds from its log, validation excluded), in the precision ``auto`` picks and, where
   that is bf16, once more in fp32, JoeyNMT's precision.
2. JoeyNMT 2.3.0 on the same tokens with a model of the same size and shape (``joeynmt_date.py``), twice:
   with seqlab's recipe in JoeyNMT's options ("same recipe", variant ``same_recipe`` of
   ``benchmarks/searches/joeynmt-date.yaml``) and with JoeyNMT's best recipe, chosen on valid by
   ``select_joeynmt.py`` with the effort seqlab's recipe got ("at its best", ``--joey-best``).
3. The book's ch08 AttentionSeq2seq (``book_numpy.py``, the book's code read from ``--book-repo``) for
   ``--book-epochs``; the book's code scores the test split after every epoch, as the book does.

seqlab and JoeyNMT validate on the 500 valid pairs after every epoch; the time to the target is the
training seconds (validation excluded) until the first epoch at ≥ 99.9 % valid exact match. The test
split is scored once per run, at its end: seqlab's best-valid model (``seqlab eval --split test``),
JoeyNMT's model at its stop (``joeynmt test``; exact match computed here as for seqlab). Target tokens
per training second compare throughput. Prints a markdown table and records it with every run in the scoreboard
(``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import joeynmt_date as joey
import yaml
from book_tasks import run_book, run_seqlab
from peer_decoding import peer_python
from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab import precision
from seqlab.data import Pair
from seqlab.metrics import exact_match
from seqlab.model import num_parameters
from seqlab.translator import load


def seqlab_runs(data_dir: Path) -> list[dict[str, Any]]:
    """date-fast.yaml as it is, and in fp32 too where ``auto`` trains in bf16."""
    runs: list[tuple[str, list[str]]] = [("auto", [])]
    if precision.resolve("auto") != "fp32":
        runs.append(("fp32", ["train.precision=fp32"]))
    out = []
    for label, overrides in runs:
        run = run_seqlab("date", "fast", str(data_dir), overrides)
        run["label"] = f"precision {label}" + (f" = {precision.resolve('auto')}" if label == "auto" else "")
        run["params"] = num_parameters(load(run["run_dir"]).model)
        run["seconds_to_target"] = joey.seconds_to_target(
            [(e["train_seconds"], e["valid"]["exact_match"]) for e in run["epochs"]])
        print(f"seqlab ({run['label']}): test {run['test']['exact_match']:.2f} %", file=sys.stderr, flush=True)
        out.append(run)
    return out


def joey_test(python: Path, run: dict[str, Any], test: Path, pairs: list[Pair]) -> float:
    """Exact match % of JoeyNMT's greedy outputs on the test split, from the checkpoint where training stopped."""
    work = Path(run["dir"])
    cfg = yaml.safe_load((work / "config.yaml").read_text(encoding="utf-8"))
    cfg["data"]["test"] = str(test)
    cfg["testing"]["load_model"] = str(work / "model" / "latest.ckpt")
    (work / "scoring.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    subprocess.run([str(python), "-m", "joeynmt", "test", str(work / "scoring.yaml"), "--output-path",
                    str(work / "hyp")], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hypotheses = (work / "hyp.test").read_text(encoding="utf-8").splitlines()
    return exact_match(hypotheses, [t for _, t in pairs])


def joey_runs(python: Path, data_dir: Path, best: str) -> list[dict[str, Any]]:
    """JoeyNMT with seqlab's recipe and with its own best one (one run when they are the same)."""
    variants, same = joey.recipes()
    splits = joey.date_splits(data_dir)
    tokenizer = joey.source_tokenizer(splits["train"])
    work = Path(tempfile.mkdtemp(prefix="joey-date-data-"))
    data = {"train": joey.write_split(work, "train", splits["train"], tokenizer),
            "dev": joey.write_split(work, "valid", splits["valid"], tokenizer)}
    test = joey.write_split(work, "test", splits["test"], tokenizer)
    runs: list[dict[str, Any]] = []
    for name, label in ((same, "same recipe"), (best, "at its best")):
        if runs and name == runs[0]["name"]:
            runs[0]["label"] += " = at its best"
            continue
        run = joey.train(python, data, variants[name], len(splits["train"]), name)
        run["label"], run["test"] = f"{label} (variant {name})", joey_test(python, run, test, splits["test"])
        print(f"JoeyNMT {name}: test {run['test']:.2f} %", file=sys.stderr, flush=True)
        runs.append(run)
    return runs


def table(ours: list[dict[str, Any]], joeys: list[dict[str, Any]], book: dict[str, Any] | None) -> Table:
    """Every system's valid scores per epoch, its time to the target, its test score and throughput."""
    fastest = min((r["seconds_to_target"] for r in ours if r["seconds_to_target"] is not None), default=None)
    table = Table(f"Date task: time to {joey.TARGET} % valid exact match, side by side", [
        "system", "parameters", "valid exact match % per epoch", "training s to ≥ 99.9 %", "test exact match %",
        "target tokens/s", "time ÷ seqlab's fastest"], [])
    for run in ours:
        epochs = [e["valid"]["exact_match"] for e in run["epochs"]]
        spent = sum(e["train_seconds"] for e in run["epochs"])
        tokens = sum(e["train_tokens_per_s"] * e["train_seconds"] for e in run["epochs"]) / spent
        table.rows.append([f"seqlab (`date-fast.yaml`, {run['label']})", f"{run['params']:,}", _per_epoch(epochs),
                           _s(run["seconds_to_target"]), f"{run['test']['exact_match']:.2f}", f"{tokens:,.0f}",
                           _ratio(run["seconds_to_target"], fastest, spent)])
    for run in joeys:
        spent = sum(r["train_s"] for r in run["epochs"])
        table.rows.append([f"JoeyNMT 2.3.0, {run['label']}", f"{run['params'] or 0:,}",
                           _per_epoch([r["valid"] for r in run["epochs"]]), _s(run["seconds_to_target"]),
                           f"{run['test']:.2f}", f"{joey.tokens_per_second(run):,.0f}",
                           _ratio(run["seconds_to_target"], fastest, spent)])
    if book:
        epochs = book["rows"]
        seconds = joey.seconds_to_target([(r["train_s"], r["acc"] * 100) for r in epochs])
        table.rows.append(["book NumPy (ch08 AttentionSeq2seq; test after every epoch)", "—",
                           f"{_per_epoch([r['acc'] * 100 for r in epochs])} (test)", f"{_s(seconds)} (on test)",
                           f"{epochs[-1]['acc'] * 100:.2f}", "—", _ratio(seconds, fastest, book["total_train_s"])])
    return table


def caption() -> str:
    """What the systems are and what is timed."""
    m = joey.model_sizes()
    return (f"seqlab and JoeyNMT: Transformer, {m.num_layers}+{m.num_layers} layers, d_model {m.d_model}, "
            f"{m.num_heads} heads, d_ff {m.d_ff}, {m.norm}-LN, dropout {m.dropout}, the same tokens (BPE source pieces, "
            "character targets), the 44,500 training pairs of the book's split, validated on its 500 valid pairs; "
            "book: ch08 AttentionSeq2seq (LSTM 256) on its 45,000. Test: the same 5,000 pairs, once per run, at its "
            "end. Training seconds exclude validation.")

def _per_epoch(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _s(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"**{seconds:.1f}**"


def _ratio(seconds: float | None, ours: float | None, spent: float) -> str:
    if ours is None:
        return "—"
    return f"**{seconds / ours:.2f}×**" if seconds is not None else f"> {spent / ours:.1f}× (not reached)"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    variants, same = joey.recipes()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="holds dlfs2/date.txt")
    parser.add_argument("--joey-best", choices=sorted(variants), default=same,
                        help="JoeyNMT's recipe chosen on valid by select_joeynmt.py")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2 (skipped if absent)")
    parser.add_argument("--book-epochs", type=int, default=3)
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    parser.add_argument("--json", help="also write every number here")
    add_results_option(parser)
    args = parser.parse_args(argv)

    data_dir = args.data_dir.resolve()
    ours = seqlab_runs(data_dir)
    joeys = joey_runs(peer_python(args.peer_venv), data_dir, args.joey_best)
    book = run_book("date", "attention", args.book_repo, args.book_epochs, None) if args.book_repo else None
    given, made = command(__file__, argv), table(ours, joeys, book)
    wall = f"`seqlab train configs/book/date-fast.yaml` wall time, everything included: {ours[0]['wall_s']:.1f} s."
    print(f"### {made.title} ({datetime.date.today()})\n\nCommand: `{given}`. {machine()}. {caption()}\n\n"
          f"{markdown(made)}\n\n{wall}\n")
    runs = [{"system": "seqlab", **run} for run in ours] + [{"system": "joeynmt", **run} for run in joeys]
    publish(Result("date_race", made.title, given, [made], runs + ([{"system": "book", **book}] if book else []),
                   notes=[caption(), wall]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps({"seqlab": ours, "joeynmt": joeys, "book": book}, indent=1))


if __name__ == "__main__":
    main()
