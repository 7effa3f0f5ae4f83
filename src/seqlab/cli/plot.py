"""``seqlab plot``: attention maps, the seeds' PE and LR figures, training curves, word vectors, a model's
structure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqlab.cli.common import Out, RunArg, fail, with_decoding
from seqlab.config import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from seqlab.decoding import DecodeOptions

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help="Figures: attention, the seeds' PE and LR, training curves, word vectors, a model's layers.")


@app.command("attention")
@with_decoding("beam")
def attention(
    run_dir: RunArg,
    options: DecodeOptions,
    text: Annotated[str, typer.Argument(help="The input to translate; its output's attention is drawn.")],
    out: Out,
    layer: Annotated[int, typer.Option("--layer", help="Decoder layer, from 0; -1 is the last.")] = -1,
    head: Annotated[int, typer.Option("--head", help="Head of that layer, from 0.")] = 0,
    all_heads: Annotated[bool, typer.Option("--all-heads", help="A grid of every head of the layer.")] = False,
) -> None:
    """Cross-attention of the model's output over its input: input tokens across, output tokens down."""
    from seqlab import plots
    from seqlab.predictors.translator import load

    try:
        translation = load(run_dir).generate([text], options, need_weights=True)[0][0]
        if translation.attention is None:
            raise ValueError(f"{run_dir}: this model has no attention to draw")
        maps, titles = plots.head_maps(translation.attention, layer, None if all_heads else head)
        figure = plots.attention_figure(translation.source_tokens, [*translation.tokens, "<eos>"], maps, titles)
        typer.echo(f"{translation.text}\n{plots.save(figure, out)}")
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)


@app.command("pe")
def positional(
    out: Out,
    length: Annotated[int, typer.Option("--length", min=1, help="Positions (rows).")] = 50,
    d_model: Annotated[int, typer.Option("--d-model", min=2, help="Depth (columns).")] = 128,
) -> None:
    """The sinusoidal positional-encoding table, as seed 000 draws it."""
    from seqlab import plots

    _save_or_fail(lambda: plots.positional_figure(length, d_model), out)


@app.command("lr")
def schedule(
    out: Out,
    d_model: Annotated[int, typer.Option("--d-model", min=1)] = 128,
    warmup: Annotated[int, typer.Option("--warmup", min=1, help="Warm-up steps.")] = 4000,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps drawn.")] = 200_000,
) -> None:
    """The warm-up learning-rate schedule, as seed 000 draws it."""
    from seqlab import plots

    _save_or_fail(lambda: plots.schedule_figure(d_model, warmup, steps), out)


@app.command("gradnorm")
def gradnorm(
    out: Out,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Time steps the gradient flows back through.")] = 20,
) -> None:
    """The seed's exploding and vanishing gradients: the norm of dh through repeated W_h products."""
    from seqlab import plots

    _save_or_fail(lambda: plots.gradnorm_figure(steps), out)


@app.command("curves")
def curves(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories, overlaid.")],
    out: Out,
) -> None:
    """Loss and the valid scores per epoch of one or more runs (their log.jsonl), overlaid; valid also where a run
    scored it inside its epochs (train.valid_every)."""
    from seqlab import plots
    from seqlab.rundir import RunDir

    _save_or_fail(lambda: plots.curves_figure({str(d): RunDir(d).log() for d in run_dirs}), out)


@app.command("vectors")
def vectors(
    run_dir: Annotated[Path, typer.Argument(help="A word-vector run directory (seqlab vectors train).")],
    words: Annotated[list[str], typer.Argument(help="The words to draw.")],
    out: Out,
) -> None:
    """Word vectors on their first two principal components, labelled (Hangul included)."""
    import numpy as np

    from seqlab import plots
    from seqlab.vectors import load

    def figure() -> Figure:
        vectors = load(run_dir)
        missing = [w for w in words if w not in vectors]
        if missing:
            raise ValueError(f"not in the vocabulary: {', '.join(missing)}")
        return plots.vectors_figure([vectors.key(w) for w in words], np.stack([vectors[w] for w in words]))

    _save_or_fail(figure, out)


@app.command("model")
def model(
    run_dir: RunArg,
    out: Annotated[Path, typer.Option("--out", help="The image to write: .png or .svg.")],
    depth: Annotated[int, typer.Option("--depth", min=1, help="Levels of nested modules drawn: 1 the blocks, 4 "
                                                              "a Transformer's attention and FFN.")] = 4,
) -> None:
    """The structure of a run's model: its layers and the shapes between them (seed 000's plot_model)."""
    from torch import nn

    from seqlab import plots, registry
    from seqlab.runtime import unpack_linears

    try:
        kind = registry.kind_of_run(run_dir)
        network = getattr(kind.load(run_dir), "model", None)
        if not isinstance(network, nn.Module):
            raise ValueError(f"{run_dir}: {kind.noun} has no layers to draw")
        unpack_linears(network)  # drawn as built, not as this machine runs it
        typer.echo(plots.model_graph(network, out, depth))
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)


def _save_or_fail(figure: Callable[[], Figure], out: Path) -> None:
    from seqlab import plots

    try:
        typer.echo(plots.save(figure(), out))
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)
