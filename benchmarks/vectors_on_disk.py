"""word2vec on a corpus larger than memory: a plain-text corpus repeated N times, trained with ``data.on_disk``
(read once into ids on disk, trained a window at a time) against the same corpus held in memory.

    python benchmarks/vectors_on_disk.py --data-dir ../shared/data [--config configs/vectors/multi30k.yaml] \\
        [--scales 1 10 134] [--memory-scales 1 10] [--rounds 1] [--set KEY=VALUE ...] [--results DIR]

The corpus: the config's sentences (Multi30k en+de train by default, 746,491 words), as one plain-text file of one
sentence a line, written N times over (134 times: 100 million words). For each scale, one command after another on
the machine, each in its own process: ``seqlab vectors train CONFIG`` reading that file (``format: lines``) with
``data.on_disk: true``, and at the ``--memory-scales`` the same without it (every sentence's words in memory). For
each run: its peak resident memory (``wait4``'s ``ru_maxrss``; the ids are read into the process's buffers, not
mapped), the seconds before training began (reading, counting, writing ids; the whole run less its epochs), and the
training words/s of its log (corpus words × epochs ÷ the epochs' seconds). ``--rounds N`` runs each way N times,
taking turns (on disk first in odd rounds): the table gives medians, the highest peak memory and the rounds'
ratios. The config's train options hold (gensim's defaults; ``--set train.epochs=1`` for a shorter run).
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import add_scale_options, machine, markdown, peak_run, publish, rounds_ratio
from scoreboard import Result, Table, command

from seqlab.config import load_config
from seqlab.rundir import RunDir
from seqlab.vectors.config import VectorsConfig
from seqlab.vectors.run import read_words

ROOT = Path(__file__).resolve().parents[1]


def corpus_file(config: Path, data_dir: Path, sets: list[str], scale: int, out: Path) -> Path:
    """The config's sentences as seqlab reads their words, one a line, ``scale`` times over (gzipped)."""
    text = "".join(" ".join(words) + "\n" for words in read_words(load_config(config, sets, schema=VectorsConfig),
                                                                  data_dir))
    path = out / f"corpus-{scale}.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        for _ in range(scale):
            f.write(text)
    return path


def scale_row(config: Path, data_dir: Path, sets: list[str], scale: int, in_memory: bool, rounds: int,
              work: Path) -> dict[str, Any]:
    """One scale: trained on disk and (``in_memory``) in memory, ``rounds`` times each, taking turns."""
    corpus = corpus_file(config, data_dir, sets, scale, work)
    common = [str(config), *(f"--set={given}" for given in sets),
              f"--set=data.corpora=[{{format: lines, path: {corpus}}}]"]
    ways = {"disk": ["--set=data.on_disk=true"], **({"memory": []} if in_memory else {})}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for turn in range(rounds):
        for name in ways if turn % 2 == 0 else reversed(ways):
            out = work / f"run-{name}-{scale}-{turn}"
            wall, mib = peak_run(["vectors", "train", *common, *ways[name], "--out", str(out)])
            run = RunDir(out)
            words = run.vectors()[3]["corpus_words"]
            training = sum(r["seconds"] for r in run.log())
            runs[name].append({"wall_s": wall, "mib": mib, "before_training_s": wall - training,
                               "words_per_s": words * len(run.log()) / training, "corpus_words": words})
    row: dict[str, Any] = {"scale": scale, "corpus_words": runs["disk"][0]["corpus_words"]}
    for name, got in runs.items():
        row |= {f"{name}_mib": max(r["mib"] for r in got),
                f"{name}_words_per_s": statistics.median(r["words_per_s"] for r in got),
                f"{name}_before_training_s": statistics.median(r["before_training_s"] for r in got),
                f"{name}_runs": got}
    if in_memory:
        row["ratios"] = [d["words_per_s"] / m["words_per_s"] for d, m in zip(runs["disk"], runs["memory"])]
    return row


def table(rows: list[dict[str, Any]], config: Path) -> Table:
    columns = ["scale", "corpus words", "peak MiB on disk", "peak MiB in memory", "s before training on disk",
               "s before training in memory", "words/s on disk", "words/s in memory", "on disk ÷ in memory"]
    out = []
    for r in rows:
        memory = "memory_mib" in r
        out.append([f"{r['scale']}×", f"{r['corpus_words']:,}", f"{r['disk_mib']:,.0f}",
                    f"{r['memory_mib']:,.0f}" if memory else "—", f"{r['disk_before_training_s']:.1f}",
                    f"{r['memory_before_training_s']:.1f}" if memory else "—", f"{r['disk_words_per_s']:,.0f}",
                    f"{r['memory_words_per_s']:,.0f}" if memory else "—", rounds_ratio(r["ratios"]) if memory else "—"])
    return Table(f"word2vec on disk: `{config.name}`'s sentences repeated", columns, out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, type=Path, help="../shared/data")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "vectors" / "multi30k.yaml")
    add_scale_options(parser, [1, 10, 134], "train.epochs=1")
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    with tempfile.TemporaryDirectory(prefix="vectors-on-disk-") as tmp:
        rows = [scale_row(args.config.resolve(), args.data_dir.resolve(), args.sets, scale, scale in args.memory_scales,
                          args.rounds, Path(tmp)) for scale in args.scales]
    made = table(rows, args.config)
    print(f"#### {made.title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{command(__file__, given)}`\n\n"
          f"{markdown(made)}\n")
    name = f"vectors_on_disk-{args.config.stem}" + (f"-{args.rounds}rounds" if args.rounds > 1 else "")
    publish(Result(name, made.title, command(__file__, given), [made], rows,
                   notes=["peak resident memory: each process's ru_maxrss",
                          "words/s: the run's log, the epochs' seconds (reading and counting excluded)"]),
            args.results)


if __name__ == "__main__":
    main()
