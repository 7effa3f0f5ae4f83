"""Does a change of code leave training bit for bit the same? One config trained at two commits of this repository,
one after the other on this machine, every epoch's losses and the final weights compared.

    python benchmarks/same_training.py configs/date.yaml --before f0b9cae [--after HEAD] \
        [--data-dir ../shared/data] [--set KEY=VALUE ...]

Each commit is checked out into a temporary git worktree and trains ``CONFIG`` (the file as it is in this work
tree, so both read the same config) with ``python -m seqlab train`` from that worktree's ``src/``, in a process
of its own, with the same threads. The two runs agree when every epoch's train and valid loss in ``log.jsonl`` is
equal and every tensor of ``model.safetensors`` is equal (``torch.equal``); the script prints the epochs and the
weights that differ, and exits with status 1 if any do. Bit-identity holds on one machine with one thread count:
compare two commits on the same machine, not two machines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def checked_out(repo: Path, rev: str, work: Path) -> Iterator[Path]:
    """``repo`` at commit ``rev``, as a git worktree in ``work`` for as long as the block runs."""
    tree = work / f"tree-{rev}"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "--force", str(tree), rev], check=True,
                   capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], check=True)


def train_at(repo: Path, rev: str, config: Path, work: Path, data_dir: str | None, overrides: list[str]) -> Path:
    """The run of ``config`` trained by the code of ``repo`` at commit ``rev`` (a worktree in ``work``)."""
    run = work / f"run-{rev}"
    command = [sys.executable, "-m", "seqlab", "train", str(config), "--out", str(run)]
    command += (["--data-dir", data_dir] if data_dir else []) + [arg for item in overrides for arg in ("--set", item)]
    with checked_out(repo, rev, work) as tree:
        subprocess.run(command, check=True, env=os.environ | {"PYTHONPATH": str(tree / "src")}, cwd=work)
    return run


def differences(before: Path, after: Path) -> list[str]:
    """What differs between two runs: per epoch the losses of their logs, then the tensors of their models."""
    import torch
    from safetensors.torch import load_file

    logs = [[json.loads(line) for line in (run / "log.jsonl").read_text(encoding="utf-8").splitlines()]
            for run in (before, after)]
    found = [] if len(logs[0]) == len(logs[1]) else [f"{len(logs[0])} epochs before, {len(logs[1])} after"]
    for a, b in zip(*logs):
        for key, x, y in [("train loss", a["train_loss"], b["train_loss"]),
                          ("valid loss", a["valid"]["loss"], b["valid"]["loss"])]:
            if x != y:
                found.append(f"epoch {a['epoch']}: {key} {x!r} before, {y!r} after")
    weights = [load_file(run / "model.safetensors") for run in (before, after)]
    if weights[0].keys() != weights[1].keys():
        found.append(f"weights named differently: {sorted(weights[0].keys() ^ weights[1].keys())}")
    found += [f"weight {name} differs (largest difference {float((weights[0][name] - weights[1][name]).abs().max()):g})"
              for name in sorted(weights[0].keys() & weights[1].keys())
              if not torch.equal(weights[0][name], weights[1][name])]
    return found


def main(argv: list[str] | None = None) -> None:
    """Train at both commits, print what differs (or that nothing does); exit 1 if anything does."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it (default HEAD)")
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="a config override, for both")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository (default: this one)")
    args = parser.parse_args(argv)
    data_dir = str(Path(args.data_dir).resolve()) if args.data_dir else None
    with tempfile.TemporaryDirectory(prefix="same-training-") as work:
        runs = [train_at(args.repo, rev, args.config.resolve(), Path(work), data_dir, args.overrides)
                for rev in (args.before, args.after)]
        found = differences(*runs)
        epochs = len((runs[1] / "log.jsonl").read_text(encoding="utf-8").splitlines())
    if found:
        print(f"{args.before} and {args.after} train {args.config} differently:\n  " + "\n  ".join(found))
        raise SystemExit(1)
    print(f"{args.before} and {args.after} train {args.config} bit for bit the same: {epochs} epochs of losses "
          "and every weight equal")


if __name__ == "__main__":
    main()
