"""A trained date, addition or execute model on freshly generated problems that are in none of its splits.

    python benchmarks/heldout_task.py RUN_DIR [--data-dir DIR] [--size 3000] [--seed 2026] [--beam 1]

The run's corpus is read (a built-in task, regenerated from its config, or the book's ``date.txt`` /
``addition.txt``, whose task is its file name); new pairs are drawn from the same task by seqlab's
generator (data/tasks.py writes the book's surface forms; an execute run's programs with its corpus's length,
nesting and mix), every source that occurs in the run's corpus
(train, valid or test) is skipped, and the first ``--size`` of the rest are translated and scored by exact
match: a check that the model learnt the task, not its test split.

seqlab's generator draws numbers uniformly from 0..999 (81 % of its problems add two 3-digit numbers), the
book's addition.txt has another mix (25 % 3 + 3 digits). So the score is also given reweighted to the run's
corpus: fresh problems are grouped by shape (digits written 9, letters a: ``999+99``), and each shape's exact
match counts as often as the shape occurs in the corpus. The scores go to the scoreboard (``--results``,
benchmarks/results/).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab.corpora import BookCorpus, DataConfig, TaskCorpus
from seqlab.data import generate_task, load_splits, resolve_data_dir
from seqlab.data.tasks import TASKS
from seqlab.metrics import exact_match
from seqlab.predictors.translator import load


def task_of(data: DataConfig) -> str | None:
    """The task a run learnt: a built-in task's name, or the stem of the book's file (``dlfs2/date.txt``: date)."""
    if isinstance(data.corpus, TaskCorpus):
        return data.corpus.task
    if isinstance(data.corpus, BookCorpus) and Path(data.corpus.path).stem in TASKS:
        return Path(data.corpus.path).stem
    return None


def shape(source: str) -> str:
    """A source's form: digits written 9, letters a (``"16+752"``: ``"99+999"``)."""
    return re.sub(r"[^\W\d_]", "a", re.sub(r"\d", "9", source))


def reweighted(sources: list[str], correct: list[bool], corpus: Counter[str]) -> tuple[float, float]:
    """Exact match (%) with each shape weighted by its count in ``corpus``, and the share of the corpus whose
    shapes the fresh problems cover."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for source, ok in zip(sources, correct):
        hits[shape(source)].append(ok)
    weights = {form: corpus[form] for form in hits if corpus[form]}
    total = sum(weights.values())
    score = sum(weights[form] * sum(hits[form]) / len(hits[form]) for form in weights) / total
    return 100 * score, 100 * total / sum(corpus.values())


def main(argv: list[str] | None = None) -> None:
    """Score the run on fresh problems, print the scores and record them."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--size", type=int, default=3000, help="fresh problems to score")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--data-dir", help="holds the book's file (default: $SEQLAB_DATA, else ./data)")
    add_results_option(parser)
    args = parser.parse_args(argv)

    translator = load(args.run_dir)
    task = task_of(translator.config.data)
    if task is None:
        parser.error(f"{args.run_dir}: not trained on a built-in task (date, addition, execute) or on the book's files")
    corpus = translator.config.data.corpus
    if isinstance(corpus, TaskCorpus) and args.seed == corpus.seed:
        parser.error(f"--seed {args.seed} is the seed of the run's own corpus")
    splits = load_splits(translator.config.data, resolve_data_dir(args.data_dir))
    known = {source for pairs in splits.values() for source, _ in pairs}
    options = corpus.options() if isinstance(corpus, TaskCorpus) else {}  # execute: the run's length, nesting, mix
    drawn = generate_task(task, args.size + len(known), args.seed, **options)
    fresh = [(s, t) for s, t in drawn if s not in known][:args.size]
    hypotheses = translator.translate([s for s, _ in fresh], beam=args.beam)
    references = [translator.normalize_target(t) for _, t in fresh]
    score = exact_match(hypotheses, references)
    wrong = [(s, h, r) for (s, _), h, r in zip(fresh, hypotheses, references) if h != r]
    mix, covered = reweighted([s for s, _ in fresh], [h == r for h, r in zip(hypotheses, references)],
                              Counter(shape(s) for pairs in splits.values() for s, _ in pairs))
    print(f"{args.run_dir}: {len(fresh):,} fresh {task} problems (seed {args.seed}, none in the run's corpus), "
          f"beam {args.beam}: exact match {score:.2f} %; reweighted to the corpus's mix of shapes {mix:.2f} % "
          f"(shapes of {covered:.1f} % of the corpus). {machine()}.")
    for source, hypothesis, target in wrong[:10]:
        print(f"  {source!r} -> {hypothesis!r} (expected {target!r})")
    table = Table(f"`{args.run_dir.name}` on fresh {task} problems", [
        "problems", "seed", "beam", "exact match %", "reweighted to the corpus's shapes %", "corpus covered by the shapes %"],
        [[f"{len(fresh):,}", str(args.seed), str(args.beam), f"{score:.2f}", f"{mix:.2f}", f"{covered:.1f}"]])
    print(f"\n{markdown(table)}")
    run = {"task": task, "problems": len(fresh), "seed": args.seed, "beam": args.beam, "exact_match": score,
           "reweighted": mix, "covered": covered, "wrong": [list(w) for w in wrong[:10]]}
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    publish(Result(f"heldout_task-{args.run_dir.name}", table.title, given, [table], [run],
                   notes=["none of the problems is in the run's corpus (train, valid or test)"]), args.results)


if __name__ == "__main__":
    main()
