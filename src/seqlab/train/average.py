"""Checkpoint averaging: the mean of the weights of a run's last epochs, as a run directory of its own.

The Transformer paper's base models average the last 5 checkpoints (Vaswani et al. 2017, §6.1); the mean of
weights late in training sits nearer the middle of the basin the optimizer circles in. ``train.keep_checkpoints:
K`` keeps the last K epochs' weights (``RunDir.keep_epoch``); ``average_run`` takes the last N of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from seqlab.rundir import INFO_KEY, RunDir


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the weight files' tensors (in float64, stored in each tensor's own dtype;
    integer tensors, which are not trained, are the last file's)."""
    first = load_file(str(paths[0]))
    sums = {name: t.double() for name, t in first.items()}
    last = first
    for path in paths[1:]:
        last = load_file(str(path))
        if last.keys() != first.keys():
            raise ValueError(f"{path}: not the same model as {paths[0]} (other weight names)")
        for name, t in last.items():
            sums[name] += t.double()
    return {name: (total / len(paths)).to(first[name].dtype) if first[name].is_floating_point() else last[name]
            for name, total in sums.items()}


def epoch_info(path: Path) -> dict[str, Any]:
    """What a kept epoch's weights are (epoch, step, valid), from its header."""
    with safe_open(str(path), framework="pt") as f:
        return json.loads((f.metadata() or {})[INFO_KEY])


def average_run(run: RunDir, last: int, out: RunDir, score: Callable[[RunDir], dict[str, Any]]) -> dict[str, Any]:
    """Average ``run``'s last ``last`` kept epochs into the run directory ``out`` (its config, tokenizers and
    labels copied), scored by ``score`` (the valid metrics); returns the model's description, whose ``averaged``
    lists the epochs."""
    kept = run.kept_epochs()
    if last < 1:
        raise ValueError(f"--last must be at least 1, got {last}")
    if len(kept) < last:
        raise ValueError(f"{run.path}: {len(kept)} kept epochs, fewer than --last {last} "
                         "(train with train.keep_checkpoints at least that many)")
    if out.has_run():
        raise ValueError(f"{out.path} already holds a run: choose another --out")
    paths = kept[-last:]
    infos = [epoch_info(path) for path in paths]
    weights = average_weights(paths)
    info: dict[str, Any] = {"epoch": infos[-1]["epoch"], "step": infos[-1]["step"],
                            "averaged": [i["epoch"] for i in infos], "valid": {}}
    out.path.mkdir(parents=True, exist_ok=True)
    out.save_model(weights, info)
    run.copy_model_files(out)  # the config last: only a whole run directory is a run
    info["valid"] = score(out)
    out.save_model(weights, info)
    return info
