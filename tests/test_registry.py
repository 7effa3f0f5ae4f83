"""The registry of kinds (seqlab.registry, seqlab.kinds): every model.type has one kind, every run is found its
kind, and a kind registered from outside seqlab is evaluated and served through the registry alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from seqlab import registry
from seqlab.registry import InferenceOptions
from seqlab.rundir import RunDir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"


def test_every_model_type_has_one_kind_and_every_kind_trains_with_a_seqlab_command():
    sections = registry.model_sections()
    assert sorted(registry.all_model_types()) == sorted(sections)
    assert all(section.model_fields["type"].default == name for name, section in sections.items())
    assert [k.name for k in registry.kinds()] == ["seq2seq", "lm", "classifier", "bert", "span", "vectors"]
    assert {k.name: k.trained_by for k in registry.kinds()} == {
        "seq2seq": "train", "lm": "train", "classifier": "train", "bert": "pretrain", "span": "train",
        "vectors": "vectors train"}


@pytest.mark.parametrize(("run", "kind"), [
    ("seq2seq-transformer", "seq2seq"), ("seq2seq-rnn", "seq2seq"), ("seq2seq-rnn-numpy", "seq2seq"),
    ("lm-lstm", "lm"), ("lm-transformer", "lm"), ("classifier", "classifier"), ("bert", "bert"), ("span", "span"),
    ("vectors-cbow", "vectors"), ("vectors-count", "vectors"),
])
def test_a_run_is_found_its_kind(run, kind):
    assert registry.kind_of_run(FIXTURES / run).name == kind


def test_no_run_and_an_unknown_kind_are_one_line_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run here"):
        registry.kind_of_run(tmp_path)
    (tmp_path / "config.yaml").write_text("model: {type: gpt}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a run of no kind seqlab knows"):
        registry.kind_of_run(tmp_path)
    with pytest.raises(ValueError, match="model.type 'gpt' is no kind's"):
        registry.kind_of_type("gpt")


class Echo(registry.Kind):
    """A kind from outside seqlab: its runs are directories with an ``echo.txt``, which it says back."""

    name = "echo"
    noun = "an echo"
    use = "seqlab eval"
    model_types = ()  # its runs have no model section: it owns them by their file

    def owns(self, run_dir: Path) -> bool:
        return (run_dir / "echo.txt").exists()

    def load(self, run_dir: Path, how: InferenceOptions = InferenceOptions()) -> str:  # noqa: B008 (frozen)
        return (run_dir / "echo.txt").read_text(encoding="utf-8")

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        return {"loss": 0.0, "split": split, "said": self.load(run_dir)}

    def serve(self, run_dir: Path, limits: Any,
              how: InferenceOptions = InferenceOptions()) -> tuple[dict[str, Any], Callable[[Any, Any], None]]:  # noqa: B008
        said = self.load(run_dir)

        def add_routes(app: Any, worker: Any) -> None:
            app.get("/api/echo")(lambda: {"said": said})

        return {"kind": "echo", "run": run_dir.name}, add_routes


@pytest.fixture
def echo(monkeypatch, tmp_path) -> Path:
    """The echo kind registered (for this test only) and a run of it."""
    registry.kinds()  # the built-in kinds first
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    registry.register(Echo())
    (tmp_path / "echo.txt").write_text("hello", encoding="utf-8")
    return tmp_path


def test_a_kind_from_outside_is_evaluated_and_served_through_the_registry(echo):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.server import create_app

    result = CliRunner().invoke(app, ["eval", str(echo), "--json"])
    assert result.exit_code == 0 and '"said": "hello"' in result.output and '"split": "valid"' in result.output
    with TestClient(create_app(echo)) as client:
        assert client.get("/api/echo").json() == {"said": "hello"}
        assert client.get("/api/info").json()["kind"] == "echo"
        assert client.get("/").status_code == 200


def test_a_kind_cannot_take_a_name_or_a_model_type_that_is_taken(echo):
    with pytest.raises(ValueError, match="the name is taken"):
        registry.register(Echo())

    class Transformer2(registry.Kind):
        name = "transformer2"
        noun, use = "a second Transformer", "nothing"
        model_types = ("transformer",)

    with pytest.raises(ValueError, match="model.type transformer is taken"):
        registry.register(Transformer2())


def test_a_predictor_refuses_a_run_of_another_kind_saying_what_uses_it():
    from seqlab.predictors.classifier import Classifier
    from seqlab.predictors.translator import Translator

    with pytest.raises(ValueError, match="a language model, not a seq2seq model: use seqlab generate or seqlab score"):
        Translator.load(FIXTURES / "lm-lstm")
    with pytest.raises(ValueError, match="a pretrained BERT, not a classifier: use seqlab fill-mask"):
        Classifier.load(FIXTURES / "bert")
    with pytest.raises(ValueError, match="a word-vector run; use seqlab vectors"):
        Classifier.load(FIXTURES / "vectors-cbow")


@pytest.mark.parametrize("name", ["seq2seq-transformer", "lm-lstm", "classifier", "bert", "span"])
def test_every_kind_loads_its_runs_as_asked(name):
    """``InferenceOptions`` reaches every kind's predictor: int8 layers and workers, whatever the kind (``seqlab
    eval --int8 --workers``); an export's engine is a seq2seq model's alone, and word vectors have none of them."""
    run = FIXTURES / name
    runtime = registry.kind_of_run(run).load(run, InferenceOptions(int8=True, workers=2)).runtime
    assert (runtime.int8, runtime.workers) == (True, 2)
    if name != "seq2seq-transformer":
        with pytest.raises(ValueError, match=f"{name}: .* runs on seqlab's own engine only, not onnx"):
            registry.kind_of_run(run).load(run, InferenceOptions("onnx"))
    with pytest.raises(ValueError, match="vectors-cbow: a word-vector run is a table of vectors"):
        registry.kind_of_run(FIXTURES / "vectors-cbow").load(FIXTURES / "vectors-cbow", InferenceOptions(int8=True))


def test_a_kind_without_a_page_says_so_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import app

    result = CliRunner().invoke(app, ["serve", str(FIXTURES / "bert")])
    assert result.exit_code == 2 and "a pretrained BERT has no page: use seqlab fill-mask" in result.output
    assert "Traceback" not in result.output


@pytest.fixture
def toy(monkeypatch) -> Any:
    """The length kind of tests/toy_kind.py registered, for this test only."""
    import toy_kind

    registry.kinds()  # the built-in kinds first
    monkeypatch.setattr(registry, "_KINDS", dict(registry._KINDS))
    registry.register(toy_kind.Lengths())
    return toy_kind


def test_a_kind_from_outside_trains_resumes_evaluates_serves_and_has_its_command(toy, tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import make_app
    from seqlab.server import create_app

    pairs = [(f"{'ab' * (i % 7)}c{i}", "x" * (i % 5 + 1)) for i in range(60)]
    for split, rows in (("train", pairs[:48]), ("valid", pairs[48:54]), ("test", pairs[54:])):
        (tmp_path / f"{split}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    config = tmp_path / "length.yaml"
    config.write_text(
        "data: {train: {format: tsv, path: train.tsv}, valid: {format: tsv, path: valid.tsv},"
        " test: {format: tsv, path: test.tsv}}\nmodel: {type: length, scale: 0.5}\n"
        "train: {epochs: 3, schedule: constant, lr: 0.01}\n", encoding="utf-8")
    run, cli, data = tmp_path / "run", CliRunner(), ["--data-dir", str(tmp_path)]
    app = make_app()  # with the new kind's command

    trained = cli.invoke(app, ["train", str(config), "--out", str(run), *data, "--set", "train.epochs=2"])
    assert trained.exit_code == 0, trained.output
    resumed = cli.invoke(app, ["train", str(config), "--out", str(run), "--resume", *data])
    assert resumed.exit_code == 0, resumed.output
    log = RunDir(run).log()
    assert [r["epoch"] for r in log] == [1, 2, 3] and log[-1]["valid"]["loss"] < log[0]["valid"]["loss"]
    assert registry.kind_of_run(run).name == "length"

    scored = cli.invoke(app, ["eval", str(run), "--split", "test", "--json", *data])
    assert scored.exit_code == 0 and json.loads(scored.output)["texts"] == 6, scored.output
    said = cli.invoke(app, ["length", str(run), "ababc1"])
    assert said.exit_code == 0 and float(said.output) == toy.LengthPredictor(run).predict("ababc1")
    assert "length" in cli.invoke(app, ["--help"]).output
    with TestClient(create_app(run)) as client:
        assert client.get("/api/info").json()["scale"] == 0.5
        assert client.get("/api/length", params={"text": "ababc1"}).json() == {"length": float(said.output)}
    wrong = cli.invoke(app, ["translate", str(run), "--input", str(tmp_path / "test.tsv")])
    assert wrong.exit_code != 0 and "a length model, not a seq2seq model: use seqlab length" in wrong.output
