"""Prepared corpora (``seqlab data prepare``, ``data.prepared``): Arrow shards that a run reads memory-mapped, against
the in-memory path on the same data."""

import json
import re
from pathlib import Path

import pytest
from conftest import resumes_exactly, small_date_config
from safetensors.torch import load_file
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.config import ConfigError, parse_config
from seqlab.data import DataError
from seqlab.data import prepared as prepared_module
from seqlab.data.prepared import Ragged, lengths_of, open_prepared, prepared_sections
from seqlab.evaluate import EncodedSplit
from seqlab.predictors.translator import load
from seqlab.train.family.seq2seq import Transduction
from seqlab.train.trainer import Trainer


def _prepare(tmp_path: Path, **config: object) -> tuple[dict, Path]:
    raw = small_date_config() | config
    out = tmp_path / "prepared"
    Transduction.prepare(parse_config(raw), None, out, progress=False)
    return raw, out


def test_a_run_from_a_prepared_directory_trains_exactly_as_one_from_the_corpus(tmp_path):
    """Same tokenizers, same ids, same batches: the same weights to the bit, the same log."""
    raw, out = _prepare(tmp_path)
    Trainer(parse_config(raw), tmp_path / "memory", progress=False).fit()
    with_prepared = raw | {"data": raw["data"] | {"prepared": str(out)}}
    Trainer(parse_config(with_prepared), tmp_path / "streamed", progress=False).fit()
    memory, streamed = (load_file(str(tmp_path / run / "model.safetensors")) for run in ("memory", "streamed"))
    assert memory.keys() == streamed.keys() and all(memory[k].equal(streamed[k]) for k in memory)
    logs = [json.loads((tmp_path / run / "log.jsonl").read_text().splitlines()[-1]) for run in ("memory", "streamed")]
    assert logs[0]["valid"] == logs[1]["valid"] and logs[0]["train_loss"] == logs[1]["train_loss"]
    for name in ("source", "target"):  # the run keeps the prepared tokenizers, as it keeps learnt ones
        assert (tmp_path / "streamed" / f"{name}_tokenizer.json").read_text() == (out / f"{name}.json").read_text()


def test_a_run_from_a_prepared_directory_resumes_exactly_after_a_kill(tmp_path, killed_at):
    raw, out = _prepare(tmp_path, train=small_date_config()["train"] | {"epochs": 2, "save_every": 5})
    config = parse_config(raw | {"data": raw["data"] | {"prepared": str(out)}})
    resumes_exactly(config, tmp_path, killed_at, 40)  # inside epoch 2 (37 steps an epoch), after its first checkpoint


def test_the_prepared_splits_hold_what_the_in_memory_path_encodes(tmp_path):
    raw, out = _prepare(tmp_path)
    config = parse_config(raw)
    Trainer(config, tmp_path / "run", progress=False).fit()
    translator = load(tmp_path / "run")
    from seqlab.data import load_splits, resolve_data_dir

    splits = load_splits(config.data, resolve_data_dir(None))
    prepared = open_prepared(out, prepared_sections(config))
    for name in ("train", "valid", "test"):
        built, read = EncodedSplit.build(translator, splits[name], name), EncodedSplit.prepared(translator, prepared, name)
        assert list(read.src) == built.src and list(read.trg) == built.trg
        assert list(read.sources) == built.sources and list(read.references) == built.references
        assert lengths_of(read.src).tolist() == [len(s) for s in built.src]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["rows"] == 800 and manifest["splits"]["valid"]["rows"] == 100
    assert manifest["splits"]["train"]["tokens"]["src"] == sum(len(s) for s in EncodedSplit.build(
        translator, splits["train"], "train").src)


def test_rows_are_cut_into_shards_and_read_back_across_them(tmp_path, monkeypatch):
    monkeypatch.setattr(prepared_module, "SHARD_ROWS", 300)
    raw, out = _prepare(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["rows"] for s in manifest["splits"]["train"]["shards"]] == [300, 300, 200]
    assert sorted(p.name for p in out.glob("train-*.arrow")) == ["train-00000.arrow", "train-00001.arrow",
                                                                "train-00002.arrow"]
    ids = open_prepared(out, prepared_sections(parse_config(raw))).ids("train", "src")
    rows = list(ids)
    assert isinstance(ids, Ragged) and len(ids) == 800 == len(rows)
    assert ids[299] == rows[299] and ids[300] == rows[300] and ids[-1] == rows[-1] and ids[650:652] == rows[650:652]
    assert ids.lengths().tolist() == [len(r) for r in rows]
    with pytest.raises(IndexError):
        ids[800]


def test_a_prepared_directory_is_refused_for_another_config_and_when_damaged(tmp_path):
    raw, out = _prepare(tmp_path)
    other = raw | {"tokens": {"source": {"level": "word"}}}
    with pytest.raises(DataError, match=re.escape(f"{out}: prepared for another config (tokens differ)")):
        open_prepared(out, prepared_sections(parse_config(other)))
    config = parse_config(raw)
    (out / "target.json").write_text((out / "target.json").read_text().replace("<eos>", "<end>"))
    with pytest.raises(DataError, match="target.json: not the tokenizer the manifest names"):
        open_prepared(out, prepared_sections(config)).tokenizer_json("target")
    shard = out / "valid-00000.arrow"
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(DataError, match="valid-00000.arrow: unreadable shard"):
        open_prepared(out, prepared_sections(config)).ids("valid", "src")
    (out / "manifest.json").unlink()
    with pytest.raises(DataError, match="manifest.json: missing"):
        open_prepared(out, prepared_sections(config))


def test_preparing_into_an_existing_directory_or_failing_half_way_leaves_nothing_behind(tmp_path, monkeypatch):
    raw, out = _prepare(tmp_path)
    with pytest.raises(DataError, match="already exists"):
        Transduction.prepare(parse_config(raw), None, out, progress=False)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(prepared_module, "write_manifest", broken)
    monkeypatch.setattr("seqlab.train.family.seq2seq.write_manifest", broken)
    with pytest.raises(OSError, match="disk full"):
        Transduction.prepare(parse_config(raw), None, tmp_path / "second", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]  # no partial directory, no temporary one


def test_the_cli_prepares_a_seq2seq_config_and_refuses_other_kinds(tmp_path):
    import yaml

    config = tmp_path / "date.yaml"
    config.write_text(yaml.safe_dump(small_date_config()))
    result = CliRunner().invoke(app, ["data", "prepare", str(config), "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert f"train 800, valid 100, test 100 pairs; train with --set data.prepared={tmp_path / 'p'}" in result.output
    lm = tmp_path / "lm.yaml"
    lm.write_text(yaml.safe_dump({"data": small_date_config()["data"], "model": {"type": "lm"},
                                  "train": {"schedule": "cosine"}}))
    result = CliRunner().invoke(app, ["data", "prepare", str(lm), "--out", str(tmp_path / "q")])
    assert result.exit_code == 2 and "a language model reads its corpus itself" in result.output
    assert not (tmp_path / "q").exists()
    with pytest.raises(ConfigError, match="data.prepared: a language model reads its corpus itself"):
        parse_config({"data": small_date_config()["data"] | {"prepared": "p"}, "model": {"type": "lm"},
                      "train": {"schedule": "cosine"}})
