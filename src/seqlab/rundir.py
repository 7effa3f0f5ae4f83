"""The run directory: everything needed to use a trained model or to resume its training.

    RUN_DIR/
      config.yaml              the resolved configuration (one YAML document, ``---`` to ``...``: a cut copy shows)
      source_tokenizer.json    tokenizers (seqlab JSON wrapping the ``tokenizers`` pipeline)
      target_tokenizer.json
      model.safetensors        the best weights so far; what they are (epoch, step, valid metrics) in its header
      checkpoint.safetensors   the latest training state: weights, Adam moments, RNG, position
      log.jsonl                one JSON object per epoch (its epoch, step and metrics), written at its end
      labels.json              a classifier's classes, in the order of its outputs (its source tokenizer is
                               saved twice, as a language model's is)
      epochs/epoch-N.safetensors  with ``train.keep_checkpoints: K``, the weights at the end of the last K
                               epochs, for ``seqlab average`` (what they are in their header, as the model's)

A word-vector run (``seqlab vectors train``) keeps its configuration and log the same way, and instead of
tokenizers and a model:

      vocabulary.json          the words, most frequent first, and their counts
      vectors.safetensors      one row per word; what they are in its header, with the vocabulary's checksum
      checkpoint.safetensors   word2vec's state at the last epoch's end: both tables and the random streams

``RunDir`` is the only code that knows these names; training writes through it and inference
reads through it. No pickle anywhere: tensors go to safetensors, the rest to JSON/YAML. Every
file but the log is written to a temporary name and renamed into place (``files.atomic_write``),
so a run killed mid-write keeps the previous file (and its temporary file, ``.NAME.XXXXXXXX.tmp``,
which a resumed run deletes); the weights and their description are one file, so they are
replaced together. The log is appended one whole line per write, at an epoch's end and before the
checkpoint that moves the position on to the next epoch, and read without a torn last line.

A resumed run (``check_start`` with ``resume``, which also deletes killed saves' temporary files) goes on from its checkpoint's
position, the epoch in progress, and the log keeps only the records of the epochs before that one
(``truncate_log``): a record of it or of a later epoch is of work the run does again. A run resumed without a
checkpoint (killed before its first: its configuration saved, maybe its tokenizers or vocabulary, a log record,
a model) starts again from its beginning: nothing was saved that could be lost.

Every file is checked as it is read: one that is damaged, truncated or not what its name says (weights that do
not fit the model included) raises ``RunFileError``, one line that names the file, as a missing one raises
``FileNotFoundError``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load as load_numpy
from safetensors.numpy import save as save_numpy
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import nn

from seqlab.config import AnyConfig, Config, ConfigError, VectorsConfig, changed_keys, dump_config, load_config
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
EPOCHS = "epochs"  # the kept epochs' weights: epochs/epoch-N.safetensors
MODEL_FILES = (CONFIG, SOURCE_TOKENIZER, TARGET_TOKENIZER, LABELS)  # what, besides weights, describes a model

T = TypeVar("T", dict, list)
log = logging.getLogger("seqlab")


class RunFileError(ValueError):
    """A run directory's file that cannot be read: damaged, truncated, or not what its name says (weights that do
    not fit the model); the message names the file, on one line."""


class RunDir:
    """One run directory (it need not exist yet)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # --- what is there ------------------------------------------------------------

    def has_run(self) -> bool:
        return (self.path / CONFIG).exists()

    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).exists()

    def has_log(self) -> bool:
        return (self.path / LOG).exists()

    def is_vectors(self) -> bool:
        """A word-vector run (its vocabulary is written as soon as it is counted)."""
        return (self.path / VOCABULARY).exists()

    def check_start(self, config: Config | VectorsConfig, resume: bool, fixed: Sequence[str]) -> bool:
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
        saved = self.vectors_config() if isinstance(config, VectorsConfig) else self.config()
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

    # --- config and tokenizers ------------------------------------------------------

    def save_config(self, config: Config | VectorsConfig) -> None:
        """The configuration as one YAML document between ``---`` and ``...``, so that a copy cut short is seen."""
        atomic_write(self.path / CONFIG, f"---\n{dump_config(config)}...\n")

    def config(self) -> Config:
        """The configuration of a model run (``seqlab train``); a word-vector run is refused with a hint."""
        if self.is_vectors():
            raise ValueError(f"{self.path}: a word-vector run; use seqlab vectors similar | analogy | eval | export")
        return self._read_config(Config)

    def vectors_config(self) -> VectorsConfig:
        return self._read_config(VectorsConfig)

    def _read_config(self, schema: type[AnyConfig]) -> AnyConfig:
        """The saved configuration as ``schema``; every problem on one line that names the file. A document that
        starts with ``---`` must end with ``...`` (runs before 2026-11-25 have neither)."""
        path = self.path / CONFIG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: not a seqlab run directory (no {CONFIG})")
        text = path.read_bytes()
        if text.startswith(b"---\n") and not text.endswith(b"\n...\n"):
            raise _damaged(path, "run configuration", "its YAML document does not end with ...")
        try:
            return load_config(path, schema=schema)
        except ConfigError as exc:
            raise ConfigError(_one_line(exc)) from None

    def save_tokenizers(self, source: Tokenizer, target: Tokenizer) -> None:
        atomic_write(self.path / SOURCE_TOKENIZER, source.to_json())
        atomic_write(self.path / TARGET_TOKENIZER, target.to_json())

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """The source and the target tokenizer (the same vocabulary twice when they are shared)."""
        return _read_tokenizer(self.path / SOURCE_TOKENIZER), _read_tokenizer(self.path / TARGET_TOKENIZER)

    def save_labels(self, labels: Sequence[str]) -> None:
        atomic_write(self.path / LABELS, json.dumps(list(labels), ensure_ascii=False) + "\n")

    def labels(self) -> list[str]:
        """A classifier's classes, in the order of its outputs."""
        path = self.path / LABELS
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing (a classifier's run directory holds its labels)")
        labels = _read_json(path, "labels file", list)
        if not all(isinstance(label, str) for label in labels):
            raise _damaged(path, "labels file", "expected a list of label strings")
        return labels

    # --- the model ------------------------------------------------------------------

    def save_model(self, model: nn.Module | dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        """The weights used for translation (a model's, or named tensors) and what they are (``info``: epoch,
        step, valid), in one file."""
        atomic_write(self.path / MODEL, save_safetensors(_weights(model), metadata={INFO_KEY: json.dumps(info)}))

    def keep_epoch(self, model: nn.Module, info: dict[str, Any], keep: int) -> None:
        """The weights at an epoch's end as ``epochs/epoch-N.safetensors``; only the last ``keep`` epochs stay."""
        (self.path / EPOCHS).mkdir(exist_ok=True)
        path = self.path / EPOCHS / f"epoch-{info['epoch']}.safetensors"
        atomic_write(path, save_safetensors(_weights(model), metadata={INFO_KEY: json.dumps(info)}))
        for old in self.kept_epochs()[:-keep]:
            old.unlink()

    def kept_epochs(self) -> list[Path]:
        """The kept epochs' weight files, oldest first."""
        files = (self.path / EPOCHS).glob("epoch-*.safetensors")
        return sorted(files, key=lambda path: int(path.stem.split("-")[1]))

    def kept_epoch(self, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The weights in one of ``kept_epochs``' files and what they are (epoch, step, valid)."""
        tensors, metadata = _read_safetensors(path, "model file")
        return tensors, _model_header(path, metadata)

    def copy_model_files(self, out: RunDir) -> None:
        """Copy what describes the model (config, tokenizers, labels) into the run directory ``out``."""
        out.path.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            if (self.path / name).exists():
                atomic_write(out.path / name, (self.path / name).read_bytes())

    def load_model(self, model: nn.Module) -> dict[str, Any]:
        """Load the saved weights into ``model``; returns what they are (``model_info``)."""
        path = self._model_path()
        tensors, metadata = _read_safetensors(path, "model file")
        info = self._model_info(path, metadata)
        model.load_state_dict(_fitting(path, model, tensors))
        return info

    def save_model_info(self, info: dict[str, Any]) -> None:
        """What an exported model is (its run's epoch, step, valid metrics and the engine), beside its weights."""
        atomic_write(self.path / EXPORTED_INFO, json.dumps(info, ensure_ascii=False) + "\n")

    def model_info(self) -> dict[str, Any]:
        """What the saved model is: its epoch, step and valid metrics (an export's: also its engine)."""
        if not (self.path / MODEL).exists() and (self.path / EXPORTED_INFO).exists():
            return _described(self.path / EXPORTED_INFO, _read_json(self.path / EXPORTED_INFO, "model description", dict))
        path = self._model_path()
        _, metadata = _read_safetensors(path, "model file", tensors=False)
        return self._model_info(path, metadata)

    def _model_path(self) -> Path:
        path = self.path / MODEL
        if not path.exists():
            raise FileNotFoundError(f"{path}: no trained model in this run directory yet (no epoch has finished)")
        return path

    def _model_info(self, path: Path, metadata: dict[str, str]) -> dict[str, Any]:
        """What the weights in ``path`` are: the description in its header, or in model.json beside it (a run
        written before the header held it)."""
        if INFO_KEY in metadata or not (self.path / LEGACY_MODEL_INFO).exists():
            return _model_header(path, metadata)
        legacy = self.path / LEGACY_MODEL_INFO
        return _described(legacy, _read_json(legacy, "model description", dict))

    # --- word vectors ---------------------------------------------------------------

    def save_vocabulary(self, words: list[str], counts: np.ndarray) -> None:
        atomic_write(self.path / VOCABULARY, _vocabulary_json(words, counts))

    def save_vectors(self, vectors: np.ndarray, info: dict[str, Any]) -> None:
        """(V, dim) float32 rows, one per word of the saved vocabulary, whose checksum goes in the header."""
        words, _ = self.vocabulary()
        if len(vectors) != len(words):
            raise ValueError(f"{len(vectors)} vectors for a vocabulary of {len(words)} words")
        info = info | {"vocabulary_sha256": _sha256(self.path / VOCABULARY)}
        tensors = {"vectors": np.ascontiguousarray(vectors, dtype=np.float32)}
        atomic_write(self.path / VECTORS, save_numpy(tensors, metadata={INFO_KEY: json.dumps(info)}))

    def vocabulary(self) -> tuple[list[str], np.ndarray]:
        """The words, most frequent first, and their counts (V,)."""
        path = self.path / VOCABULARY
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: not a word-vector run (no {VOCABULARY})")
        data = _read_json(path, "vocabulary", dict)
        try:
            words, counts = list(data["words"]), np.asarray(data["counts"], dtype=np.int64)
        except (ValueError, KeyError, TypeError) as exc:
            raise _damaged(path, "vocabulary", f"no words and counts: {exc!r}") from None
        if counts.ndim != 1 or len(words) != len(counts) or not all(isinstance(w, str) for w in words):
            raise _damaged(path, "vocabulary", "words and counts do not match")
        return words, counts

    def vectors(self) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
        """(words, counts (V,), vectors (V, dim) float32, info), checked to belong together."""
        words, counts = self.vocabulary()
        path = self.path / VECTORS
        if not path.exists():
            raise FileNotFoundError(f"{path}: no vectors in this run directory yet (training has not finished)")
        tensors, metadata = _read_safetensors(path, "vectors file", framework="numpy")
        info = _header_json(path, "vectors file", metadata, INFO_KEY, dict)
        vectors = tensors.get("vectors")
        if vectors is None or vectors.ndim != 2:
            raise _damaged(path, "vectors file", "no (words, dim) table named vectors")
        if info.get("vocabulary_sha256") != _sha256(self.path / VOCABULARY) or len(vectors) != len(words):
            raise RunFileError(f"{path}: the vectors do not belong to {VOCABULARY} (a run was interrupted mid-save?)")
        return words, counts, vectors, info

    def save_word2vec_state(self, state: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """word2vec's state at an epoch's end (``tensors``: tables and torch's generator state; ``info``:
        epochs done, numpy's generator state)."""
        atomic_write(self.path / CHECKPOINT, save_numpy(state, metadata={"state": json.dumps(info)}))

    def word2vec_state(self, shapes: dict[str, list[int]]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The state ``save_word2vec_state`` saved, whose tensors must have the names and ``shapes`` of a fresh
        state's (else a ``RunFileError`` naming the file)."""
        path = self.path / CHECKPOINT
        if not path.exists():
            raise FileNotFoundError(f"{path}: nothing to resume (no epoch has finished)")
        tensors, metadata = _read_safetensors(path, "word2vec state", framework="numpy")
        _check_shapes(path, shapes, tensors, "tensors", "this run's word2vec")
        info = _header_json(path, "word2vec state", metadata, "state", dict)
        if not _is_int(info.get("epochs_done")) or not isinstance(info.get("rng"), dict):
            raise _damaged(path, "word2vec state", "no epochs_done and rng in its state")
        return tensors, info

    # --- the log --------------------------------------------------------------------

    def append_log(self, record: dict[str, Any]) -> None:
        """One epoch's record as one line, written with one call and flushed to disk."""
        with open(self.path / LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def log(self) -> list[dict[str, Any]]:
        """The per-epoch records (epoch, step, train_loss, ..., valid: {...}); a torn last line is left out. A line
        that is not such a record (JSON, with an integer epoch and step) is a ``RunFileError`` naming it."""
        path = self.path / LOG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: no {LOG} (not a seqlab run directory, or no epoch finished yet)")
        lines = path.read_bytes().split(b"\n")[:-1]  # the part after the last newline is an unfinished write
        records = []
        for lineno, line in enumerate(lines, 1):
            try:
                record = _json(line, dict)
            except ValueError as exc:
                raise RunFileError(f"{path}:{lineno}: not a JSON record ({_one_line(exc)})") from None
            missing = [key for key in ("epoch", "step") if not _is_int(record.get(key))]
            if missing:
                raise RunFileError(f"{path}:{lineno}: not an epoch's record (no integer {' and '.join(missing)})")
            records.append(record)
        return records

    def truncate_log(self, epoch: int) -> None:
        """Keep only the records of the epochs before ``epoch``, where a resumed run's position is (its epoch in
        progress). A record is written at its epoch's end, before the checkpoint that moves the position on to
        the next epoch; so a record of ``epoch`` or later is of work that the resumed run does again (a run
        killed after an epoch's record and before that checkpoint has it, even when its last checkpoint was
        taken at the epoch's last step), and one that is kept is of an epoch no run will do again."""
        if self.has_log():
            kept = [record for record in self.log() if record["epoch"] < epoch]
            atomic_write(self.path / LOG, "".join(json.dumps(record) + "\n" for record in kept))

    # --- the training state ---------------------------------------------------------

    def save_checkpoint(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        state: dict[str, Any],
        carried: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """One file holds the whole training state; ``state`` (epoch, position, counters) goes in its metadata,
        ``carried`` (what the next batch starts from: a language model's hidden state) beside the weights."""
        tensors = {f"model.{k}": v for k, v in _weights(model).items()}
        tensors.update({f"carried.{k}": v.detach().contiguous().clone() for k, v in (carried or {}).items()})
        optim = optimizer.state_dict()
        for index, slots in optim["state"].items():
            for slot, value in slots.items():
                tensors[f"optim.{index}.{slot}"] = value.detach().clone()
        tensors["rng.torch"] = torch.get_rng_state()
        metadata = {
            "state": json.dumps(state),
            "param_groups": json.dumps(optim["param_groups"]),
            "scheduler": json.dumps(scheduler.state_dict()),
        }
        atomic_write(self.path / CHECKPOINT, save_safetensors(tensors, metadata=metadata))

    def load_checkpoint(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """Restore what ``save_checkpoint`` wrote and return its ``state`` and what was ``carried``."""
        path = self.path / CHECKPOINT
        if not path.exists():
            raise FileNotFoundError(f"{path}: nothing to resume (no checkpoint was saved yet)")
        tensors, metadata = _read_safetensors(path, "checkpoint")
        state = _header_json(path, "checkpoint", metadata, "state", dict)
        param_groups = _header_json(path, "checkpoint", metadata, "param_groups", list)
        schedule = _header_json(path, "checkpoint", metadata, "scheduler", dict)
        if "rng.torch" not in tensors:
            raise _damaged(path, "checkpoint", "no rng.torch")
        weights = _fitting(path, model, {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
        slots = _optimizer_slots(path, model, tensors)
        model.load_state_dict(weights)
        try:
            optimizer.load_state_dict({"state": slots, "param_groups": param_groups})
            scheduler.load_state_dict(schedule)
        except (KeyError, TypeError, ValueError) as exc:  # what torch raises for another optimizer's state
            raise RunFileError(f"{path}: the optimizer's state does not fit this run's ({_one_line(repr(exc))})") from None
        torch.set_rng_state(tensors["rng.torch"])
        carried = {k[len("carried.") :]: v for k, v in tensors.items() if k.startswith("carried.")}
        return state, carried


def _read_safetensors(path: Path, what: str, framework: Literal["pt", "numpy"] = "pt", tensors: bool = True
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
        raise _damaged(path, what, exc) from None
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])  # the format: size (u64 LE), JSON
    return loaded, header.get("__metadata__") or {}


def _fitting(path: Path, model: nn.Module, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` if they are ``model``'s weights, name for name and shape for shape; else a ``RunFileError``
    that names ``path`` and the first differences."""
    _check_shapes(path, {name: list(t.shape) for name, t in model.state_dict().items()}, tensors, "weights",
                  "this run's model")
    return tensors


def _check_shapes(path: Path, shapes: dict[str, list[int]], tensors: Mapping[str, torch.Tensor | np.ndarray],
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


def _optimizer_slots(path: Path, model: nn.Module, tensors: dict[str, torch.Tensor]) -> dict[int, dict[str, torch.Tensor]]:
    """The checkpoint's optimizer state by parameter index (``optim.{index}.{slot}``), each moment checked to
    have its parameter's shape (a scalar ``step`` aside)."""
    shapes = [list(p.shape) for p in model.parameters()]
    slots: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, index, slot = key.split(".", 2)
            fits = index.isdigit() and int(index) < len(shapes)
            if not fits or (slot != "step" and list(value.shape) != shapes[int(index)]):
                raise RunFileError(f"{path}: the optimizer's state does not fit this run's model ({key})")
            slots.setdefault(int(index), {})[slot] = value
    return slots


def _read_tokenizer(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_json(path.read_bytes().decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON, not a tokenizer
        raise RunFileError(f"{path}: {_one_line(exc)}") from None


def _read_json(path: Path, what: str, kind: type[T]) -> T:
    """A JSON file's value, which must be a ``kind`` (dict or list); else a ``RunFileError`` naming the file."""
    try:
        return _json(path.read_bytes(), kind)
    except ValueError as exc:
        raise _damaged(path, what, exc) from None


def _header_json(path: Path, what: str, metadata: dict[str, str], key: str, kind: type[T]) -> T:
    """The JSON ``kind`` under ``key`` in a safetensors file's metadata; else a ``RunFileError`` naming the file."""
    if key not in metadata:
        raise _damaged(path, what, f"no {key} in its header")
    try:
        return _json(metadata[key], kind)
    except ValueError as exc:
        raise _damaged(path, what, f"{key}: {exc}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _model_header(path: Path, metadata: dict[str, str]) -> dict[str, Any]:
    """The description of a weight file's model (epoch, step, valid), from its header's metadata."""
    return _described(path, _header_json(path, "model file", metadata, INFO_KEY, dict))


def _described(path: Path, info: dict[str, Any]) -> dict[str, Any]:
    """A model's description (``info``), if it says which epoch and step the weights are of."""
    if not all(_is_int(info.get(key)) for key in ("epoch", "step")):
        raise RunFileError(f"{path}: not a seqlab model description (no epoch and step)")
    return info


def _json(text: str | bytes, kind: type[T]) -> T:
    """``text`` (bytes: UTF-8) as JSON, which must be a ``kind``; a ``ValueError`` says what is wrong."""
    value = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    if not isinstance(value, kind):
        raise ValueError(f"a JSON {type(value).__name__} where a {kind.__name__} belongs")
    return value


def _damaged(path: Path, what: str, reason: object) -> RunFileError:
    return RunFileError(f"{path}: not a seqlab {what} (damaged or truncated: {_one_line(reason)})")


def _one_line(reason: object) -> str:
    return " ".join(str(reason).split())


def _weights(model: nn.Module | dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Cloned so that tied parameters (shared memory) can be stored under both names.
    tensors = model.state_dict() if isinstance(model, nn.Module) else model
    return {name: t.detach().contiguous().clone() for name, t in tensors.items()}


def _vocabulary_json(words: list[str], counts: np.ndarray) -> str:
    return json.dumps({"words": words, "counts": [int(c) for c in counts]}, ensure_ascii=False)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
