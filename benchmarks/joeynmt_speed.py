"""Training speed next to JoeyNMT 2.3 on one config's model, tokens and batches: target tokens per training second.

    python benchmarks/joeynmt_speed.py configs/multi30k_de_en.yaml --data-dir ../shared/data [--pairs 8000]
                                       [--rounds 3] [--results DIR]

Both systems train one epoch on the first ``--pairs`` training pairs of the config (all where 0), in rounds that
take turns: seqlab in the precision ``auto`` picks, seqlab in fp32 where ``auto`` picks another, then JoeyNMT (a slow
spell of the machine falls on all of them). seqlab runs ``seqlab train CONFIG`` as a user does, the pairs written to
a data directory of their own; its training seconds and target tokens per second come from its log (validation
excluded). JoeyNMT (installed into ``--peer-venv`` as ``peer_decoding.py`` does) reads the pieces of seqlab's
tokenizers from the first run as words, each side with seqlab's vocabulary; its model has the config's sizes
(layers, d_model, heads, d_ff, pre-/post-LN, dropout, tied embeddings, label smoothing) and trains in float32 with
Adam; its seconds and target tokens come from its log's line for the epoch ("num. of tokens", which counts
<eos> as seqlab does). Batches: seqlab sorts by length and cuts at its token budget (``length_batches``). JoeyNMT
runs twice a round: on its own batches (shuffled pairs, no bucketing: more padding) and on seqlab's (the training
file written in the order of seqlab's batches, unshuffled), each at a budget set here so that its batches hold as
many target tokens on average as seqlab's (computed on the same pieces before any run). Prints a table per system (mean ±
sd and range over rounds, ratio of tokens/s to seqlab's) and records it in the scoreboard (``--results``).
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from joeynmt_date import sized_template
from peer_decoding import peer_python
from report import add_results_option, machine, markdown, publish, seqlab_train
from scoreboard import Result, Table, command, ratio_range, spread

from seqlab import precision
from seqlab.config import Config, load_config
from seqlab.data import Pair, load_splits
from seqlab.data.batching import length_batches
from seqlab.model.transformer import TransformerConfig
from seqlab.predictors.translator import load
from seqlab.rundir import RunDir
from seqlab.tokenizer import Tokenizer


def write_data(cfg: Config, data_dir: Path, pairs: int, out: Path) -> tuple[list[str], dict[str, list[Pair]]]:
    """The config's splits, its training pairs cut to ``pairs``, as plain aligned files in ``out``: the ``--set``
    overrides that point a run of the config at them, and the splits as written."""
    splits = {name: split[:pairs] if name == "train" and pairs else split
              for name, split in load_splits(cfg.data, data_dir).items()}
    overrides = ["data.corpus=null"]  # the splits as made from a corpus, now files of their own
    for name, rows in splits.items():
        for side, column in (("source", 0), ("target", 1)):
            path = out / f"{name}.{side}"
            path.write_text("".join(pair[column] + "\n" for pair in rows), encoding="utf-8")
            overrides.append(f"data.{name}.{side}={path}")
        overrides.append(f"data.{name}.format=aligned")
    return overrides, splits


def run_seqlab(config: str, data: list[str], label: str, extra: list[str]) -> dict[str, Any]:
    """``seqlab train`` for one epoch (validation on 100 valid pairs); its epoch's log."""
    run_dir = Path(tempfile.mkdtemp(prefix="seqlab-speed-")) / "run"
    sets = [*data, "train.epochs=1", "eval.valid_limit=100", *extra]
    seqlab_train(config, run_dir, sets)
    epoch = RunDir(run_dir).log()[-1]
    chosen = RunDir(run_dir).model_info().get("precision", label)
    print(f"seqlab ({label} = {chosen}): {epoch['train_tokens_per_s']:,.0f} target tokens/s", file=sys.stderr)
    return {"system": f"seqlab ({label} = {chosen})", "run_dir": str(run_dir), "train_s": epoch["train_seconds"],
            "tokens_per_s": epoch["train_tokens_per_s"]}


Tokenizers = tuple[Tokenizer, Tokenizer]  # a run's source and target tokenizers


def words(tokenizer: Tokenizer, text: str) -> list[str]:
    """The pieces seqlab's tokenizer makes of ``text``, a space (a character-level piece) written "▁": JoeyNMT
    reads pieces as words between spaces."""
    return [piece if piece.strip() else "▁" for piece in tokenizer.tokens(text)]


def pieces(tokenizers: Tokenizers, split: list[Pair]) -> list[tuple[list[str], list[str]]]:
    """Each pair as the pieces seqlab's tokenizers make of its two sides."""
    return [(words(tokenizers[0], s), words(tokenizers[1], t)) for s, t in split]


def vocabulary(tokenizer: Tokenizer) -> str:
    """seqlab's ordinary pieces, one a line (JoeyNMT adds its four specials): the same embedding sizes."""
    ordinary = tokenizer.tokens_from_ids(range(tokenizer.first_ordinary_id, tokenizer.vocab_size))
    return "".join(p + "\n" for p in dict.fromkeys(p if p.strip() else "▁" for p in ordinary))


def joey_budget(data: list[tuple[list[str], list[str]]], batch_tokens: int, order: np.ndarray) -> int:
    """JoeyNMT's token budget whose batches (``data`` visited in ``order``, cut where n × max(src + 1, trg + 1)
    reaches the budget) hold on average as many target tokens as seqlab's ``length_batches`` at ``batch_tokens``."""
    src = np.array([len(s) for s, _ in data])
    trg = np.array([len(t) + 1 for _, t in data])  # <eos>
    ours = trg.sum() / len(length_batches(src.tolist(), (trg - 1).tolist(), batch_tokens, seed=0))
    cost = np.maximum(src + 1, trg)[order]

    def mean_target_tokens(budget: int) -> float:
        batches, longest, size = 0, 0, 0
        for c in cost:
            longest, size = max(longest, c), size + 1
            if longest * size >= budget:
                batches, longest, size = batches + 1, 0, 0
        return float(trg.sum() / (batches + (size > 0)))

    low, high = 1, 4 * batch_tokens
    while low < high:  # the smallest budget whose batches hold at least seqlab's mean
        middle = (low + high) // 2
        low, high = (middle + 1, high) if mean_target_tokens(middle) < ours else (low, middle)
    return low


def joey_config(cfg: Config, work: Path, batches: str, budget: int) -> dict[str, Any]:
    """The date race's JoeyNMT template with this config's model, seqlab's vocabulary of pieces on each side (read
    as words), ``batches`` (``BATCHES``) at ``budget`` tokens, one epoch and no validation before its end."""
    m = cfg.model
    assert isinstance(m, TransformerConfig)
    joey = sized_template(m)
    for side in ("src", "trg"):
        joey["data"][side] |= {"level": "word", "voc_file": str(work / f"vocab.{side}"), "max_length": m.max_length}
    joey["data"] |= {"train": str(work / batches / "train"), "dev": str(work / "dev")}
    joey["model"] |= {"tied_embeddings": False, "tied_softmax": m.tie_output}  # one table a side, as seqlab
    joey["testing"]["eval_metrics"] = ["bleu"]
    joey["training"] |= {"batch_type": "token", "batch_size": budget, "label_smoothing": cfg.train.label_smoothing,
                         "validation_freq": 10**9, "logging_freq": 10**9, "model_dir": str(work / batches / "model"),
                         "epochs": 1, "shuffle": batches == "own"}
    return joey


BATCHES = {"own": "its own batches (random order)", "seqlab": "seqlab's batches (the pairs in their order)"}


def prepare_joey(cfg: Config, splits: dict[str, list[Pair]], tokenizers: Tokenizers, work: Path) -> dict[str, int]:
    """JoeyNMT's files in ``work``: the dev pieces, seqlab's vocabulary, and per ``BATCHES`` the training pieces
    and config.yaml; the budget of each."""
    train = pieces(tokenizers, splits["train"])
    lengths = [len(s) for s, _ in train], [len(t) for _, t in train]
    orders = {"own": np.arange(len(train)),  # JoeyNMT shuffles: its budget below for a random order
              "seqlab": np.concatenate(length_batches(*lengths, cfg.train.batch_tokens, seed=cfg.seed))}
    write_pieces(work / "dev", pieces(tokenizers, splits["valid"][:100]))
    for side, tokenizer in zip(("src", "trg"), tokenizers):
        (work / f"vocab.{side}").write_text(vocabulary(tokenizer), encoding="utf-8")
    budgets = {}
    for name, order in orders.items():
        (work / name).mkdir()
        ordered = [train[i] for i in order]
        write_pieces(work / name / "train", ordered)
        visits = np.random.default_rng(0).permutation(len(train)) if name == "own" else np.arange(len(train))
        budgets[name] = joey_budget(ordered, cfg.train.batch_tokens, visits)
        config = joey_config(cfg, work, name, budgets[name])
        (work / name / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return budgets


def write_pieces(prefix: Path, rows: list[tuple[list[str], list[str]]]) -> None:
    """``prefix.src`` and ``prefix.trg``: a line of space-separated pieces per pair."""
    for side, column in (("src", 0), ("trg", 1)):
        prefix.with_suffix(f".{side}").write_text("".join(" ".join(r[column]) + "\n" for r in rows), encoding="utf-8")


def run_joey(python: Path, work: Path, batches: str) -> dict[str, Any]:
    """One epoch of JoeyNMT on ``batches``; its seconds and target tokens per second from its log."""
    log = work / batches / "model" / "train.log"
    subprocess.run([str(python), "-m", "joeynmt", "train", str(work / batches / "config.yaml"), "--skip-test"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # what follows the epoch is not timed
    found = re.search(r"Epoch\s+1, total training loss: [\d.]+, num. of seqs: \d+, num. of tokens: (\d+), "
                      r"([\d.]+)\[sec\]", log.read_text(encoding="utf-8") if log.exists() else "")
    if found is None:
        raise RuntimeError(f"JoeyNMT's log has no finished epoch: {log}")
    tokens, seconds = int(found.group(1)), float(found.group(2))
    print(f"JoeyNMT ({batches} batches): {tokens / seconds:,.0f} target tokens/s", file=sys.stderr)
    return {"system": f"JoeyNMT 2.3.0 (float32, {BATCHES[batches]})", "train_s": seconds,
            "tokens_per_s": tokens / seconds}


def table(runs: list[dict[str, Any]], title: str) -> Table:
    """A row per system: tokens/s over the rounds, and the ratio to JoeyNMT's on each of its batchings."""
    systems: dict[str, list[float]] = {}
    for run in runs:
        systems.setdefault(run["system"], []).append(run["tokens_per_s"])
    joeys = [(name, speeds) for name, speeds in systems.items() if name.startswith("JoeyNMT")]
    columns = ["system", "rounds", "target tokens/s", *[f"tokens/s ÷ {name}'s" for name, _ in joeys]]
    rows = [[name, str(len(speeds)), spread(speeds, 0), *[ratio_range(speeds, joey) for _, joey in joeys]]
            for name, speeds in systems.items()]
    return Table(title, columns, rows)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="a Transformer seq2seq config")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=8000, help="training pairs to train on (0: all)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    add_results_option(parser)
    args = parser.parse_args(argv)

    cfg = load_config(args.config)
    if not isinstance(cfg.model, TransformerConfig):
        raise SystemExit(f"{args.config}: JoeyNMT races seqlab's Transformer, not a {type(cfg.model).__name__}")
    work = Path(tempfile.mkdtemp(prefix="joeynmt-speed-"))
    data, splits = write_data(cfg, args.data_dir.resolve(), args.pairs, work)
    labels: list[tuple[str, list[str]]] = [("auto", [])]
    if precision.resolve("auto") != "fp32":
        labels.append(("fp32", ["train.precision=fp32"]))
    python, runs, budgets = peer_python(args.peer_venv), [], dict[str, int]()
    for _ in range(args.rounds):
        runs += [run_seqlab(args.config, data, label, extra) for label, extra in labels]
        if not budgets:  # JoeyNMT reads the pieces of the first run's tokenizer
            first = load(runs[0]["run_dir"])
            budgets = prepare_joey(cfg, splits, (first.source, first.target), work)
        runs += [run_joey(python, work, batches) for batches in BATCHES]
    name = Path(args.config).stem
    title = f"Training speed next to JoeyNMT: `{args.config}`, one epoch of {len(splits['train']):,} pairs"
    caption = (f"The same model and pieces; seqlab's token budget {cfg.train.batch_tokens:,} (sorted by length), "
               f"JoeyNMT's {budgets['own']:,} on its own batches and {budgets['seqlab']:,} on seqlab's, each equal to "
               "seqlab's in mean target tokens per batch.")
    made, given = [table(runs, title)], command(__file__, argv)
    print(f"### {title} ({datetime.date.today()})\n\nCommand: `{given}`. {machine()}. {caption}\n\n"
          f"{markdown(made[0])}\n")
    publish(Result(f"joeynmt_speed-{name}", title, given, made, runs, notes=[caption]), args.results)


if __name__ == "__main__":
    main()
