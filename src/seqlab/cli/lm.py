"""``seqlab generate`` and ``seqlab score``: use a trained language model (``model.type: lm``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqlab.cli.common import RunArg, Workers, fail, read_lines, setup_logging, with_decoding
from seqlab.config import ConfigError

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions
    from seqlab.predictors.language_model import LanguageModel


@with_decoding("beam", "nbest", "sample", "temperature", "top_k", "top_p", "num_samples", "seed", "min_length",
               "no_repeat_ngram_size", "repetition_penalty")
def generate(
    run_dir: RunArg,
    options: DecodeOptions,
    start: Annotated[list[str], typer.Option("--start", help="The text to continue; repeat for several.")],
    length: Annotated[int | None, typer.Option(
        "--length", min=1, help="Most words to add (default: the run's eval.max_output_length); <eos> ends sooner.")] = None,
    workers: Workers = 1,
) -> None:
    """Continue each --start with a language model. Greedy, beam search (--beam, --nbest) or sampling (--sample,
    --temperature, --top-k, --top-p, --num-samples, --seed). One line per output; with several per start,
    ``NUMBER<TAB>LOG-PROB<TAB>TEXT``."""
    lm = _load(run_dir, workers)
    try:
        found = lm.generate(start, options.model_copy(update={"max_length": length}))
    except ValueError as exc:
        fail(exc)
    for outputs in found:
        for i, output in enumerate(outputs):
            typer.echo(output.text if len(outputs) == 1 else f"{i}\t{output.log_prob:.4f}\t{output.text}")


def score(
    run_dir: RunArg,
    input_file: Annotated[str, typer.Option("--input", help="One text per line; - for stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Score each line of a file with a language model. Each line's log-probability (natural log, its <eos>
    included) and perplexity, and the whole file's perplexity read as one stream."""
    from seqlab.data import DataError

    lm = _load(run_dir)
    try:
        lines = read_lines(input_file)
    except (OSError, DataError) as exc:
        fail(exc)
    scores = lm.score(lines)
    overall = lm.perplexity(lines)
    if as_json:
        typer.echo(json.dumps({"lines": scores, **overall}))
        return
    for line, result in zip(lines, scores):
        typer.echo(f"{result['log_prob']:.4f}\t{result['perplexity']:.3f}\t{line}")
    typer.echo(f"perplexity {overall['perplexity']:.3f} over {overall['tokens']} tokens", err=True)


def _load(run_dir: Path, workers: int = 1) -> LanguageModel:
    from seqlab.predictors.language_model import load

    setup_logging()
    try:
        return load(run_dir, workers=workers)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
