"""Checkpoint averaging: the mean of the weights of a run's last epochs, as a run directory of its own.

The Transformer paper's base models average the last 5 checkpoints (Vaswani et al. 2017, §6.1); the mean of
weights late in training sits nearer the middle of the basin the optimizer circles in. ``train.keep_checkpoints:
K`` keeps the last K epochs' weights (``RunDir.keep_epoch``); ``average_run`` takes the last N of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from seqlab.decoding.options import GREEDY
from seqlab.registry import kind_of_run
from seqlab.rundir import RunDir


def average_weights(run: RunDir, paths: list[Path]) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The element-wise mean of the kept epochs' weights in ``paths`` (in float64, stored in each tensor's own
    dtype; integer tensors, which are not trained, are the last file's), and what each file is (epoch, step,
    valid), from its header."""
    first, info = run.kept_epoch(paths[0])
    infos = [info]
    sums = {name: t.double() for name, t in first.items()}
    last = first
    for path in paths[1:]:
        last, info = run.kept_epoch(path)
        infos.append(info)
        if last.keys() != first.keys():
            raise ValueError(f"{path}: not the same model as {paths[0]} (other weight names)")
        for name, t in last.items():
            sums[name] += t.double()
    mean = {name: (total / len(paths)).to(first[name].dtype) if first[name].is_floating_point() else last[name]
            for name, total in sums.items()}
    return mean, infos


def average_run(run: RunDir, last: int, out: RunDir, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Average ``run``'s last ``last`` kept epochs into the run directory ``out`` (its config, tokenizers and
    labels copied), scored on valid as its kind scores it (``Kind.evaluate``; the data in ``data_dir``), a
    seq2seq model decoded greedily as training scores its epochs (``GREEDY``); returns
    the model's description, whose ``averaged`` lists the epochs."""
    kept = run.kept_epochs()
    if last < 1:
        raise ValueError(f"--last must be at least 1, got {last}")
    if len(kept) < last:
        raise ValueError(f"{run.path}: {len(kept)} kept epochs, fewer than --last {last} "
                         "(train with train.keep_checkpoints at least that many)")
    if out.has_run():
        raise ValueError(f"{out.path} already holds a run: choose another --out")
    weights, infos = average_weights(run, kept[-last:])
    info: dict[str, Any] = {"epoch": infos[-1]["epoch"], "step": infos[-1]["step"],
                            "averaged": [i["epoch"] for i in infos], "valid": {}}
    out.path.mkdir(parents=True, exist_ok=True)
    out.save_model(weights, info)
    run.copy_model_files(out)  # the config last: only a whole run directory is a run
    info["valid"] = kind_of_run(out.path).evaluate(out.path, "valid", None if data_dir is None else Path(data_dir),
                                                   GREEDY)
    out.save_model(weights, info)
    return info
