"""Text classification on ChatbotData's labels: seqlab's encoder against scikit-learn's TF-IDF + logistic regression.

    python benchmarks/classify_race.py --data-dir ../shared/data [--features F --C C] [--seeds 1 2 3] \\
        [--set KEY=VALUE ...] [--json FILE] [--results DIR]

One command, one machine, one split, one scoring:

* **Data.** ``configs/chatbot_ko_labels.yaml`` (``--config``): ChatbotData's questions (column Q) and their labels
  (0 everyday, 1 break-up, 2 love), split by the config (``data.split``, a seeded shuffle; valid 1,000, test
  1,000). Both systems get exactly these (text, label) pairs, read by ``seqlab.data.load_splits``; ``--set``
  overrides the config for both (the split) and for every ``seqlab train``.
* **scikit-learn**: TF-IDF + logistic regression with the features and C chosen on valid by
  ``benchmarks/select_tfidf.py`` (``--features``, ``--C``; the defaults are its last choice), fitted on train.
  Timed: its fit (vectoriser + regression).
* **seqlab**: ``seqlab train CONFIG --set seed=N`` for each of ``--seeds``, as a user runs it (the config was
  chosen on valid: ``benchmarks/searches/chatbot-labels.yaml``), the best epoch by valid macro-F1, then
  ``seqlab eval RUN --split test --json``. Timed: the training seconds in the run's log (validation excluded).
  Throughput: texts per second from the log, and tokens per second (the encoder's inputs: ``<sos>``, the
  text's tokens, ``<eos>``).
* **Scores**: accuracy and macro-F1 (``seqlab.metrics.classification_scores``, equal to scikit-learn's, tested
  in tests/test_classifier.py) of both systems on the same test pairs, each scored once; seqlab's spread over the
  seeds (mean ± sd and range). The tables and every run go to the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command, spread
from select_tfidf import FEATURES, labelled, tfidf_model

from seqlab.config import load_config
from seqlab.data import load_splits
from seqlab.metrics import classification_scores
from seqlab.predictors.classifier import class_labels
from seqlab.predictors.classifier import load as load_classifier
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
CHOSEN_FEATURES, CHOSEN_C = "char 2-4", 3.0  # benchmarks/select_tfidf.py's choice on valid (docs/results.md)


def sklearn_run(splits: Mapping[str, list[tuple[str, str]]], labels: list[str], features: str, c: float) -> dict[str, Any]:
    """The chosen TF-IDF + logistic regression fitted on train, scored on valid and on test."""
    (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = (labelled(splits[name], labels)
                                                                 for name in ("train", "valid", "test"))
    start = time.perf_counter()
    model = tfidf_model(features, c).fit(train_x, train_y)
    fit_s = time.perf_counter() - start
    return {"features": features, "C": c, "fit_s": fit_s,
            "valid": classification_scores(valid_y, model.predict(valid_x).tolist(), labels),
            "test": classification_scores(test_y, model.predict(test_x).tolist(), labels)}


def seqlab_run(config: Path, seed: int, extra: list[str], data_dir: str, work: Path) -> dict[str, Any]:
    """``seqlab train`` and ``seqlab eval --split test`` of one seed, as a user runs them."""
    run_dir = work / f"seed{seed}"
    env = os.environ | {"SEQLAB_DATA": data_dir}
    overrides = [x for item in [*extra, f"seed={seed}"] for x in ("--set", item)]
    subprocess.run(["seqlab", "train", str(config), "--out", str(run_dir), *overrides], check=True, env=env)
    test = json.loads(subprocess.run(["seqlab", "eval", str(run_dir), "--split", "test", "--json"], check=True,
                                     env=env, capture_output=True, text=True).stdout)
    run = RunDir(run_dir)
    log = run.log()
    train_s = sum(e["train_seconds"] for e in log)
    texts = sum(e["train_texts_per_s"] * e["train_seconds"] for e in log)
    classifier = load_classifier(run_dir)
    splits = load_splits(classifier.config.data, Path(data_dir))
    tokens_per_text = float(np.mean([len(ids) for ids in classifier.encode([t for t, _ in splits["train"]])]))
    return {"seed": seed, "run_dir": str(run_dir), "train_s": train_s, "best_epoch": run.model_info()["epoch"],
            "epochs": len(log), "valid": run.model_info()["valid"], "test": test, "texts_per_s": texts / train_s,
            "tokens_per_s": texts / train_s * tokens_per_text}


def tables(config: Path, sk: dict[str, Any], ours: list[dict[str, Any]]) -> list[Table]:
    """Every run of both systems, then each system's test scores and times over its runs (seqlab's seeds)."""
    shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    runs = Table("Text classification on ChatbotData's labels: seqlab's encoder vs TF-IDF + logistic regression",
                 ["system", "chosen on valid", "valid macro-F1", "**test macro-F1**", "test accuracy", "training s",
                  "texts/s (tokens/s)"],
                 [["scikit-learn TF-IDF + LR", f"{sk['features']}, C {sk['C']}", f"{sk['valid']['macro_f1']:.2f}",
                   f"**{sk['test']['macro_f1']:.2f}**", f"{sk['test']['accuracy']:.2f}", f"{sk['fit_s']:.1f}", "—"]])
    for run in ours:
        runs.rows.append([f"seqlab `{shown}`, seed {run['seed']}", f"epoch {run['best_epoch']} of {run['epochs']}",
                          f"{run['valid']['macro_f1']:.2f}", f"**{run['test']['macro_f1']:.2f}**",
                          f"{run['test']['accuracy']:.2f}", f"{run['train_s']:.1f}",
                          f"{run['texts_per_s']:,.0f} ({run['tokens_per_s']:,.0f})"])
    spreads = Table("Over the seeds", ["system", "runs", "test macro-F1", "test accuracy", "training s"], [
        ["scikit-learn TF-IDF + LR", "1", spread([sk["test"]["macro_f1"]]), spread([sk["test"]["accuracy"]]),
         spread([sk["fit_s"]], 1)],
        [f"seqlab `{shown}`", str(len(ours)), spread([run["test"]["macro_f1"] for run in ours]),
         spread([run["test"]["accuracy"] for run in ours]), spread([run["train_s"] for run in ours], 1)]])
    return [runs, spreads]

def main(argv: list[str] | None = None) -> None:
    """Fit scikit-learn's model and train seqlab's for each seed on the same split, print the tables and record them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds chatbot_ko/ChatbotData.csv")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "chatbot_ko_labels.yaml")
    parser.add_argument("--features", choices=sorted(FEATURES), default=CHOSEN_FEATURES)
    parser.add_argument("--C", type=float, default=CHOSEN_C)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--set", dest="extra", action="append", default=[],
                        help="an override of the config, for the split and every seqlab run")
    parser.add_argument("--json", help="also write every number here")
    add_results_option(parser)
    args = parser.parse_args(argv)

    data_dir = str(Path(args.data_dir).resolve())
    config = args.config.resolve()
    splits = load_splits(load_config(config, args.extra).data, Path(data_dir))
    labels = class_labels([label for _, label in splits["train"]])
    sk = sklearn_run(splits, labels, args.features, args.C)
    work = Path(tempfile.mkdtemp(prefix="classify-race-"))
    ours = [seqlab_run(config, seed, args.extra, data_dir, work) for seed in args.seeds]
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    made = tables(config, sk, ours)
    print(f"#### {made[0].title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{given}`\n\n"
          + "\n\n".join(markdown(table) for table in made) + "\n")
    publish(Result("classify_race", made[0].title, given, made, [{"system": "sklearn", **sk}, *ours],
                   notes=["scikit-learn's features and C chosen on valid by benchmarks/select_tfidf.py; timed: its fit",
                          "seqlab timed: training seconds from the run's log, validation excluded"]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps({"sklearn": sk, "seqlab": ours}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
