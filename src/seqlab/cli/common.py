"""What every command group shares: option types, the decoding options (declared once), errors, logging."""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import typer

Out = Annotated[Path, typer.Option("--out", help="The image to write: .png, .svg or .pdf.")]

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory for relative data paths (default: $SEQLAB_DATA, else ./data)."),
]

RunArg = Annotated[Path, typer.Argument(help="A trained run directory.")]

Engine = Annotated[Literal["torch", "ct2", "onnx"], typer.Option(
    "--engine", help="torch: the run directory's model; ct2 or onnx: a `seqlab export --to ctranslate2` or "
                     "`--to onnx` directory, decoded by CTranslate2 or ONNX Runtime.")]
Int8 = Annotated[bool, typer.Option("--int8", help="Decode with int8 linear layers (dynamic quantisation; "
                                    "benchmarks/peer_decoding.py measures its speed and accuracy).",
                                    rich_help_panel="Decoding")]


def _decoding(flag: str, kind: Any, help: str) -> Any:
    return Annotated[kind, typer.Option(flag, help=help, rich_help_panel="Decoding")]


# name: (type with its option, default); the fields of seqlab.decoding.DecodeOptions
DECODING: dict[str, tuple[Any, Any]] = {
    "beam": (_decoding("--beam", int, "Beam size; 1 is greedy."), 1),
    "nbest": (_decoding("--nbest", int, "Print this many hypotheses per input (≤ beam)."), 1),
    "length_penalty": (_decoding("--length-penalty", float, "GNMT's α: rank by log P / ((5 + len) / 6)^α."), 0.0),
    "normalize": (_decoding("--normalize", bool, "Rank by the average log-probability per word."), False),
    "sample": (_decoding("--sample", bool, "Draw words from the softmax instead of searching."), False),
    "temperature": (_decoding("--temperature", float, "Sampling temperature; 0 is greedy."), 1.0),
    "top_k": (_decoding("--top-k", int, "Sample among the k most probable words (0: all)."), 0),
    "top_p": (_decoding("--top-p", float, "Sample among the most probable words holding p of the mass."), 1.0),
    "num_samples": (_decoding("--num-samples", int, "Samples per input (with --sample)."), 1),
    "seed": (_decoding("--seed", int, "Seed of the sampling generator."), 0),
    "max_length": (_decoding("--max-length", int | None,
                             "Most output words (default: the run's eval.max_output_length)."), None),
}


def with_decoding(*names: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the decoding options ``names`` (keys of ``DECODING``); it receives them as one
    ``options: DecodeOptions`` argument, checked before the command runs."""
    unknown = set(names) - DECODING.keys()
    if unknown:
        raise ValueError(f"no decoding option {', '.join(sorted(unknown))}")

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command)  # string annotations: ``options`` is typed for checkers only
        kept = [p.replace(annotation=_evaluated(p.annotation, command)) for p in signature.parameters.values()
                if p.name != "options"]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=DECODING[name][0],
                                   default=DECODING[name][1]) for name in names]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            values = {name: kwargs.pop(name) for name in names}
            command(**kwargs, options=decode_options(**values))

        wrapper.__signature__ = signature.replace(parameters=kept + added)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in kept + added}
        return wrapper

    return wrap


def _evaluated(annotation: Any, command: Callable[..., None]) -> Any:
    return eval(annotation, command.__globals__) if isinstance(annotation, str) else annotation  # noqa: S307


def decode_options(**values: Any) -> Any:
    """DecodeOptions from the command line; a bad combination is reported like any usage error."""
    from pydantic import ValidationError

    from seqlab.decoding import DecodeOptions

    try:
        return DecodeOptions(**values)
    except ValidationError as exc:
        problems = [
            (f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        ]
        raise typer.BadParameter("; ".join(problems)) from None


def fail(exc: Exception) -> NoReturn:
    """The one way a command reports an error: ``error: ...`` on one line of stderr, exit status 2."""
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def warn_cut(number: int, input: str | None, limit: int) -> None:
    """The warning for input ``number`` (from 0; a line of the file ``input``, or an argument) that was longer
    than the ``limit`` tokens the model reads."""
    where = f"{input}:{number + 1}" if input else f"input {number + 1}"
    typer.echo(f"warning: {where}: longer than the {limit} tokens the model reads; only the first {limit} were "
               "read", err=True)


def setup_logging(quiet: bool = False) -> None:
    """Progress lines on stderr; ``quiet`` (the processes torchrun starts beside rank 0): warnings only."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s", stream=sys.stderr)


def read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file (or stdin for ``-``); undecodable bytes name the file and line."""
    from seqlab.data.corpus import decode_lines

    if path == "-":
        return [text for _, text in decode_lines(sys.stdin.buffer, "<stdin>")]
    with open(path, "rb") as f:
        return [text for _, text in decode_lines(f, path)]


def read_text(path: str) -> str:
    """A whole UTF-8 file (or stdin for ``-``), its line ends kept; undecodable bytes name the file and line."""
    return "\n".join(read_lines(path))
