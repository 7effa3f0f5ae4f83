"""Choose a decoding setting of a trained run on the valid split: beam search with each length penalty.

    python benchmarks/select_decoding.py RUN_DIR --data-dir ../shared/data [--beam 5] \
        [--length-penalties 0 0.2 0.4 0.6 0.8 1.0] [--metric bleu] [--results DIR]

Every GNMT length penalty α is scored on the run's valid split (sacreBLEU or exact match of the
decoded outputs); the best is the choice. This script never loads the test split: it ends with the one
command that scores the choice on test, once. The table goes to the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from report import add_results_option, choose_on_valid, machine, markdown, publish
from scoreboard import Result, Table, command

from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.predictors.translator import load


def main(argv: list[str] | None = None) -> None:
    """Score every length penalty on valid, print the table and the choice, and record them."""
    choose_on_valid()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    parser.add_argument("--metric", choices=["bleu", "exact_match"], default="bleu")
    add_results_option(parser)
    args = parser.parse_args(argv)

    translator = load(args.run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(args.data_dir))["valid"]
    split = EncodedSplit.build(translator, pairs, "valid")
    rows = []
    for alpha in args.length_penalties:
        start = time.perf_counter()
        metrics = evaluate(translator, split, translator.config.train.batch_tokens,
                           options=DecodeOptions(beam=args.beam, length_penalty=alpha))
        rows.append((alpha, metrics, time.perf_counter() - start))
        print(f"α {alpha}: valid {args.metric} {metrics[args.metric]:.2f}", flush=True)
    best = max(rows, key=lambda row: row[1][args.metric])[0]
    title = f"Length penalty for `{args.run_dir}`, beam {args.beam}, chosen on valid"
    table = Table(title, ["α", "valid BLEU", "valid BLEU, lower-cased", "valid exact match %", "seconds"],
                  [[f"**{alpha}**" if alpha == best else str(alpha), f"{m['bleu']:.2f}", f"{m['bleu_lowercase']:.2f}",
                    f"{m['exact_match']:.2f}", f"{seconds:.1f}"] for alpha, m, seconds in rows])
    choice = (f"Chosen on valid: **α {best}**. Score it on test once: `seqlab eval {args.run_dir} --split test "
              f"--beam {args.beam} --length-penalty {best}`.")
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    print(f"#### {title} ({time.strftime('%Y-%m-%d %H:%M')})\n\nCommand: `{given}`. {machine()}. Valid split: "
          f"{len(pairs):,} pairs.\n\n{markdown(table)}\n\n{choice}\n")
    runs = [{"length_penalty": alpha, "beam": args.beam, "valid": m, "seconds": seconds} for alpha, m, seconds in rows]
    publish(Result(f"select_decoding-{args.run_dir.name}", title, given, [table], runs,
                   notes=[f"valid split: {len(pairs):,} pairs; chosen by valid {args.metric}", choice]), args.results)

if __name__ == "__main__":
    main()
