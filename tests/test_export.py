"""CTranslate2 export: a seqlab Transformer converted weight for weight decodes as seqlab does."""

from pathlib import Path

import pytest
from conftest import small_date_config
from typer.testing import CliRunner

import seqlab
from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.rundir import RunDir
from seqlab.train.trainer import Trainer

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 is an optional extra: pip install -e '.[export]'")

from seqlab.export.ctranslate2 import export_ctranslate2, load_ct2  # noqa: E402


def _train(directory: Path, **model: object) -> Path:
    """A date model that gets most valid dates right (75-90 %), so that decoding is mostly no coin toss."""
    config = small_date_config(epochs=8)
    config["model"] |= {"d_model": 64, "d_ff": 128, **model}
    config["data"]["corpus"]["size"] = 3000
    run = directory / "run"
    Trainer(parse_config(config), run, progress=False).fit()
    return run


@pytest.fixture(scope="module", params=["pre", "post-tied"])
def date_run(request, tmp_path_factory) -> Path:
    """A small date Transformer: pre-LN, or post-LN with the output projection tied to the target embedding."""
    model = {"norm": "pre"} if request.param == "pre" else {"norm": "post", "tie_output": True}
    return _train(tmp_path_factory.mktemp(request.param), **model)


def _sources(run: Path) -> list[str]:
    translator = seqlab.load(run)
    return [source for source, _ in load_splits(translator.config.data, resolve_data_dir(None))["valid"]]


@pytest.mark.parametrize("beam", [1, 5])
def test_ctranslate2_decodes_as_seqlab_does(date_run, tmp_path, beam):
    export_ctranslate2(date_run, tmp_path / "ct2")
    sources = _sources(date_run)
    ours = seqlab.load(date_run).generate(sources, beam=beam, nbest=beam)
    theirs = load_ct2(tmp_path / "ct2").generate(sources, beam=beam, nbest=beam)
    same = sum(a[0].text == b[0].text for a, b in zip(ours, theirs))
    assert same >= 0.99 * len(sources), f"{same} of {len(sources)} the same"
    if beam > 1:
        # the same n-best lists; near-ties below the best may swap places: CTranslate2 renormalises each step's
        # softmax over the tokens it may choose (not <pad>, <s>), seqlab does not (a small model gives them a little)
        assert sum({h.text for h in a} == {h.text for h in b} for a, b in zip(ours, theirs)) >= 0.95 * len(sources)


def test_ctranslate2_scores_an_output_as_seqlab_does(date_run, tmp_path):
    """The converted weights are the model's: CTranslate2's log-probability of seqlab's greedy output (every
    token, </s> included, nothing suppressed) is seqlab's."""
    export_ctranslate2(date_run, tmp_path / "ct2")
    ct2 = load_ct2(tmp_path / "ct2")
    sources = _sources(date_run)[:30]
    ours = [outputs[0] for outputs in seqlab.load(date_run).generate(sources)]
    src = [[ct2.source_names[i] for i in ids] for ids in ct2.encode_sources(sources)]
    trg = [h.tokens for h in ours]
    scored = ct2.engine.score_batch(src, trg)
    for h, s in zip(ours, scored):
        assert sum(s.log_probs) == pytest.approx(h.log_prob, abs=1e-3)


def test_an_int8_export_is_smaller_and_stays_close(date_run, tmp_path):
    export_ctranslate2(date_run, tmp_path / "fp32")
    export_ctranslate2(date_run, tmp_path / "int8", quantization="int8")
    sources = _sources(date_run)
    ours = seqlab.load(date_run).translate(sources)
    int8 = load_ct2(tmp_path / "int8").translate(sources)
    assert sum(a == b for a, b in zip(ours, int8)) >= 0.9 * len(sources)
    size = {name: (tmp_path / name / "model.bin").stat().st_size for name in ("fp32", "int8")}
    assert size["int8"] < 0.5 * size["fp32"]  # 1 byte a weight instead of 4, scales and vocabularies beside


def test_the_commands_export_and_translate(date_run, tmp_path):
    out = tmp_path / "ct2"
    result = CliRunner().invoke(app, ["export", str(date_run), "--to", "ctranslate2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    dates = ["september 27, 1994", "10/15/94"]
    result = CliRunner().invoke(app, ["translate", str(out), "--engine", "ct2", *dates])
    assert result.exit_code == 0, result.output
    assert result.output.split() == seqlab.load(date_run).translate(dates)
    again = CliRunner().invoke(app, ["export", str(date_run), "--out", str(out)])
    assert again.exit_code == 2 and "already holds a model" in again.output
    penalty = CliRunner().invoke(app, ["translate", str(out), "--engine", "ct2", "--beam", "3",
                                       "--length-penalty", "0.6", *dates])
    assert penalty.exit_code == 2 and "GNMT" in penalty.output


def test_only_a_transformer_exports(tmp_path):
    config = small_date_config(epochs=1)
    config["model"] = {"type": "rnn", "cell": "gru", "embedding_size": 8, "hidden_size": 16}
    Trainer(parse_config(config), tmp_path / "rnn", progress=False).fit()
    result = CliRunner().invoke(app, ["export", str(tmp_path / "rnn"), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "CTranslate2 runs Transformers" in result.output


def test_serve_decodes_with_the_export(date_run, tmp_path):
    from fastapi.testclient import TestClient

    from seqlab.server import create_app

    export_ctranslate2(date_run, tmp_path / "ct2")
    client = TestClient(create_app(tmp_path / "ct2", engine="ct2"))
    dates = ["september 27, 1994", "10/15/94"]
    answer = client.post("/api/translate", json={"inputs": dates, "beam": 3})
    assert answer.status_code == 200
    assert [o["hypotheses"][0]["text"] for o in answer.json()["outputs"]] == seqlab.load(date_run).translate(dates, beam=3)
    refused = client.post("/api/translate", json={"inputs": dates, "attention": True})
    assert refused.status_code == 422 and "attention" in refused.json()["error"]
    info = client.get("/api/info").json()
    assert info["metrics"] == RunDir(date_run).model_info() | {"engine": "ctranslate2", "quantization": "float32"}
