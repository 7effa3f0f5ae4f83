"""The guard on the test split: choices are made on valid, and a selection run cannot read test however it asks.

A selection run (``SEQLAB_SELECTION=1``, set by the benchmarks that choose a configuration, and inherited by every
process they start) gets data with no test split: explicit test files are never opened, a shuffled corpus's test
share is never taken out, and every way of asking for test raises ``WithheldSplit``. Each test below plants one way a
script could read test (the ways a check of its text missed) and sees it caught.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path

import pytest
from conftest import small_date_config
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.corpora import DataConfig, TsvCorpus
from seqlab.data import DataError, WithheldSplit, load_sentence_splits, load_splits, selection_run
from seqlab.data.splits import SELECTION_ENV, SPLITS, load_question_splits, split_pairs
from seqlab.train.trainer import Trainer

runner = CliRunner()


@pytest.fixture
def selecting(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test is part of a selection run."""
    monkeypatch.setenv(SELECTION_ENV, "1")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A date model trained for one short epoch on generated data (1,000 pairs: 800 / 100 / 100)."""
    run = tmp_path_factory.mktemp("selection") / "run"
    Trainer(parse_config(small_date_config()), run, progress=False).fit()
    return run


def _date_data() -> DataConfig:
    return parse_config(small_date_config()).data


def test_selection_mode_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SELECTION_ENV, raising=False)
    assert not selection_run()
    monkeypatch.setenv(SELECTION_ENV, "0")
    assert not selection_run()
    monkeypatch.setenv(SELECTION_ENV, "1")
    assert selection_run()


def test_outside_a_selection_run_test_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SELECTION_ENV, raising=False)
    splits = load_splits(_date_data(), Path("/nonexistent"))
    assert [len(items) for _, items in splits.items()] == [800, 100, 100]


def test_a_shuffled_corpus_never_takes_test_out_in_a_selection_run(selecting: None) -> None:
    data = _date_data()
    pairs = list(range(1000))
    parts = split_pairs(pairs, data.split)
    assert set(parts) == {"train", "valid"} and len(parts["train"]) == 800 and len(parts["valid"]) == 100
    splits = load_splits(data, Path("/nonexistent"))
    assert len(splits["train"]) == 800 and len(splits["valid"]) == 100  # the same train and valid as outside
    with pytest.raises(WithheldSplit, match="selection run"):
        splits["test"]


def test_splits_are_read_lazily_so_training_never_opens_the_test_file(tmp_path: Path) -> None:
    """Outside a selection run too: a test file that cannot be read does not stop training."""
    (tmp_path / "train.tsv").write_text("".join(f"{i}\t{i}\n" for i in range(40)), encoding="utf-8")
    (tmp_path / "valid.tsv").write_text("1\t1\n2\t2\n", encoding="utf-8")
    config = small_date_config()
    config["data"] = {"train": {"format": "tsv", "path": str(tmp_path / "train.tsv")},
                      "valid": {"format": "tsv", "path": str(tmp_path / "valid.tsv")},
                      "test": {"format": "tsv", "path": str(tmp_path / "missing.tsv")}, "max_source_length": 40}
    best = Trainer(parse_config(config), tmp_path / "run", progress=False).fit()
    assert best["epoch"] == 1
    splits = load_splits(parse_config(config).data, tmp_path)
    with pytest.raises(DataError, match="missing.tsv: no such file"):
        splits["test"]  # the file was never there: training did not ask for it


# --- the five ways a selecting script read test past a check of its text ---------------------------------------


def test_bypass_1_eval_without_split_reads_valid_not_test(tiny_run: Path, selecting: None) -> None:
    """``seqlab eval RUN`` with no ``--split`` read test; it now scores valid, and so works in a selection run."""
    default = runner.invoke(app, ["eval", str(tiny_run), "--json"])
    assert default.exit_code == 0, default.output
    valid = runner.invoke(app, ["eval", str(tiny_run), "--split", "valid", "--json"])
    assert json.loads(default.stdout) == json.loads(valid.stdout)
    assert json.loads(default.stdout)["sentences"] == 100


@pytest.mark.parametrize("argv", [["--split", "test"], ["--split=test"]])
def test_bypass_2_eval_split_test_in_either_spelling_is_refused(tiny_run: Path, selecting: None,
                                                                argv: list[str]) -> None:
    result = runner.invoke(app, ["eval", str(tiny_run), *argv, "--json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "withheld in a selection run" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_bypass_3_iterating_the_splits_reaches_test_and_is_refused(selecting: None) -> None:
    splits = load_splits(_date_data(), Path("/nonexistent"))
    seen = []
    with pytest.raises(WithheldSplit):
        for name, _items in splits.items():
            seen.append(name)
    assert seen == ["train", "valid"]
    with pytest.raises(WithheldSplit):
        list(splits.values())
    sentences = load_sentence_splits(_date_data(), Path("/nonexistent"))
    with pytest.raises(WithheldSplit):
        dict(sentences)


def test_bypass_4_an_attribute_naming_test_is_refused(selecting: None) -> None:
    """No literal "test" in the code: the name comes from an attribute (here an argparse default)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--split", default=SPLITS[-1])
    options = parser.parse_args([])
    splits = load_splits(_date_data(), Path("/nonexistent"))
    with pytest.raises(WithheldSplit):
        splits[options.split]
    with pytest.raises(WithheldSplit):
        splits.get(options.split)


def test_bypass_5_a_helper_in_an_imported_module_is_refused(tmp_path: Path, selecting: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scoring_helper.py").write_text(
        "from pathlib import Path\n"
        "from seqlab.data import load_splits\n\n\n"
        "def final_scores(data):\n"
        "    return len(load_splits(data, Path('/nonexistent'))['test'])\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    helper = importlib.import_module("scoring_helper")
    with pytest.raises(WithheldSplit):
        helper.final_scores(_date_data())


def test_explicit_test_files_are_withheld_for_every_kind_of_data(tmp_path: Path, selecting: None) -> None:
    """Pairs, sentences and SQuAD questions: the test file is not opened (it does not even exist here)."""
    (tmp_path / "train.tsv").write_text("a\tb\n", encoding="utf-8")
    (tmp_path / "valid.tsv").write_text("c\td\n", encoding="utf-8")
    data = DataConfig(train=TsvCorpus(path="train.tsv"), valid=TsvCorpus(path="valid.tsv"),
                      test=TsvCorpus(path="missing.tsv"))
    for load in (load_splits, load_sentence_splits, load_question_splits):
        with pytest.raises(WithheldSplit):
            load(data, tmp_path)["test"]
    assert load_splits(data, tmp_path)["valid"] == [("c", "d")]
