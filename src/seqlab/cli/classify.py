"""``seqlab classify``, ``seqlab fill-mask`` and ``seqlab answer``: use a classifier (``model.type: encoder``), a
pretrained BERT (``model.type: bert``) or a span extractor (``model.type: span``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from seqlab.cli.common import RunArg, Workers, fail, read_lines, read_text, setup_logging, warn_cut
from seqlab.config import ConfigError


def classify(
    run_dir: RunArg,
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to classify.")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="File with one text per line; - for stdin.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per text: label and probabilities.")] = False,
    workers: Workers = 1,
) -> None:
    """Classify texts given as arguments, or a file line by line. The label of every text with its probability
    ("LABEL<TAB>PROBABILITY<TAB>TEXT"), or with --json every class's probability. An empty or blank line gives an
    empty line (with --json, an empty label and no probabilities); a text longer than the model reads is cut,
    with a warning naming it."""
    from seqlab.predictors.classifier import load

    setup_logging()
    if bool(texts) == bool(input):
        fail(ValueError("give texts as arguments or --input FILE, not both and not neither"))
    try:
        classifier = load(run_dir, workers=workers)
        lines = texts or read_lines(input)  # type: ignore[arg-type]  # one of them is given
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # DataError is a ValueError
        fail(exc)
    for number, (text, prediction) in enumerate(zip(lines, classifier.classify(lines))):
        if prediction.truncated:
            warn_cut(number, input, classifier.max_tokens)
        if as_json:
            typer.echo(json.dumps({"text": text, "label": prediction.label,
                                   "probabilities": prediction.probabilities}, ensure_ascii=False))
        else:
            typer.echo(f"{prediction.label}\t{prediction.probabilities[prediction.label]:.4f}\t{text}"
                       if prediction.label else "")


def fill_mask(
    run_dir: RunArg,
    texts: Annotated[list[str], typer.Argument(help='Texts with [MASK] where a token is to be filled in.')],
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates per [MASK].")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per text.")] = False,
) -> None:
    """Fill in each [MASK] with a pretrained BERT (seqlab pretrain). The text with the best candidates,
    then per mask its --top tokens with their probabilities."""
    from seqlab.predictors.masked_lm import load

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


def answer(
    run_dir: RunArg,
    questions: Annotated[list[str], typer.Argument(help="Questions about the context.")],
    context: Annotated[str, typer.Option("--context", "-c", help="The text the answers are cut out of; @FILE reads "
                                                                  "a file, @- stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per question.")] = False,
    workers: Workers = 1,
) -> None:
    """Answer questions about a context with a span extractor (model.type span). Each answer is cut out of the
    context, with its probability ("ANSWER<TAB>PROBABILITY<TAB>QUESTION"), or with --json also its character span."""
    from seqlab.predictors.answerer import load

    setup_logging()
    try:
        answerer = load(run_dir, workers=workers)
        text = read_text(context[1:]) if context.startswith("@") else context
        answers = answerer.answer(questions, [text] * len(questions))
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    for question, found in zip(questions, answers):
        if as_json:
            typer.echo(json.dumps({"question": question, "answer": found.text, "start": found.start, "end": found.end,
                                   "probability": found.probability}, ensure_ascii=False))
        else:
            typer.echo(f"{found.text}\t{found.probability:.4f}\t{question}")
