"""Choose a decoding setting of trained runs on the valid split: beam search with each length penalty.

    python benchmarks/select_decoding.py RUN_DIR [RUN_DIR ...] --data-dir ../shared/data [--beam 5] \
        [--length-penalties 0 0.2 0.4 0.6 0.8 1.0] [--metric bleu] [--name NAME] [--results DIR]

Every GNMT length penalty α is scored on each run's valid split (sacreBLEU or exact match of the decoded outputs);
the choice is the α with the best mean over the runs (the seeds of one config get one α). This script never loads
the test split: it ends with the command that scores the choice on test, once. The table goes to the scoreboard
(benchmarks/results/) as ``select_decoding-NAME`` (default: the first run's directory name).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from statistics import mean

from report import add_results_option, choose_on_valid, machine, markdown, publish
from scoreboard import Result, Table, command, spread

from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.predictors.translator import load


def main(argv: list[str] | None = None) -> None:
    """Score every length penalty on valid, print the table and the choice, and record them."""
    choose_on_valid()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", type=Path, nargs="+", help="runs of one config (its seeds)")
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    parser.add_argument("--metric", choices=["bleu", "exact_match"], default="bleu")
    parser.add_argument("--name", help="the result's name on the scoreboard (default: the first run's directory)")
    add_results_option(parser)
    args = parser.parse_args(argv)

    scored = [score_penalties(run_dir, args.data_dir, args.beam, args.length_penalties)
              for run_dir in args.run_dirs]
    rows = [(alpha, [run[i][1] for run in scored], sum(run[i][2] for run in scored))
            for i, alpha in enumerate(args.length_penalties)]
    best = max(rows, key=lambda row: mean(m[args.metric] for m in row[1]))[0]
    shown = ", ".join(f"`{run_dir}`" for run_dir in args.run_dirs)
    title = f"Length penalty for {shown}, beam {args.beam}, chosen on valid"
    table = Table(title, ["α", "valid BLEU", "valid BLEU, lower-cased", "valid exact match %", "seconds"],
                  [[f"**{alpha}**" if alpha == best else str(alpha), *(cell([m[key] for m in metrics])
                    for key in ("bleu", "bleu_lowercase", "exact_match")), f"{seconds:.1f}"]
                   for alpha, metrics, seconds in rows])
    choice = (f"Chosen on valid: **α {best}**. Score it on test once: "
              + "; ".join(f"`seqlab eval {run_dir} --split test --beam {args.beam} --length-penalty {best}`"
                          for run_dir in args.run_dirs) + ".")
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    pairs = scored[0][0][1]["sentences"]  # the valid pairs decoded
    print(f"#### {title} ({time.strftime('%Y-%m-%d %H:%M')})\n\nCommand: `{given}`. {machine()}. Valid split: "
          f"{pairs:,} pairs.\n\n{markdown(table)}\n\n{choice}\n")
    runs = [{"run": str(run_dir), "length_penalty": alpha, "beam": args.beam, "valid": m, "seconds": seconds}
            for run_dir, run in zip(args.run_dirs, scored, strict=True) for alpha, m, seconds in run]
    publish(Result(f"select_decoding-{args.name or args.run_dirs[0].name}", title, given, [table], runs,
                   notes=[f"valid split: {pairs:,} pairs; chosen by the mean valid {args.metric} over "
                          f"{len(args.run_dirs)} run(s)", choice]), args.results)


def score_penalties(run_dir: Path, data_dir: str | None, beam: int,
                    alphas: list[float]) -> list[tuple[float, dict[str, float], float]]:
    """The valid metrics of ``run_dir`` decoded by beam search with each length penalty α: (α, metrics, seconds)
    per α."""
    translator = load(run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(data_dir))["valid"]
    split = EncodedSplit.build(translator, pairs, "valid")
    scored = []
    for alpha in alphas:
        start = time.perf_counter()
        metrics = evaluate(translator, split, translator.config.train.batch_tokens,
                           options=DecodeOptions(beam=beam, length_penalty=alpha))
        scored.append((alpha, metrics, time.perf_counter() - start))
        print(f"{run_dir}, α {alpha}: valid BLEU {metrics['bleu']:.2f}, exact match {metrics['exact_match']:.2f}",
              flush=True)
    return scored


def cell(values: list[float]) -> str:
    """One run's value, or the mean ± sd (range) of several."""
    return f"{values[0]:.2f}" if len(values) == 1 else spread(values)


if __name__ == "__main__":
    main()
