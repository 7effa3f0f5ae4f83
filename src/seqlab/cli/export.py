"""``seqlab export``: a trained run for the engines production decoding uses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from seqlab.cli.common import RunArg, fail, setup_logging
from seqlab.config import ConfigError


def export(
    run_dir: RunArg,
    out: Annotated[Path, typer.Option("--out", help="The directory to write.")],
    to: Annotated[Literal["ctranslate2"], typer.Option("--to", help="The engine: ctranslate2.")] = "ctranslate2",
    quantization: Annotated[Literal["float32", "int8", "int8_float32", "int16"], typer.Option(
        "--quantization", help="How CTranslate2 stores the weights.")] = "float32",
) -> None:
    """Convert a Transformer run for CTranslate2 (pip install -e '.[export]'); the directory holds the run's config
    and tokenizers too, so that `seqlab translate DIR --engine ct2` decodes with it."""
    from seqlab.export.ctranslate2 import export_ctranslate2

    setup_logging()
    try:
        export_ctranslate2(run_dir, out, quantization)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    typer.echo(f"{run_dir} exported for {to} ({quantization}) to {out}", err=True)
