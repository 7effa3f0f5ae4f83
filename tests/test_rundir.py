"""The run directory's files: safetensors round trips of weights and training state, tokenizers, the log."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import small_date_config
from safetensors.torch import save as save_safetensors
from typer.testing import CliRunner

import seqlab
import seqlab.predictors.classifier
import seqlab.vectors
from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.model import build_model
from seqlab.model.transformer import Transformer, TransformerConfig
from seqlab.rundir import CHECKPOINT, LOG, MODEL, RunDir, RunFileError
from seqlab.sections import TokenizerConfig, TrainConfig
from seqlab.tokenizer import Tokenizer
from seqlab.train.optimizer import build_optimizer
from seqlab.train.schedule import transformer_schedule
from seqlab.train.trainer import Trainer
from seqlab.vectors.config import VectorsConfig
from seqlab.vectors.run import _restore, train_vectors

CFG = TransformerConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32, max_length=16, tie_output=True)


def test_model_weights_round_trip_with_tied_embeddings(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    RunDir(tmp_path).save_model(model, {"epoch": 1, "step": 5})
    fresh = build_model(CFG, 11, 13)
    info = RunDir(tmp_path).load_model(fresh)
    assert info == {"epoch": 1, "step": 5}
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert isinstance(fresh, Transformer) and fresh.generator.weight is fresh.decoder.embed.embedding.weight


def test_weights_and_their_description_are_one_file(tmp_path):
    run = RunDir(tmp_path)
    run.save_model(build_model(CFG, 11, 13), {"epoch": 3, "step": 30, "valid": {"loss": 0.5}})
    assert sorted(p.name for p in tmp_path.iterdir()) == [MODEL]
    assert run.model_info() == {"epoch": 3, "step": 30, "valid": {"loss": 0.5}}


def test_a_run_written_before_the_header_held_the_description_still_reads(tmp_path):
    model = build_model(CFG, 11, 13)
    weights = {k: v.contiguous().clone() for k, v in model.state_dict().items()}
    (tmp_path / MODEL).write_bytes(save_safetensors(weights, metadata={"step": "5"}))
    (tmp_path / "model.json").write_text(json.dumps({"epoch": 1, "step": 5}))
    assert RunDir(tmp_path).load_model(build_model(CFG, 11, 13)) == {"epoch": 1, "step": 5}


def test_tokenizers_round_trip(tmp_path):
    source = Tokenizer.train(["ab ba", "abc"], TokenizerConfig(level="char"))
    target = Tokenizer.train(["xy", "yx z"], TokenizerConfig(level="char"))
    RunDir(tmp_path).save_tokenizers(source, target)
    read_source, read_target = RunDir(tmp_path).tokenizers()
    assert read_source.encode(["cab"]) == source.encode(["cab"])
    assert read_target.encode(["zyx"]) == target.encode(["zyx"])


def test_log_appends_whole_lines_and_skips_a_torn_last_line(tmp_path):
    run = RunDir(tmp_path)
    run.append_log({"epoch": 1, "step": 10})
    run.append_log({"epoch": 2, "step": 20})
    with open(tmp_path / LOG, "a", encoding="utf-8") as f:
        f.write('{"epoch": 3, "st')  # a write cut short by a kill
    assert run.log() == [{"epoch": 1, "step": 10}, {"epoch": 2, "step": 20}]
    run.truncate_log(2)  # resumed in epoch 2: its record is of work done again
    assert (tmp_path / LOG).read_text(encoding="utf-8") == '{"epoch": 1, "step": 10}\n'


def test_a_resumed_run_keeps_the_records_of_the_epochs_before_its_position(tmp_path):
    """A record is written at its epoch's end, whose checkpoint (written after it) is in the next epoch: resumed
    in epoch 2, epoch 2's record goes even when it has the checkpoint's step (its last step was checkpointed)."""
    run = RunDir(tmp_path)
    for epoch in (1, 2):
        run.append_log({"epoch": epoch, "step": 20 * epoch})
    run.truncate_log(3)  # resumed from epoch 2's end: nothing to drop
    assert [r["epoch"] for r in run.log()] == [1, 2]
    run.truncate_log(2)  # resumed from step 40, epoch 2's last, checkpointed before its end
    assert run.log() == [{"epoch": 1, "step": 20}]
    run.truncate_log(1)  # started again from its beginning
    assert run.log() == [] and (tmp_path / LOG).read_bytes() == b""
    RunDir(tmp_path / "none").truncate_log(1)  # no log: nothing to do


def test_check_start_refuses_to_overwrite_and_says_what_a_resume_continues(tmp_path):
    from seqlab.config import ConfigError

    config = parse_config(small_date_config())
    run = RunDir(tmp_path / "run")
    assert run.check_start(config, False, ("model",)) is False  # a new run
    with pytest.raises(ConfigError, match=r"run: nothing to resume \(no config.yaml"):
        run.check_start(config, True, ("model",))
    run.path.mkdir()
    run.save_config(config)  # killed before its first checkpoint
    with pytest.raises(ConfigError, match="already holds a run: pass --resume to continue it, or choose another"):
        run.check_start(config, False, ("model",))
    assert run.check_start(config, True, ("model",)) is False  # resumed: from its beginning
    other = small_date_config()
    other["model"]["d_model"] = 64
    with pytest.raises(ConfigError, match=r"with a different model.d_model \(only"):
        run.check_start(parse_config(other), True, ("model",))
    (run.path / CHECKPOINT).write_bytes(b"a checkpoint")
    assert run.check_start(config, True, ("model",)) is True


def test_a_resumed_run_deletes_the_temporary_files_of_killed_saves(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / "epochs").mkdir()
    for path in (tmp_path / ".checkpoint.safetensors.abcd_123.tmp", tmp_path / "epochs" / ".epoch-3.safetensors."
                 "q1w2e3r4.tmp", tmp_path / ".log.jsonl.swp"):
        path.write_bytes(b"x")
    assert run.remove_temporaries() == 2
    assert [p.name for p in tmp_path.rglob(".*")] == [".log.jsonl.swp"]
    assert RunDir(tmp_path / "missing").remove_temporaries() == 0


def test_a_damaged_log_line_is_named(tmp_path):
    (tmp_path / LOG).write_text('{"epoch": 1, "step": 5}\nnot json\n{"epoch": 3, "step": 15}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"log.jsonl:2: not a JSON record"):
        RunDir(tmp_path).log()


@pytest.mark.parametrize("record", ['{"step": 10}', '{"epoch": 2}', '{"epoch": "2", "step": 10}',
                                    '{"epoch": true, "step": null}'])
def test_a_log_record_without_its_epoch_and_step_is_named(tmp_path, record):
    (tmp_path / LOG).write_text(f'{{"epoch": 1, "step": 5}}\n{record}\n', encoding="utf-8")
    run = RunDir(tmp_path)
    for read in (run.log, lambda: run.truncate_log(2)):
        with pytest.raises(RunFileError, match=rf"^{tmp_path / LOG}:2: not an epoch's record \(no integer "
                                               r"(epoch|step|epoch and step)\)$"):
            read()


def test_training_state_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(CFG, 11, 13)
    optimizer = build_optimizer(model, TrainConfig())
    scheduler = transformer_schedule(optimizer, 16, 10, 1.0)
    for _ in range(3):
        model(torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))).sum().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    RunDir(tmp_path).save_checkpoint(model, optimizer, scheduler, {"epoch": 2, "batch": 7})
    expected_random = torch.rand(3)

    torch.manual_seed(123)
    model2 = build_model(CFG, 11, 13)
    optimizer2 = build_optimizer(model2, TrainConfig())
    scheduler2 = transformer_schedule(optimizer2, 16, 10, 1.0)
    state, carried = RunDir(tmp_path).load_checkpoint(model2, optimizer2, scheduler2)
    assert carried == {}
    assert state == {"epoch": 2, "batch": 7}
    assert torch.equal(torch.rand(3), expected_random)  # the RNG continues where it was saved
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    for p1, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(p1, p2)
        assert torch.equal(optimizer.state[p1]["exp_avg_sq"], optimizer2.state[p2]["exp_avg_sq"])


def test_missing_files_are_explained(tmp_path):
    run = RunDir(tmp_path)
    with pytest.raises(FileNotFoundError, match="no trained model"):
        run.load_model(build_model(CFG, 11, 13))
    with pytest.raises(FileNotFoundError, match="not a seqlab run directory"):
        run.config()
    with pytest.raises(FileNotFoundError, match="no log.jsonl"):
        run.log()
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        model = build_model(CFG, 11, 13)
        optimizer = build_optimizer(model, TrainConfig())
        run.load_checkpoint(model, optimizer, transformer_schedule(optimizer, 16, 10, 1.0))


# --- damaged files: every reader names the file in one line -----------------------------------------------------

DAMAGES = {
    "half": lambda data: data[: len(data) // 2],  # a copy cut short
    "random": lambda data: np.random.default_rng(0).bytes(300),
    "json": lambda data: b"[1, 2, 3]",  # valid JSON of the wrong shape (a safetensors header too large to be one)
}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A small date run of two epochs, the last kept (epochs/epoch-2.safetensors)."""
    run = tmp_path_factory.mktemp("damaged") / "run"
    Trainer(parse_config(small_date_config(epochs=2, keep_checkpoints=1)), run, progress=False).fit()
    return run


@pytest.fixture(scope="module")
def vectors_run(tmp_path_factory) -> Path:
    """A word2vec run of one epoch over a few sentences."""
    tmp = tmp_path_factory.mktemp("vectors")
    (tmp / "corpus.txt").write_text("a b c d\nb c d a\nc d a b\n" * 20, encoding="utf-8")
    config = parse_config({"data": {"corpora": [{"format": "lines", "path": "corpus.txt"}]},
                           "train": {"method": "cbow", "dim": 4, "window": 1, "min_count": 1, "epochs": 1}},
                          schema=VectorsConfig)
    train_vectors(config, tmp / "run", tmp, progress=False)
    return tmp / "run"


def _exported(run: Path, out: Path) -> Path:
    """What an export directory holds besides another engine's weights: the config, tokenizers, model_info.json."""
    out.mkdir()
    for name in ("config.yaml", "source_tokenizer.json", "target_tokenizer.json"):
        shutil.copy(run / name, out / name)
    RunDir(out).save_model_info(RunDir(run).model_info() | {"engine": "ctranslate2"})
    return out


def _legacy(run: Path, out: Path) -> Path:
    """A run written before model.safetensors held its description: that is in model.json."""
    shutil.copytree(run, out)
    tensors, info = RunDir(out).kept_epoch(out / "epochs" / "epoch-2.safetensors")
    (out / MODEL).write_bytes(save_safetensors(tensors))
    (out / "model.json").write_text(json.dumps(info), encoding="utf-8")
    return out


def _resume(run: Path) -> None:
    Trainer(RunDir(run).config(), run, resume=True, progress=False)


READERS = {  # a file of a run directory: how the run is made, and what reads the file
    "config.yaml": ("trained", lambda run: RunDir(run).config()),
    "source_tokenizer.json": ("trained", lambda run: RunDir(run).tokenizers()),
    "target_tokenizer.json": ("trained", lambda run: seqlab.load(run)),
    MODEL: ("trained", lambda run: seqlab.load(run)),
    "model.safetensors (its description)": ("trained", lambda run: RunDir(run).model_info()),
    "checkpoint.safetensors": ("trained", _resume),
    "epochs/epoch-2.safetensors": ("trained", lambda run: RunDir(run).kept_epoch(run / "epochs" / "epoch-2.safetensors")),
    "model_info.json": ("exported", lambda run: RunDir(run).model_info()),
    "model.json": ("legacy", lambda run: seqlab.load(run)),
    "labels.json": ("classifier", lambda run: seqlab.predictors.classifier.load(run)),
    "vocabulary.json": ("vectors", lambda run: seqlab.vectors.load(run)),
    "vectors.safetensors": ("vectors", lambda run: seqlab.vectors.load(run)),
    "checkpoint.safetensors (word2vec)": ("vectors", lambda run: _restore(
        RunDir(run), 4, RunDir(run).read_config(VectorsConfig).train)),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("name", READERS)
def test_a_damaged_file_is_named_in_one_line(name, damage, trained_run, vectors_run, tiny_classifier, tmp_path):
    kind, read = READERS[name]
    run = tmp_path / "run"
    if kind == "exported":
        _exported(trained_run, run)
    elif kind == "legacy":
        _legacy(trained_run, run)
    else:
        shutil.copytree({"trained": trained_run, "vectors": vectors_run, "classifier": tiny_classifier}[kind], run)
    path = run / name.split(" ")[0]
    path.write_bytes(DAMAGES[damage](path.read_bytes()))
    with pytest.raises(ValueError) as caught:
        read(run)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message, message


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_log_line_is_named_with_its_number(damage, tmp_path):
    run = RunDir(tmp_path)
    run.append_log({"epoch": 1, "step": 10})
    with open(tmp_path / LOG, "ab") as f:
        f.write(DAMAGES[damage](b'{"epoch": 2, "step": 20}').replace(b"\n", b" ") + b"\n")
    run.append_log({"epoch": 3, "step": 30})
    with pytest.raises(RunFileError, match=rf"^{tmp_path / LOG}:2: not a JSON record \([^\n]*\)$"):
        run.log()


def test_weights_that_do_not_fit_the_model_are_named(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    other = build_model(CFG, 11, 13)  # another model: other names and shapes
    RunDir(run).save_model(other, {"epoch": 1, "step": 5})
    with pytest.raises(RunFileError, match=rf"^{run / MODEL}: the weights do not fit this run's model \(no .* more\)$"):
        seqlab.load(run)
    model = seqlab.load(trained_run).model
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights["generator.weight"] = weights["generator.weight"][:-1]  # one row short
    RunDir(run).save_model(weights, {"epoch": 1, "step": 5})
    with pytest.raises(RunFileError, match=r"generator.weight is \[\d+, 32\], the model's \[\d+, 32\]\)$"):
        seqlab.load(run)
    del weights["generator.weight"]
    RunDir(run).save_model(weights, {"epoch": 1, "step": 5})
    with pytest.raises(RunFileError, match=r"\(no generator.weight\)$"):
        seqlab.load(run)


def test_a_checkpoint_of_another_model_is_named(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    model = build_model(CFG, 11, 13)
    optimizer = build_optimizer(model, TrainConfig())
    RunDir(run).save_checkpoint(model, optimizer, transformer_schedule(optimizer, 16, 10, 1.0), {"epoch": 2})
    with pytest.raises(RunFileError, match=rf"^{run / CHECKPOINT}: the weights do not fit this run's model"):
        _resume(run)


def test_a_model_file_without_its_description_is_named(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    tensors, _ = RunDir(run).kept_epoch(run / "epochs" / "epoch-2.safetensors")
    (run / MODEL).write_bytes(save_safetensors(tensors))
    with pytest.raises(RunFileError, match=rf"^{run / MODEL}: not a seqlab model file \(damaged or truncated: no "
                                           r"seqlab.info in its header\)$"):
        seqlab.load(run)
    RunDir(run).save_model(tensors, {"valid": {}})
    with pytest.raises(RunFileError, match=rf"^{run / MODEL}: not a seqlab model description \(no epoch and step\)$"):
        RunDir(run).model_info()


@pytest.mark.parametrize(("command", "name"), [("translate", MODEL), ("translate", "source_tokenizer.json"),
                                               ("eval", MODEL), ("eval", "config.yaml"), ("train", CHECKPOINT)])
def test_the_cli_names_a_damaged_file_in_one_error_line(command, name, trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    config = tmp_path / "config.yaml"
    shutil.copy(run / "config.yaml", config)
    path = run / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    args = {"translate": ["translate", str(run), "10/15/94"], "eval": ["eval", str(run), "--split", "valid"],
            "train": ["train", str(config), "--out", str(run), "--resume"]}[command]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]  # progress lines aside
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: not a seqlab "), result.output
    assert "Traceback" not in result.output


def test_vectors_train_names_a_damaged_checkpoint_in_one_error_line(vectors_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(vectors_run, run)
    config = tmp_path / "vectors.yaml"
    shutil.copy(run / "config.yaml", config)
    (run / CHECKPOINT).write_bytes(b"[1, 2, 3]")
    result = CliRunner().invoke(app, ["vectors", "train", str(config), "--out", str(run), "--resume",
                                      "--data-dir", str(vectors_run.parent)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {run / CHECKPOINT}: not a seqlab word2vec state (damaged or truncated: Error while "
                      "deserializing: header too large)"], result.output


def _vectors_resume(run: Path, config: Path, data_dir: Path) -> list[str]:
    """The error lines of ``seqlab vectors train --resume`` into ``run``."""
    result = CliRunner().invoke(app, ["vectors", "train", str(config), "--out", str(run), "--resume",
                                      "--data-dir", str(data_dir)])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    return [line for line in result.output.splitlines() if line.startswith("error: ")]


def test_a_word2vec_state_of_another_shape_or_kind_is_named_in_one_error_line(vectors_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(vectors_run, run)
    config = tmp_path / "vectors.yaml"
    shutil.copy(run / "config.yaml", config)
    tensors, info = RunDir(run).word2vec_state({"w_in": [4, 4], "w_out": [4, 4], "generator": [5056]})
    wider = {name: np.zeros((4, 8), dtype=np.float32) if name != "generator" else t for name, t in tensors.items()}
    RunDir(run).save_word2vec_state(wider, info)  # another run's state: 8 dimensions, not 4
    assert _vectors_resume(run, config, vectors_run.parent) == [
        f"error: {run / CHECKPOINT}: the tensors do not fit this run's word2vec (w_in is [4, 8], the model's [4, 4]; "
        "w_out is [4, 8], the model's [4, 4])"]
    RunDir(run).save_word2vec_state(tensors, info | {"rng": {"bit_generator": "MT19937"}})  # numpy's other kind
    errors = _vectors_resume(run, config, vectors_run.parent)
    assert len(errors) == 1 and errors[0].startswith(f"error: {run / CHECKPOINT}: not a seqlab word2vec state ("), errors
    RunDir(run).save_word2vec_state(tensors, {"epochs_done": 1})
    assert _vectors_resume(run, config, vectors_run.parent) == [
        f"error: {run / CHECKPOINT}: not a seqlab word2vec state (damaged or truncated: no epochs_done and rng in its "
        "state)"]
