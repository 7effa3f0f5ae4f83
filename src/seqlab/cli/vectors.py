"""``seqlab vectors train | similar | analogy | eval | export``: word vectors (seed 002 ch. 2–4)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqlab.cli.common import DataDir, RunArg, fail, setup_logging
from seqlab.config import ConfigError

if TYPE_CHECKING:
    from seqlab.vectors import WordVectors

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help="Word vectors: count-based (PPMI + SVD) or word2vec (CBOW, skip-gram).")

Top = Annotated[int, typer.Option("--top", min=1, help="How many words to list.")]


@app.command("train")
def train(
    config: Annotated[Path, typer.Argument(help="YAML config, e.g. configs/vectors/multi30k.yaml.")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a config key: --set train.dim=50.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default: runs/<config name>).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last epoch.")] = False,
    data_dir: DataDir = None,
) -> None:
    """Learn word vectors from the config's corpora into a run directory. train.method: count, cbow or skipgram."""
    from seqlab.config import load_config
    from seqlab.data import DataError
    from seqlab.rundir import RunFileError
    from seqlab.vectors.config import VectorsConfig
    from seqlab.vectors.run import train_vectors

    setup_logging()
    run_dir = out or Path("runs") / config.stem
    try:
        vectors = train_vectors(load_config(config, overrides or [], VectorsConfig), run_dir, data_dir, resume)
    except (ConfigError, DataError, RunFileError, OSError, RuntimeError) as exc:  # OSError: a full disk, a missing file
        fail(exc)
    info = vectors.info
    typer.echo(f"{info['method']}: {info['vocab_size']} words × {info['dim']} from {info['corpus_words']} words "
               f"in {info['seconds']:.1f} s — saved in {run_dir}", err=True)


@app.command("similar")
def similar(
    run_dir: RunArg,
    words: Annotated[list[str], typer.Argument(help="One or more words.")],
    top: Top = 10,
) -> None:
    """The nearest words by cosine similarity (seed 002 §2.3.6: most_similar)."""
    vectors = _load(run_dir)
    for word in words:
        _print(word, functools.partial(vectors.most_similar, word, top))


@app.command("analogy")
def analogy(
    run_dir: RunArg,
    a: Annotated[str, typer.Argument(help="a in a : b = c : ?")],
    b: Annotated[str, typer.Argument(help="b")],
    c: Annotated[str, typer.Argument(help="c")],
    top: Top = 5,
) -> None:
    """Complete a : b = c : ? with the words nearest to b − a + c. a, b and c are left out (man woman king -> queen)."""
    vectors = _load(run_dir)
    _print(f"{a} : {b} = {c} : ?", functools.partial(vectors.analogy, a, b, c, top))


@app.command("eval")
def evaluate(
    run_dir: RunArg,
    analogies: Annotated[Path | None, typer.Option(
        "--analogies", help="Analogy questions in the questions-words.txt format (': section', then 'a b c d').")] = None,
    similarities: Annotated[Path | None, typer.Option(
        "--similarities", help="Word pairs with human scores: 'word1<TAB>word2<TAB>score' (WordSim-353, SimLex-999).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Score the vectors on analogies and word similarities. Analogy accuracy and Spearman's correlation with
    human similarity, each with its coverage (the share of questions / pairs whose words are all in the
    vocabulary; the others are not scored)."""
    from seqlab.data import DataError

    if analogies is None and similarities is None:
        fail(ValueError("give --analogies FILE, --similarities FILE or both"))
    vectors = _load(run_dir)
    try:
        scores = vectors.evaluate(analogies, similarities)
    except DataError as exc:
        fail(exc)
    if as_json:
        typer.echo(json.dumps(scores))
        return
    if "analogies" in scores:
        a = scores["analogies"]
        typer.echo(f"analogy accuracy {a['analogy_accuracy']:.2f}% ({a['correct']}/{a['covered']}), "
                   f"coverage {a['coverage']:.1f}% of {a['questions']} questions")
    if "similarities" in scores:
        s = scores["similarities"]
        rho = "n/a" if s["spearman"] is None else f"{s['spearman']:.4f}"
        typer.echo(f"spearman {rho}, coverage {s['coverage']:.1f}% of {s['pairs']} pairs")


@app.command("export")
def export(
    run_dir: RunArg,
    out: Annotated[Path, typer.Option("--out", help="The file to write.")],
) -> None:
    """The vectors in the word2vec text format (gensim's KeyedVectors.load_word2vec_format reads it)."""
    _load(run_dir).export(out)
    typer.echo(out)


def _load(run_dir: Path) -> WordVectors:
    from seqlab.vectors import load

    try:
        return load(run_dir)
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        fail(exc)


def _print(title: str, neighbours: Callable[[], list[tuple[str, float]]]) -> None:
    """The title, then one ``word<TAB>cosine`` line per neighbour; a word not in the vocabulary is an error."""
    try:
        rows = neighbours()
    except KeyError as exc:
        fail(ValueError(exc.args[0]))
    typer.echo(title)
    for word, score in rows:
        typer.echo(f"  {word}\t{score:.4f}")
