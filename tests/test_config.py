"""Configs: every key validated, misspellings named, overrides typed, the resolved config round-trips."""

import sys
from typing import Any

import pytest

from seqlab.config import ConfigError, apply_override, dump_config, load_config, parse_config
from seqlab.corpora import TaskCorpus

MINIMAL = {"data": {"corpus": {"format": "task", "task": "date"}}}


def test_unknown_keys_are_errors_that_name_them():
    with pytest.raises(ConfigError) as err:
        parse_config({"data": {"corpus": {"format": "tsv", "pat": "x.tsv"}}, "train": {"epoch": 3}})
    message = str(err.value)
    assert "data.corpus.tsv.pat: unknown key (did you mean 'path'?)" in message
    assert "train.epoch: unknown key (did you mean 'epochs'?)" in message


def test_values_are_validated():
    with pytest.raises(ConfigError, match=r"model.transformer.dropout: Input should be less than 1"):
        parse_config(MINIMAL | {"model": {"dropout": 1.5}})
    with pytest.raises(ConfigError, match="divisible"):
        parse_config(MINIMAL | {"model": {"d_model": 10, "num_heads": 4}})
    with pytest.raises(ConfigError, match="either data.corpus"):
        parse_config({"data": {}})
    with pytest.raises(ConfigError, match="data.valid is needed"):
        parse_config({"data": {"train": {"format": "tsv", "path": "a.tsv"}}})


def test_overrides_are_parsed_as_yaml():
    raw = {"train": {"epochs": 1}}
    apply_override(raw, "train.epochs=5")
    apply_override(raw, "model.norm=pre")
    apply_override(raw, "train.clip_norm=null")
    assert raw == {"train": {"epochs": 5, "clip_norm": None}, "model": {"norm": "pre"}}
    with pytest.raises(ConfigError, match="key=value"):
        apply_override(raw, "train.epochs")
    with pytest.raises(ConfigError, match="not a section"):
        apply_override(raw, "train.epochs.x=1")


def test_load_config_files(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("data:\n  corpus: {format: task, task: addition}\ntrain: {epochs: 2}\n", encoding="utf-8")
    config = load_config(path, ["train.epochs=7"])
    assert config.train.epochs == 7 and isinstance(config.data.corpus, TaskCorpus) and config.data.corpus.task == "addition"
    (tmp_path / "again.yaml").write_text(dump_config(config), encoding="utf-8")
    assert load_config(tmp_path / "again.yaml") == config
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "broken.yaml").write_text("data: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load_config(tmp_path / "broken.yaml")


def test_shipped_configs_are_valid():
    from pathlib import Path

    from seqlab.config import Config
    from seqlab.vectors.config import VectorsConfig

    configs = sorted((Path(__file__).parents[1] / "configs").rglob("*.yaml"))
    assert len([p for p in configs if p.parent.name == "vectors"]) >= 4
    for path in configs:
        if path.parent.name == "vectors":
            load_config(path, schema=VectorsConfig)
        else:
            load_config(path, schema=Config)


def test_vectors_config():
    from seqlab.vectors.config import VectorsConfig

    raw = {"data": {"corpora": [{"format": "lines", "path": "a.txt"},
                                {"format": "csv", "path": "b.csv", "source_column": "Q", "target_column": "A"}]}}
    cfg = parse_config(raw, schema=VectorsConfig)
    assert cfg.train.method == "skipgram" and cfg.words.lowercase and (cfg.train.dim, cfg.train.window) == (100, 5)
    with pytest.raises(ConfigError, match="train.methd: unknown key .did you mean 'method'"):
        parse_config(raw | {"train": {"methd": "cbow"}}, schema=VectorsConfig)
    with pytest.raises(ConfigError, match="data.corpora: List should have at least 1 item"):
        parse_config({"data": {"corpora": []}}, schema=VectorsConfig)
    with pytest.raises(ConfigError, match="train.method: Input should be 'count', 'cbow' or 'skipgram'"):
        parse_config(raw | {"train": {"method": "glove"}}, schema=VectorsConfig)


def test_model_type_selects_the_model_section():
    from seqlab.model.rnn import RNNConfig
    from seqlab.model.transformer import TransformerConfig

    assert isinstance(parse_config(MINIMAL).model, TransformerConfig)
    rnn = parse_config(MINIMAL | {"model": {"type": "rnn", "attention": "general"}, "train": {"schedule": "constant"}})
    assert isinstance(rnn.model, RNNConfig) and (rnn.model.embedding_size, rnn.model.hidden_size) == (16, 128)
    with pytest.raises(ConfigError, match="RNN models use train.schedule: constant"):
        parse_config(MINIMAL | {"model": {"type": "rnn"}})
    with pytest.raises(ConfigError, match="bidirectional encoder"):
        parse_config(MINIMAL | {"model": {"type": "rnn", "attention": "dot", "bidirectional": True},
                                "train": {"schedule": "constant"}})
    with pytest.raises(ConfigError, match="model.rnn.d_model: unknown key"):
        parse_config(MINIMAL | {"model": {"type": "rnn", "d_model": 64}, "train": {"schedule": "constant"}})
    with pytest.raises(ConfigError, match="must cover data.max_source_length"):
        parse_config(MINIMAL | {"model": {"max_length": 32}})


def test_the_books_source_form_and_one_bias_are_checked():
    rnn = {"model": {"type": "rnn", "hidden_bias": False}, "train": {"schedule": "constant"}}
    data = MINIMAL["data"]
    assert parse_config(MINIMAL | rnn | {"data": data | {"source_eos": False, "source_width": 29}}).data.source_width == 29
    with pytest.raises(ConfigError, match="a GRU's b_hn is inside the reset gate's product"):
        parse_config(MINIMAL | {"model": {"type": "rnn", "cell": "gru", "hidden_bias": False},
                                "train": {"schedule": "constant"}})
    with pytest.raises(ConfigError, match="data.source_width pads with the space character: it needs "
                                          "tokens.source.level char"):
        parse_config(MINIMAL | rnn | {"data": data | {"source_width": 29}, "tokens": {"source": {"level": "word"}}})
    with pytest.raises(ConfigError, match=r"data.max_source_length \(29\) must cover data.source_width \(29\) and <eos>"):
        parse_config(MINIMAL | rnn | {"data": data | {"source_width": 29, "max_source_length": 29}})
    with pytest.raises(ConfigError, match="shape a seq2seq model's sources .* not model.type encoder's"):
        parse_config(MINIMAL | {"data": data | {"source_eos": False}, "model": {"type": "encoder"},
                                "train": {"schedule": "constant"}})


@pytest.mark.parametrize(("section", "key", "value"), [
    ("model", "mask_split", [float("nan"), 0.1, 0.1]), ("train", "lr", float("inf")), ("train", "stop_at", float("nan")),
    ("train", "clip_norm", float("inf")), ("data", "split", {"valid": float("inf")})])
def test_nan_and_infinity_are_refused_in_every_float(section, key, value):
    """NaN passed every bound (NaN < 0 is false) and mask_split's sum check; null is how a setting says none."""
    raw = MINIMAL | {"model": {"type": "bert"}, "train": {"schedule": "constant"}}
    raw[section] = {**raw.get(section, {}), key: value}
    with pytest.raises(ConfigError, match=rf"\n  {section}\.(bert\.)?{key}(\.0|\.valid)?: Input should be a finite number"):
        parse_config(raw)


@pytest.mark.parametrize(("assignment", "problem"), [
    ("train.lr=[", "--set train.lr: not a YAML value (line 1, column 2: expected the node content, but found "
                   "'<stream end>')"),
    ("train.lr={a", "--set train.lr: not a YAML value (line 1, column 3: expected ',' or '}', but got '<stream end>')"),
    ("seed=2001-13-01", "--set seed: month must be in 1..12"),
    ("seed=" + "9" * 5000, f"--set seed: an integer of more than {sys.get_int_max_str_digits()} digits"),
    ("seed=" + "[" * 5000, "--set seed: its value is nested too deep"),
    ("a\nb.c=a: b: c", "--set 'a\\nb.c': not a YAML value (line 1, column 5: mapping values are not allowed here)"),
])
def test_a_set_value_yaml_cannot_read_is_one_line_naming_it(assignment, problem):
    with pytest.raises(ConfigError) as err:
        apply_override({}, assignment)
    assert str(err.value) == problem


def test_a_yaml_value_python_cannot_make_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 2001-13-01\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: not a usable YAML value \(month must be in 1..12\)$"):
        load_config(path)
    v = "1"
    for _ in range(600):  # read by yaml, nested beyond its recursion
        v = f"[{v}]"
    path.write_text(f"data: {{corpus: {{format: task, task: date}}}}\nseed: {v}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: nested too deep to be a config$"):
        load_config(path)


@pytest.mark.parametrize("number", ["0x" + "f" * 4000, "0b" + "1" * 15000, ":".join(["59"] * 3000)],
                         ids=["hexadecimal", "binary", "base 60"])
def test_an_integer_too_long_to_write_back_is_refused(tmp_path, number):
    """YAML's other bases are read without Python's limit on decimal digits; config.yaml could not hold it."""
    path = tmp_path / "c.yaml"
    path.write_text(f"data: {{corpus: {{format: task, task: date, size: {number}}}}}\n", encoding="utf-8")
    limit = sys.get_int_max_str_digits()
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"invalid config {path}:\n  data.corpus.size: an integer of more than {limit} digits"


def test_keys_that_are_not_names_are_quoted_in_their_problem_line():
    with pytest.raises(ConfigError) as err:
        keys: dict[Any, int] = {"a\nb": 1, "a.b": 2, "x y": 3, "trai\x1bn": 4, 5: 6}  # 5: YAML's keys need not be strings
        parse_config(MINIMAL | keys)
    assert str(err.value).split("\n")[1:] == [
        "  'a\\nb': unknown key", "  'a.b': unknown key", "  'x y': unknown key",
        "  'trai\\x1bn': unknown key (did you mean 'train'?)", "  5: Keys should be strings"]
