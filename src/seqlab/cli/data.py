"""``seqlab data fetch``: the public corpora that the configs read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from seqlab.cli.common import fail, setup_logging

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Get the public corpora that the configs read.")


@app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(
        help="chatbot-ko, multi30k, dlfs2 (the book's date and addition files) or ptb (the book's Penn Treebank).")],
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", "--dest", help="Where to put it (default: $SEQLAB_DATA, else ./data).")] = None,
    mirror: Annotated[str | None, typer.Option(
        "--mirror", help="Fetch from this URL, laid out like the data directory, instead of the publishers.")] = None,
) -> None:
    """Download a corpus into the data directory. Each file is checked by SHA-256 (PTB: its line and word counts);
    files already there and valid are kept."""
    from seqlab.data import resolve_data_dir
    from seqlab.data.fetch import FetchError
    from seqlab.data.fetch import fetch as fetch_corpus

    setup_logging()
    try:
        paths = fetch_corpus(name, resolve_data_dir(data_dir), mirror)
    except FetchError as exc:
        fail(exc)
    for path in paths:
        typer.echo(path)
