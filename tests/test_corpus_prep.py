"""What preparing a real corpus needs (issue 41): JSON Lines and Parquet readers, ``data.clean`` (duplicates and
misfit lengths dropped from the training pairs), ``split.by: hash``, each read in memory and as a stream alike."""

from __future__ import annotations

import gzip
import json
import logging
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import small_date_config
from pydantic import TypeAdapter

from seqlab.config import ConfigError, parse_config
from seqlab.corpora import CleanConfig, Corpus, DataConfig, JsonlCorpus, SplitConfig
from seqlab.data import DataError, load_splits, read_corpus
from seqlab.data.clean import Cleaned, cleaned
from seqlab.data.corpus import CorpusStream
from seqlab.data.splits import hashed_split, split_pairs, streamed_train

CORPUS = TypeAdapter(Corpus)


def _jsonl(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


@pytest.mark.parametrize("name", ["p.jsonl", "p.jsonl.gz"])
def test_jsonl_pairs_are_read_by_field_name(tmp_path, name):
    _jsonl(tmp_path / name, [json.dumps({"de": " Ein Hund. ", "en": "A dog.", "id": 1}),
                             json.dumps({"en": "개가 짖는다", "de": "Ein \"Hund\" bellt", "x": [1]}, ensure_ascii=False)])
    spec = CORPUS.validate_python({"format": "jsonl", "path": name, "source_field": "de", "target_field": "en"})
    assert read_corpus(spec, tmp_path) == [("Ein Hund.", "A dog."), ('Ein "Hund" bellt', "개가 짖는다")]
    default = JsonlCorpus(path=name)
    assert (default.source_field, default.target_field) == ("source", "target")


@pytest.mark.parametrize(("line", "reason"), [
    ('{"source": "a", "target": "b"', "not valid JSON: Expecting ',' delimiter (column 30)"),
    ('["a", "b"]', "expected a JSON object, found list"),
    ('{"source": "a"}', "no field 'target'"),
    ('{"source": 3, "target": "b"}', "field 'source' is not a string"),
    ('{"source": "a", "target": "  "}', "empty target"),
    ("", "not valid JSON: Expecting value (column 1)"),
])
def test_a_bad_jsonl_line_names_its_file_and_line(tmp_path, line, reason):
    path = _jsonl(tmp_path / "p.jsonl", ['{"source": "ok", "target": "fine"}', line])
    spec = CORPUS.validate_python({"format": "jsonl", "path": "p.jsonl"})
    with pytest.raises(DataError, match=f"^{re.escape(f'{path}:2: {reason}')}$"):
        read_corpus(spec, tmp_path)
    assert read_corpus(spec, tmp_path, skip_bad_lines=True) == [("ok", "fine")]


def _parquet(path: Path, source: list, target: list, **types: pa.DataType) -> Path:
    table = pa.table({"src": pa.array(source, types.get("src", pa.string())),
                      "trg": pa.array(target, types.get("trg", pa.large_string())), "n": list(range(len(source)))})
    pq.write_table(table, path, row_group_size=3)  # several row groups, read a batch at a time
    return path


def test_parquet_pairs_are_read_by_column_name_across_row_groups(tmp_path):
    sources = [f" source {i} " for i in range(8)]
    _parquet(tmp_path / "p.parquet", sources, [f"target {i}" for i in range(8)])
    spec = CORPUS.validate_python({"format": "parquet", "path": "p.parquet", "source_column": "src",
                                   "target_column": "trg"})
    assert read_corpus(spec, tmp_path) == [(f"source {i}", f"target {i}") for i in range(8)]
    assert list(CorpusStream(spec, tmp_path)) == read_corpus(spec, tmp_path)  # streamed alike


def test_parquet_errors_name_the_file_and_the_column_or_row(tmp_path):
    path = _parquet(tmp_path / "p.parquet", ["a", "b", None, "d"], ["w", "x", "y", " "])
    spec = {"format": "parquet", "path": "p.parquet", "source_column": "src", "target_column": "trg"}
    with pytest.raises(DataError, match=f"^{re.escape(f'{path}: row 3: no source (null)')}$"):
        read_corpus(CORPUS.validate_python(spec), tmp_path)
    assert read_corpus(CORPUS.validate_python(spec), tmp_path, skip_bad_lines=True) == [("a", "w"), ("b", "x")]
    with pytest.raises(DataError, match=re.escape(f"{path}: no column 'en'; the columns are 'src', 'trg', 'n'")):
        read_corpus(CORPUS.validate_python(spec | {"target_column": "en"}), tmp_path)
    with pytest.raises(DataError, match=re.escape(f"{path}: column 'n' holds int64, not text")):
        read_corpus(CORPUS.validate_python(spec | {"target_column": "n"}), tmp_path)
    (tmp_path / "t.parquet").write_text("src,trg\na,b\n")
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 't.parquet'}: not a readable Parquet file")):
        read_corpus(CORPUS.validate_python(spec | {"path": "t.parquet"}), tmp_path)


PAIRS = [("a b", "x y"), ("a b", "x y"), ("one", "one two three four"), ("a b", "x z"), ("c d e f g h", "u v w x y z"),
         ("a b", "x y")]


def test_cleaning_drops_later_duplicates_and_misfit_lengths_in_order(caplog):
    assert cleaned(PAIRS, CleanConfig(dedup=True)) == [PAIRS[0], PAIRS[2], PAIRS[3], PAIRS[4]]
    assert cleaned(PAIRS, CleanConfig(max_words=5)) == [p for p in PAIRS if p != PAIRS[4]]
    assert cleaned(PAIRS, CleanConfig(min_words=2)) == [p for p in PAIRS if p != PAIRS[2]]
    assert cleaned(PAIRS, CleanConfig(max_ratio=3)) == [p for p in PAIRS if p != PAIRS[2]]  # 4 words against 1
    assert cleaned(PAIRS, CleanConfig(max_ratio=4)) == PAIRS
    with caplog.at_level(logging.INFO, logger="seqlab"):
        assert cleaned(PAIRS, CleanConfig(dedup=True, max_words=5, max_ratio=3)) == [PAIRS[0], PAIRS[3]]
    assert "data.clean: 2 training pairs kept, 2 duplicates, 1 by length, 1 by ratio dropped" in caplog.text
    with pytest.raises(DataError, match=r"^data.clean: it dropped every training pair \(0 duplicates, 6 by length"):
        cleaned(PAIRS, CleanConfig(min_words=7))


def test_a_streamed_corpus_is_cleaned_as_the_list_and_valid_and_test_never(tmp_path):
    for name, pairs in (("train", PAIRS), ("valid", PAIRS[:2])):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    data = DataConfig.model_validate({"train": {"format": "tsv", "path": "train.tsv"},
                                      "valid": {"format": "tsv", "path": "valid.tsv"},
                                      "clean": {"dedup": True, "max_words": 5}})
    splits = load_splits(data, tmp_path)
    assert splits["train"] == [PAIRS[0], PAIRS[2], PAIRS[3]] and splits["valid"] == PAIRS[:2]
    stream = streamed_train(data, tmp_path)
    assert isinstance(stream, Cleaned) and list(stream) == list(stream) == splits["train"]  # each pass alike


def test_only_a_seq2seq_model_cleans_its_pairs():
    raw = small_date_config()
    assert parse_config(raw | {"data": raw["data"] | {"clean": {"dedup": True}}}).data.clean.dedup
    lm = {"data": raw["data"] | {"clean": {"max_words": 50}}, "model": {"type": "lm"}}
    with pytest.raises((ConfigError, ValueError), match="data.clean: .* reads no pairs of texts to clean"):
        parse_config(lm)


def test_a_hash_split_is_the_fractions_on_average_and_each_items_own_whatever_the_corpus():
    split = SplitConfig(valid=0.1, test=0.05, seed=7, by="hash")
    items = [(f"sentence {i}", f"target {i}") for i in range(20_000)]
    parts = split_pairs(items, split, lambda pair: pair[0])
    counts = {name: len(part) for name, part in parts.items()}
    assert abs(counts["valid"] - 2000) < 4 * 42 and abs(counts["test"] - 1000) < 4 * 31  # 4 sd of a binomial
    trained = set(parts["train"])
    assert sum(counts.values()) == 20_000 and parts["train"] == [p for p in items if p in trained]  # in order
    grown = split_pairs(items[::3] + [("new", "one")] * 5, split, lambda pair: pair[0])  # another corpus
    assert all(hashed_split(s, split) == name for name, part in grown.items() for s, _ in part)
    assert set(grown["test"]) - {("new", "one")} == set(parts["test"]) & set(items[::3])
    assert Counter(hashed_split(s, split) for s, _ in grown["train"] if s == "new") in (Counter(), Counter(train=5))
    assert hashed_split("sentence 1", SplitConfig(valid=0.1, test=0.05, seed=8, by="hash")) is not None
    with pytest.raises(ValueError, match="split.by hash: valid and test are fractions"):
        SplitConfig(valid=1000, test=0.1, by="hash")


def test_a_hash_split_corpus_streams_its_training_pairs_and_reads_each_split_alone(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(500)]
    (tmp_path / "all.jsonl").write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in pairs))
    data = DataConfig.model_validate({"corpus": {"format": "jsonl", "path": "all.jsonl"},
                                      "split": {"valid": 0.1, "test": 0.1, "seed": 3, "by": "hash"}})
    splits = load_splits(data, tmp_path)
    whole = split_pairs(pairs, data.split, lambda pair: pair[0])
    assert {name: splits[name] for name in ("train", "valid", "test")} == whole
    assert list(streamed_train(data, tmp_path) or []) == whole["train"]
    shuffled = DataConfig.model_validate(data.model_dump() | {"split": {"valid": 0.1, "test": 0.1}})
    assert streamed_train(shuffled, tmp_path) is None  # a shuffled split reads the corpus whole
