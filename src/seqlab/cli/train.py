"""``seqlab train``, ``seqlab pretrain`` and ``seqlab eval``: make a run directory, score a run on a split."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from seqlab.cli.common import DataDir, Int8, RunArg, fail, setup_logging, with_decoding
from seqlab.config import ConfigError, load_config

if TYPE_CHECKING:
    from seqlab.decoding import DecodeOptions

T = TypeVar("T")


ConfigArg = Annotated[Path, typer.Argument(help="YAML config, e.g. configs/date.yaml.")]
Overrides = Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.epochs=3.")]
Out = Annotated[Path | None, typer.Option("--out", help="Run directory (default: runs/<config name>).")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.")]


def train(config: ConfigArg, overrides: Overrides = None, out: Out = None, resume: Resume = False,
          data_dir: DataDir = None) -> None:
    """Train a model from a YAML config; the run directory is enough to translate and to resume."""
    _fit(config, overrides, out, resume, data_dir, pretraining=False)


def pretrain(config: ConfigArg, overrides: Overrides = None, out: Out = None, resume: Resume = False,
             data_dir: DataDir = None) -> None:
    """Pretrain BERT (model.type bert): masked tokens, and next sentences with model.next_sentence. A classifier
    starts from the run with model.init_from; seqlab fill-mask shows what it learnt."""
    _fit(config, overrides, out, resume, data_dir, pretraining=True)


def _fit(config: Path, overrides: list[str] | None, out: Path | None, resume: bool, data_dir: Path | None,
         pretraining: bool) -> None:
    from seqlab.data import DataError
    from seqlab.rundir import RunFileError
    from seqlab.train.distributed import World
    from seqlab.train.trainer import NonFiniteLoss, Trainer

    world = World.from_env()  # under torchrun: this process's rank among WORLD_SIZE
    setup_logging(quiet=not world.is_main)
    run_dir = out or Path("runs") / config.stem
    try:
        cfg = load_config(config, overrides or [])
        if cfg.is_masked_lm != pretraining:
            raise ConfigError(f"{config}: model.type bert is trained by seqlab pretrain" if cfg.is_masked_lm else
                              f"{config}: seqlab pretrain trains model.type bert, not {cfg.model.type}")
        best = Trainer(cfg, run_dir, data_dir, resume=resume, world=world).fit()
    except (ConfigError, DataError, RunFileError, NonFiniteLoss, OSError) as exc:  # OSError: a full disk, a missing file
        world.close(finished=False)
        fail(exc)
    world.close()
    if not world.is_main:
        return
    typer.echo(f"best epoch {best['epoch']}: {_valid_line(best['valid'])} — saved in {run_dir}", err=True)


def _valid_line(valid: dict[str, Any]) -> str:
    """A model's main valid scores, by its kind."""
    if "macro_f1" in valid:
        return f"valid accuracy {valid['accuracy']:.2f}%, macro-F1 {valid['macro_f1']:.2f}%"
    if "bleu" in valid:
        return f"valid exact match {valid['exact_match']:.2f}%, BLEU {valid['bleu']:.2f}, ppl {valid['perplexity']:.3f}"
    if "f1" in valid:
        return f"valid exact match {valid['exact_match']:.2f}%, F1 {valid['f1']:.2f}%"
    if "mlm_accuracy" in valid:
        return f"valid masked ppl {valid['perplexity']:.3f}, masked tokens right {valid['mlm_accuracy']:.2f}%"
    return f"valid ppl {valid['perplexity']:.3f}"


@with_decoding("beam", "length_penalty", "normalize", "sample", "temperature", "top_k", "top_p", "seed", "max_length")
def evaluate_run(
    run_dir: RunArg,
    options: DecodeOptions,
    split: Annotated[str, typer.Option(help="train, valid or test (scored only when asked for, never in a "
                                            "selection run: SEQLAB_SELECTION=1).")] = "valid",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    data_dir: DataDir = None,
    int8: Int8 = False,
) -> None:
    """Loss, perplexity, exact match and BLEU (sacreBLEU, cased and lower-cased, with signatures) on a split; exact
    match also over the sentences whose source is not a training source. A language model: loss and perplexity
    over the split's whole token stream. A classifier: loss, accuracy, macro and micro precision, recall and F1,
    per class, and the confusion matrix (rows true, columns predicted). A pretrained BERT: the masked tokens'
    loss, perplexity and accuracy (masks from a fixed seed), and next-sentence accuracy. A span extractor: the
    loss and SQuAD's exact match and F1."""
    from seqlab.data import DataError

    setup_logging()
    try:
        metrics = score_run(run_dir, split, data_dir, options, int8)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    _print_metrics(metrics, as_json)


def average(
    run_dir: RunArg,
    last: Annotated[int, typer.Option("--last", help="Average the weights of the last N kept epochs.")] = 5,
    out: Annotated[Path | None, typer.Option("--out", help="The new run directory (default: RUN_DIR-avgN).")] = None,
    data_dir: DataDir = None,
) -> None:
    """Average the weights of a run's last N epochs (kept with train.keep_checkpoints) into a run directory of its
    own, scored on the valid split; translate, eval and serve use it as any run."""
    from seqlab.data import DataError
    from seqlab.rundir import RunDir
    from seqlab.train.average import average_run

    setup_logging()
    out = out or run_dir.with_name(f"{run_dir.name}-avg{last}")
    try:
        info = average_run(RunDir(run_dir), last, RunDir(out), lambda run: score_run(run.path, "valid", data_dir))
    except (ConfigError, DataError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    typer.echo(f"epochs {', '.join(map(str, info['averaged']))} averaged: {_valid_line(info['valid'])} — saved in "
               f"{out}", err=True)


def score_run(run_dir: Path, split: str, data_dir: Path | None, options: DecodeOptions | None = None,
              int8: bool = False) -> dict[str, Any]:
    """``seqlab eval``'s metrics of the run in ``run_dir`` on ``split``, by its kind."""
    from seqlab.data import load_splits, resolve_data_dir
    from seqlab.evaluate import EncodedSplit, evaluate
    from seqlab.metrics import bleu_signature
    from seqlab.predictors.translator import load
    from seqlab.rundir import RunDir

    config = RunDir(run_dir).config()
    kinds = [(config.is_language_model, _evaluate_lm), (config.is_classifier, _evaluate_classifier),
             (config.is_masked_lm, _evaluate_masked_lm), (config.is_span, _evaluate_answerer)]
    scorer = next((score for is_kind, score in kinds if is_kind), None)
    if scorer is not None:  # every kind but a seq2seq model
        return scorer(run_dir, split, data_dir)
    translator = load(run_dir, int8=int8)
    splits = load_splits(translator.config.data, resolve_data_dir(data_dir))
    pairs = _split_of(splits, split)
    encoded = EncodedSplit.build(translator, pairs, split)
    seen = None if split == "train" else splits["train"]
    metrics = evaluate(translator, encoded, translator.config.train.batch_tokens, options=options, seen=seen)
    return metrics | {"bleu_signature": bleu_signature(), "bleu_lowercase_signature": bleu_signature(lowercase=True)}


def _split_of(splits: Mapping[str, list[T]], split: str) -> list[T]:
    """The ``split`` of a run's data; an error if it has none (explicit files without a test file)."""
    items = splits.get(split)
    if not items:
        raise ValueError(f"the run's data has no {split!r} split (splits: train, valid, test)")
    return items


def _evaluate_lm(run_dir: Path, split: str, data_dir: Path | None) -> dict[str, Any]:
    from seqlab.data import load_sentence_splits, resolve_data_dir
    from seqlab.predictors.language_model import load

    lm = load(run_dir)
    return lm.perplexity(_split_of(load_sentence_splits(lm.config.data, resolve_data_dir(data_dir)), split))


def _evaluate_classifier(run_dir: Path, split: str, data_dir: Path | None) -> dict[str, Any]:
    from seqlab.data import load_splits, resolve_data_dir
    from seqlab.evaluate import LabelledSplit, evaluate_classifier
    from seqlab.predictors.classifier import load

    classifier = load(run_dir)
    pairs = _split_of(load_splits(classifier.config.data, resolve_data_dir(data_dir)), split)
    return evaluate_classifier(classifier, LabelledSplit.build(classifier, pairs, split))


def _evaluate_answerer(run_dir: Path, split: str, data_dir: Path | None) -> dict[str, Any]:
    from seqlab.data import resolve_data_dir
    from seqlab.data.splits import load_question_splits
    from seqlab.evaluate import QuestionSplit, evaluate_answerer
    from seqlab.predictors.answerer import load

    answerer = load(run_dir)
    questions = _split_of(load_question_splits(answerer.config.data, resolve_data_dir(data_dir)), split)
    return evaluate_answerer(answerer, QuestionSplit.build(answerer, questions, split))


def _evaluate_masked_lm(run_dir: Path, split: str, data_dir: Path | None) -> dict[str, Any]:
    import numpy as np

    from seqlab.data import load_sentence_splits, load_splits, resolve_data_dir
    from seqlab.predictors.masked_lm import load

    mlm = load(run_dir)
    data = resolve_data_dir(data_dir)
    texts: list[str] | list[tuple[str, str]] = (
        _split_of(load_splits(mlm.config.data, data), split) if mlm.bert.next_sentence
        else _split_of(load_sentence_splits(mlm.config.data, data), split))
    return mlm.scores(mlm.examples(texts, np.random.default_rng(0)))


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
