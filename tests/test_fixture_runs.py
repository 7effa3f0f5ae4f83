"""Runs written by an earlier seqlab still work: tests/fixtures/runs/ holds one small run of every kind, trained
before issue 35 changed how kinds are declared (tests/fixtures/make_runs.py). Each must load through README's
Python entry point and answer as it did, score the same with ``seqlab eval``, be served, and train on with
``--resume``."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from seqlab import registry

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUNS = FIXTURES / "runs"
EXPECTED: dict[str, Any] = json.loads((RUNS / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def make_runs():
    """tests/fixtures/make_runs.py as a module: the same questions are asked as when the fixtures were made."""
    sys.path.insert(0, str(FIXTURES))
    import make_runs

    yield make_runs
    sys.path.remove(str(FIXTURES))


def same(got: Any, expected: Any, path: str = "") -> None:
    """``got`` equals ``expected``, floats to 5 significant digits (they were computed on another CPU, maybe)."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-4), path
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), path
        for key in expected:
            same(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), path
        for k, (g, e) in enumerate(zip(got, expected, strict=True)):
            same(g, e, f"{path}[{k}]")
    else:
        assert got == expected, path


def test_every_kind_has_a_fixture():
    kinds = {"transformer": "seq2seq-transformer", "rnn": "seq2seq-rnn", "lm": "lm-lstm",
             "transformer_lm": "lm-transformer", "encoder": "classifier", "bert": "bert", "span": "span"}
    types = set(registry.model_sections())
    assert types == set(kinds), "a model type without a fixture run: add it to tests/fixtures/make_runs.py"
    assert {"vectors-cbow", "vectors-count", "seq2seq-rnn-numpy"} | set(kinds.values()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_old_run_answers_as_it_did(make_runs, name):
    same(make_runs.answers(name, RUNS / name), EXPECTED[name]["answers"], name)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n]["eval"] is not None))
def test_an_old_run_scores_as_it_did(make_runs, name):
    same(make_runs.scores(name, RUNS / name), EXPECTED[name]["eval"], name)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if EXPECTED[n]["served"] is not None))
def test_an_old_run_is_served(make_runs, name):
    same(make_runs.served(name, RUNS / name), EXPECTED[name]["served"], name)


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if not n.startswith("vectors")))
def test_an_old_run_trains_on_with_resume(make_runs, name, tmp_path):
    """``--resume --set train.epochs=N+1`` trains one epoch more from the old checkpoint."""
    from seqlab.rundir import RunDir

    run = tmp_path / name
    shutil.copytree(RUNS / name, run)
    epochs = len(RunDir(run).log())
    make_runs.cli(EXPECTED[name]["command"], str(run / "config.yaml"), "--out", str(run), "--resume",
                  "--set", f"train.epochs={epochs + 1}", "--data-dir", str(make_runs.DATA))
    assert [r["epoch"] for r in RunDir(run).log()] == list(range(1, epochs + 2))


@pytest.mark.parametrize("name", ["vectors-cbow", "vectors-count"])
def test_an_old_vectors_run_resumes_to_the_same_vectors(make_runs, name, tmp_path):
    """A finished word-vector run resumed (from its last epoch's state, or afresh for count) gives its vectors."""
    import numpy as np

    import seqlab.vectors

    run = tmp_path / name
    shutil.copytree(RUNS / name, run)
    make_runs.cli("vectors", "train", str(run / "config.yaml"), "--out", str(run), "--resume",
                  "--data-dir", str(make_runs.DATA))
    before, after = seqlab.vectors.load(RUNS / name), seqlab.vectors.load(run)
    assert before.words == after.words
    assert np.allclose(before["cat"], after["cat"], atol=1e-5)


@pytest.mark.parametrize(("old", "new", "name", "predictor"), [
    ("seqlab.translator", "seqlab.predictors.translator", "seq2seq-rnn", "Translator"),
    ("seqlab.language_model", "seqlab.predictors.language_model", "lm-lstm", "LanguageModel"),
    ("seqlab.classifier", "seqlab.predictors.classifier", "classifier", "Classifier"),
    ("seqlab.masked_lm", "seqlab.predictors.masked_lm", "bert", "MaskedLanguageModel"),
    ("seqlab.reader", "seqlab.predictors.answerer", "span", "Answerer"),
])
def test_the_entry_points_of_before_still_load_and_say_where_they_went_once(old, new, name, predictor):
    import importlib
    import warnings

    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
        importlib.import_module(old)  # imported again: no second warning
    assert [(w.category, str(w.message)) for w in caught] == [(FutureWarning, f"{old} is now {new}")]
    loaded = module.load(RUNS / name)
    assert type(loaded) is getattr(importlib.import_module(new), predictor)


def test_every_kind_answers_the_same_with_workers_side_by_side():
    """``workers`` is every predictor's: a classifier's, a span extractor's and a language model's batches computed
    side by side (in batches for 4 a worker) give what one after another gives."""
    import numpy as np

    from seqlab.predictors import answerer, classifier
    from seqlab.predictors.language_model import load as load_lm

    texts = ["오늘 정말 생각나", "그냥 좋다", "힘들다", "밥 먹었어", "내일 만나", "오늘도 고마워", "우울해",
             "생각이 많아", "좋은 하루", "또 보자", "배고파", "슬프다"]
    one, two = classifier.load(RUNS / "classifier"), classifier.load(RUNS / "classifier", workers=2)
    assert two.runtime.workers == 2
    assert np.allclose(two.probabilities_ids(two.encode(texts)), one.probabilities_ids(one.encode(texts)), atol=1e-6)

    context = json.loads((RUNS / "data" / "squad" / "valid.json").read_text(encoding="utf-8"))["data"][0]["paragraphs"][0]
    questions = [q["question"] for q in context["qas"]] * 4
    contexts = [context["context"]] * len(questions)
    answers = [[a.text for a in answerer.load(RUNS / "span", workers=n).answer(questions, contexts)] for n in (1, 2)]
    assert answers[0] == answers[1]

    for name in ("lm-lstm", "lm-transformer"):
        starts = ["two three", "one", "four five six", "two", "three four", "five six seven eight"]
        made = [[[g.text for g in gs] for gs in load_lm(RUNS / name, workers=n).generate(starts, beam=3, nbest=2)]
                for n in (1, 2)]
        assert made[0] == made[1], name


@pytest.mark.parametrize("command", [["classify", str(RUNS / "classifier"), "오늘 정말 생각나", "그냥 좋다", "힘들다"],
                                     ["generate", str(RUNS / "lm-lstm"), "--start", "two", "--start", "three four"]])
def test_the_commands_take_workers(command):
    from typer.testing import CliRunner

    from seqlab.cli import app

    one, two = (CliRunner().invoke(app, [*command, "--workers", n]) for n in ("1", "2"))
    assert one.exit_code == 0 and two.output == one.output, two.output
