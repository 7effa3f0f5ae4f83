"""Choose scikit-learn's TF-IDF + logistic regression for ChatbotData's labels on the valid split.

    python benchmarks/select_tfidf.py --data-dir ../shared/data [--set KEY=VALUE ...] [--results DIR]

The split is configs/chatbot_ko_labels.yaml's (``--config``, with ``--set`` overrides as
``classify_race.py`` takes them), read by ``seqlab.data.load_splits``.
``TfidfVectorizer`` over character n-grams inside words (``char_wb``), word n-grams, or both side by side
(``FeatureUnion``), sublinear tf, then ``LogisticRegression`` (lbfgs, multinomial, ``max_iter`` 2000) with C
from a grid: every combination is fitted on train and scored on valid by macro-F1
(``seqlab.metrics.classification_scores``). This script never loads the test split; it ends with the winner,
which ``benchmarks/classify_race.py --features ... --C ...`` scores on test once (its defaults are the
winner of this script's last recorded run). The ranking and every trial go to the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from report import add_results_option, choose_on_valid, machine, markdown, publish
from scoreboard import Result, Table, command
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline

from seqlab.config import load_config
from seqlab.data import load_splits
from seqlab.metrics import classification_scores
from seqlab.model.ngrams import Analyzer, vectorizer
from seqlab.predictors.classifier import class_labels

ROOT = Path(__file__).resolve().parents[1]
FEATURES: dict[str, list[tuple[Analyzer, tuple[int, int]]]] = {
    "char 1-3": [("char_wb", (1, 3))],
    "char 2-4": [("char_wb", (2, 4))],
    "char 1-5": [("char_wb", (1, 5))],
    "word 1-2": [("word", (1, 2))],
    "char 1-4 + word 1-2": [("char_wb", (1, 4)), ("word", (1, 2))],
    "char 2-5 + word 1-2": [("char_wb", (2, 5)), ("word", (1, 2))],
}
C_GRID = (0.3, 1.0, 3.0, 10.0, 30.0)


def tfidf_model(features: str, c: float) -> Pipeline:
    """TF-IDF over the feature set ``features`` (a key of FEATURES), then logistic regression with C = ``c``: the
    vectorisers of seqlab's n-gram head (``seqlab.model.ngrams.vectorizer``, model.ngrams)."""
    vectorisers = [(f"{analyzer}{low}{high}", vectorizer(analyzer, (low, high)))
                   for analyzer, (low, high) in FEATURES[features]]
    return make_pipeline(FeatureUnion(vectorisers), LogisticRegression(C=c, max_iter=2000))


def labelled(pairs: list[tuple[str, str]], labels: list[str]) -> tuple[list[str], list[int]]:
    """Texts and their class indices."""
    index = {label: i for i, label in enumerate(labels)}
    return [text for text, _ in pairs], [index[label] for _, label in pairs]


def main(argv: list[str] | None = None) -> None:
    """Fit every feature set × C on train, rank them on valid, print the table and the choice, and record them."""
    choose_on_valid()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds chatbot_ko/ChatbotData.csv")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "chatbot_ko_labels.yaml")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override of the config")
    add_results_option(parser)
    args = parser.parse_args(argv)

    splits = load_splits(load_config(args.config, args.extra).data, Path(args.data_dir))
    labels = class_labels([label for _, label in splits["train"]])
    (train_x, train_y), (valid_x, valid_y) = labelled(splits["train"], labels), labelled(splits["valid"], labels)
    trials = []
    for features, c in itertools.product(FEATURES, C_GRID):
        start = time.perf_counter()
        model = tfidf_model(features, c).fit(train_x, train_y)
        fit_s = time.perf_counter() - start
        valid = classification_scores(valid_y, model.predict(valid_x).tolist(), labels)
        trials.append((valid["macro_f1"], valid["accuracy"], features, c, fit_s))
        print(f"{features}, C {c}: valid macro-F1 {valid['macro_f1']:.2f} ({fit_s:.1f} s)", flush=True)
    trials.sort(key=lambda t: -t[0])
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    table = Table("TF-IDF + logistic regression on ChatbotData's labels, chosen on valid",
                  ["rank", "features", "C", "valid macro-F1", "valid accuracy", "fit s"],
                  [[str(rank), features, str(c), f"{f1:.2f}", f"{accuracy:.2f}", f"{fit_s:.1f}"]
                   for rank, (f1, accuracy, features, c, fit_s) in enumerate(trials[:10], 1)])
    best = trials[0]
    choice = (f"Chosen on valid: **{best[2]}, C {best[3]}**; scored on test once by "
              f"`python benchmarks/classify_race.py --features \"{best[2]}\" --C {best[3]}"
              + "".join(f" --set {item}" for item in args.extra) + "`.")
    print(f"#### {table.title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{given}`\n\n{markdown(table)}\n\n"
          f"{choice}\n")
    runs = [{"features": features, "C": c, "valid_macro_f1": f1, "valid_accuracy": accuracy, "fit_s": fit_s}
            for f1, accuracy, features, c, fit_s in trials]
    publish(Result("select_tfidf", table.title, given, [table], runs, notes=["the 10 best of the grid shown", choice]),
            args.results)

if __name__ == "__main__":
    main()
