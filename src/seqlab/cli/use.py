"""``seqlab translate``, ``seqlab chat`` and ``seqlab serve``: use a trained run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqlab.cli.common import (
    Engine,
    Int8,
    RunArg,
    Workers,
    fail,
    read_lines,
    setup_logging,
    stdin_bytes,
    warn_cut,
    with_decoding,
)
from seqlab.config import ConfigError
from seqlab.registry import InferenceOptions

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions


@with_decoding("beam", "nbest", "length_penalty", "normalize", "sample", "temperature", "top_k", "top_p",
               "num_samples", "seed", "max_length", "min_length", "no_repeat_ngram_size", "repetition_penalty")
def translate(
    run_dir: RunArg,
    options: DecodeOptions,
    texts: Annotated[list[str] | None, typer.Argument(help="Sentences to translate.")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="File with one sentence per line; - for stdin.")] = None,
    int8: Int8 = False,
    engine: Engine = "torch",
    workers: Workers = 1,
) -> None:
    """Translate sentences given as arguments, or a file line by line. One line in, one line out: an empty or
    blank line gives an empty line, and a line longer than the model reads is cut, with a warning naming it).

    With --nbest or --num-samples above 1, every output is a line "INPUT_NUMBER<tab>SCORE<tab>TEXT".
    """
    from seqlab.export import load_translator

    setup_logging()
    if bool(texts) == bool(input):
        fail(ValueError("give sentences as arguments or --input FILE, not both and not neither"))
    try:
        translator = load_translator(run_dir, engine, int8, workers)
        lines = texts or read_lines(input)  # type: ignore[arg-type]  # one of them is given
        several = options.nbest > 1 or options.num_samples > 1
        generated = translator.generate(lines, options)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # DataError is a ValueError
        fail(exc)
    for number, outputs in enumerate(generated):
        if outputs[0].truncated:
            warn_cut(number, input, translator.max_source_tokens)
        for output in outputs if several else outputs[:1]:
            typer.echo(f"{number}\t{output.score:.4f}\t{output.text}" if several else output.text)


@with_decoding("beam", "sample", "temperature", "top_k", "top_p", "seed", "max_length", "min_length",
               "no_repeat_ngram_size", "repetition_penalty")
def chat(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory, e.g. a chatbot.")],
    options: DecodeOptions,
) -> None:
    """Talk to a model. In a terminal: a prompt with line editing, history and /beam N, /greedy, /sample T,
    /help, /quit. Otherwise every line of stdin gets one line of reply, so conversations can be scripted."""
    from seqlab.chat import HELP, Chat, converse, terminal_lines
    from seqlab.data.corpus import decode_lines
    from seqlab.predictors.translator import load

    setup_logging()
    try:
        translator = load(run_dir)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    for stream in (sys.stdout, sys.stderr):  # replies are UTF-8 whatever the locale says
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="replace")
    if sys.stdin.isatty():
        typer.echo(f"{run_dir} — {HELP}", err=True)
        lines = terminal_lines()
    else:
        lines = (text for _, text in decode_lines(stdin_bytes(), "<stdin>"))
    try:
        converse(Chat(translator, options), lines, sys.stdout, sys.stderr)
    except ValueError as exc:  # undecodable input names its line
        fail(exc)


def serve(
    run_dir: RunArg,
    host: Annotated[str, typer.Option("--host", help="Address to listen on; 0.0.0.0 opens it to the network.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    engine: Engine = "torch",
    int8: Int8 = False,
    workers: Workers = 1,
    max_queue: Annotated[int | None, typer.Option("--max-queue", min=1, help="Requests in work at a time "
                         "(running or waiting); one more gets a 503 with Retry-After [default: Limits.max_queue]")]
    = None,
    timeout: Annotated[float | None, typer.Option("--timeout", min=0.001, help="Seconds a request may take; past "
                       "them it gets a 503 and its decoding stops [default: Limits.timeout_s]")] = None,
) -> None:
    """Serve a run: a web page to use it and its JSON API. For a seq2seq run the page talks to the model
    (http://HOST:PORT/) through /api/translate, /api/info, /openapi.json; for a word-vector run, a page of a
    word's nearest neighbours and analogies (/api/similar, /api/analogy); for a language model, continuations of
    a start with each token's probability (/api/generate); for a classifier, the label, the class probabilities
    and the attention of the pooled position (/api/classify); for a span extractor, a context and questions
    about it, the answers marked in it (/api/answer)."""
    import uvicorn

    from seqlab.server import Limits, create_app

    setup_logging()
    default = Limits()
    limits = Limits(max_queue=max_queue or default.max_queue, timeout_s=timeout or default.timeout_s)
    try:
        web = create_app(run_dir, limits, InferenceOptions(engine, int8, workers))
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    typer.echo(f"seqlab: serving {run_dir} on http://{host}:{port}/", err=True)
    uvicorn.run(web, host=host, port=port, log_level="warning")
