"""Every kind that trains on texts on the prepared path (``seqlab data prepare``, ``data.prepared``): classifiers,
language models (LSTM and Transformer) and BERT's pretraining, each against its in-memory path on the same data.
(Seq2seq's prepared path: test_prepared.py.)"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import counting_corpus, labelled_csv, resumes_exactly, squad_config
from safetensors.torch import load_file
from typer.testing import CliRunner

from seqlab import registry
from seqlab.cli import app
from seqlab.config import ConfigError, parse_config
from seqlab.data import DataError, load_sentence_splits, resolve_data_dir
from seqlab.data import prepared as prepared_module
from seqlab.data.prepared import open_prepared, prepared_sections
from seqlab.predictors.language_model import load as load_lm
from seqlab.rundir import RunDir
from seqlab.specials import EOS
from seqlab.train.family import StreamLM
from seqlab.train.family.classification import SHAPE_KEYS
from seqlab.train.trainer import Trainer

CHUNK_ROWS = 37  # small record batches: every run below reads across many of them


def _classifier(tmp_path: Path) -> dict[str, Any]:
    labelled_csv(tmp_path / "train.csv", 300, 0)
    labelled_csv(tmp_path / "valid.csv", 60, 1)
    corpus = {"format": "csv", "source_column": "Q", "target_column": "label"}
    return {"data": {"train": corpus | {"path": str(tmp_path / "train.csv")},
                     "valid": corpus | {"path": str(tmp_path / "valid.csv")}, "max_source_length": 16},
            "tokens": {"source": {"level": "word"}},
            "model": {"type": "encoder", "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.1,
                      "max_length": 16, "pooling": "cls", "ngrams": {"char": [1, 3], "word": None, "C": 1.0}},
            "train": {"epochs": 2, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32",
                      "batch_window": 2}}


def _lm(tmp_path: Path, model: str = "lm") -> dict[str, Any]:
    shape = ({"embedding_size": 16, "hidden_size": 16, "num_layers": 2} if model == "lm" else
             {"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32, "max_length": 16})
    return {"seed": 3, "data": counting_corpus(tmp_path, 300, 50, 50),
            "tokens": {"source": {"level": "word", "vocab_size": 50}},
            "model": {"type": model, "dropout": 0.1, **shape},
            "train": {"epochs": 2, "streams": 4, "time_size": 8, "schedule": "constant", "lr": 0.01,
                      "precision": "fp32"}}


def _bert(tmp_path: Path) -> dict[str, Any]:
    data = counting_corpus(tmp_path, 300, 50, 50)
    return {"data": data | {"max_source_length": 12}, "tokens": {"source": {"level": "word"}},
            "model": {"type": "bert", "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.1,
                      "max_length": 16, "mask_probability": 0.3},
            "train": {"epochs": 2, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32",
                      "batch_window": 2}}


CONFIGS = {"classifier": _classifier, "lm": _lm, "transformer_lm": lambda tmp: _lm(tmp, "transformer_lm"),
           "bert": _bert}


def _prepare(raw: dict[str, Any], out: Path) -> dict[str, Any]:
    config = parse_config(raw)
    return dict(config.kind.family().prepare(config, None, out, progress=False, chunk_rows=CHUNK_ROWS))


def _with_prepared(raw: dict[str, Any], out: Path) -> dict[str, Any]:
    return raw | {"data": raw["data"] | {"prepared": str(out)}}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_a_kind_trains_from_a_prepared_directory_exactly_as_from_its_corpus(tmp_path, kind):
    """Same tokenizer, same inputs, same batches (read across record batches of 37 rows): the same weights to the
    bit and the same log; the run keeps the prepared tokenizer (and a classifier the prepared classes)."""
    raw = CONFIGS[kind](tmp_path)
    manifest = _prepare(raw, tmp_path / "prepared")
    assert len(manifest["splits"]["train"]["shards"][0]["batches"]) > 5
    Trainer(parse_config(raw), tmp_path / "memory", progress=False).fit()
    Trainer(parse_config(_with_prepared(raw, tmp_path / "prepared")), tmp_path / "streamed", progress=False).fit()
    memory, streamed = (load_file(str(tmp_path / run / "model.safetensors")) for run in ("memory", "streamed"))
    assert memory.keys() == streamed.keys() and all(memory[k].equal(streamed[k]) for k in memory)
    logs = [RunDir(tmp_path / run).log() for run in ("memory", "streamed")]
    assert [r["train_loss"] for r in logs[0]] == [r["train_loss"] for r in logs[1]]
    assert [r["valid"] for r in logs[0]] == [r["valid"] for r in logs[1]]
    assert ((tmp_path / "streamed" / "source_tokenizer.json").read_text()
            == (tmp_path / "prepared" / "source.json").read_text())
    if kind == "classifier":
        assert manifest["labels"] == ["0", "1", "2"] and manifest["unit"] == "texts"
        assert RunDir(tmp_path / "streamed").labels() == manifest["labels"]
        heads = [RunDir(tmp_path / run).ngrams() for run in ("memory", "streamed")]  # fitted on the same texts
        assert heads[0][1]["vocabularies"] == heads[1][1]["vocabularies"]
        assert all((heads[0][0][k] == heads[1][0][k]).all() for k in heads[0][0])


def test_a_prepared_stream_reads_what_the_language_model_streams(tmp_path):
    """Any slice of the stream read from the shards (across record batches, the first <eos> included) equals that
    slice of ``LanguageModel.stream`` over the same sentences; the manifest counts each sentence's <eos>."""
    raw = _lm(tmp_path)
    manifest = _prepare(raw, tmp_path / "prepared")
    Trainer(parse_config(raw | {"train": raw["train"] | {"epochs": 1}}), tmp_path / "run", progress=False).fit()
    lm = load_lm(tmp_path / "run")
    config = parse_config(raw)
    sentences = load_sentence_splits(config.data, resolve_data_dir(None))
    prepared = open_prepared(tmp_path / "prepared", prepared_sections(config))
    for name in ("train", "valid", "test"):
        whole = lm.stream(sentences[name])
        stream = prepared.stream(name, "ids", EOS, cache=3)
        assert len(stream) == len(whole) == 1 + manifest["splits"][name]["tokens"]["ids"]
        assert np.array_equal(stream[:], whole)
        rng = np.random.default_rng(0)
        for start, stop in [(0, 1), (0, 0), (1, 40), *rng.integers(0, len(whole), (30, 2))]:
            assert np.array_equal(stream[start:stop], whole[start:stop]), (start, stop)
        assert list(prepared.texts(name, "text")) == list(sentences[name])


def test_a_language_model_from_a_prepared_directory_resumes_exactly(tmp_path, killed_at):
    raw = _lm(tmp_path)
    _prepare(raw, tmp_path / "prepared")
    config = parse_config(_with_prepared(raw | {"train": raw["train"] | {"save_every": 5}}, tmp_path / "prepared"))
    resumes_exactly(config, tmp_path, killed_at, 27)  # in epoch 2 (18 steps an epoch), its state carried


def test_each_process_reads_the_part_of_the_stream_its_rows_cover(tmp_path, monkeypatch):
    """With the rows shared by processes (parts 4, two each), each reads the record batches under its own rows:
    the first process's end where the second's begin (one at most in common)."""
    raw = _lm(tmp_path)
    _prepare(raw, tmp_path / "prepared")
    config = parse_config(_with_prepared(raw, tmp_path / "prepared"))
    read: dict[int, set[int]] = {}
    real = prepared_module.Rows.read
    (tmp_path / "run").mkdir()
    for rank, share in enumerate((range(0, 2), range(2, 4))):
        family = StreamLM.build(config, RunDir(tmp_path / "run"), None, rank == 1, parts=4, share=share)
        read[rank] = set()

        def spy(self: prepared_module.Rows, chunk: int, seen: set[int] = read[rank]) -> tuple:
            seen.add(chunk)
            return real(self, chunk)

        monkeypatch.setattr(prepared_module.Rows, "read", spy)
        for batch in family.batches(1)[0]:
            if int(batch[1]) in share:
                family.loss(batch)
        monkeypatch.setattr(prepared_module.Rows, "read", real)
    assert read[0] and read[1] and max(read[0]) <= min(read[1]) and len(read[0] | read[1]) > 5


def test_the_cli_prepares_every_kind_but_span_extraction_and_says_what_a_row_is(tmp_path):
    assert {k.name for k in registry.kinds() if k.prepares} == {"seq2seq", "classifier", "lm", "bert"}
    lm = tmp_path / "lm.yaml"
    lm.write_text(yaml.safe_dump(_lm(tmp_path)))
    result = CliRunner().invoke(app, ["data", "prepare", str(lm), "--out", str(tmp_path / "p"), "--chunk-rows", "100"])
    assert result.exit_code == 0, result.output
    assert f"train 300, valid 50, test 50 sentences; train with --set data.prepared={tmp_path / 'p'}" in result.output
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert manifest["tokenizers"].keys() == {"source"}
    shards = [shard["file"] for shard in manifest["splits"]["train"]["shards"]]  # 3 record batches: by default one
    assert len(shards) == min(prepared_module.default_workers(), 3)  # worker process per core, here at most 3
    span = tmp_path / "span.yaml"
    span.write_text(yaml.safe_dump(squad_config(tmp_path)))
    result = CliRunner().invoke(app, ["data", "prepare", str(span), "--out", str(tmp_path / "q")])
    assert result.exit_code == 2 and "a span extractor reads its corpus itself" in result.output
    assert not (tmp_path / "q").exists()


def test_next_sentence_prediction_and_another_pretrained_tokenizer_are_refused(tmp_path):
    raw = _bert(tmp_path)
    pairs = {"corpus": {"format": "task", "task": "date", "size": 200}, "prepared": "p"}
    with pytest.raises(ConfigError, match="data.prepared: next-sentence prediction draws its pairs"):
        parse_config(raw | {"data": pairs, "model": raw["model"] | {"next_sentence": True}})
    classifier = _classifier(tmp_path)
    _prepare(classifier, tmp_path / "prepared")
    Trainer(parse_config(raw | {"train": raw["train"] | {"epochs": 1}}), tmp_path / "bert", progress=False).fit()
    shape = RunDir(tmp_path / "bert").config().model.model_dump(include=set(SHAPE_KEYS))
    tuned = _with_prepared(classifier, tmp_path / "prepared")
    tuned["model"] = {"type": "encoder", "pooling": "cls", "init_from": str(tmp_path / "bert"), **shape}
    with pytest.raises(DataError, match="not prepared with the tokenizer of model.init_from"):
        Trainer(parse_config(tuned), tmp_path / "tuned", progress=False).fit()


@pytest.mark.parametrize("kind", ["lm", "bert"])
def test_explicit_training_files_are_prepared_sentence_by_sentence_never_read_whole(tmp_path, monkeypatch, kind):
    """The training file is read at each pass (the tokenizer's, then the writing), not listed: the same directory
    as when it is read whole."""
    from seqlab.data import splits as splits_module

    family = "seqlab.train.family." + {"lm": "stream", "bert": "masked"}[kind]
    raw = CONFIGS[kind](tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(f"{family}.streamed_sentences", lambda *args: None)  # the training split as a list
        whole = _prepare(raw, tmp_path / "whole")
    real = splits_module.read_sentences

    def read_sentences(spec: Any, *args: Any, **kwargs: Any) -> list[str]:
        assert not spec.path.endswith("train.txt"), "the training file was read whole"
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(splits_module, "read_sentences", read_sentences)
    streamed = _prepare(raw, tmp_path / "streamed")
    assert streamed["splits"] == whole["splits"] and streamed["tokenizers"] == whole["tokenizers"]
    for name in ("train-00000.arrow", "source.json"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
