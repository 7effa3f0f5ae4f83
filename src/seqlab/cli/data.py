"""``seqlab data fetch``: the public corpora that the configs read; ``seqlab data prepare``: a config's corpus read
and tokenised once, for every later run (``data.prepared``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from seqlab.cli.common import DataDir, fail, setup_logging

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help="Get the public corpora that the configs read; prepare a config's corpus once.")


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


@app.command("prepare")
def prepare(
    config: Annotated[Path, typer.Argument(help="YAML config of a run: its kind, data and tokens sections.")],
    out: Annotated[Path, typer.Option("--out", help="The new directory to write (refused where it exists).")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set "
                                                                         "tokens.source.vocab_size=8000.")] = None,
    data_dir: DataDir = None,
    chunk_rows: Annotated[int, typer.Option("--chunk-rows", min=1, help="Rows of a record batch: a run holds "
                                            "train.batch_window of them in memory at a time.")] = 100_000,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Processes that encode a split's record "
                                                "batches side by side (forked; 1: this process, its tokenizer on "
                                                "every core). Default: one per core.")] = None,
) -> None:
    """Read the config's corpus once, learn its tokenizers and write every split's token ids and texts to Arrow
    shards in OUT, with a manifest tying them to the config. Train with --set data.prepared=OUT: the run reads the
    shards memory-mapped instead of reading and tokenising the corpus."""
    from seqlab import registry
    from seqlab.config import ConfigError, load_config
    from seqlab.data import DataError
    from seqlab.data.prepared import default_workers

    setup_logging()
    try:
        cfg = load_config(config, overrides or [])
        kind = cfg.kind
        if not kind.prepares:
            able = ", ".join(k.noun for k in registry.kinds() if k.prepares)
            raise ConfigError(f"{config}: {kind.noun} reads its corpus itself (seqlab data prepare is for {able})")
        manifest = kind.family().prepare(cfg, data_dir, out, chunk_rows=chunk_rows,
                                         workers=workers or default_workers())
    except (ConfigError, DataError, OSError) as exc:
        fail(exc)
    counts = ", ".join(f"{name} {split['rows']:,}" for name, split in manifest["splits"].items())
    typer.echo(f"{out}: {counts} {manifest['unit']}; train with --set data.prepared={out}")
