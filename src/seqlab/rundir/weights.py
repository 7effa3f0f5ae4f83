"""The weights of a run directory's model: the best so far (``model.safetensors``, what they are in its header),
the kept epochs' for ``seqlab average``, an export's description."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as save_safetensors
from torch import nn

from seqlab.files import atomic_write
from seqlab.rundir.core import (
    EPOCHS,
    EXPORTED_INFO,
    INFO_KEY,
    LEGACY_MODEL_INFO,
    MODEL,
    MODEL_FILES,
    RunCore,
    RunFileError,
    check_shapes,
    header_json,
    is_int,
    read_json,
    read_safetensors,
)


class Weights(RunCore):
    """The model's weights in a run directory."""

    def save_model(self, model: nn.Module | dict[str, torch.Tensor], info: dict[str, Any]) -> None:
        """The weights used for translation (a model's, or named tensors) and what they are (``info``: epoch,
        step, valid), in one file."""
        atomic_write(self.path / MODEL, save_safetensors(weights_of(model), metadata={INFO_KEY: json.dumps(info)}))

    def keep_epoch(self, model: nn.Module, info: dict[str, Any], keep: int) -> None:
        """The weights at an epoch's end as ``epochs/epoch-N.safetensors``; only the last ``keep`` epochs stay."""
        (self.path / EPOCHS).mkdir(exist_ok=True)
        path = self.path / EPOCHS / f"epoch-{info['epoch']}.safetensors"
        atomic_write(path, save_safetensors(weights_of(model), metadata={INFO_KEY: json.dumps(info)}))
        for old in self.kept_epochs()[:-keep]:
            old.unlink()

    def kept_epochs(self) -> list[Path]:
        """The kept epochs' weight files, oldest first."""
        files = (self.path / EPOCHS).glob("epoch-*.safetensors")
        return sorted(files, key=lambda path: int(path.stem.split("-")[1]))

    def kept_epoch(self, path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """The weights in one of ``kept_epochs``' files and what they are (epoch, step, valid)."""
        tensors, metadata = read_safetensors(path, "model file")
        return tensors, model_header(path, metadata)

    def copy_model_files(self, out: RunCore) -> None:
        """Copy what describes the model (config, tokenizers, labels) into the run directory ``out``."""
        out.path.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            if (self.path / name).exists():
                atomic_write(out.path / name, (self.path / name).read_bytes())

    def load_model(self, model: nn.Module) -> dict[str, Any]:
        """Load the saved weights into ``model``; returns what they are (``model_info``)."""
        path = self._model_path()
        tensors, metadata = read_safetensors(path, "model file")
        info = self._model_info(path, metadata)
        model.load_state_dict(fitting(path, model, tensors))
        return info

    def save_model_info(self, info: dict[str, Any]) -> None:
        """What an exported model is (its run's epoch, step, valid metrics and the engine), beside its weights."""
        atomic_write(self.path / EXPORTED_INFO, json.dumps(info, ensure_ascii=False) + "\n")

    def model_info(self) -> dict[str, Any]:
        """What the saved model is: its epoch, step and valid metrics (an export's: also its engine)."""
        if not (self.path / MODEL).exists() and (self.path / EXPORTED_INFO).exists():
            return described(self.path / EXPORTED_INFO, read_json(self.path / EXPORTED_INFO, "model description", dict))
        path = self._model_path()
        _, metadata = read_safetensors(path, "model file", tensors=False)
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
            return model_header(path, metadata)
        legacy = self.path / LEGACY_MODEL_INFO
        return described(legacy, read_json(legacy, "model description", dict))


def fitting(path: Path, model: nn.Module, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` if they are ``model``'s weights, name for name and shape for shape; else a ``RunFileError``
    that names ``path`` and the first differences."""
    check_shapes(path, {name: list(t.shape) for name, t in model.state_dict().items()}, tensors, "weights",
                  "this run's model")
    return tensors

def model_header(path: Path, metadata: dict[str, str]) -> dict[str, Any]:
    """The description of a weight file's model (epoch, step, valid), from its header's metadata."""
    return described(path, header_json(path, "model file", metadata, INFO_KEY, dict))

def described(path: Path, info: dict[str, Any]) -> dict[str, Any]:
    """A model's description (``info``), if it says which epoch and step the weights are of."""
    if not all(is_int(info.get(key)) for key in ("epoch", "step")):
        raise RunFileError(f"{path}: not a seqlab model description (no epoch and step)")
    return info

def weights_of(model: nn.Module | dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Cloned so that tied parameters (shared memory) can be stored under both names.
    tensors = model.state_dict() if isinstance(model, nn.Module) else model
    return {name: t.detach().contiguous().clone() for name, t in tensors.items()}
