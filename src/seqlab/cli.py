"""The ``seqlab`` command: train, translate, eval, chat, serve, plot, data fetch."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from seqlab.config import ConfigError, load_config

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sequence-to-sequence learning on the CPU.")

data_app = typer.Typer(no_args_is_help=True, help="Get the public corpora that the configs read.")
app.add_typer(data_app, name="data")

plot_app = typer.Typer(no_args_is_help=True, help="Figures: attention maps, the seeds' PE and LR plots, training curves.")
app.add_typer(plot_app, name="plot")

Out = Annotated[Path, typer.Option("--out", help="The image to write: .png, .svg or .pdf.")]

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory for relative data paths (default: $SEQLAB_DATA, else ./data)."),
]


# decoding options, shared by translate and eval (see seqlab.decoding.DecodeOptions)
Beam = Annotated[int, typer.Option("--beam", help="Beam size; 1 is greedy.", rich_help_panel="Decoding")]
NBest = Annotated[int, typer.Option("--nbest", help="Print this many hypotheses per input (≤ beam).",
                                    rich_help_panel="Decoding")]
LengthPenalty = Annotated[float, typer.Option("--length-penalty", help="GNMT's α: rank by log P / ((5 + len) / 6)^α.",
                                              rich_help_panel="Decoding")]
Normalize = Annotated[bool, typer.Option("--normalize", help="Rank by the average log-probability per word.",
                                         rich_help_panel="Decoding")]
Sample = Annotated[bool, typer.Option("--sample", help="Draw words from the softmax instead of searching.",
                                      rich_help_panel="Decoding")]
Temperature = Annotated[float, typer.Option("--temperature", help="Sampling temperature; 0 is greedy.",
                                            rich_help_panel="Decoding")]
TopK = Annotated[int, typer.Option("--top-k", help="Sample among the k most probable words (0: all).",
                                   rich_help_panel="Decoding")]
TopP = Annotated[float, typer.Option("--top-p", help="Sample among the most probable words holding p of the mass.",
                                     rich_help_panel="Decoding")]
NumSamples = Annotated[int, typer.Option("--num-samples", help="Samples per input (with --sample).",
                                         rich_help_panel="Decoding")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the sampling generator.", rich_help_panel="Decoding")]
Int8 = Annotated[bool, typer.Option("--int8", help="Decode with int8 linear layers (dynamic quantisation; "
                                     "docs/benchmarks.md has its speed and accuracy).", rich_help_panel="Decoding")]
MaxLength = Annotated[int | None, typer.Option("--max-length", help="Most output words (default: the run's "
                                               "eval.max_output_length).", rich_help_panel="Decoding")]


def _decode_options(**values: object) -> DecodeOptions:
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


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)


@app.command()
def train(
    config: Annotated[Path, typer.Argument(help="YAML config, e.g. configs/date.yaml.")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.epochs=3.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default: runs/<config name>).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Train a model from a YAML config; the run directory is enough to translate and to resume."""
    from seqlab.data import DataError
    from seqlab.train.trainer import Trainer

    _setup_logging()
    run_dir = out or Path("runs") / config.stem
    try:
        cfg = load_config(config, overrides or [])
        best = Trainer(cfg, run_dir, data_dir, resume=resume).fit()
    except (ConfigError, DataError, FileNotFoundError) as exc:
        _fail(exc)
    valid = best["valid"]
    typer.echo(
        f"best epoch {best['epoch']}: valid exact match {valid['exact_match']:.2f}%, BLEU {valid['bleu']:.2f}, "
        f"ppl {valid['perplexity']:.3f} — saved in {run_dir}",
        err=True,
    )


@app.command()
def translate(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    texts: Annotated[list[str] | None, typer.Argument(help="Sentences to translate.")] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="File with one sentence per line; - for stdin.")] = None,
    beam: Beam = 1,
    nbest: NBest = 1,
    length_penalty: LengthPenalty = 0.0,
    normalize: Normalize = False,
    sample: Sample = False,
    temperature: Temperature = 1.0,
    top_k: TopK = 0,
    top_p: TopP = 1.0,
    num_samples: NumSamples = 1,
    seed: Seed = 0,
    max_length: MaxLength = None,
    int8: Int8 = False,
) -> None:
    """Translate sentences given as arguments, or a file line by line (one line in, one line out).

    With --nbest or --num-samples above 1, every output is a line "INPUT_NUMBER<tab>SCORE<tab>TEXT".
    """
    from seqlab.translator import load

    _setup_logging()
    options = _decode_options(beam=beam, nbest=nbest, length_penalty=length_penalty, normalize=normalize,
                              sample=sample, temperature=temperature, top_k=top_k, top_p=top_p,
                              num_samples=num_samples, seed=seed, max_length=max_length)
    if bool(texts) == bool(input):
        _fail(ValueError("give sentences as arguments or --input FILE, not both and not neither"))
    try:
        translator = load(run_dir, int8)
        lines = texts or _read_lines(input)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # DataError is a ValueError
        _fail(exc)
    several = options.nbest > 1 or options.num_samples > 1
    for number, outputs in enumerate(translator.generate(lines, options)):
        for output in outputs if several else outputs[:1]:
            typer.echo(f"{number}\t{output.score:.4f}\t{output.text}" if several else output.text)


@app.command("eval")
def evaluate_run(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    split: Annotated[str, typer.Option(help="train, valid or test.")] = "test",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDir = None,
    beam: Beam = 1,
    length_penalty: LengthPenalty = 0.0,
    normalize: Normalize = False,
    sample: Sample = False,
    temperature: Temperature = 1.0,
    top_k: TopK = 0,
    top_p: TopP = 1.0,
    seed: Seed = 0,
    max_length: MaxLength = None,
    int8: Int8 = False,
) -> None:
    """Loss, perplexity, exact match and BLEU (sacreBLEU, cased and lower-cased, with signatures) on a split; exact
    match also over the sentences whose source is not a training source."""
    options = _decode_options(beam=beam, length_penalty=length_penalty, normalize=normalize, sample=sample,
                              temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, max_length=max_length)
    from seqlab.data import DataError, load_splits, resolve_data_dir
    from seqlab.evaluate import EncodedSplit, evaluate
    from seqlab.metrics import bleu_signature
    from seqlab.translator import load

    _setup_logging()
    try:
        translator = load(run_dir, int8)
        splits = load_splits(translator.config.data, resolve_data_dir(data_dir))
        pairs = splits.get(split)
        if not pairs:
            raise ValueError(f"the run's data has no {split!r} split (splits: train, valid, test)")
        encoded = EncodedSplit.build(translator, pairs, split)
        seen = None if split == "train" else {source for source, _ in splits["train"]}
        metrics = evaluate(translator, encoded, translator.config.train.batch_tokens, options=options, seen_sources=seen)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        _fail(exc)
    metrics["bleu_signature"] = bleu_signature()
    metrics["bleu_lowercase_signature"] = bleu_signature(lowercase=True)
    if as_json:
        typer.echo(json.dumps(metrics))
    else:
        width = max(map(len, metrics))
        for key, value in metrics.items():
            typer.echo(f"{key:{width}s} {value:.4f}" if isinstance(value, float) else f"{key:{width}s} {value}")


@app.command()
def chat(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory, e.g. a chatbot.")],
    beam: Beam = 1,
    sample: Sample = False,
    temperature: Temperature = 1.0,
    top_k: TopK = 0,
    top_p: TopP = 1.0,
    seed: Seed = 0,
    max_length: MaxLength = None,
) -> None:
    """Talk to a model. In a terminal: a prompt with line editing, history and /beam N, /greedy, /sample T,
    /help, /quit. Otherwise every line of stdin gets one line of reply, so conversations can be scripted."""
    from seqlab.chat import HELP, Chat, converse, terminal_lines
    from seqlab.data.corpus import decode_lines
    from seqlab.translator import load

    _setup_logging()
    options = _decode_options(beam=beam, sample=sample, temperature=temperature, top_k=top_k, top_p=top_p,
                              seed=seed, max_length=max_length)
    try:
        translator = load(run_dir)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        _fail(exc)
    for stream in (sys.stdout, sys.stderr):  # replies are UTF-8 whatever the locale says
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="replace")
    if sys.stdin.isatty():
        typer.echo(f"{run_dir} — {HELP}", err=True)
        lines = terminal_lines()
    else:
        lines = (text for _, text in decode_lines(sys.stdin.buffer, "<stdin>"))
    try:
        converse(Chat(translator, options), lines, sys.stdout, sys.stderr)
    except ValueError as exc:  # undecodable input names its line
        _fail(exc)


@app.command()
def serve(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on; 0.0.0.0 opens it to the network.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
) -> None:
    """A web page to talk to the model (http://HOST:PORT/) and its JSON API (/api/translate, /api/info, /docs)."""
    import uvicorn

    from seqlab.server import create_app

    _setup_logging()
    try:
        web = create_app(run_dir)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        _fail(exc)
    typer.echo(f"seqlab: serving {run_dir} on http://{host}:{port}/", err=True)
    uvicorn.run(web, host=host, port=port, log_level="warning")


def _read_lines(path: str) -> list[str]:
    """Lines of a UTF-8 file (or stdin for ``-``); undecodable bytes name the file and line."""
    from seqlab.data.corpus import decode_lines

    if path == "-":
        return [text for _, text in decode_lines(sys.stdin.buffer, "<stdin>")]
    with open(path, "rb") as f:
        return [text for _, text in decode_lines(f, path)]


@data_app.command("fetch")
def data_fetch(
    name: Annotated[str, typer.Argument(help="chatbot-ko, multi30k or dlfs2 (the book's date and addition files).")],
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", "--dest", help="Where to put it (default: $SEQLAB_DATA, else ./data).")] = None,
    mirror: Annotated[str | None, typer.Option(
        "--mirror", help="Fetch from this URL, laid out like the data directory, instead of the publishers.")] = None,
) -> None:
    """Download a corpus into the data directory, checking SHA-256; files already there and valid are kept."""
    from seqlab.data import resolve_data_dir
    from seqlab.data.fetch import FetchError, fetch

    _setup_logging()
    try:
        paths = fetch(name, resolve_data_dir(data_dir), mirror)
    except FetchError as exc:
        _fail(exc)
    for path in paths:
        typer.echo(path)


@plot_app.command("attention")
def plot_attention(
    run_dir: Annotated[Path, typer.Argument(help="A trained run directory.")],
    text: Annotated[str, typer.Argument(help="The input to translate; its output's attention is drawn.")],
    out: Out,
    layer: Annotated[int, typer.Option("--layer", help="Decoder layer, from 0; -1 is the last.")] = -1,
    head: Annotated[int, typer.Option("--head", help="Head of that layer, from 0.")] = 0,
    all_heads: Annotated[bool, typer.Option("--all-heads", help="A grid of every head of the layer.")] = False,
    beam: Beam = 1,
) -> None:
    """Cross-attention of the model's output over its input: input tokens across, output tokens down."""
    from seqlab import plots
    from seqlab.translator import load

    try:
        translation = load(run_dir).generate([text], beam=beam, need_weights=True)[0][0]
        if translation.attention is None:
            raise ValueError(f"{run_dir}: this model has no attention to draw")
        maps, titles = plots.head_maps(translation.attention, layer, None if all_heads else head)
        figure = plots.attention_figure(translation.source_tokens, [*translation.tokens, "<eos>"], maps, titles)
        typer.echo(f"{translation.text}\n{plots.save(figure, out)}")
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        _fail(exc)


@plot_app.command("pe")
def plot_pe(
    out: Out,
    length: Annotated[int, typer.Option("--length", min=1, help="Positions (rows).")] = 50,
    d_model: Annotated[int, typer.Option("--d-model", min=2, help="Depth (columns).")] = 128,
) -> None:
    """The sinusoidal positional-encoding table, as seed 000 draws it."""
    from seqlab import plots

    _save_or_fail(lambda: plots.positional_figure(length, d_model), out)


@plot_app.command("lr")
def plot_lr(
    out: Out,
    d_model: Annotated[int, typer.Option("--d-model", min=1)] = 128,
    warmup: Annotated[int, typer.Option("--warmup", min=1, help="Warm-up steps.")] = 4000,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps drawn.")] = 200_000,
) -> None:
    """The warm-up learning-rate schedule, as seed 000 draws it."""
    from seqlab import plots

    _save_or_fail(lambda: plots.schedule_figure(d_model, warmup, steps), out)


@plot_app.command("curves")
def plot_curves(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories, overlaid.")],
    out: Out,
) -> None:
    """Loss, exact match and BLEU per epoch of one or more runs (their log.jsonl), overlaid."""
    from seqlab import plots
    from seqlab.train.checkpoint import read_log

    _save_or_fail(lambda: plots.curves_figure({str(d): read_log(d) for d in run_dirs}), out)


def _save_or_fail(figure: Callable[[], object], out: Path) -> None:
    from seqlab import plots

    try:
        typer.echo(plots.save(figure(), out))
    except (FileNotFoundError, ValueError) as exc:
        _fail(exc)
