"""A trained built-in-task model on freshly generated problems that are in none of its splits.

    python benchmarks/heldout_task.py RUN_DIR [--size 3000] [--seed 2026] [--beam 1]

The run's corpus is regenerated from its config; new pairs are drawn from the same task with another
seed, every source that occurs in the run's corpus (train, valid or test) is skipped, and the first
``--size`` of the rest are translated and scored by exact match: a check that the model learnt the
task, not its test split.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from report import machine

from seqlab.config import TaskCorpus
from seqlab.data import generate_task, load_splits
from seqlab.metrics import exact_match
from seqlab.translator import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--size", type=int, default=3000, help="fresh problems to score")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--beam", type=int, default=1)
    args = parser.parse_args()

    translator = load(args.run_dir)
    corpus = translator.config.data.corpus
    if not isinstance(corpus, TaskCorpus):
        parser.error(f"{args.run_dir}: not trained on a built-in task (data.corpus.format: task)")
    if args.seed == corpus.seed:
        parser.error(f"--seed {args.seed} is the seed of the run's own corpus")
    known = {source for pairs in load_splits(translator.config.data, Path(".")).values() for source, _ in pairs}
    drawn = generate_task(corpus.task, args.size + len(known), args.seed)
    fresh = [(s, t) for s, t in drawn if s not in known][:args.size]
    hypotheses = translator.translate([s for s, _ in fresh], beam=args.beam)
    references = [translator.normalize_target(t) for _, t in fresh]
    score = exact_match(hypotheses, references)
    wrong = [(s, h, r) for (s, _), h, r in zip(fresh, hypotheses, references) if h != r]
    print(f"{args.run_dir}: {len(fresh):,} fresh {corpus.task} problems (seed {args.seed}, none in the run's corpus), "
          f"beam {args.beam}: exact match {score:.2f} %. {machine()}.")
    for source, hypothesis, target in wrong[:10]:
        print(f"  {source!r} -> {hypothesis!r} (expected {target!r})")


if __name__ == "__main__":
    main()
