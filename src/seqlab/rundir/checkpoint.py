"""A run directory's training state (``checkpoint.safetensors``): weights, Adam's moments, the random state, the
position, and what a batch hands to the next; one file, replaced whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as save_safetensors
from torch import nn

from seqlab.files import atomic_write
from seqlab.rundir.core import CHECKPOINT, RunCore, RunFileError, damaged, header_json, one_line, read_safetensors
from seqlab.rundir.weights import fitting, weights_of


class Checkpoints(RunCore):
    """Save and restore the whole training state."""

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
        tensors = {f"model.{k}": v for k, v in weights_of(model).items()}
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
        tensors, metadata = read_safetensors(path, "checkpoint")
        state = header_json(path, "checkpoint", metadata, "state", dict)
        param_groups = header_json(path, "checkpoint", metadata, "param_groups", list)
        schedule = header_json(path, "checkpoint", metadata, "scheduler", dict)
        if "rng.torch" not in tensors:
            raise damaged(path, "checkpoint", "no rng.torch")
        weights = fitting(path, model, {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
        slots = _optimizer_slots(path, model, tensors)
        model.load_state_dict(weights)
        try:
            optimizer.load_state_dict({"state": slots, "param_groups": param_groups})
            scheduler.load_state_dict(schedule)
        except (KeyError, TypeError, ValueError) as exc:  # what torch raises for another optimizer's state
            raise RunFileError(f"{path}: the optimizer's state does not fit this run's ({one_line(repr(exc))})") from None
        torch.set_rng_state(tensors["rng.torch"])
        carried = {k[len("carried.") :]: v for k, v in tensors.items() if k.startswith("carried.")}
        return state, carried


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
