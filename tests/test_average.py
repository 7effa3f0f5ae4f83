"""Checkpoint averaging: kept epochs, their mean as a run directory of its own, scored on valid."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import give_search, small_date_config
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import seqlab
from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.rundir import INFO_KEY, MODEL, RunDir
from seqlab.train.average import average_weights
from seqlab.train.trainer import Trainer


def test_the_average_is_the_mean_of_float_tensors_and_keeps_integer_ones(tmp_path):
    paths = []
    for i, value in enumerate([1.0, 2.0, 6.0]):
        paths.append(tmp_path / f"{i}.safetensors")
        save_file({"w": torch.full((2,), value), "h": torch.full((1,), value, dtype=torch.bfloat16),
                   "n": torch.tensor([i])}, str(paths[-1]), metadata=_info(i))
    mean, infos = average_weights(RunDir(tmp_path), paths)
    assert mean["w"].tolist() == [3.0, 3.0] and mean["h"].dtype == torch.bfloat16 and float(mean["h"]) == 3.0
    assert mean["n"].tolist() == [2]  # not trained: the last file's
    assert [info["epoch"] for info in infos] == [0, 1, 2]
    save_file({"other": torch.zeros(2)}, str(tmp_path / "x.safetensors"), metadata=_info(3))
    with pytest.raises(ValueError, match="not the same model"):
        average_weights(RunDir(tmp_path), [paths[0], tmp_path / "x.safetensors"])


def _info(epoch: int) -> dict[str, str]:
    return {INFO_KEY: json.dumps({"epoch": epoch, "step": 10 * epoch})}


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory) -> Path:
    """A tiny date model trained 4 epochs keeping the last 3 epochs' weights."""
    tmp = tmp_path_factory.mktemp("average")
    config = small_date_config(epochs=4, keep_checkpoints=3)
    Trainer(parse_config(config), tmp / "run", progress=False).fit()
    return tmp / "run"


def test_training_keeps_the_last_epochs_weights(kept_run):
    kept = RunDir(kept_run).kept_epochs()
    assert [p.name for p in kept] == ["epoch-2.safetensors", "epoch-3.safetensors", "epoch-4.safetensors"]
    final = load_file(str(kept_run / "checkpoint.safetensors"))
    last = load_file(str(kept[-1]))
    assert all(torch.equal(last[k], final[f"model.{k}"]) for k in last)  # epoch 4's end is the last checkpoint


def test_seqlab_average_writes_a_scored_run_directory(kept_run, tmp_path):
    out = tmp_path / "avg"
    result = CliRunner().invoke(app, ["average", str(kept_run), "--last", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "epochs 3, 4 averaged" in result.output
    weights = load_file(str(out / MODEL))
    three, four = (load_file(str(kept_run / "epochs" / f"epoch-{e}.safetensors")) for e in (3, 4))
    for name, value in weights.items():
        torch.testing.assert_close(value, (three[name].double() + four[name].double()).div(2).float(), rtol=0, atol=0)
    info = RunDir(out).model_info()
    assert info["averaged"] == [3, 4] and info["epoch"] == 4
    scored = CliRunner().invoke(app, ["eval", str(out), "--split", "valid", "--json"])
    assert json.loads(scored.output.strip().splitlines()[-1])["exact_match"] == info["valid"]["exact_match"]
    assert len(seqlab.load(out).translate(["september 27, 1994"])) == 1  # a run like any other


def test_the_average_is_scored_greedily_as_the_epochs_were_whatever_the_runs_search(kept_run, tmp_path,
                                                                                       monkeypatch):
    """A run whose config says ``eval.beam: 3`` (its search for ``seqlab eval``) has its averaged weights scored on
    valid greedily, as training scored each epoch, so that the mean and the epochs compare."""
    from seqlab import evaluate

    run = Path(shutil.copytree(kept_run, tmp_path / "run"))
    give_search(run, 3, 0.6)
    searches = []
    real = evaluate.evaluate

    def scored_with(translator: Any, *args: Any, **kwargs: Any) -> Any:
        searches.append(translator.decoding(kwargs["options"]))  # the search evaluate's decoding runs
        return real(translator, *args, **kwargs)

    monkeypatch.setattr(evaluate, "evaluate", scored_with)
    result = CliRunner().invoke(app, ["average", str(run), "--last", "2", "--out", str(tmp_path / "avg")])
    assert result.exit_code == 0, result.output
    scored = CliRunner().invoke(app, ["eval", str(tmp_path / "avg"), "--split", "valid", "--json"])
    assert scored.exit_code == 0, scored.output
    assert [(o.beam, o.length_penalty) for o in searches] == [(1, 0.0), (3, 0.6)]  # average, then eval


def test_average_names_what_is_missing(kept_run, tmp_path):
    result = CliRunner().invoke(app, ["average", str(kept_run), "--last", "5", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "3 kept epochs, fewer than --last 5" in result.output
    assert not (tmp_path / "a").exists()
    result = CliRunner().invoke(app, ["average", str(kept_run), "--last", "1", "--out", str(kept_run)])
    assert result.exit_code == 2 and "already holds a run" in result.output


def test_a_damaged_kept_epoch_is_named_in_one_line(kept_run, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(kept_run, damaged)
    epoch = damaged / "epochs" / "epoch-3.safetensors"
    epoch.write_bytes(epoch.read_bytes()[: epoch.stat().st_size // 2])
    result = CliRunner().invoke(app, ["average", str(damaged), "--last", "2", "--out", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert len(result.output.splitlines()) == 1
    assert result.output.startswith(f"error: {epoch}: not a seqlab model file (damaged or truncated: ")
