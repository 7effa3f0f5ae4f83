"""JoeyNMT 2.3.0 on the book's date task with seqlab's tokens: what ``select_joeynmt.py`` and ``date_race.py`` share.

JoeyNMT reads the pairs as seqlab trains on them: the sources as the BPE pieces of
``configs/book/date-fast.yaml`` (learned on the training sources, as ``seqlab train`` learns them;
JoeyNMT reads them as words), the targets as characters. Its model has the sizes of ``date-fast.yaml``
(layers, d_model, heads, d_ff, pre-/post-LN, dropout). A recipe is a variant of
``benchmarks/searches/joeynmt-date.yaml``: dotted overrides of the JoeyNMT config
``benchmarks/peers/joeynmt_date.yaml``. JoeyNMT validates on seqlab's valid split after every epoch
and is stopped after the first epoch at ≥ TARGET % or after the recipe's epochs.
"""

from __future__ import annotations

import math
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from seqlab.config import load_config
from seqlab.data import Pair, load_splits
from seqlab.model.transformer import TransformerConfig
from seqlab.tokenizer import Tokenizer, learn_tokenizers

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "book" / "date-fast.yaml"
TEMPLATE = ROOT / "benchmarks" / "peers" / "joeynmt_date.yaml"
SEARCH = ROOT / "benchmarks" / "searches" / "joeynmt-date.yaml"
TARGET = 99.9


def recipes() -> tuple[dict[str, list[str]], str]:
    """The variants of the search file and the name of the one that is seqlab's recipe in JoeyNMT's options."""
    search = yaml.safe_load(SEARCH.read_text(encoding="utf-8"))
    return search["variants"], search["same_recipe"]


def model_sizes() -> TransformerConfig:
    """The model of ``date-fast.yaml``, which JoeyNMT's model copies."""
    model = load_config(CONFIG).model
    if not isinstance(model, TransformerConfig):
        raise SystemExit(f"{CONFIG}: JoeyNMT races seqlab's Transformer, not a {type(model).__name__}")
    return model


def source_tokenizer(train: list[Pair]) -> Tokenizer:
    """The source tokenizer ``seqlab train configs/book/date-fast.yaml`` learns on these training pairs."""
    return learn_tokenizers(train, load_config(CONFIG).tokens)[0]


def date_splits(data_dir: Path) -> Mapping[str, list[Pair]]:
    """The splits of ``date-fast.yaml``'s data in ``data_dir``."""
    return load_splits(load_config(CONFIG).data, data_dir)


def write_split(work: Path, name: str, pairs: list[Pair], tokenizer: Tokenizer) -> Path:
    """``work/name.src`` (the source pieces, space-separated) and ``work/name.trg``; returns their common prefix."""
    (work / f"{name}.src").write_text("".join(" ".join(tokenizer.tokens(s)) + "\n" for s, _ in pairs), encoding="utf-8")
    (work / f"{name}.trg").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return work / name


def sized_template(m: TransformerConfig) -> dict[str, Any]:
    """The JoeyNMT template with the model sizes of ``m`` (layers, heads, d_model, d_ff, dropout, pre-/post-LN)."""
    cfg = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    for side in ("encoder", "decoder"):
        cfg["model"][side] |= {"num_layers": m.num_layers, "num_heads": m.num_heads, "hidden_size": m.d_model,
                               "ff_size": m.d_ff, "dropout": m.dropout, "layer_norm": m.norm}
        cfg["model"][side]["embeddings"]["embedding_dim"] = m.d_model
    return cfg


def joey_config(data: dict[str, Path], overrides: list[str], train_pairs: int, model_dir: Path) -> dict[str, Any]:
    """The template, the model sizes of date-fast.yaml, then the recipe's overrides; one validation per epoch."""
    cfg = sized_template(model_sizes())
    cfg["data"] |= {name: str(prefix) for name, prefix in data.items()}
    for item in overrides:
        key, value = item.split("=", 1)
        *path, last = key.split(".")
        node = cfg
        for part in path:
            node = node[part]
        node[last] = yaml.safe_load(value)
    steps_per_epoch = math.ceil(train_pairs / cfg["training"]["batch_size"])
    cfg["training"] |= {"validation_freq": steps_per_epoch, "logging_freq": steps_per_epoch,
                        "model_dir": str(model_dir), "keep_best_ckpts": -1}
    return cfg


def train(python: Path, data: dict[str, Path], overrides: list[str], train_pairs: int, name: str) -> dict[str, Any]:
    """Train one recipe until the first epoch at ≥ TARGET % on valid or its last epoch; its epochs and files."""
    work = Path(tempfile.mkdtemp(prefix=f"joey-date-{name}-"))
    cfg = joey_config(data, overrides, train_pairs, work / "model")
    steps_per_epoch = cfg["training"]["validation_freq"]
    (work / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    log, validations = work / "model" / "train.log", work / "model" / "validations.txt"
    process = subprocess.Popen([str(python), "-m", "joeynmt", "train", str(work / "config.yaml"), "--skip-test"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None:
        time.sleep(1)
        rows = epochs(log, validations, steps_per_epoch)
        if rows and rows[-1]["valid"] >= TARGET and len(rows) < cfg["training"]["epochs"]:
            process.terminate()  # its checkpoint was saved before the validation was written; after the last epoch
            # JoeyNMT stops by itself, writing the checkpoint again, which a signal would cut short
    process.wait()
    rows = epochs(log, validations, steps_per_epoch)
    if not rows:
        raise RuntimeError(f"JoeyNMT produced no epoch; see {log}")
    params = re.search(r"Total params: (\d+)", log.read_text(encoding="utf-8"))
    return {"name": name, "overrides": overrides, "epochs": rows, "params": int(params.group(1)) if params else None,
            "dir": str(work), "seconds_to_target": seconds_to_target([(r["train_s"], r["valid"]) for r in rows])}


def epochs(log: Path, validations: Path, steps_per_epoch: int) -> list[dict[str, Any]]:
    """Finished epochs: training seconds (JoeyNMT's, validation excluded), target tokens, valid exact match %."""
    if not (log.exists() and validations.exists()):
        return []
    done = re.findall(r"Epoch\s+(\d+), total training loss: [\d.]+, num. of seqs: \d+, num. of tokens: (\d+), "
                      r"([\d.]+)\[sec\]", log.read_text(encoding="utf-8"))
    accuracy = {int(steps) // steps_per_epoch: float(acc) for steps, acc in
                re.findall(r"Steps: (\d+).*?sequence_accuracy: ([\d.]+)", validations.read_text(encoding="utf-8"))}
    return [{"epoch": int(e), "tokens": int(tokens), "train_s": float(s), "valid": accuracy[int(e)]}
            for e, tokens, s in done if int(e) in accuracy]


def seconds_to_target(rows: list[tuple[float, float]]) -> float | None:
    """(seconds, valid exact match %) per epoch -> the cumulative seconds at the first epoch at ≥ TARGET."""
    total = 0.0
    for seconds, accuracy in rows:
        total += seconds
        if accuracy >= TARGET:
            return total
    return None


def rank_key(run: dict[str, Any]) -> tuple[bool, float]:
    """Reached the target on valid first (sooner is better), then the best valid exact match."""
    if run["seconds_to_target"] is not None:
        return (False, run["seconds_to_target"])
    return (True, -max(r["valid"] for r in run["epochs"]))


def tokens_per_second(run: dict[str, Any]) -> float:
    return sum(r["tokens"] for r in run["epochs"]) / sum(r["train_s"] for r in run["epochs"])
