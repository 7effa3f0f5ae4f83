"""``seqlab train`` and ``seqlab eval``: make a run directory, score a run on a split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqlab.cli.common import DataDir, Int8, RunArg, fail, setup_logging, with_decoding
from seqlab.config import ConfigError, load_config

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions


def train(
    config: Annotated[Path, typer.Argument(help="YAML config, e.g. configs/date.yaml.")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.epochs=3.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default: runs/<config name>).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Train a model from a YAML config; the run directory is enough to translate and to resume."""
    from seqlab.data import DataError
    from seqlab.train.trainer import Trainer

    setup_logging()
    run_dir = out or Path("runs") / config.stem
    try:
        cfg = load_config(config, overrides or [])
        best = Trainer(cfg, run_dir, data_dir, resume=resume).fit()
    except (ConfigError, DataError, FileNotFoundError) as exc:
        fail(exc)
    valid = best["valid"]
    scores = f"valid exact match {valid['exact_match']:.2f}%, BLEU {valid['bleu']:.2f}, " if "bleu" in valid else "valid "
    typer.echo(f"best epoch {best['epoch']}: {scores}ppl {valid['perplexity']:.3f} — saved in {run_dir}", err=True)


@with_decoding("beam", "length_penalty", "normalize", "sample", "temperature", "top_k", "top_p", "seed", "max_length")
def evaluate_run(
    run_dir: RunArg,
    options: DecodeOptions,
    split: Annotated[str, typer.Option(help="train, valid or test.")] = "test",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDir = None,
    int8: Int8 = False,
) -> None:
    """Loss, perplexity, exact match and BLEU (sacreBLEU, cased and lower-cased, with signatures) on a split; exact
    match also over the sentences whose source is not a training source. A language model: loss and perplexity
    over the split's whole token stream."""
    from seqlab.data import DataError, load_splits, resolve_data_dir
    from seqlab.evaluate import EncodedSplit, evaluate
    from seqlab.metrics import bleu_signature
    from seqlab.rundir import RunDir
    from seqlab.translator import load

    setup_logging()
    try:
        if RunDir(run_dir).config().is_language_model:
            _print_metrics(_evaluate_lm(run_dir, split, data_dir), as_json)
            return
        translator = load(run_dir, int8)
        splits = load_splits(translator.config.data, resolve_data_dir(data_dir))
        pairs = splits.get(split)
        if not pairs:
            raise ValueError(f"the run's data has no {split!r} split (splits: train, valid, test)")
        encoded = EncodedSplit.build(translator, pairs, split)
        seen = None if split == "train" else {source for source, _ in splits["train"]}
        metrics = evaluate(translator, encoded, translator.config.train.batch_tokens, options=options, seen_sources=seen)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    metrics["bleu_signature"] = bleu_signature()
    metrics["bleu_lowercase_signature"] = bleu_signature(lowercase=True)
    _print_metrics(metrics, as_json)


def _evaluate_lm(run_dir: Path, split: str, data_dir: Path | None) -> dict[str, Any]:
    from seqlab.data import load_sentence_splits, resolve_data_dir
    from seqlab.language_model import load

    lm = load(run_dir)
    sentences = load_sentence_splits(lm.config.data, resolve_data_dir(data_dir)).get(split)
    if not sentences:
        raise ValueError(f"the run's data has no {split!r} split (splits: train, valid, test)")
    return lm.perplexity(sentences)


def _print_metrics(metrics: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(metrics))
    else:
        width = max(map(len, metrics))
        for key, value in metrics.items():
            typer.echo(f"{key:{width}s} {value:.4f}" if isinstance(value, float) else f"{key:{width}s} {value}")
