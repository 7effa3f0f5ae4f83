"""Encoder-only text classification (seed 001, S106) and its scores (seed 002 §10.2, S101): the seed's worked
example, the scores against scikit-learn, the model's pooling, and a classifier trained, resumed, evaluated and
used through the CLI."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import labelled_csv, resumes_exactly

from seqlab.metrics import classification_scores, confusion_matrix, f1

# --- the scores (S101) ----------------------------------------------------------------------------------------


def test_the_seeds_confusion_matrix_example():  # S101
    real = [1, 1, 0, 1, 1, 1, 0, 0, 1, 0]
    predicted = [1, 1, 0, 1, 0, 0, 0, 1, 0, 1]
    (tn, fp), (fn, tp) = confusion_matrix(real, predicted, 2)
    assert (tp, tn, fp, fn) == (3, 2, 2, 3)
    scores = classification_scores(real, predicted, ["0", "1"])
    positive = scores["per_class"]["1"]
    assert scores["accuracy"] == pytest.approx(50.0)  # (TP + TN) / all
    assert positive["precision"] == pytest.approx(60.0)  # TP / (TP + FP)
    assert positive["recall"] == pytest.approx(50.0)  # TP / (TP + FN)
    assert positive["f1"] == pytest.approx(100 * 6 / 11)  # 0.5454...: below the arithmetic mean 0.55
    assert positive["f1"] < (positive["precision"] + positive["recall"]) / 2


def test_f1_is_the_harmonic_mean():  # S101: P 0.9, R 0.1 -> mean 0.5, F1 0.18
    assert float(f1(np.array(0.9), np.array(0.1))) == pytest.approx(0.18)
    assert float(f1(np.array(0.0), np.array(0.0))) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_scores_equal_scikit_learns(seed):
    from sklearn import metrics

    rng = np.random.default_rng(seed)
    true = rng.integers(0, 4, size=200)
    predicted = np.where(rng.random(200) < 0.6, true, rng.integers(0, 3, size=200))  # class 3 is never predicted
    scores = classification_scores(true.tolist(), predicted.tolist(), ["a", "b", "c", "d"])
    assert scores["accuracy"] == pytest.approx(100 * metrics.accuracy_score(true, predicted))
    for average in ("macro", "micro"):
        p, r, f, _ = metrics.precision_recall_fscore_support(true, predicted, labels=[0, 1, 2, 3], average=average,
                                                             zero_division=0)
        assert [scores[f"{average}_{name}"] for name in ("precision", "recall", "f1")] == \
            pytest.approx([100 * p, 100 * r, 100 * f])
    p, r, f, n = metrics.precision_recall_fscore_support(true, predicted, labels=[0, 1, 2, 3], zero_division=0)
    for i, label in enumerate("abcd"):
        assert scores["per_class"][label] == pytest.approx(
            {"precision": 100 * p[i], "recall": 100 * r[i], "f1": 100 * f[i], "support": n[i]})
    assert scores["confusion"] == metrics.confusion_matrix(true, predicted, labels=[0, 1, 2, 3]).tolist()
    assert scores["micro_f1"] == pytest.approx(scores["accuracy"])  # one label per input


def test_class_labels_are_ordered_by_value():
    from seqlab.predictors.classifier import class_labels

    assert class_labels(["10", "2", "love", "0", "2", "breakup"]) == ["0", "2", "10", "breakup", "love"]


# --- the model (S106) -------------------------------------------------------------------------------------------


def _classifier(pooling: str):
    from seqlab.model import build_classifier
    from seqlab.model.classifier import EncoderConfig

    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=16, num_layers=2, num_heads=2, d_ff=32, dropout=0.0, max_length=16, pooling=pooling)
    return build_classifier(cfg, 12, 3).eval()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_padding_does_not_change_a_texts_logits(pooling):
    model = _classifier(pooling)
    short = torch.tensor([[1, 5, 6, 7, 2]])  # <sos> tokens <eos>
    padded = torch.tensor([[1, 5, 6, 7, 2, 0, 0, 0], [1, 4, 4, 4, 4, 4, 4, 2]])
    logits = model(padded)  # (batch, classes)
    assert logits.shape == (2, 3)
    torch.testing.assert_close(logits[:1], model(short), rtol=1e-5, atol=1e-6)


def test_the_pools_read_the_first_position_or_the_mean_of_the_real_ones():
    cls, mean = _classifier("cls"), _classifier("mean")
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).view(2, 4, 3)
    src = torch.tensor([[1, 5, 2, 0], [1, 5, 6, 2]])
    torch.testing.assert_close(cls.pool(hidden, src), hidden[:, 0])
    torch.testing.assert_close(mean.pool(hidden, src), torch.stack([hidden[0, :3].mean(0), hidden[1].mean(0)]))


def test_the_attention_weights_come_from_the_same_pass():
    model = _classifier("cls")
    src = torch.tensor([[1, 5, 6, 7, 2, 0]])
    with torch.no_grad():
        logits, weights = model.classify(src, need_weights=True)
    torch.testing.assert_close(logits, model(src))
    assert len(weights) == 2 and weights[0].shape == (1, 2, 6, 6)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(1, 2, 6))
    assert float(weights[0][..., -1].max()) < 1e-6  # the padding is never looked at


# --- end to end ---------------------------------------------------------------------------------------------------

def _config(tmp_path: Path, **train):
    """A small encoder over ``tmp_path``'s train.csv and valid.csv (``_labelled_data``); valid is also the test."""
    from seqlab.config import parse_config

    csv_corpus = {"format": "csv", "source_column": "Q", "target_column": "label"}
    return parse_config({
        "data": {"train": csv_corpus | {"path": str(tmp_path / "train.csv")},
                 "valid": csv_corpus | {"path": str(tmp_path / "valid.csv")},
                 "test": csv_corpus | {"path": str(tmp_path / "valid.csv")}, "max_source_length": 16},
        "tokens": {"source": {"level": "word"}},
        "model": {"type": "encoder", "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "max_length": 16, "pooling": "cls"},
        "train": {"epochs": 3, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32",
                  **train},
    })


def _labelled_data(tmp_path: Path) -> Path:
    labelled_csv(tmp_path / "train.csv", 400, 0)
    labelled_csv(tmp_path / "valid.csv", 60, 1)
    return tmp_path


def test_a_classifier_trains_classifies_and_is_scored_through_the_cli(tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.predictors.classifier import load
    from seqlab.rundir import RunDir
    from seqlab.train.trainer import Trainer

    run = tmp_path / "run"
    best = Trainer(_config(_labelled_data(tmp_path)), run, progress=False).fit()
    assert best["valid"]["macro_f1"] == 100.0  # the topic word decides; unseen combinations in valid
    assert RunDir(run).labels() == ["0", "1", "2"]
    assert "train_texts_per_s" in RunDir(run).log()[0]

    classifier = load(run)
    [prediction] = classifier.classify(["요즘 사랑 생각나"], need_weights=True)
    assert prediction.label == "2" and sum(prediction.probabilities.values()) == pytest.approx(1.0)
    assert prediction.tokens == ["<sos>", "▁요즘", "▁사랑", "▁생각나", "<eos>"]
    assert prediction.attention is not None and prediction.attention.shape == (1, 2, 5, 5)

    runner = CliRunner()
    result = runner.invoke(app, ["classify", str(run), "정말 이별 힘들어", "주말 날씨 어때?"])
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines()] == ["1", "0"]
    result = runner.invoke(app, ["classify", str(run), "고백 너무 궁금해", "--json"])
    out = json.loads(result.stdout)
    assert out["label"] == "2" and set(out["probabilities"]) == {"0", "1", "2"}
    result = runner.invoke(app, ["eval", str(run), "--split", "test", "--json"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert scores["accuracy"] == 100.0 and scores["macro_f1"] == 100.0 and scores["sentences"] == 60
    assert sum(map(sum, scores["confusion"])) == 60 and scores["labels"] == ["0", "1", "2"]
    result = runner.invoke(app, ["eval", str(run), "--split", "test", "--json", "--int8", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accuracy"] == 100.0 and json.loads(result.stdout)["sentences"] == 60
    result = runner.invoke(app, ["eval", str(run), "--split", "test"])
    assert "macro_f1" in result.stdout and "rows true, columns predicted" in result.stdout
    result = runner.invoke(app, ["translate", str(run), "사랑"])
    assert result.exit_code == 2 and "a classifier, not a seq2seq model: use seqlab classify" in result.output


def test_a_killed_classifier_run_resumes_to_the_same_log(tmp_path, killed_at):
    config = _config(_labelled_data(tmp_path), epochs=2, save_every=7, schedule="cosine")
    config = config.model_copy(update={"model": config.model.model_copy(update={"dropout": 0.1})})
    resumes_exactly(config, tmp_path, killed_at, 30)  # inside epoch 2 (25 batches an epoch), after step 28's checkpoint


def _with_head(tmp_path: Path, weight: float = 0.4, **train):
    """``_config`` with an n-gram head (model.ngrams): character 1-3-grams, C 1, the encoder's weight ``weight``."""
    from seqlab.model.ngrams import NgramConfig

    config = _config(_labelled_data(tmp_path), **train)
    head = NgramConfig(word=None, char=(1, 3), C=1.0, weight=weight)
    return config.model_copy(update={"model": config.model.model_copy(update={"ngrams": head})})


def test_a_classifier_with_a_head_trains_averages_and_is_scored(tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.model.ngrams import NgramConfig, NgramHead
    from seqlab.predictors.base import saved_ngrams
    from seqlab.predictors.classifier import load
    from seqlab.rundir import RunDir, RunFileError
    from seqlab.train.trainer import Trainer

    run = tmp_path / "run"
    best = Trainer(_with_head(tmp_path), run, progress=False).fit()
    assert (run / "ngrams.safetensors").exists()
    classifier = load(run)
    assert classifier.ngrams is not None
    texts = ["요즘 사랑 생각나", "정말 이별 힘들어", "주말 날씨 어때?"]
    ids = classifier.encode(texts)
    mixed = 0.4 * classifier.probabilities_ids(ids) + 0.6 * classifier.ngrams.probabilities(texts)
    np.testing.assert_allclose(classifier.probabilities(texts, ids), mixed)
    predictions = classifier.classify(texts)
    np.testing.assert_allclose([list(p.probabilities.values()) for p in predictions], mixed, rtol=1e-12)
    [with_weights] = classifier.classify(texts[:1], need_weights=True)
    assert with_weights.probabilities == pytest.approx(predictions[0].probabilities)
    assert classifier.predict(texts) == ["2", "1", "0"]
    result = CliRunner().invoke(app, ["eval", str(run), "--split", "valid", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["loss"] == pytest.approx(best["valid"]["loss"])  # validation averaged too
    with pytest.raises(RunFileError, match=r"ngrams.safetensors: not the n-gram model of this model.ngrams \(fitted"):
        saved_ngrams(RunDir(run), NgramHead, NgramConfig(char=(1, 3), word=(1, 1)))  # a config whose head has other features
    averaged = RunDir(tmp_path / "averaged")  # what seqlab average copies
    RunDir(run).copy_model_files(averaged)
    assert (averaged.path / "ngrams.safetensors").read_bytes() == (run / "ngrams.safetensors").read_bytes()


def test_a_killed_run_with_a_head_resumes_to_the_same_log(tmp_path, killed_at):
    config = _with_head(tmp_path, epochs=2, save_every=7, schedule="cosine")
    resumes_exactly(config, tmp_path, killed_at, 30)


def test_classifier_config_and_data_errors_name_the_key(tmp_path):
    from seqlab.config import ConfigError, parse_config
    from seqlab.train.trainer import Trainer

    good = _config(_labelled_data(tmp_path)).model_dump(mode="json")
    for change, message in [
        ({"train": good["train"] | {"best_metric": "bleu"}}, "picked by accuracy, macro_f1, loss, not bleu"),
        ({"train": good["train"] | {"schedule": "transformer"}},
         "encoder-only models use train.schedule: constant, cosine or linear"),
        ({"data": good["data"] | {"max_source_length": 32}}, "model.max_length (16) must cover data.max_source_length"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            parse_config(good | change)
    with (tmp_path / "valid.csv").open("a", encoding="utf-8") as f:
        f.write("사랑 고백,-,3\n")  # a class training never saw
    with pytest.raises(ValueError, match="the valid split: label '3' is not one of the model's classes"):
        Trainer(_config(tmp_path), tmp_path / "run", progress=False)
