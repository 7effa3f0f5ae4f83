"""Prepared corpora at scale: a config's training corpus repeated N times, prepared once (``seqlab data prepare``)
and trained from its shards for a fixed number of steps, against the same steps read from the corpus; any kind
that prepares (a seq2seq config's aligned files, a language model's lines, ...).

    python benchmarks/prepared_data.py --data-dir ../shared/data [--config configs/multi30k_de_en.yaml] \\
        [--scales 1 10 100] [--memory-scales 1 10] [--steps 100] [--rounds 1] [--set KEY=VALUE ...] [--results DIR]

For each scale N, one command after another on the machine, each in its own process: the config's training files
(an aligned corpus's two, or one file) written N times over into a temporary data directory, its valid and test
files as they are; then

* ``seqlab data prepare CONFIG --out DIR``: wall seconds, rows (pairs, sentences, texts) a second, peak resident
  memory;
* ``seqlab train CONFIG --set data.prepared=DIR --set train.max_steps=S``: peak resident memory and training
  tokens a second (the run's log: the steps' seconds, validation excluded), validation cut to
  ``eval.valid_limit`` 100 sentences;
* at the ``--memory-scales``, the same training from the corpus (read, tokenised and batched in memory).

``--rounds N`` trains each way N times, taking turns (prepared first in odd rounds, the corpus first in even
ones): the table gives the median tokens/s, the median of the rounds' ratios and their range, the highest peak
memory; the record is then named ``prepared_data-CONFIG-Nrounds``.

Peak resident memory is each process's own high-water mark (``wait4``'s ``ru_maxrss``), the prepared run's
memory-mapped pages included. The flat-memory claim is the prepared rows' peak memory across the scales; the
speed claim the prepared run's tokens a second over the in-memory run's at the same scale.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from report import add_scale_options, machine, markdown, peak_run, publish, rounds_ratio
from scoreboard import Result, Table, command

from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]


def file_keys(spec: dict[str, Any]) -> list[str]:
    """The keys of a corpus spec that name its files: an aligned corpus's ``source`` and ``target``, else ``path``."""
    return ["source", "target"] if "source" in spec else ["path"]


def repeated_data(config: dict[str, Any], data_dir: Path, scale: int, out: Path) -> Path:
    """A data directory whose training files are the config's repeated ``scale`` times (plain text), valid and
    test linked as they are; the same relative paths, so the config reads it unchanged but for the suffix."""
    data = config["data"]
    for key in file_keys(data["train"]):
        given = data_dir / data["train"][key]
        lines = (gzip.open if given.suffix == ".gz" else open)(given, "rt", encoding="utf-8").read()
        target = out / data["train"][key].removesuffix(".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as f:
            for _ in range(scale):
                f.write(lines if lines.endswith("\n") else lines + "\n")
    for split in ("valid", "test"):
        for key in file_keys(data[split]):
            link = out / data[split][key]
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(data_dir / data[split][key])
    return out


def scale_rows(config_path: Path, data_dir: Path, scale: int, steps: int, in_memory: bool, work: Path,
               sets: list[str], rounds: int = 1, workers: int = 1) -> dict[str, Any]:
    """One scale: prepare (with ``workers`` processes), train from the shards, and (``in_memory``) train from the
    corpus, ``rounds`` times taking turns; ``sets``: the config's overrides (``KEY=VALUE``) in every command."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    data = repeated_data(config, data_dir, scale, work / f"data-{scale}")
    env = os.environ | {"SEQLAB_DATA": str(data)}
    train = config["data"]["train"]
    files = [f"--set=data.train.{key}={train[key].removesuffix('.gz')}" for key in file_keys(train)]
    files += [f"--set={given}" for given in sets]
    prepared = work / f"prepared-{scale}"
    prepare_s, prepare_mib = peak_run(["data", "prepare", str(config_path), "--out", str(prepared), *files,
                                       "--workers", str(workers)], env)
    manifest = yaml.safe_load((prepared / "manifest.json").read_text())
    rows, unit = int(manifest["splits"]["train"]["rows"]), manifest["unit"]
    short = [*files, f"--set=train.max_steps={steps}", "--set=train.epochs=1", "--set=eval.valid_limit=100"]
    row: dict[str, Any] = {"scale": scale, "rows": rows, "unit": unit, "prepare_s": prepare_s,
                           "prepare_mib": prepare_mib}
    ways = {"prepared": [f"--set=data.prepared={prepared}"], **({"memory": []} if in_memory else {})}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for turn in range(rounds):
        for name in ways if turn % 2 == 0 else reversed(ways):
            run = work / f"run-{name}-{scale}-{turn}"
            wall, mib = peak_run(["train", str(config_path), "--out", str(run), *short, *ways[name]], env)
            record = RunDir(run).log()[-1]
            runs[name].append({"wall_s": wall, "mib": mib, "tokens_per_s": record["train_tokens_per_s"],
                               "steps": record["step"]})
    for name, got in runs.items():
        row |= {f"{name}_wall_s": statistics.median(r["wall_s"] for r in got), f"{name}_mib": max(r["mib"] for r in got),
                f"{name}_tokens_per_s": statistics.median(r["tokens_per_s"] for r in got),
                f"{name}_steps": got[0]["steps"], f"{name}_runs": got}
    if in_memory:
        row["ratios"] = [p["tokens_per_s"] / m["tokens_per_s"] for p, m in zip(runs["prepared"], runs["memory"])]
    return row


def table(rows: list[dict[str, Any]], config: Path, steps: int) -> Table:
    unit = rows[0]["unit"] if rows else "rows"
    columns = ["scale", f"training {unit}", "prepare s", f"{unit}/s", "prepare peak MiB", "train peak MiB (prepared)",
               "train peak MiB (in memory)", "tokens/s prepared", "tokens/s in memory", "prepared ÷ in memory",
               "train wall s (prepared / in memory)"]
    out = []
    for r in rows:
        memory = "memory_mib" in r
        out.append([f"{r['scale']}×", f"{r['rows']:,}", f"{r['prepare_s']:.1f}", f"{r['rows'] / r['prepare_s']:,.0f}",
                    f"{r['prepare_mib']:,.0f}", f"{r['prepared_mib']:,.0f}",
                    f"{r['memory_mib']:,.0f}" if memory else "—", f"{r['prepared_tokens_per_s']:,.0f}",
                    f"{r['memory_tokens_per_s']:,.0f}" if memory else "—",
                    rounds_ratio(r["ratios"]) if memory else "—",
                    f"{r['prepared_wall_s']:.1f} / {r['memory_wall_s']:.1f}" if memory else f"{r['prepared_wall_s']:.1f}"])
    return Table(f"Prepared corpora: `{config.name}`'s training corpus repeated, {steps} training steps", columns, out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, type=Path, help="../shared/data")
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "multi30k_de_en.yaml")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--prepare-workers", type=int, default=1, help="seqlab data prepare --workers")
    add_scale_options(parser, [1, 10, 100], "tokens.source.sample=2000000")
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    with tempfile.TemporaryDirectory(prefix="prepared-data-") as tmp:
        rows = [scale_rows(args.config.resolve(), args.data_dir.resolve(), scale, args.steps,
                           scale in args.memory_scales, Path(tmp), args.sets, args.rounds, args.prepare_workers)
                for scale in args.scales]
    made = table(rows, args.config, args.steps)
    print(f"#### {made.title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{command(__file__, given)}`\n\n"
          f"{markdown(made)}\n")
    name = (f"prepared_data-{args.config.stem}" + (f"-{args.rounds}rounds" if args.rounds > 1 else "")
            + (f"-{args.prepare_workers}workers" if args.prepare_workers > 1 else ""))
    publish(Result(name, made.title, command(__file__, given), [made], rows,
                   notes=["peak resident memory: each process's ru_maxrss (memory-mapped pages included; with "
                          "--prepare-workers, the largest of the processes')",
                          "tokens/s: the run's log, training steps only (validation excluded)"]), args.results)


if __name__ == "__main__":
    main()
