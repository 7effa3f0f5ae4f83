"""CBOW's copy plans for two workers, taking turns, each run tagged by where the machine had its two cores.

    python benchmarks/cbow_copies.py --data-dir ../shared/data [--repeat 3] [--seconds 600] [--plans all8 all16]

One epoch of CBOW (``--config``, configs/vectors/multi30k.yaml) on its corpus ``--repeat`` times over, with one
worker, then with two under each plan of ``PLANS`` (the rows each worker copies and how often they merge:
``seqlab.vectors.train._Copies``), in turn, until ``--seconds`` have passed. Before and after each run the round
trip of a cache line between CPUs 0 and 1 (``core_placement.py``) tags it: "one die" (below 150 ns both times),
"two dies" (above both times) or "moved" (the VM moved its cores during the run); "untagged" without a C
compiler. Prints words/s per placement and plan (median, range, runs) and each two-worker plan's median over one
worker's in the same placement: a placement changes that ratio more than any plan does (``_OwnRows``), so plans
are compared within a placement, never across.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from core_placement import TWO_DIES_NS, build, round_trip
from report import add_results_option, markdown, publish
from scoreboard import Result, Table, command

from seqlab.config import load_config
from seqlab.vectors.config import VectorsConfig, VectorsTrainConfig
from seqlab.vectors.pairs import Vocabulary
from seqlab.vectors.run import read_words
from seqlab.vectors.train import _Copies, _OwnRows, train_word2vec

ONE_WORKER = "one worker"
PLANS = {  # two workers' copies: rows of W_in, of W_out (None: all), words a row between merges; hottest rows
    "hot1024": _Copies(1_024, 1_024, 2),  # the 1,024 hottest rows alone, every 2 words a row (until all8)
    "all8": _Copies(None, None, 8, hot_rows=1_024, hot_words_a_row=2),  # every row; the hottest 1,024 every 2 (until all16)
    "all16": _Copies(None, None, 16, hot_rows=1_024, hot_words_a_row=2),  # until the hottest rows merged every 4
    "all32": _Copies(None, None, 32, hot_rows=1_024, hot_words_a_row=2),
    "all16hot4": _Copies(None, None, 16, hot_rows=1_024, hot_words_a_row=4),  # _OwnRows.COPY["cbow"] now
}  # the hottest rows' merges take the rows a worker changed (kernel.merge's ``changed``) in every plan
Tag = Callable[[], float | None]  # a round trip in ns, or None where nothing can measure one


def placement(before: float | None, after: float | None) -> str:
    """The tag of a run from the round trips around it."""
    if before is None or after is None:
        return "untagged"
    if max(before, after) < TWO_DIES_NS:
        return "one die"
    return "two dies" if min(before, after) > TWO_DIES_NS else "moved"


def words_per_second(sentences: list[np.ndarray], counts: np.ndarray, cfg: VectorsTrainConfig, workers: int,
                     plan: _Copies | None) -> float:
    """One epoch's words per second of training, with ``plan`` as CBOW's copies (two workers)."""
    saved = _OwnRows.COPY
    if plan is not None:
        _OwnRows.COPY = {**saved, "cbow": plan}
    try:
        start = time.perf_counter()
        train_word2vec(sentences, counts, cfg.model_copy(update={"workers": workers}), progress=False)
        return sum(map(len, sentences)) / (time.perf_counter() - start)
    finally:
        _OwnRows.COPY = saved


def race(sentences: list[np.ndarray], counts: np.ndarray, cfg: VectorsTrainConfig, plans: list[str], seconds: float,
         tag: Tag) -> dict[tuple[str, str], list[float]]:
    """(placement, plan) -> the words/s of its runs: one worker, then each plan, in turn until ``seconds`` are
    spent (at least one round)."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    end = time.monotonic() + seconds
    while True:
        for name in [ONE_WORKER, *plans]:
            before = tag()
            speed = words_per_second(sentences, counts, cfg, 1 if name == ONE_WORKER else 2, PLANS.get(name))
            runs[(placement(before, tag()), name)].append(speed)
        if time.monotonic() >= end:
            return runs


def table(runs: dict[tuple[str, str], list[float]], plans: list[str]) -> Table:
    """Per placement and plan: median, range and runs of millions of words/s, and the median over one worker's."""
    out = Table("CBOW, one epoch: million words/s per placement of the two cores",
                ["placement", "plan", "runs", "median", "range", "÷ one worker"], [])
    for where in sorted({where for where, _ in runs}):
        alone = runs.get((where, ONE_WORKER))
        for name in [ONE_WORKER, *plans]:
            speeds = runs.get((where, name))
            if speeds:
                median = statistics.median(speeds)
                ratio = f"{median / statistics.median(alone):.2f}" if alone and name != ONE_WORKER else "—"
                out.rows.append([where, name, str(len(speeds)), f"{median / 1e6:.3f}",
                                 f"{min(speeds) / 1e6:.2f}–{max(speeds) / 1e6:.2f}", ratio])
    return out


def main(argv: list[str] | None = None) -> dict[tuple[str, str], list[float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/vectors/multi30k.yaml")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="the corpus this many times over")
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--plans", nargs="+", choices=sorted(PLANS), default=sorted(PLANS))
    parser.add_argument("--trips", type=int, default=200_000, help="round trips a tag")
    add_results_option(parser)
    args = parser.parse_args(argv)
    config = load_config(args.config, ["train.method=cbow", "train.epochs=1"], schema=VectorsConfig)
    words = read_words(config, args.data_dir) * args.repeat
    vocabulary = Vocabulary.build(words, config.train.min_count)
    sentences = vocabulary.encode(words)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            program: Path | None = build(Path(tmp))
        except SystemExit as missing:  # no C compiler: runs go untagged
            print(f"{missing}: runs are untagged")
            program = None
        tag: Tag = (lambda: None) if program is None else (lambda: round_trip(program, args.trips, (0, 1)))
        train_word2vec(sentences[:10], vocabulary.counts, config.train, progress=False)  # the kernel compiled
        runs = race(sentences, vocabulary.counts, config.train, args.plans, args.seconds, tag)
    corpus = f"{sum(map(len, sentences)):,} words ({args.repeat} × the corpus), vocabulary {len(vocabulary.words):,}"
    result = table(runs, args.plans)
    print(f"{corpus}\n#### {result.title}\n\n{markdown(result)}")
    given = sys.argv[1:] if argv is None else argv
    publish(Result("cbow_copies", result.title, command(__file__, given), [result],
                   [{"placement": where, "plan": name, "words_per_s": speeds} for (where, name), speeds in runs.items()],
                   notes=[corpus, f"{args.seconds:.0f} s of runs taking turns"]), args.results)
    return runs


if __name__ == "__main__":
    main()
