"""Text classification on ChatbotData's labels: seqlab's classifier against scikit-learn's TF-IDF + logistic regression.

    python benchmarks/classify_race.py --data-dir ../shared/data [--features F --C C] [--seeds 1 2 3 4 5] \\
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
  chosen on valid: ``benchmarks/searches/chatbot-labels*.yaml``), the best epoch by valid macro-F1, then
  ``seqlab eval RUN --split test --json``. Timed: the training seconds in the run's log (validation excluded),
  and the fit of its n-gram head where the config has one (``model.ngrams``: its own TF-IDF + logistic
  regression, averaged with the encoder).
  Throughput: texts per second from the log, and tokens per second (the encoder's inputs: ``<sos>``, the
  text's tokens, ``<eos>``).
* **Scores**: accuracy and macro-F1 (``seqlab.metrics.classification_scores``, equal to scikit-learn's, tested
  in tests/test_classifier.py) of both systems on the same test pairs, each scored once; seqlab's spread over the
  seeds (mean ± sd and range). The tables and every run go to the scoreboard (benchmarks/results/).
* **Significance**: a paired bootstrap over the test questions (Koehn 2004; 10,000 resamples of the questions
  with replacement, the same resample for both systems): the difference of seqlab's mean macro-F1 over its seeds
  and scikit-learn's on each resample, its 95 % interval, and the one-sided p-value, the share of resamples on
  which seqlab is not ahead. With ``data.split.by: source`` in the config no test question occurs in training.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from report import add_results_option, machine, markdown, publish, seqlab, seqlab_train
from scoreboard import Result, Table, command, spread
from select_tfidf import FEATURES, labelled, tfidf_model

from seqlab.config import load_config
from seqlab.data import load_splits
from seqlab.metrics import classification_scores
from seqlab.predictors.classifier import class_labels
from seqlab.predictors.classifier import load as load_classifier
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
CHOSEN_FEATURES, CHOSEN_C = "char 2-5 + word 1-2", 30.0  # benchmarks/select_tfidf.py's choice on valid (docs/results.md)
BOOTSTRAP_SAMPLES = 10_000


def resampled_macro_f1(true: np.ndarray, predicted: np.ndarray, index: np.ndarray, classes: int) -> np.ndarray:
    """Macro-F1 in percent of ``predicted`` against ``true`` (class ids, shape (n,)) on each row of ``index``
    (resamples × n positions): F1 = 2TP / (2TP + FP + FN) per class, as ``classification_scores`` computes it
    (0 for a class with no TP, FP or FN), averaged over the classes."""
    t, p = true[index], predicted[index]  # (resamples, n)
    f1 = np.zeros((index.shape[0], classes))
    for c in range(classes):
        tp = ((t == c) & (p == c)).sum(1)
        wrong = (t == c).sum(1) + (p == c).sum(1) - 2 * tp  # FP + FN
        f1[:, c] = np.divide(2 * tp, 2 * tp + wrong, out=np.zeros(len(tp)), where=2 * tp + wrong > 0)
    return 100 * f1.mean(1)


def paired_bootstrap(true: list[int], ours: list[list[int]], theirs: list[int], classes: int,
                     samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> dict[str, float]:
    """Koehn's (2004) paired bootstrap of ``ours`` (the predictions of several seeds, their macro-F1 averaged) against
    ``theirs`` on the same questions: the observed difference, its 95 % interval over the resamples, and the
    one-sided p-value (the share of resamples where ours is not ahead)."""
    truth = np.asarray(true)
    index = np.random.default_rng(seed).integers(0, len(truth), (samples, len(truth)))
    whole = np.arange(len(truth))[None]  # (1, n): the test split itself
    ours_f1 = [resampled_macro_f1(truth, np.asarray(run), index, classes) for run in ours]
    difference = np.mean(ours_f1, axis=0) - resampled_macro_f1(truth, np.asarray(theirs), index, classes)
    observed = (np.mean([resampled_macro_f1(truth, np.asarray(run), whole, classes)[0] for run in ours])
                - resampled_macro_f1(truth, np.asarray(theirs), whole, classes)[0])
    low, high = np.percentile(difference, [2.5, 97.5])
    return {"difference": float(observed), "low": float(low), "high": float(high),
            "p": float((difference <= 0).mean()), "samples": samples}


def sklearn_run(splits: Mapping[str, list[tuple[str, str]]], labels: list[str], features: str, c: float) -> dict[str, Any]:
    """The chosen TF-IDF + logistic regression fitted on train, scored on valid and on test."""
    (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = (labelled(splits[name], labels)
                                                                 for name in ("train", "valid", "test"))
    start = time.perf_counter()
    model = tfidf_model(features, c).fit(train_x, train_y)
    fit_s = time.perf_counter() - start
    predicted = model.predict(test_x).tolist()
    return {"features": features, "C": c, "fit_s": fit_s,
            "valid": classification_scores(valid_y, model.predict(valid_x).tolist(), labels),
            "test": classification_scores(test_y, predicted, labels), "test_predicted": predicted}


def seqlab_run(config: Path, seed: int, extra: list[str], data_dir: str, work: Path,
               labels: list[str]) -> dict[str, Any]:
    """``seqlab train`` and ``seqlab eval --split test`` of one seed, as a user runs them, with the predicted class
    of every test question as an index into ``labels`` (for the bootstrap) and their macro-F1 (eval's unless
    batching changed a prediction). Training seconds: the epochs' (from the log), and the n-gram head's fit."""
    run_dir = work / f"seed{seed}"
    env = {"SEQLAB_DATA": data_dir}
    seqlab_train(config, run_dir, [*extra, f"seed={seed}"], env)
    test = json.loads(seqlab(["eval", run_dir, "--split", "test", "--json"], env, capture=True))
    run = RunDir(run_dir)
    log = run.log()
    classifier = load_classifier(run_dir)
    train_s = run.training_seconds()  # the n-gram head's fit included
    epochs_s = sum(e["train_seconds"] for e in log)  # the encoder's steps alone, for its speed
    texts = sum(e["train_texts_per_s"] * e["train_seconds"] for e in log)
    splits = load_splits(classifier.config.data, Path(data_dir))
    tokens_per_text = float(np.mean([len(ids) for ids in classifier.encode([t for t, _ in splits["train"]])]))
    test_x, test_y = labelled(splits["test"], labels)
    predicted = [labels.index(label) for label in classifier.predict(test_x)]
    return {"seed": seed, "run_dir": str(run_dir), "train_s": train_s, "best_epoch": run.model_info()["epoch"],
            "epochs": len(log), "valid": run.model_info()["valid"], "test": test, "texts_per_s": texts / epochs_s,
            "tokens_per_s": texts / epochs_s * tokens_per_text, "test_predicted": predicted,
            "test_predicted_macro_f1": classification_scores(test_y, predicted, labels)["macro_f1"]}


def tables(config: Path, sk: dict[str, Any], ours: list[dict[str, Any]], paired: dict[str, float]) -> list[Table]:
    """Every run of both systems, each system's test scores and times over its runs (seqlab's seeds), and the paired
    bootstrap of the difference."""
    shown = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    runs = Table("Text classification on ChatbotData's labels: seqlab's classifier vs TF-IDF + logistic regression",
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
    bootstrap = Table("Paired bootstrap over the test questions", [
        "seqlab's mean macro-F1 − scikit-learn's", "95 % interval", "p (seqlab not ahead)", "resamples"],
        [[f"{paired['difference']:+.2f}", f"{paired['low']:+.2f} to {paired['high']:+.2f}", f"{paired['p']:.4f}",
          f"{paired['samples']:,}"]])
    return [runs, spreads, bootstrap]

def main(argv: list[str] | None = None) -> None:
    """Fit scikit-learn's model and train seqlab's for each seed on the same split, print the tables and record them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds chatbot_ko/ChatbotData.csv")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "chatbot_ko_labels.yaml")
    parser.add_argument("--features", choices=sorted(FEATURES), default=CHOSEN_FEATURES)
    parser.add_argument("--C", type=float, default=CHOSEN_C)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
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
    ours = [seqlab_run(config, seed, args.extra, data_dir, work, labels) for seed in args.seeds]
    true = labelled(splits["test"], labels)[1]
    paired = paired_bootstrap(true, [run["test_predicted"] for run in ours], sk["test_predicted"], len(labels))
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    made = tables(config, sk, ours, paired)
    print(f"#### {made[0].title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{given}`\n\n"
          + "\n\n".join(markdown(table) for table in made) + "\n")
    publish(Result("classify_race", made[0].title, given, made,
                   [{"system": "sklearn", **sk}, *ours, {"system": "paired bootstrap", **paired}],
                   notes=["scikit-learn's features and C chosen on valid by benchmarks/select_tfidf.py; timed: its fit",
                          "seqlab timed: training seconds from the run's log, validation excluded, and its n-gram "
                          "head's fit where it has one"]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps({"sklearn": sk, "seqlab": ours, "paired": paired}, indent=1),
                                   encoding="utf-8")


if __name__ == "__main__":
    main()
