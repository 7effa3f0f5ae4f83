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
    to: Annotated[Literal["ctranslate2", "onnx"], typer.Option(
        "--to", help="The engine: ctranslate2, or onnx (the encoder and a decoder step with its key/value cache).")]
    = "ctranslate2",
    quantization: Annotated[Literal["float32", "int8", "int8_float32", "int16"], typer.Option(
        "--quantization", help="How the weights are stored: float32; int8 (both engines); int8_float32, int16 "
                               "(CTranslate2).")] = "float32",
) -> None:
    """Convert a Transformer run for CTranslate2 or ONNX Runtime. Needs pip install -e '.[export]'; the directory
    holds the run's config and tokenizers too, so that `seqlab translate DIR --engine ct2|onnx` decodes with it."""
    from seqlab.export import export as export_run

    setup_logging()
    try:
        export_run(run_dir, out, to, quantization)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    typer.echo(f"{run_dir} exported for {to} ({quantization}) to {out}", err=True)
