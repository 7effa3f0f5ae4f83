"""What every command group shares: option types, the decoding options (declared once), errors, logging."""

from __future__ import annotations

import functools
import inspect
import io
import logging
import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, Optional, cast

import typer

from seqlab.decoding.options import RUN_SEARCH, DecodeOptions

Out = Annotated[Path, typer.Option("--out", help="The image to write: .png, .svg or .pdf.")]

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory for relative data paths (default: $SEQLAB_DATA, else ./data)."),
]

RunArg = Annotated[Path, typer.Argument(help="A trained run directory.")]

Engine = Annotated[Literal["torch", "ct2", "onnx"], typer.Option(
    "--engine", help="torch: the run directory's model; ct2 or onnx: a `seqlab export --to ctranslate2` or "
                     "`--to onnx` directory, decoded by CTranslate2 or ONNX Runtime.")]
Int8 = Annotated[bool, typer.Option("--int8", help="Run with int8 linear layers (dynamic quantisation; "
                                    "benchmarks/peer_decoding.py measures its speed and accuracy).",
                                    rich_help_panel="Decoding")]
Workers = Annotated[int, typer.Option("--workers", min=1, help="Batches computed side by side, each on its share of "
                                      "the threads (a small model on many inputs: faster than all threads on one "
                                      "batch; CTranslate2's inter_threads).")]


def _decoding(name: str) -> tuple[Any, Any]:
    """The command-line option of a ``DecodeOptions`` field: ``--top-k``, its type, its description, its default;
    no default for those of ``RUN_SEARCH``, which the run's config fills where they are not given
    (``Predictor.decoding``)."""
    field = DecodeOptions.model_fields[name]
    description = field.description or ""
    help = description[:1].upper() + description[1:] + "."
    run_search = name in RUN_SEARCH
    if run_search:
        help += f" [default: the run's eval.{name}, {field.default} unless its config says]"
    option = typer.Option("--" + name.replace("_", "-"), help=help, rich_help_panel="Decoding")
    if run_search:
        return Annotated[Optional[field.annotation], option], None  # noqa: UP045 (the annotation is a value here)
    return Annotated[field.annotation, option], field.default


def with_decoding(*names: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the decoding options ``names`` (fields of ``DecodeOptions``); it receives them as one
    ``options: DecodeOptions`` argument, checked before the command runs."""
    unknown = set(names) - DecodeOptions.model_fields.keys()
    if unknown:
        raise ValueError(f"no decoding option {', '.join(sorted(unknown))}")

    def wrap(command: Callable[..., None]) -> Callable[..., None]:
        hints = typing.get_type_hints(command, localns={"DecodeOptions": DecodeOptions}, include_extras=True)
        kept = [p.replace(annotation=hints[p.name]) for p in inspect.signature(command).parameters.values()
                if p.name != "options"]
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
                 for name in names for annotation, default in [_decoding(name)]]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            values = {name: kwargs.pop(name) for name in names}
            given = {name: value for name, value in values.items() if not (name in RUN_SEARCH and value is None)}
            command(**kwargs, options=decode_options(**given))

        wrapper.__signature__ = inspect.Signature(kept + added)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in kept + added}
        return wrapper

    return wrap


def decode_options(**values: Any) -> Any:
    """DecodeOptions from the command line; a bad combination is reported like any usage error."""
    from pydantic import ValidationError

    try:
        return DecodeOptions(**values)
    except ValidationError as exc:
        problems = [
            (f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ")
            for e in exc.errors()
        ]
        raise typer.BadParameter("; ".join(problems)) from None


def fail(exc: Exception, at_once: bool = False) -> NoReturn:
    """The one way a command reports an error: ``error: ...`` on one line of stderr, exit status 2.

    ``at_once``: the process ends here, without Python's exit (its ``atexit`` handlers, the C++ teardown): a
    training process under ``torchrun`` whose process group another may still be using or tearing down, where
    leaving the group can hang (pytorch/pytorch#75097; torchtitan leaves it only after a run that ended well).
    torchrun ends the job when a process exits; what the run directory holds is safe at any instant (atomic
    writes)."""
    typer.echo(f"error: {exc}", err=True)
    if at_once:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)
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


def stdin_bytes() -> io.BufferedIOBase:
    """Standard input as bytes (a BufferedReader, though typed BinaryIO)."""
    return cast(io.BufferedIOBase, sys.stdin.buffer)


def read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file (or stdin for ``-``); undecodable bytes name the file and line."""
    from seqlab.data.corpus import decode_lines

    if path == "-":
        return [text for _, text in decode_lines(stdin_bytes(), "<stdin>")]
    with open(path, "rb") as f:
        return [text for _, text in decode_lines(f, path)]


def read_text(path: str) -> str:
    """A whole UTF-8 file (or stdin for ``-``), its line ends kept; undecodable bytes name the file and line."""
    return "\n".join(read_lines(path))
