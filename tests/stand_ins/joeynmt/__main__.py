"""``python -m joeynmt train|test``: the files JoeyNMT writes, which the benchmarks read (see __init__.py)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import yaml

PAUSE_S = 5.0  # between epochs: a benchmark that stops JoeyNMT at its target stops it in this pause


def train(cfg: dict[str, Any]) -> None:
    """``model_dir/train.log`` (its parameters, a line per epoch) and ``validations.txt`` (a line per validation),
    written epoch by epoch; ``latest.ckpt``."""
    training = cfg["training"]
    model_dir = Path(training["model_dir"])
    model_dir.mkdir(parents=True)
    targets = Path(cfg["data"]["train"] + ".trg").read_text(encoding="utf-8").splitlines()
    Path(cfg["data"]["dev"] + ".src").read_text(encoding="utf-8")  # validated on
    (model_dir / "latest.ckpt").write_bytes(b"")
    with open(model_dir / "train.log", "w") as log, open(model_dir / "validations.txt", "w") as validations:
        log.write("Total params: 1234\n")
        for epoch in range(1, training["epochs"] + 1):
            if epoch > 1:
                time.sleep(PAUSE_S)
            accuracy = min(100.0, 1e5 * training["learning_rate"] * epoch)
            log.write(f"Epoch {epoch:3d}, total training loss: 1.00, num. of seqs: {len(targets)}, "
                      f"num. of tokens: {sum(map(len, targets))}, 0.50[sec]\n")
            validations.write(f"Steps: {epoch * training['validation_freq']}\tLoss: 1.00000\t"
                              f"sequence_accuracy: {accuracy:.2f}\n")
            log.flush()
            validations.flush()


def test(cfg: dict[str, Any], output_path: str) -> None:
    """``OUT.test``: the test references, every 4th left empty, from the checkpoint ``testing.load_model``."""
    if not Path(cfg["testing"]["load_model"]).exists():
        raise SystemExit(f"no checkpoint {cfg['testing']['load_model']}")
    references = Path(cfg["data"]["test"] + ".trg").read_text(encoding="utf-8").splitlines()
    Path(output_path + ".test").write_text("".join(("" if i % 4 == 0 else r) + "\n" for i, r in enumerate(references)),
                                           encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(prog="joeynmt")
    parser.add_argument("mode", choices=["train", "test"])
    parser.add_argument("config")
    parser.add_argument("--skip-test", action="store_true")
    parser.add_argument("--output-path")
    args = parser.parse_args()
    cfg = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    if args.mode == "train":
        train(cfg)
    else:
        test(cfg, args.output_path)


if __name__ == "__main__":
    main()
