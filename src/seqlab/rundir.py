"""The run directory: everything needed to use a trained model or to resume its training.

    RUN_DIR/
      config.yaml              the resolved configuration
      source_tokenizer.json    tokenizers (seqlab JSON wrapping the ``tokenizers`` pipeline)
      target_tokenizer.json
      model.safetensors        the best weights so far; what they are (epoch, step, valid metrics) in its header
      checkpoint.safetensors   the latest training state: weights, Adam moments, RNG, position
      log.jsonl                one JSON object per epoch
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
so a run killed mid-write keeps the previous file; the weights and their description are one
file, so they are replaced together. The log is appended one whole line per write and read
without a torn last line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.numpy import save as save_numpy
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import nn

from seqlab.config import Config, ConfigError, VectorsConfig, changed_keys, dump_config, load_config
from seqlab.files import atomic_write
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

    def check_start(self, config: Config | VectorsConfig, resume: bool, fixed: Sequence[str]) -> None:
        """Before training starts: refuse to overwrite a run; on resume, refuse a config whose ``fixed``
        sections differ from the saved one (they decide the data or the model)."""
        if not resume:
            if self.has_run():
                raise ConfigError(f"{self.path} already holds a run: pass --resume to continue it, or choose another --out")
            return
        if not self.has_checkpoint():
            raise ConfigError(f"{self.path}: nothing to resume (no {CHECKPOINT})")
        saved = self.vectors_config() if isinstance(config, VectorsConfig) else self.config()
        changed = changed_keys(saved, config, fixed)
        if changed:
            raise ConfigError(f"cannot resume {self.path} with a different {', '.join(changed)} "
                              f"(only what is outside {', '.join(fixed)} may change)")

    # --- config and tokenizers ------------------------------------------------------

    def save_config(self, config: Config | VectorsConfig) -> None:
        atomic_write(self.path / CONFIG, dump_config(config))

    def config(self) -> Config:
        """The configuration of a model run (``seqlab train``); a word-vector run is refused with a hint."""
        if self.is_vectors():
            raise ValueError(f"{self.path}: a word-vector run; use seqlab vectors similar | analogy | eval | export")
        return load_config(self._config_path())

    def vectors_config(self) -> VectorsConfig:
        return load_config(self._config_path(), schema=VectorsConfig)

    def _config_path(self) -> Path:
        path = self.path / CONFIG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: not a seqlab run directory (no {CONFIG})")
        return path

    def save_tokenizers(self, source: Tokenizer, target: Tokenizer) -> None:
        atomic_write(self.path / SOURCE_TOKENIZER, source.to_json())
        atomic_write(self.path / TARGET_TOKENIZER, target.to_json())

    def tokenizers(self) -> tuple[Tokenizer, Tokenizer]:
        """The source and the target tokenizer (the same vocabulary twice when they are shared)."""
        source, target = (Tokenizer.from_json((self.path / name).read_text(encoding="utf-8"))
                          for name in (SOURCE_TOKENIZER, TARGET_TOKENIZER))
        return source, target

    def save_labels(self, labels: Sequence[str]) -> None:
        atomic_write(self.path / LABELS, json.dumps(list(labels), ensure_ascii=False) + "\n")

    def labels(self) -> list[str]:
        """A classifier's classes, in the order of its outputs."""
        path = self.path / LABELS
        try:
            labels = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: missing (a classifier's run directory holds its labels)") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
            raise ValueError(f"{path}: expected a list of label strings")
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

    def copy_model_files(self, out: RunDir) -> None:
        """Copy what describes the model (config, tokenizers, labels) into the run directory ``out``."""
        out.path.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            if (self.path / name).exists():
                atomic_write(out.path / name, (self.path / name).read_bytes())

    def load_model(self, model: nn.Module) -> dict[str, Any]:
        """Load the saved weights into ``model``; returns what they are (``model_info``)."""
        path = self.path / MODEL
        if not path.exists():
            raise FileNotFoundError(f"{path}: no trained model in this run directory yet (no epoch has finished)")
        model.load_state_dict(load_safetensors(path.read_bytes()))
        return self.model_info()

    def save_model_info(self, info: dict[str, Any]) -> None:
        """What an exported model is (its run's epoch, step, valid metrics and the engine), beside its weights."""
        atomic_write(self.path / EXPORTED_INFO, json.dumps(info, ensure_ascii=False) + "\n")

    def model_info(self) -> dict[str, Any]:
        """What the saved model is: its epoch, step and valid metrics (an export's: also its engine)."""
        path = self.path / MODEL
        if not path.exists() and (self.path / EXPORTED_INFO).exists():
            return json.loads((self.path / EXPORTED_INFO).read_text(encoding="utf-8"))
        if not path.exists():
            raise FileNotFoundError(f"{path}: no trained model in this run directory yet (no epoch has finished)")
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        if INFO_KEY in metadata:
            return json.loads(metadata[INFO_KEY])
        return json.loads((self.path / LEGACY_MODEL_INFO).read_text(encoding="utf-8"))

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
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            words, counts = list(data["words"]), np.asarray(data["counts"], dtype=np.int64)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a seqlab vocabulary ({exc})") from None
        if len(words) != len(counts) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"{path}: not a seqlab vocabulary (words and counts do not match)")
        return words, counts

    def vectors(self) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
        """(words, counts (V,), vectors (V, dim) float32, info), checked to belong together."""
        words, counts = self.vocabulary()
        path = self.path / VECTORS
        if not path.exists():
            raise FileNotFoundError(f"{path}: no vectors in this run directory yet (training has not finished)")
        try:
            with safe_open(str(path), framework="numpy") as f:
                info = json.loads((f.metadata() or {})[INFO_KEY])
                vectors = f.get_tensor("vectors")
        except Exception as exc:  # safetensors raises its own errors for a damaged file
            raise ValueError(f"{path}: not a seqlab vectors file ({exc})") from None
        if info.get("vocabulary_sha256") != _sha256(self.path / VOCABULARY) or len(vectors) != len(words):
            raise ValueError(f"{path}: the vectors do not belong to {VOCABULARY} (a run was interrupted mid-save?)")
        return words, counts, vectors, info

    def save_word2vec_state(self, state: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """word2vec's state at an epoch's end (``tensors``: tables and torch's generator state; ``info``:
        epochs done, numpy's generator state)."""
        atomic_write(self.path / CHECKPOINT, save_numpy(state, metadata={"state": json.dumps(info)}))

    def word2vec_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        path = self.path / CHECKPOINT
        if not path.exists():
            raise FileNotFoundError(f"{path}: nothing to resume (no epoch has finished)")
        with safe_open(str(path), framework="numpy") as f:
            info = json.loads((f.metadata() or {})["state"])
            return {key: f.get_tensor(key) for key in f.keys()}, info

    # --- the log --------------------------------------------------------------------

    def append_log(self, record: dict[str, Any]) -> None:
        """One epoch's record as one line, written with one call and flushed to disk."""
        with open(self.path / LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def log(self) -> list[dict[str, Any]]:
        """The per-epoch records (epoch, step, train_loss, ..., valid: {...}); a torn last line is left out."""
        path = self.path / LOG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: no {LOG} (not a seqlab run directory, or no epoch finished yet)")
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")[:-1]  # the part after the last newline is an unfinished write
        records = []
        for lineno, line in enumerate(lines, 1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not a JSON record ({exc.msg})") from None
        return records

    def truncate_log(self, step: int) -> None:
        """Drop the records written after ``step`` (those of a resumed run's lost work)."""
        if self.has_log():
            kept = [record for record in self.log() if record["step"] <= step]
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
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata()
        tensors = load_safetensors(path.read_bytes())
        model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
        slots: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, slot = key.split(".", 2)
                slots.setdefault(int(index), {})[slot] = value
        optimizer.load_state_dict({"state": slots, "param_groups": json.loads(metadata["param_groups"])})
        scheduler.load_state_dict(json.loads(metadata["scheduler"]))
        torch.set_rng_state(tensors["rng.torch"])
        carried = {k[len("carried.") :]: v for k, v in tensors.items() if k.startswith("carried.")}
        return json.loads(metadata["state"]), carried


def _weights(model: nn.Module | dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Cloned so that tied parameters (shared memory) can be stored under both names.
    tensors = model.state_dict() if isinstance(model, nn.Module) else model
    return {name: t.detach().contiguous().clone() for name, t in tensors.items()}


def _vocabulary_json(words: list[str], counts: np.ndarray) -> str:
    return json.dumps({"words": words, "counts": [int(c) for c in counts]}, ensure_ascii=False)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
