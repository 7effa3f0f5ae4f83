"""JoeyNMT's best recipe for the book's date task, chosen on the valid split (``benchmarks/searches/joeynmt-date.yaml``).

    python benchmarks/select_joeynmt.py --data-dir ../shared/data [--variants A S K] [--results DIR]

JoeyNMT 2.3.0 (installed into the peers' virtual environment on first use, as for ``peer_decoding.py``)
trains each variant on seqlab's tokens and the model of ``configs/book/date-fast.yaml``
(``joeynmt_date.py``), validating on the 500 valid pairs after every epoch, one run after the other.
The ranking is the race's: first the variants that reach 99.9 % valid exact match, sooner first; then
the rest by their best valid exact match. This script writes no other split for JoeyNMT: the chosen
recipe is timed and scored on test once, by ``date_race.py --joey-best NAME``. The ranking and every run go to the
scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path
from typing import Any

import joeynmt_date as joey
from peer_decoding import peer_python
from report import add_results_option, choose_on_valid, machine, markdown, publish
from scoreboard import Result, Table, command


def main(argv: list[str] | None = None) -> None:
    choose_on_valid()
    argv = sys.argv[1:] if argv is None else argv
    variants, same = joey.recipes()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="holds dlfs2/date.txt")
    parser.add_argument("--variants", nargs="+", choices=sorted(variants), default=list(variants))
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    add_results_option(parser)
    args = parser.parse_args(argv)

    splits = joey.date_splits(args.data_dir.resolve())
    tokenizer = joey.source_tokenizer(splits["train"])
    work = Path(tempfile.mkdtemp(prefix="joey-date-data-"))
    data = {"train": joey.write_split(work, "train", splits["train"], tokenizer),
            "dev": joey.write_split(work, "valid", splits["valid"], tokenizer)}
    python = peer_python(args.peer_venv)
    runs: list[dict[str, Any]] = []
    for name in args.variants:
        runs.append(joey.train(python, data, variants[name], len(splits["train"]), name))
        last = runs[-1]["epochs"][-1]
        print(f"{name}: valid {last['valid']:.2f} % after epoch {last['epoch']}", file=sys.stderr, flush=True)
    best = min(runs, key=joey.rank_key)
    made, given = table(runs, best), command(__file__, argv)
    about = ("JoeyNMT 2.3.0, seqlab's tokens (BPE source pieces, character targets), the model of "
             f"`configs/book/date-fast.yaml`; variants from `benchmarks/searches/joeynmt-date.yaml` ({same} is seqlab's "
             "recipe in JoeyNMT's options)")
    choice = (f"Chosen on valid: **{best['name']}**. Race it and score it on test once: "
              f"`python benchmarks/date_race.py --data-dir DATA --joey-best {best['name']}`.")
    print(f"### {made.title} ({datetime.date.today().isoformat()})\n\nCommand: `{given}`. {machine()}. {about}.\n\n"
          f"{markdown(made)}\n\n{choice}\n")
    publish(Result("select_joeynmt", made.title, given, [made], runs, notes=[about, choice]), args.results)


def table(runs: list[dict[str, Any]], best: dict[str, Any]) -> Table:
    """The variants in the race's order: valid exact match per epoch, time to the target, throughput."""
    table = Table("JoeyNMT's recipe for the date task, chosen on valid", [
        "variant", "overrides", "valid exact match % per epoch", "training s to ≥ 99.9 % valid", "training s",
        "target tokens/s"], [])
    for run in sorted(runs, key=joey.rank_key):
        reached = run["seconds_to_target"]
        table.rows.append([f"{run['name']}{' (chosen)' if run is best else ''}", ", ".join(run["overrides"]) or "—",
                           " / ".join(format(r["valid"], ".2f") for r in run["epochs"]),
                           "not reached" if reached is None else f"{reached:.1f}",
                           f"{sum(r['train_s'] for r in run['epochs']):.1f}", f"{joey.tokens_per_second(run):,.0f}"])
    return table

if __name__ == "__main__":
    main()
