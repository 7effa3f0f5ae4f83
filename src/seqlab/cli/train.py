"""``seqlab train``, ``seqlab pretrain`` and ``seqlab eval``: make a run directory, score a run on a split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqlab.cli.common import DataDir, Int8, RunArg, Workers, fail, setup_logging, with_decoding
from seqlab.config import ConfigError, load_config
from seqlab.registry import InferenceOptions, kind_of_run, kind_of_type, kinds

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions

ConfigArg = Annotated[Path, typer.Argument(help="YAML config, e.g. configs/date.yaml.")]
Overrides = Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.epochs=3.")]
Out = Annotated[Path | None, typer.Option("--out", help="Run directory (default: runs/<config name>).")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")]


def train(config: ConfigArg, overrides: Overrides = None, out: Out = None, resume: Resume = False,
          data_dir: DataDir = None) -> None:
    """Train a model from a YAML config. The run directory is enough to use it and to resume it."""
    _fit(config, overrides, out, resume, data_dir, "train")


def pretrain(config: ConfigArg, overrides: Overrides = None, out: Out = None, resume: Resume = False,
             data_dir: DataDir = None) -> None:
    """Pretrain BERT (model.type bert). Masked tokens, and next sentences with model.next_sentence. A classifier
    starts from the run with model.init_from; seqlab fill-mask shows what it learnt."""
    _fit(config, overrides, out, resume, data_dir, "pretrain")


def _fit(config: Path, overrides: list[str] | None, out: Path | None, resume: bool, data_dir: Path | None,
         command: str) -> None:
    from seqlab.data import DataError
    from seqlab.rundir import RunFileError
    from seqlab.train.distributed import World
    from seqlab.train.trainer import NonFiniteLoss, Trainer

    world = World.from_env()  # under torchrun: this process's rank among WORLD_SIZE
    setup_logging(quiet=not world.is_main)
    run_dir = out or Path("runs") / config.stem
    try:
        cfg = load_config(config, overrides or [])
        kind = kind_of_type(cfg.model.type)
        if kind.trained_by != command:
            types = [t for k in kinds() if k.trained_by == command for t in k.model_types]
            raise ConfigError(f"{config}: seqlab {command} trains model.type {', '.join(types)}, not {cfg.model.type}: "
                              f"model.type {cfg.model.type} is trained by seqlab {kind.trained_by}")
        best = Trainer(cfg, run_dir, data_dir, resume=resume, world=world).fit()
    except (ConfigError, DataError, RunFileError, NonFiniteLoss, OSError) as exc:  # OSError: a full disk, a missing file
        fail(exc, at_once=world.size > 1)
    world.close()
    if not world.is_main:
        return
    typer.echo(f"best epoch {best['epoch']}: {kind.family().summary(best['valid'])} — saved in {run_dir}", err=True)


@with_decoding("beam", "length_penalty", "normalize", "sample", "temperature", "top_k", "top_p", "seed", "max_length",
               "min_length", "no_repeat_ngram_size", "repetition_penalty")
def evaluate_run(
    run_dir: RunArg,
    options: DecodeOptions,
    split: Annotated[str, typer.Option(help="train, valid or test (scored only when asked for, never in a "
                                            "selection run: SEQLAB_SELECTION=1).")] = "valid",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDir = None,
    int8: Int8 = False,
    workers: Workers = 1,
) -> None:
    """Score a run on a split, as its kind scores it. A seq2seq model: loss, perplexity, exact match and BLEU
    (sacreBLEU, cased and lower-cased, with signatures); exact match also over the sentences whose source is not
    a training source. A language model: loss and perplexity over the split's whole token stream. A classifier:
    loss, accuracy, macro and micro precision, recall and F1, per class, and the confusion matrix (rows true,
    columns predicted). A pretrained BERT: the masked tokens' loss, perplexity and accuracy (masks from a fixed
    seed), and next-sentence accuracy. A span extractor: the loss and SQuAD's exact match and F1."""
    from seqlab.data import DataError

    setup_logging()
    try:
        metrics = kind_of_run(run_dir).evaluate(run_dir, split, data_dir, options,
                                                InferenceOptions(int8=int8, workers=workers))
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    _print_metrics(metrics, as_json)


def average(
    run_dir: RunArg,
    last: Annotated[int, typer.Option("--last", help="Average the weights of the last N kept epochs.")] = 5,
    out: Annotated[Path | None, typer.Option("--out", help="The new run directory (default: RUN_DIR-avgN).")] = None,
    data_dir: DataDir = None,
) -> None:
    """Average the weights of a run's last N kept epochs into a run of its own. The epochs are those kept with
    train.keep_checkpoints; the new run is scored on the valid split, and translate, eval and serve use it as any
    run."""
    from seqlab.data import DataError
    from seqlab.rundir import RunDir
    from seqlab.train.average import average_run

    setup_logging()
    out = out or run_dir.with_name(f"{run_dir.name}-avg{last}")
    try:
        info = average_run(RunDir(run_dir), last, RunDir(out), data_dir)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    summary = kind_of_run(run_dir).family().summary(info["valid"])
    typer.echo(f"epochs {', '.join(map(str, info['averaged']))} averaged: {summary} — saved in "
               f"{out}", err=True)


def _print_metrics(metrics: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(metrics, ensure_ascii=False))
        return
    width = max(map(len, metrics))
    for key, value in metrics.items():
        if key == "per_class":
            for label, scores in value.items():
                typer.echo(f"{'class ' + label:{width}s} " + ", ".join(
                    f"{name} {score:.2f}" if isinstance(score, float) else f"{name} {score}"
                    for name, score in scores.items()))
        elif key == "confusion":
            typer.echo(f"{key:{width}s} rows true, columns predicted ({', '.join(metrics['labels'])})")
            for label, row in zip(metrics["labels"], value):
                typer.echo(f"{label:>{width}s} " + " ".join(f"{n:6d}" for n in row))
        elif key != "labels":
            typer.echo(f"{key:{width}s} {value:.4f}" if isinstance(value, float) else f"{key:{width}s} {value}")
