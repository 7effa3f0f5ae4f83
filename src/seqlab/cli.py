"""The ``seqlab`` command: train, translate, eval."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

from seqlab.config import ConfigError, load_config

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sequence-to-sequence learning on the CPU.")

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory for relative data paths [default: $SEQLAB_DATA or ./data]."),
]


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)


@app.command()
def train(
    config: Annotated[Path, typer.Argument(help="YAML config, e.g. configs/date.yaml.")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.epochs=3.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory [default: runs/<config name>].")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Train a model from a YAML config; the run directory is enough to translate and to resume."""
    from seqlab.data import DataError
    from seqlab.train.trainer import Trainer

    _setup_logging()
    run_dir = out or Path("runs") / config.stem
    try:
        cfg = load_config(config, overrides or [])
        best = Trainer(cfg, run_dir, data_dir, resume=resume).fit()
    except (ConfigError, DataError, FileNotFoundError) as exc:
        _fail(exc)
    valid = best["valid"]
    typer.echo(
        f"best epoch {best['epoch']}: valid exact match {valid['exact_match']:.2f}%, BLEU {valid['bleu']:.2f}, "
        f"ppl {valid['perplexity']:.3f} — saved in {run_dir}",
        err=True,
    )


@app.command()
def translate(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    texts: Annotated[list[str] | None, typer.Argument(help="Sentences to translate.")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="File with one sentence per line; - for stdin.")] = None,
) -> None:
    """Translate sentences given as arguments, or a file line by line (one line in, one line out)."""
    from seqlab.translator import load

    _setup_logging()
    if bool(texts) == bool(input):
        _fail(ValueError("give sentences as arguments or --input FILE, not both and not neither"))
    try:
        translator = load(run_dir)
        lines = texts or _read_lines(input)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # DataError is a ValueError
        _fail(exc)
    for output in translator.translate(lines):
        typer.echo(output)


@app.command("eval")
def evaluate_run(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    split: Annotated[str, typer.Option(help="train, valid or test.")] = "test",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Loss, perplexity, exact match and BLEU of a trained model on a split of its data."""
    from seqlab.data import DataError, load_splits, resolve_data_dir
    from seqlab.evaluate import EncodedSplit, evaluate
    from seqlab.translator import load

    _setup_logging()
    try:
        translator = load(run_dir)
        pairs = load_splits(translator.config.data, resolve_data_dir(data_dir)).get(split)
        if not pairs:
            raise ValueError(f"the run's data has no {split!r} split (splits: train, valid, test)")
        metrics = evaluate(translator, EncodedSplit.build(translator, pairs, split), translator.config.train.batch_tokens)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(metrics))
    else:
        for key, value in metrics.items():
            typer.echo(f"{key:12s} {value:.4f}" if isinstance(value, float) else f"{key:12s} {value}")


def _read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file (or stdin for ``-``); undecodable bytes name the file and line."""
    from seqlab.data.corpus import decode_lines

    if path == "-":
        return [text for _, text in decode_lines(sys.stdin.buffer, "<stdin>")]
    with open(path, "rb") as f:
        return [text for _, text in decode_lines(f, path)]
