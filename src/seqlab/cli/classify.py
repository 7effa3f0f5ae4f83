"""``seqlab classify`` and ``seqlab fill-mask``: use a classifier (``model.type: encoder``) or a pretrained BERT
(``model.type: bert``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from seqlab.cli.common import RunArg, fail, read_lines, setup_logging
from seqlab.config import ConfigError


def classify(
    run_dir: RunArg,
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to classify.")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="File with one text per line; - for stdin.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per text: label and probabilities.")] = False,
) -> None:
    """The label of every text given as an argument or read line by line from a file, with its probability
    ("LABEL<TAB>PROBABILITY<TAB>TEXT"), or with --json every class's probability."""
    from seqlab.classifier import load

    setup_logging()
    if bool(texts) == bool(input):
        fail(ValueError("give texts as arguments or --input FILE, not both and not neither"))
    try:
        classifier = load(run_dir)
        lines = texts or read_lines(input)  # type: ignore[arg-type]  # one of them is given
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # DataError is a ValueError
        fail(exc)
    for text, prediction in zip(lines, classifier.classify(lines)):
        if as_json:
            typer.echo(json.dumps({"text": text, "label": prediction.label,
                                   "probabilities": prediction.probabilities}, ensure_ascii=False))
        else:
            typer.echo(f"{prediction.label}\t{prediction.probabilities[prediction.label]:.4f}\t{text}")


def fill_mask(
    run_dir: RunArg,
    texts: Annotated[list[str], typer.Argument(help='Texts with [MASK] where a token is to be filled in.')],
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates per [MASK].")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per text.")] = False,
) -> None:
    """What a pretrained BERT (seqlab pretrain) puts in place of each [MASK]: the text with the best candidates,
    then per mask its --top tokens with their probabilities."""
    from seqlab.masked_lm import load

    setup_logging()
    try:
        model = load(run_dir)
        filled = model.fill_mask(texts, top)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    for text, result in zip(texts, filled):
        if as_json:
            typer.echo(json.dumps({"text": text, "filled": result.text, "masks": [
                [{"token": token, "probability": p} for token, p in candidates] for candidates in result.candidates]},
                ensure_ascii=False))
            continue
        typer.echo(result.text)
        for number, candidates in enumerate(result.candidates, 1):
            typer.echo(f"  [MASK] {number}: " + ", ".join(f"{token} {p:.3f}" for token, p in candidates))
