"""The run directory's core: the names of its files, what is there, its configuration and the tokenizers and labels
that describe its model, and the checks every reading goes through (a damaged file is one ``RunFileError`` line)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from pydantic import BaseModel
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load as load_numpy
from safetensors.numpy import save as save_numpy
from safetensors.torch import load as load_safetensors

from seqlab import registry
from seqlab.config import AnyConfig, Config, ConfigError, changed_keys, dump_config, load_config
from seqlab.files import atomic_write, remove_temporaries
from seqlab.tokenizer import Tokenizer

CONFIG = "config.yaml"
SOURCE_TOKENIZER = "source_tokenizer.json"
TARGET_TOKENIZER = "target_tokenizer.json"
MODEL = "model.safetensors"
CHECKPOINT = "checkpoint.safetensors"
LOG = "log.jsonl"
LEGACY_MODEL_INFO = "model.json"  # where runs before 2026-11-23 kept the model's description
EXPORTED_INFO = "model_info.json"  # an export's description of its model, whose weights are another engine's
INFO_KEY = "seqlab.info"  # the model's description in the header of model.safetensors
VOCABULARY = "vocabulary.json"
VECTORS = "vectors.safetensors"
LABELS = "labels.json"
NGRAMS = "ngrams.safetensors"  # the n-gram model beside the network (model.ngrams): its arrays, its metadata in the header
EPOCHS = "epochs"  # the kept epochs' weights: epochs/epoch-N.safetensors
MODEL_FILES = (CONFIG, SOURCE_TOKENIZER, TARGET_TOKENIZER, LABELS, NGRAMS)  # what, besides weights, describes a model

T = TypeVar("T", dict, list)
log = logging.getLogger("seqlab")


class RunFileError(ValueError):
    """A run directory's file that cannot be read: damaged, truncated, or not what its name says (weights that do
    not fit the model); the message names the file, on one line."""


class RunCore:
    """One run directory (it need not exist yet): what is there, its configuration, tokenizers and labels."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def has_run(self) -> bool:
        return (self.path / CONFIG).exists()

    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).exists()

    def has_log(self) -> bool:
        return (self.path / LOG).exists()

    def check_start(self, config: BaseModel, resume: bool, fixed: Sequence[str]) -> bool:
        """Before training starts: refuse to overwrite a run; on resume, refuse a directory without a run, or a
        config whose ``fixed`` sections differ from the saved one (they decide the data or the model), then
        delete the temporary files of killed saves. Returns whether there is a checkpoint to resume from: a run
        resumed without one (killed before its first checkpoint) starts again from its beginning."""
        if not resume:
            if self.has_run():
                raise ConfigError(f"{self.path} already holds a run: pass --resume to continue it, or choose another --out")
            return False
        if not self.has_run():
            raise ConfigError(f"{self.path}: nothing to resume (no {CONFIG}: no run was started there)")
        saved = self.config() if isinstance(config, Config) else self.read_config(type(config))
        changed = changed_keys(saved, config, fixed)
        if changed:
            raise ConfigError(f"cannot resume {self.path} with a different {', '.join(changed)} "
                              f"(only what is outside {', '.join(fixed)} may change)")
        removed = self.remove_temporaries()  # nothing writes there yet
        if removed:
            log.info("%s: deleted %d temporary file(s) of saves that were killed", self.path, removed)
        if not self.has_checkpoint():
            log.info("%s holds a run with no checkpoint (killed before its first, or a count run, which keeps "
                     "none): starting it from its beginning (nothing was saved that could be lost)", self.path)
            return False
        return True

    def remove_temporaries(self) -> int:
        """Delete the temporary files that saves killed before their rename left in the run directory and in
        ``epochs/`` (``files.remove_temporaries``; only while nothing writes there); returns how many."""
        return remove_temporaries(self.path) + remove_temporaries(self.path / EPOCHS)

    def save_config(self, config: BaseModel) -> None:
        """The configuration as one YAML document between ``---`` and ``...``, so that a copy cut short is seen."""
        atomic_write(self.path / CONFIG, f"---\n{dump_config(config)}...\n")

    def config(self) -> Config:
        """The configuration of a model run; a run of a kind without a model section (word vectors) is refused
        with the commands that use it."""
        try:
            return self.read_config(Config)
        except (ConfigError, FileNotFoundError):
            try:
                kind: registry.Kind | None = registry.kind_of_run(self.path)
            except (FileNotFoundError, ValueError):
                kind = None  # no run of any kind: the first problem says so
            if kind is not None and not kind.model_types:
                raise ValueError(f"{self.path}: {kind.noun}; use {kind.use}") from None
            raise

    def read_config(self, schema: type[AnyConfig]) -> AnyConfig:
        """The saved configuration as ``schema``; every problem on one line that names the file. A document that
        starts with ``---`` must end with ``...`` (runs before 2026-11-25 have neither)."""
        path = self.path / CONFIG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: not a seqlab run directory (no {CONFIG})")
        text = path.read_bytes()
        if text.startswith(b"---\n") and not text.endswith(b"\n...\n"):
            raise damaged(path, "run configuration", "its YAML document does not end with ...")
        try:
            return load_config(path, schema=schema)
        except ConfigError as exc:
            raise ConfigError(one_line(exc)) from None

    def save_tokenizers(self, source: Tokenizer, target: Tokenizer) -> None:
        atomic_write(self.path / SOURCE_TOKENIZER, source.to_json())
        atomic_write(self.path / TARGET_TOKENIZER, target.to_json())

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """The source and the target tokenizer (the same vocabulary twice when they are shared)."""
        return read_tokenizer(self.path / SOURCE_TOKENIZER), read_tokenizer(self.path / TARGET_TOKENIZER)

    def save_labels(self, labels: Sequence[str]) -> None:
        atomic_write(self.path / LABELS, json.dumps(list(labels), ensure_ascii=False) + "\n")

    def labels(self) -> list[str]:
        """A classifier's classes, in the order of its outputs."""
        path = self.path / LABELS
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing (a classifier's run directory holds its labels)")
        labels = read_json(path, "labels file", list)
        if not all(isinstance(label, str) for label in labels):
            raise damaged(path, "labels file", "expected a list of label strings")
        return labels

    def save_ngrams(self, arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
        """The n-gram model beside the network (``model.ngrams``: a classifier's ``NgramHead``, a language model's
        ``KneserNey``; their ``state``): its arrays, and its metadata in the header."""
        contiguous = {name: np.ascontiguousarray(a) for name, a in arrays.items()}  # safetensors writes a strided
        atomic_write(self.path / NGRAMS, save_numpy(contiguous, metadata=metadata))  # array's memory as if C-ordered

    def ngrams(self, tensors: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The n-gram model ``save_ngrams`` wrote: its arrays (none unless ``tensors``: the header alone is read)
        and its metadata (the header's ``ngrams`` JSON)."""
        path = self.path / NGRAMS
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing (a model with model.ngrams keeps its n-gram model there)")
        arrays, metadata = read_safetensors(path, "n-gram model", framework="numpy", tensors=tensors)
        return arrays, header_json(path, "n-gram model", metadata, "ngrams", dict)


def read_safetensors(path: Path, what: str, framework: Literal["pt", "numpy"] = "pt", tensors: bool = True
                      ) -> tuple[dict[str, Any], dict[str, str]]:
    """A safetensors file's tensors (torch's or NumPy's; none unless ``tensors``) and its header's metadata, read
    at once; a damaged or truncated file is a ``RunFileError`` that names it as a seqlab ``what``. The tensors are
    copies (safe_open's would map the file for as long as they live, an optimizer's moments for a whole run)."""
    try:
        if not tensors:
            with safe_open(str(path), framework=framework) as f:  # the header, checked against the file's size
                return {}, f.metadata() or {}
        data = path.read_bytes()
        loaded = (load_safetensors if framework == "pt" else load_numpy)(data)  # checks the header and the size
    except SafetensorError as exc:
        raise damaged(path, what, exc) from None
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])  # the format: size (u64 LE), JSON
    return loaded, header.get("__metadata__") or {}

def check_shapes(path: Path, shapes: dict[str, list[int]], tensors: Mapping[str, torch.Tensor | np.ndarray],
                  what: str, whose: str) -> None:
    """A ``RunFileError`` naming ``path`` and the first differences unless ``tensors`` have the names and
    ``shapes`` of ``whose``."""
    problems = [f"no {name}" for name in shapes if name not in tensors]
    problems += [f"{name} is not the model's" for name in tensors if name not in shapes]
    problems += [f"{name} is {list(tensors[name].shape)}, the model's {shape}" for name, shape in shapes.items()
                 if name in tensors and list(tensors[name].shape) != shape]
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise RunFileError(f"{path}: the {what} do not fit {whose} ({'; '.join(problems[:3])}{more})")

def read_tokenizer(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_json(path.read_bytes().decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, not a tokenizer
        raise RunFileError(f"{path}: {one_line(exc)}") from None

def read_json(path: Path, what: str, kind: type[T]) -> T:
    """A JSON file's value, which must be a ``kind`` (dict or list); else a ``RunFileError`` naming the file."""
    try:
        return json_as(path.read_bytes(), kind)
    except ValueError as exc:
        raise damaged(path, what, exc) from None

def header_json(path: Path, what: str, metadata: dict[str, str], key: str, kind: type[T]) -> T:
    """The JSON ``kind`` under ``key`` in a safetensors file's metadata; else a ``RunFileError`` naming the file."""
    if key not in metadata:
        raise damaged(path, what, f"no {key} in its header")
    try:
        return json_as(metadata[key], kind)
    except ValueError as exc:
        raise damaged(path, what, f"{key}: {exc}") from None

def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

def json_as(text: str | bytes, kind: type[T]) -> T:
    """``text`` (bytes: UTF-8) as JSON, which must be a ``kind``; a ``ValueError`` says what is wrong."""
    value = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    if not isinstance(value, kind):
        raise ValueError(f"a JSON {type(value).__name__} where a {kind.__name__} belongs")
    return value

def damaged(path: Path, what: str, reason: object) -> RunFileError:
    return RunFileError(f"{path}: not a seqlab {what} (damaged or truncated: {one_line(reason)})")

def one_line(reason: object) -> str:
    return " ".join(str(reason).split())

def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
