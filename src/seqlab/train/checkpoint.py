"""The run directory: everything needed to translate with a model or resume its training.

    RUN_DIR/
      config.yaml              the resolved configuration
      source_tokenizer.json    tokenizers (seqlab JSON wrapping the ``tokenizers`` pipeline)
      target_tokenizer.json
      model.safetensors        the best weights so far      + model.json (epoch, step, valid metrics)
      checkpoint.safetensors   the latest training state: weights, Adam moments, RNG, position
      log.jsonl                one JSON object per epoch

No pickle anywhere: tensors go to safetensors, the rest to JSON/YAML. Every
file is written to a temporary name in the same directory and renamed into
place, so a run killed mid-write never leaves a broken file behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import nn

from seqlab.config import Config, dump_config, load_config
from seqlab.files import atomic_write

CONFIG = "config.yaml"
SOURCE_TOKENIZER = "source_tokenizer.json"
TARGET_TOKENIZER = "target_tokenizer.json"
MODEL = "model.safetensors"
MODEL_INFO = "model.json"
CHECKPOINT = "checkpoint.safetensors"
LOG = "log.jsonl"


def save_run_config(run_dir: Path, config: Config) -> None:
    atomic_write(run_dir / CONFIG, dump_config(config))


def load_run_config(run_dir: Path) -> Config:
    path = Path(run_dir) / CONFIG
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: not a seqlab run directory (no {CONFIG})")
    return load_config(path)


def read_log(run_dir: Path) -> list[dict[str, Any]]:
    """The per-epoch records of ``log.jsonl`` (epoch, step, train_loss, ..., valid: {loss, exact_match, bleu})."""
    path = Path(run_dir) / LOG
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: no {LOG} (not a seqlab run directory, or no epoch finished yet)")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not a JSON record ({exc.msg})") from None
    return records


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    # Cloned so that tied parameters (shared memory) can be stored under both names.
    return {name: t.detach().contiguous().clone() for name, t in model.state_dict().items()}


def save_model(run_dir: Path, model: nn.Module, info: dict[str, Any]) -> None:
    """The weights used for translation (model.safetensors) and what they are (model.json)."""
    atomic_write(run_dir / MODEL, save_safetensors(_weights(model), metadata={"step": str(info["step"])}))
    atomic_write(run_dir / MODEL_INFO, json.dumps(info, indent=2) + "\n")


def load_model_weights(run_dir: Path, model: nn.Module) -> dict[str, Any]:
    path = run_dir / MODEL
    if not path.exists():
        raise FileNotFoundError(f"{path}: no trained model in this run directory yet (no epoch has finished)")
    model.load_state_dict(load_safetensors(path.read_bytes()))
    return read_model_info(run_dir)


def read_model_info(run_dir: Path) -> dict[str, Any]:
    """What the saved model is (model.json): its epoch, step and valid metrics."""
    return json.loads((Path(run_dir) / MODEL_INFO).read_text(encoding="utf-8"))


def save_checkpoint(
    run_dir: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    state: dict[str, Any],
) -> None:
    """One file holds the whole training state; ``state`` (epoch, position, counters) goes in its metadata."""
    tensors = {f"model.{k}": v for k, v in _weights(model).items()}
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
    atomic_write(run_dir / CHECKPOINT, save_safetensors(tensors, metadata=metadata))


def load_checkpoint(
    run_dir: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> dict[str, Any]:
    """Restore what ``save_checkpoint`` wrote and return its ``state``."""
    path = run_dir / CHECKPOINT
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
    return json.loads(metadata["state"])
