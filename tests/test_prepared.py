"""Prepared corpora (``seqlab data prepare``, ``data.prepared``): Arrow shards that a run reads memory-mapped, against
the in-memory path on the same data."""

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import resumes_exactly, small_date_config
from safetensors.torch import load_file
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.config import ConfigError, parse_config
from seqlab.data import DataError
from seqlab.data import prepared as prepared_module
from seqlab.data.prepared import Rows, open_prepared, prepared_sections
from seqlab.evaluate import EncodedSplit
from seqlab.predictors.translator import load
from seqlab.rundir import RunDir
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
        assert isinstance(read.src, Rows) and read.src.lengths(np.arange(len(read.src.chunks))).tolist() == [
            len(s) for s in built.src]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["rows"] == 800 and manifest["splits"]["valid"]["rows"] == 100
    assert manifest["splits"]["train"]["tokens"]["src"] == sum(len(s) for s in EncodedSplit.build(
        translator, splits["train"], "train").src)


def test_rows_are_cut_into_shards_of_chunks_and_read_back_a_few_chunks_at_a_time(tmp_path, monkeypatch):
    raw, whole = _prepare(tmp_path)  # one shard of one chunk
    monkeypatch.setattr(prepared_module, "SHARD_ROWS", 300)
    out = tmp_path / "chunked"
    Transduction.prepare(parse_config(raw), None, out, progress=False, chunk_rows=100)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(s["rows"], s["batches"]) for s in manifest["splits"]["train"]["shards"]] == [
        (300, [100, 100, 100]), (300, [100, 100, 100]), (200, [100, 100])]
    assert sorted(p.name for p in out.glob("train-*.arrow")) == ["train-00000.arrow", "train-00001.arrow",
                                                                "train-00002.arrow"]
    sections = prepared_sections(parse_config(raw))
    ids = open_prepared(out, sections).ids("train", "src", cache=2)
    assert isinstance(ids, Rows) and len(ids) == 800 and ids.chunk_rows() == [100] * 8
    every = [ids[i] for i in range(800)]
    assert every == list(open_prepared(whole, sections).ids("train", "src"))  # the same rows, however cut
    assert len(ids._open) == 2  # the last two chunks read, no more
    assert ids[299] == every[299] and ids[300] == every[300] and ids[-1] == every[-1]
    assert ids[650:652] == every[650:652] and ids.lengths(np.arange(8)).tolist() == [len(r) for r in every]
    with pytest.raises(IndexError):
        ids[800]


def test_a_run_from_chunked_prepared_data_batches_a_window_at_a_time_and_resumes_exactly(tmp_path, killed_at,
                                                                                          monkeypatch):
    raw = small_date_config() | {"train": small_date_config()["train"] | {"epochs": 2, "save_every": 5}}
    out = tmp_path / "prepared"
    Transduction.prepare(parse_config(raw), None, out, progress=False, chunk_rows=100)  # 8 chunks: 2 windows of 4
    config = parse_config(raw | {"data": raw["data"] | {"prepared": str(out)}})
    (tmp_path / "family").mkdir()
    [stream] = Transduction.build(config, RunDir(tmp_path / "family"), None, resume=False).batches(1)
    batches = list(stream)
    assert sorted(i for b in batches for i in b.tolist()) == list(range(800))  # every row once
    groups: list[set[int]] = []  # the chunks of each window, as the batches reach them
    for chunks in ({int(i) // 100 for i in b} for b in batches):
        if groups and len(groups[-1] | chunks) <= 4:
            groups[-1] |= chunks
        else:
            groups.append(chunks)
    assert len(groups) == 2 and groups[0] | groups[1] == set(range(8))  # one window, then the other
    second = Transduction.build(config, RunDir(tmp_path / "family"), None, resume=True, parts=2, share=range(1, 2))
    streams, read, real = second.batches(1), [], prepared_module._column  # a step's two parts: two streams

    def column(chunk: prepared_module.Chunk, name: str) -> tuple:
        read.append(chunk.batch)
        return real(chunk, name)

    monkeypatch.setattr(prepared_module, "_column", column)
    rows = {int(i) for b in streams[1] for i in b}
    assert len(streams) == 2 and set(read) == {i // 100 for i in rows} and len(set(read)) == 4  # its own chunks only
    resumes_exactly(config, tmp_path, killed_at, 40)


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
        open_prepared(out, prepared_sections(config)).ids("valid", "src")[0]
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
    with pytest.raises(OSError, match="disk full"):
        Transduction.prepare(parse_config(raw), None, tmp_path / "second", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"]  # no partial directory, no temporary one


def test_the_cli_prepares_a_seq2seq_config(tmp_path):
    import yaml

    config = tmp_path / "date.yaml"
    config.write_text(yaml.safe_dump(small_date_config()))
    result = CliRunner().invoke(app, ["data", "prepare", str(config), "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert f"train 800, valid 100, test 100 pairs; train with --set data.prepared={tmp_path / 'p'}" in result.output
    with pytest.raises(ConfigError, match="data.prepared: a span extractor reads its corpus itself"):
        parse_config({"data": {"train": {"format": "squad", "path": "x.json"}, "valid": {"format": "squad", "path": "y.json"},
                               "prepared": "p"},
                      "model": {"type": "span"}, "train": {"schedule": "constant"}})


def _tsv_config(tmp_path: Path) -> dict:
    """small_date_config's pairs written to TSV files: explicit train/valid/test files."""
    from seqlab.data import load_splits, resolve_data_dir

    raw = small_date_config()
    splits = load_splits(parse_config(raw).data, resolve_data_dir(None))
    data: dict[str, object] = {"max_source_length": 40}
    for name in ("train", "valid", "test"):
        path = tmp_path / f"{name}.tsv"
        path.write_text("".join(f"{s}\t{t}\n" for s, t in splits[name]) + ("\t\n" if name == "train" else ""),
                        encoding="utf-8")  # a bad last line in train, skipped
        data[name] = {"format": "tsv", "path": str(path)}
    return raw | {"data": data | {"skip_bad_lines": True}}


def test_explicit_training_files_are_prepared_pair_by_pair_as_the_in_memory_path_reads_them(tmp_path, monkeypatch,
                                                                                           caplog):
    """The training file is read from disk at each pass (tokenizers, then ids), never as one list; the result is
    the in-memory path's: the same tokenizers and ids, the bad line skipped and counted once."""
    import logging

    import seqlab.data.splits as splits_module

    raw = _tsv_config(tmp_path)
    Trainer(parse_config(raw), tmp_path / "memory", progress=False).fit()
    translator = load(tmp_path / "memory")
    reading = splits_module.read_corpus

    def read_corpus(spec, *args, **kwargs):
        assert not str(spec.path).endswith("train.tsv"), "the training file was read whole"
        return reading(spec, *args, **kwargs)

    monkeypatch.setattr(splits_module, "read_corpus", read_corpus)
    caplog.clear()  # the training's own warning of the bad line
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        Transduction.prepare(parse_config(raw), None, tmp_path / "prepared", progress=False)
    assert sum("skipped 1 bad line" in r.getMessage() for r in caplog.records) == 1
    for name in ("source", "target"):
        assert (tmp_path / "prepared" / f"{name}.json").read_text() == \
            (tmp_path / "memory" / f"{name}_tokenizer.json").read_text()
    monkeypatch.setattr(splits_module, "read_corpus", reading)
    from seqlab.data import load_splits, resolve_data_dir

    built = EncodedSplit.build(translator, load_splits(parse_config(raw).data, resolve_data_dir(None))["train"], "train")
    prepared = open_prepared(tmp_path / "prepared", prepared_sections(parse_config(raw)))
    assert list(prepared.ids("train", "src")) == built.src and list(prepared.ids("train", "trg")) == built.trg


def test_a_corpus_stream_reads_the_pairs_of_read_corpus_at_every_pass(tmp_path):
    from seqlab.corpora import TsvCorpus
    from seqlab.data.corpus import CorpusStream, read_corpus

    raw = _tsv_config(tmp_path)
    spec = parse_config(raw).data.train
    assert isinstance(spec, TsvCorpus)
    stream = CorpusStream(spec, tmp_path, skip_bad_lines=True)
    assert list(stream) == list(stream) == read_corpus(spec, tmp_path, skip_bad_lines=True)
    empty = tmp_path / "empty.tsv"
    empty.write_text("\t\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty.tsv: no pairs"):
        list(CorpusStream(spec.model_copy(update={"path": str(empty)}), tmp_path, skip_bad_lines=True))


def test_a_jsonl_corpus_split_by_hash_and_cleaned_is_prepared_as_it_is_read_in_memory(tmp_path):
    """The streamed preparation (the training pairs read from the file at each pass, split and cleaned as they
    come, the vocabulary learnt from a sample) holds what the in-memory path reads and encodes."""
    from seqlab.data import generate_task

    pairs = generate_task("date", 600, seed=2)
    lines = [json.dumps({"source": s, "target": t}) for s, t in pairs + pairs[:100]]  # 100 duplicates
    (tmp_path / "dates.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = small_date_config()
    raw["data"] = raw["data"] | {"corpus": {"format": "jsonl", "path": "dates.jsonl"},
                                 "split": {"valid": 0.1, "test": 0.1, "seed": 4, "by": "hash"},
                                 "clean": {"dedup": True}}
    raw["tokens"] = {"source": {"level": "char", "sample": 300}}
    config = parse_config(raw)
    Transduction.prepare(config, tmp_path, tmp_path / "prepared", progress=False)
    (tmp_path / "run").mkdir()
    memory = Transduction.build(config, RunDir(tmp_path / "run"), tmp_path, resume=False)
    streamed = Transduction.build(parse_config(raw | {"data": raw["data"] | {"prepared": str(tmp_path / "prepared")}}),
                                  RunDir(tmp_path / "run"), tmp_path, resume=True)
    assert memory.translator.source.to_json() == streamed.translator.source.to_json()
    for split in ("train_set", "valid_set"):
        built, read = getattr(memory, split), getattr(streamed, split)
        assert list(read.src) == built.src and list(read.trg) == built.trg and list(read.sources) == built.sources
    from seqlab.data.splits import hashed_split

    trained = [s for s, _ in pairs if hashed_split(s, config.data.split) == "train"]  # each once: duplicates dropped
    assert list(memory.train_set.sources) == trained and 400 < len(trained) < 560


def test_a_counted_corpus_knows_its_length_after_one_pass_and_shows_the_first(capsys):
    class Twice:  # a corpus read afresh at every pass, of unknown length
        def __iter__(self):
            return iter(range(25_000))

    counted = prepared_module.Counted(Twice(), "pairs", progress=True)
    assert counted.count is None
    assert sum(1 for _ in itertools.islice(counted, 100)) == 100 and counted.count is None  # not a whole pass
    assert sum(counted) == sum(range(25_000)) and counted.count == 25_000
    assert "read train" in capsys.readouterr().err
    assert list(counted) == list(range(25_000)) and "read train" not in capsys.readouterr().err  # once counted
    assert prepared_module.Counted([1, 2, 3]).count == 3


def test_two_worker_processes_prepare_the_rows_one_process_prepares_in_the_same_order(tmp_path):
    """Every other record batch encoded by a forked process into shards of its own: the same rows, texts and counts
    in the same order (the manifest's ``order``), and a run from it trains to the same weights."""
    raw = small_date_config()
    config = parse_config(raw)
    one = Transduction.prepare(config, None, tmp_path / "one", progress=False, chunk_rows=37)
    two = Transduction.prepare(config, None, tmp_path / "two", progress=False, chunk_rows=37, workers=2)
    assert {s["file"] for s in two["splits"]["train"]["shards"]} == {"train.0-00000.arrow", "train.1-00000.arrow"}
    assert two["splits"]["train"]["order"][:3] == [[0, 0], [1, 0], [0, 1]]
    for name in ("train", "valid", "test"):
        assert two["splits"][name]["rows"] == one["splits"][name]["rows"]
        assert two["splits"][name]["tokens"] == one["splits"][name]["tokens"]
        read = [open_prepared(tmp_path / d, prepared_sections(config)) for d in ("one", "two")]
        for column in ("src", "trg"):
            assert list(read[0].ids(name, column, 2)) == list(read[1].ids(name, column, 2))
        assert list(read[0].texts(name, "source")) == list(read[1].texts(name, "source"))
    for d in ("one", "two"):
        Trainer(parse_config(raw | {"data": raw["data"] | {"prepared": str(tmp_path / d)}}), tmp_path / f"run-{d}",
                progress=False).fit()
    weights = [load_file(str(tmp_path / f"run-{d}" / "model.safetensors")) for d in ("one", "two")]
    assert all(weights[0][k].equal(weights[1][k]) for k in weights[0])


def test_an_error_in_a_worker_process_is_raised_and_leaves_nothing_behind(tmp_path, monkeypatch):
    from seqlab.predictors.translator import Translator

    real = Translator.encode_targets

    def encode_targets(self: Translator, texts: list[str], what: str = "input") -> list[list[int]]:
        if what == "train" and texts[0] == first_of_third_chunk:
            raise DataError("corpus.txt:75: a bad pair")
        return real(self, texts, what)

    config = parse_config(small_date_config())
    from seqlab.data import load_splits, resolve_data_dir

    first_of_third_chunk = load_splits(config.data, resolve_data_dir(None))["train"][74][1]
    monkeypatch.setattr(Translator, "encode_targets", encode_targets)
    with pytest.raises(DataError, match="corpus.txt:75: a bad pair"):
        Transduction.prepare(config, None, tmp_path / "p", progress=False, chunk_rows=37, workers=2)
    assert list(tmp_path.iterdir()) == []
