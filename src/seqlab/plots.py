"""Pictures of a model and of its training: attention maps, the seeds' two figures, training curves.

* :func:`attention_figure`: the attention weights of one output over its source, source tokens on
  the x axis and output tokens on the y axis, brighter = more weight, as the book draws them
  (002 §8.3, where "AUGUST" lights up "08"); one head, or a grid of several;
* :func:`positional_figure`: the sinusoidal positional-encoding table, ``pcolormesh`` in RdBu with
  "Depth" across and "Position" down (seed 000, 50 × 128);
* :func:`schedule_figure`: the warm-up learning-rate schedule over the training steps (seed 000,
  d_model 128, 4,000 warm-up steps, 200,000 steps);
* :func:`gradnorm_figure`: the norm of a gradient flowing back through repeated ``W_h`` products, growing
  or vanishing (002 §6.1.4, :func:`gradient_norms`);
* :func:`curves_figure`: loss, exact match and BLEU per epoch of one or more runs, overlaid (the
  book's comparison of baseline / Reverse / Peeky / attention), with the valid scores taken inside epochs;
* :func:`vectors_figure`: word vectors projected on their first two principal components, each point
  labelled with its word (002 §2.4 draws the SVD vectors of its toy corpus this way);
* :func:`model_graph`: a model's structure, its layers and the shapes between them (seed 000's ``plot_model``),
  traced by torchview and laid out by Graphviz.

Figures are built with ``matplotlib.figure.Figure`` (no pyplot, no global state, no display), so
they work headless, in threads and inside the web server; :func:`save` writes PNG or SVG atomically.

Text is set in NanumGothic, which covers Hangul as well as Latin (matplotlib's default DejaVu
Sans has no Hangul: Korean tokens would be drawn as boxes), with DejaVu Sans as the fallback for
symbols such as "␣", which marks spaces in token labels. The font file ships with the
``koreanize-matplotlib`` package (``seqlab.fonts``); :func:`text_font` registers it with matplotlib
and :func:`missing_glyphs` checks what a font covers.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.ft2font import FT2Font

from seqlab.files import atomic_open
from seqlab.fonts import font_path
from seqlab.model import evaluating
from seqlab.model.positional import sinusoidal_table
from seqlab.train.schedule import transformer_lr


@cache
def text_font() -> FontProperties:
    """The fonts every label is set in: NanumGothic (registered with matplotlib once), falling back
    to DejaVu Sans for what it lacks."""
    font_manager.fontManager.addfont(str(font_path()))
    name = FT2Font(str(font_path())).family_name
    return FontProperties(family=[name, "DejaVu Sans"])


def missing_glyphs(path: str | Path, text: str) -> list[str]:
    """The distinct characters of ``text`` (spaces aside) that the font file at ``path`` has no glyph for."""
    font = FT2Font(str(path))
    return [c for c in dict.fromkeys(text) if not c.isspace() and font.get_char_index(ord(c)) == 0]


def save(figure: Figure, out: str | Path) -> Path:
    """Write ``figure`` to ``out``; the format (png, svg, pdf) follows the file's suffix."""
    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in ("png", "svg", "pdf"):
        raise ValueError(f"{out}: the file name must end in .png, .svg or .pdf")
    with atomic_open(out) as f:
        figure.savefig(f, format=fmt, bbox_inches="tight", dpi=150)
    return out


# --- attention -----------------------------------------------------------------------------------


def shown(token: str) -> str:
    """A token as it is labelled: a space (char level) and the word-start mark "▁" of subwords as "␣"."""
    return "␣" if token == " " else token.replace("▁", "␣")


def attention_figure(
    source_tokens: Sequence[str],
    output_tokens: Sequence[str],
    weights: torch.Tensor,
    titles: Sequence[str] = (),
    columns: int = 4,
) -> Figure:
    """Attention maps: weights (maps, output tokens, source tokens), one panel per map (e.g. per head),
    ``columns`` panels a row; each panel titled by ``titles``. Source tokens across, output tokens down."""
    if weights.dim() == 2:
        weights = weights.unsqueeze(0)  # (1, out, src)
    maps, rows_, cols_ = weights.shape
    if (rows_, cols_) != (len(output_tokens), len(source_tokens)):
        raise ValueError(f"weights of shape {tuple(weights.shape)} do not match {len(output_tokens)} output "
                         f"and {len(source_tokens)} source tokens")
    font = text_font()
    columns = min(columns, maps)
    rows = math.ceil(maps / columns)
    cell = 0.32  # inches per token
    width = max(3.0, cell * len(source_tokens) + 1.5)
    height = max(2.5, cell * len(output_tokens) + 1.0)
    figure = Figure(figsize=(width * columns, height * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= maps:
            ax.set_visible(False)
            continue
        image = ax.imshow(weights[index].float().numpy(), cmap="gray", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(source_tokens)), [shown(t) for t in source_tokens], rotation=90, fontproperties=font)
        ax.set_yticks(range(len(output_tokens)), [shown(t) for t in output_tokens], fontproperties=font)
        if index < len(titles):
            ax.set_title(titles[index], fontproperties=font)
    figure.colorbar(image, ax=axes, shrink=0.8)
    return figure


# --- the seeds' two figures -------------------------------------------------------------------------


def positional_figure(length: int = 50, d_model: int = 128) -> Figure:
    """The positional-encoding table (length × d_model) as the seed draws it: RdBu, Depth × Position."""
    table = sinusoidal_table(length, d_model)[0]  # (length, d_model)
    font = text_font()
    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.subplots()
    mesh = ax.pcolormesh(table.numpy(), cmap="RdBu")
    ax.set_xlabel("Depth", fontproperties=font)
    ax.set_xlim((0, d_model))
    ax.set_ylabel("Position", fontproperties=font)
    ax.set_title(f"Sinusoidal positional encoding ({length} × {d_model})", fontproperties=font)
    figure.colorbar(mesh, ax=ax)
    return figure


def vectors_figure(words: Sequence[str], vectors: np.ndarray) -> Figure:
    """A scatter of ``vectors`` (n, dim) on their first two principal components, labelled with ``words``."""
    if len(words) != len(vectors) or len(words) < 2:
        raise ValueError(f"need two or more words, one per vector; got {len(words)} words and {len(vectors)} vectors")
    from sklearn.decomposition import PCA  # here: importing scikit-learn takes longer than any other figure

    points = PCA(n_components=2).fit_transform(np.asarray(vectors, dtype=np.float64))  # (n, 2)
    font = text_font()
    figure = Figure(figsize=(7, 6), layout="constrained")
    ax = figure.subplots()
    ax.scatter(points[:, 0], points[:, 1], alpha=0.6)
    for word, (x, y) in zip(words, points):
        ax.annotate(word, (x, y), textcoords="offset points", xytext=(4, 4), fontproperties=font)
    ax.set_xlabel("first principal component", fontproperties=font)
    ax.set_ylabel("second principal component", fontproperties=font)
    ax.set_title("Word vectors", fontproperties=font)
    return figure


def schedule_figure(d_model: int = 128, warmup: int = 4000, steps: int = 200_000, scale: float = 1.0) -> Figure:
    """The warm-up schedule d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) over ``steps`` steps."""
    stride = max(1, steps // 2000)  # 2,000 points draw the curve exactly enough
    xs = list(range(1, steps + 1, stride))
    font = text_font()
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.subplots()
    ax.plot(xs, [transformer_lr(step, d_model, warmup, scale) for step in xs])
    ax.set_xlabel("Train Step", fontproperties=font)
    ax.set_ylabel("Learning Rate", fontproperties=font)
    ax.set_title(f"d_model {d_model}, warm-up {warmup:,} steps", fontproperties=font)
    return figure


def gradient_norms(scale: float = 1.0, steps: int = 20, seed: int = 3) -> np.ndarray:
    """Seed 002 §6.1.4's demo of exploding and vanishing gradients: ``dh`` (2 × 3, ones) flows back through
    ``steps`` time steps, ``dh = dh · W_hᵀ`` each, with ``W_h = scale · randn(3, 3)`` from NumPy's legacy
    generator seeded ``seed``; returns ``‖dh‖ / N`` after each step (steps,). With seed 3: scale 1 grows
    from 2.468 to ≈ 249.5, scale 0.5 falls from 1.234 to ≈ 2.38e-4."""
    rng = np.random.RandomState(seed)
    w_h = rng.randn(3, 3) * scale
    dh = np.ones((2, 3))
    norms = []
    for _ in range(steps):
        dh = dh @ w_h.T
        norms.append(np.sqrt(np.sum(dh**2)) / 2)
    return np.array(norms)


def gradnorm_figure(steps: int = 20, seed: int = 3) -> Figure:
    """The seed's two curves of ``gradient_norms``: W_h drawn as randn (explodes) and as 0.5 · randn
    (vanishes), on a log scale."""
    font = text_font()
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    ax = figure.subplots()
    for scale in (1.0, 0.5):
        ax.plot(range(1, steps + 1), gradient_norms(scale, steps, seed), marker="o", label=f"W_h = {scale:g} · randn")
    ax.set_yscale("log")
    ax.set_xlabel("time step (backwards)", fontproperties=font)
    ax.set_ylabel("norm of dh", fontproperties=font)
    ax.legend(prop=font)
    return figure


# --- training curves -----------------------------------------------------------------------------------


# The valid scores a run's log may hold, and their titles; runs of one kind share theirs.
SCORES = {"exact_match": "valid exact match (%)", "bleu": "valid BLEU", "accuracy": "valid accuracy (%)",
          "macro_f1": "valid macro-F1 (%)", "mlm_accuracy": "valid masked tokens right (%)", "f1": "valid F1 (%)"}


def curves_figure(runs: Mapping[str, Sequence[Mapping]]) -> Figure:
    """Loss (train solid, valid dashed), then each valid score the runs share per epoch (a translator's exact
    match and BLEU, a classifier's accuracy and macro-F1, BERT's masked tokens right, a span extractor's exact
    match and F1; a language model's perplexity), one line per run; ``runs`` maps a label to the run's ``log.jsonl``
    records. A run that scored valid inside its epochs (``train.valid_every``) draws those looks on its valid lines,
    each where it fell in its epoch (``valid_points``)."""
    font = text_font()
    scores = [key for key in SCORES if all(key in records[0]["valid"] for records in runs.values())] or ["perplexity"]
    figure = Figure(figsize=(4.3 * (1 + len(scores)), 4), layout="constrained")
    loss_ax, *score_axes = figure.subplots(1, 1 + len(scores))
    for label, records in runs.items():
        line, = loss_ax.plot([r["epoch"] for r in records], [r["train_loss"] for r in records], label=f"{label} train")
        at, valid = valid_points(records)
        loss_ax.plot(at, [v["loss"] for v in valid], "--", color=line.get_color(), label=f"{label} valid")
        for ax, key in zip(score_axes, scores):
            ax.plot(at, [v[key] for v in valid], marker=".", label=label)
    titles = ["loss", *(SCORES.get(key, "valid perplexity") for key in scores)]
    for ax, title in zip([loss_ax, *score_axes], titles):
        ax.set_xlabel("epoch", fontproperties=font)
        ax.set_title(title, fontproperties=font)
        ax.grid(alpha=0.3)
        ax.legend(prop=font)
    return figure


def valid_points(records: Sequence[Mapping]) -> tuple[list[float], list[Mapping]]:
    """A run's valid scores in order and where each fell, in epochs: an epoch's end at its number, a look inside it
    (``looks``: its step, counted over the whole run as the epochs' records count theirs) at the share of the epoch's
    steps done before it."""
    at: list[float] = []
    valid: list[Mapping] = []
    before = 0  # the steps of the epochs before this record's
    for record in records:
        steps = max(record.get("step", 0) - before, 1)
        for look in record.get("looks", []):
            at.append(record["epoch"] - 1 + (look["step"] - before) / steps)
            valid.append(look["valid"])
        at.append(record["epoch"])
        valid.append(record["valid"])
        before = record.get("step", before)
    return at, valid


def head_maps(attention: torch.Tensor, layer: int = -1, head: int | None = 0) -> tuple[torch.Tensor, list[str]]:
    """One head (or, with ``head=None``, every head) of one layer from ``Translation.attention``
    (output tokens, layers, heads, source tokens) -> (maps, output tokens, source tokens) and a title
    per map. Indices count from 0; negative ones from the end (layer -1 is the last)."""
    _, layers, heads, _ = attention.shape
    if not -layers <= layer < layers:
        raise ValueError(f"--layer {layer}: the model has {layers} attention layer(s), 0..{layers - 1}")
    if head is not None and not -heads <= head < heads:
        raise ValueError(f"--head {head}: the model has {heads} head(s) per layer, 0..{heads - 1}")
    layer %= layers
    chosen = range(heads) if head is None else [head % heads]
    maps = attention[:, layer].permute(1, 0, 2)[list(chosen)]  # (maps, out, src)
    return maps, [f"layer {layer}, head {h}" for h in chosen]


# --- a model's structure ---------------------------------------------------------------------------


def model_graph(model: torch.nn.Module, out: str | Path, depth: int = 4) -> Path:
    """Draw ``model`` as seed 000's ``tf.keras.utils.plot_model(model, show_shapes=True)`` does (S107): its
    modules, nested ``depth`` levels deep, with the shape of every tensor between them, traced on the model's
    ``example_inputs()`` by torchview and laid out by Graphviz's ``dot``; PNG or SVG by the suffix of ``out``.
    Depth 1 draws the blocks (encoder, decoder, output layer), 4 reaches the attention and feed-forward layers
    inside a Transformer's layers."""
    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in ("png", "svg"):
        raise ValueError(f"{out}: the file name must end in .png or .svg")
    if shutil.which("dot") is None:
        raise ValueError("seqlab plot model lays the graph out with Graphviz's dot, which is not installed "
                         "(Debian, Ubuntu: apt-get install graphviz)")
    example_inputs = getattr(model, "example_inputs", None)  # each model's own (seqlab.model)
    if example_inputs is None:
        raise ValueError(f"{type(model).__name__} has no example_inputs() to trace its layers with")
    from torchview import draw_graph

    with evaluating(model), torch.no_grad():
        try:
            graph = draw_graph(model, input_data=list(example_inputs()), depth=depth, expand_nested=True,
                               graph_name=type(model).__name__, device="cpu")
        except KeyError:  # torchview 0.2 loses an edge where a decoder layer's cached keys and values leave it
            raise ValueError(f"torchview cannot draw {type(model).__name__} at depth {depth} (an edge of the decoder "
                             f"layers' cached keys and values is lost there): draw it at another depth") from None
    image = graph.visual_graph.pipe(format=fmt)
    with atomic_open(out) as f:
        f.write(image)
    return out
