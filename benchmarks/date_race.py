"""Time to 99.9 % on the book's date task: seqlab, JoeyNMT and the book's NumPy code, one after the other.

    python benchmarks/date_race.py --data-dir ../shared/data [--joey-best NAME] [--book-repo /tmp/dlfs2]
                                   [--seeds 1 2 3] [--results DIR]

Every system runs from each of ``--seeds``; the book's code also runs once as published, with its own seed.

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
per training second compare throughput. Prints two markdown tables, a row per system (mean ± sd and range over its
runs; the ratio of its time to seqlab's, of the means and over every pairing of runs) and a row per run, and
records them with every run in the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
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
from scoreboard import Result, Table, command, ratio_range, spread

from seqlab import precision
from seqlab.data import Pair
from seqlab.metrics import exact_match
from seqlab.model import num_parameters
from seqlab.predictors.translator import load
from seqlab.rundir import RunDir


def seqlab_runs(data_dir: Path, seeds: list[int]) -> list[dict[str, Any]]:
    """date-fast.yaml as it is from each seed, and in fp32 too where ``auto`` trains in bf16."""
    runs: list[tuple[str, list[str]]] = [("auto", [])]
    if precision.resolve("auto") != "fp32":
        runs.append(("fp32", ["train.precision=fp32"]))
    out = []
    for label, overrides in runs:
        for seed in seeds:
            run = run_seqlab("date", "fast", str(data_dir), [*overrides, f"seed={seed}"])
            chosen = RunDir(run["run_dir"]).model_info().get("precision", precision.resolve(label))  # auto's choice
            run["label"] = f"precision {label}" + (f" = {chosen}" if label == "auto" else "")
            run["seed"], run["params"] = seed, num_parameters(load(run["run_dir"]).model)
            run["seconds_to_target"] = joey.seconds_to_target(
                [(e["train_seconds"], e["valid"]["exact_match"]) for e in run["epochs"]])
            print(f"seqlab ({run['label']}, seed {seed}): test {run['test']['exact_match']:.2f} %", file=sys.stderr,
                  flush=True)
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


def joey_runs(python: Path, data_dir: Path, best: str, seeds: list[int]) -> list[dict[str, Any]]:
    """JoeyNMT with seqlab's recipe and with its own best one (one recipe when they are the same), from each seed
    (its ``training.random_seed``)."""
    variants, same = joey.recipes()
    splits = joey.date_splits(data_dir)
    tokenizer = joey.source_tokenizer(splits["train"])
    work = Path(tempfile.mkdtemp(prefix="joey-date-data-"))
    data = {"train": joey.write_split(work, "train", splits["train"], tokenizer),
            "dev": joey.write_split(work, "valid", splits["valid"], tokenizer)}
    test = joey.write_split(work, "test", splits["test"], tokenizer)
    recipes = [(same, "same recipe" + (" = at its best" if best == same else ""))]
    recipes += [] if best == same else [(best, "at its best")]
    runs: list[dict[str, Any]] = []
    for name, label in recipes:
        for seed in seeds:
            run = joey.train(python, data, [*variants[name], f"training.random_seed={seed}"], len(splits["train"]),
                             name)
            run["label"], run["seed"] = f"{label} (variant {name})", seed
            run["test"] = joey_test(python, run, test, splits["test"])
            print(f"JoeyNMT {name}, seed {seed}: test {run['test']:.2f} %", file=sys.stderr, flush=True)
            runs.append(run)
    return runs


def book_runs(book_repo: str, epochs: int, seeds: list[int]) -> list[dict[str, Any]]:
    """The book's ch08 code as published (its own first weights), then reseeded from each seed."""
    runs = []
    for seed in [None, *seeds]:
        run = run_book("date", "attention", book_repo, epochs, seed)
        run["label"] = "as published (its own seed)" if seed is None else "reseeded"
        run["seconds_to_target"] = joey.seconds_to_target([(r["train_s"], r["acc"] * 100) for r in run["rows"]])
        runs.append(run)
    return runs


def normalised(ours: list[dict[str, Any]], joeys: list[dict[str, Any]],
               books: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every run in one shape: system, seed, parameters, valid % per epoch (the book's: test), training seconds to
    the target and in all, test exact match %, target tokens per training second."""
    rows = []
    for run in ours:
        spent = sum(e["train_seconds"] for e in run["epochs"])
        rows.append({"system": f"seqlab (`date-fast.yaml`, {run['label']})", "seed": run["seed"],
                     "params": run["params"], "epochs": [e["valid"]["exact_match"] for e in run["epochs"]],
                     "to_target": run["seconds_to_target"], "spent": spent, "test": run["test"]["exact_match"],
                     "tokens_per_s": sum(e["train_tokens_per_s"] * e["train_seconds"] for e in run["epochs"]) / spent})
    for run in joeys:
        rows.append({"system": f"JoeyNMT 2.3.0, {run['label']}", "seed": run["seed"], "params": run["params"] or 0,
                     "epochs": [r["valid"] for r in run["epochs"]], "to_target": run["seconds_to_target"],
                     "spent": sum(r["train_s"] for r in run["epochs"]), "test": run["test"],
                     "tokens_per_s": joey.tokens_per_second(run)})
    for run in books:
        rows.append({"system": f"book NumPy (ch08 AttentionSeq2seq, {run['label']}; on test after every epoch)",
                     "seed": run["seed"], "params": None, "epochs": [r["acc"] * 100 for r in run["rows"]],
                     "to_target": run["seconds_to_target"], "spent": run["total_train_s"],
                     "test": run["rows"][-1]["acc"] * 100, "tokens_per_s": None})
    return rows


def runs_table(rows: list[dict[str, Any]]) -> Table:
    """One row per run."""
    table = Table(f"Date task: every run, time to {joey.TARGET} % valid exact match", [
        "system", "seed", "parameters", "valid exact match % per epoch", "training s to ≥ 99.9 %",
        "test exact match %", "target tokens/s"], [])
    for r in rows:
        table.rows.append([r["system"], "the book's" if r["seed"] is None else str(r["seed"]),
                           "—" if r["params"] is None else f"{r['params']:,}", _per_epoch(r["epochs"]),
                           _s(r["to_target"]), f"{r['test']:.2f}",
                           "—" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:,.0f}"])
    return table


def summary_table(rows: list[dict[str, Any]]) -> Table:
    """One row per system: its runs' spread and the ratio of its time to seqlab's in ``auto`` (and to seqlab's
    fastest precision where that is another)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["system"], []).append(r)
    ours = [g for name, g in groups.items() if name.startswith("seqlab")]
    best = min(ours, key=lambda g: statistics.mean(_times(g) or [math.inf]))
    columns = ["system", "runs reaching ≥ 99.9 %", "training s to ≥ 99.9 %", "test exact match %",
               "target tokens/s", "time ÷ seqlab's (auto)"]
    if best is not ours[0]:
        columns.append(f"time ÷ seqlab's fastest ({best[0]['system']})")
    table = Table(f"Date task: time to {joey.TARGET} % valid exact match, side by side", columns, [])
    for name, group in groups.items():
        times = _times(group)
        speed = [r["tokens_per_s"] for r in group if r["tokens_per_s"] is not None]
        row = [name, f"{len(times)} of {len(group)}", spread(times, 1) if times else "not reached",
               spread([r["test"] for r in group]), spread(speed, 0) if speed else "—"]
        row += [_ratio(group, base) for base in ([ours[0]] if best is ours[0] else [ours[0], best])]
        table.rows.append(row)
    return table


def _times(group: list[dict[str, Any]]) -> list[float]:
    return [r["to_target"] for r in group if r["to_target"] is not None]


def _ratio(group: list[dict[str, Any]], base: list[dict[str, Any]]) -> str:
    """The ratio of times to the target (mean, and its range over pairs of runs); a system that never reached it:
    its seconds in all against seqlab's time to it."""
    times, ours = _times(group), _times(base)
    if not ours:
        return "—"
    if times:
        return ratio_range(times, ours)
    return f"> {statistics.mean(r['spent'] for r in group) / statistics.mean(ours):.1f}× (not reached)"


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
    return "not reached" if seconds is None else f"{seconds:.1f}"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    variants, same = joey.recipes()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="holds dlfs2/date.txt")
    parser.add_argument("--joey-best", choices=sorted(variants), default=same,
                        help="JoeyNMT's recipe chosen on valid by select_joeynmt.py")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2 (skipped if absent)")
    parser.add_argument("--book-epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3],
                        help="each system's seeds (the book also runs once as published, with its own)")
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    parser.add_argument("--json", help="also write every number here")
    add_results_option(parser)
    args = parser.parse_args(argv)

    data_dir = args.data_dir.resolve()
    ours = seqlab_runs(data_dir, args.seeds)
    joeys = joey_runs(peer_python(args.peer_venv), data_dir, args.joey_best, args.seeds)
    books = book_runs(args.book_repo, args.book_epochs, args.seeds) if args.book_repo else []
    rows = normalised(ours, joeys, books)
    given, made = command(__file__, argv), [summary_table(rows), runs_table(rows)]
    walls = [run["wall_s"] for run in ours if run["label"].startswith("precision auto")]
    wall = f"`seqlab train configs/book/date-fast.yaml` wall time, everything included: {spread(walls, 1)} s."
    tables = "\n\n".join(f"#### {t.title}\n\n{markdown(t)}" for t in made)
    print(f"### Date task: seqlab, JoeyNMT and the book's code ({datetime.date.today()})\n\nCommand: `{given}`. "
          f"{machine()}. {caption()}\n\n{tables}\n\n{wall}\n")
    runs = ([{"system": "seqlab", **run} for run in ours] + [{"system": "joeynmt", **run} for run in joeys]
            + [{"system": "book", **run} for run in books])
    publish(Result("date_race", made[0].title, given, made, runs, notes=[caption(), wall]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps({"seqlab": ours, "joeynmt": joeys, "book": books}, indent=1))


if __name__ == "__main__":
    main()
