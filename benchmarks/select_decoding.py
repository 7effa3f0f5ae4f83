"""Choose a decoding setting of a trained run on the valid split: beam search with each length penalty.

    python benchmarks/select_decoding.py RUN_DIR --data-dir ../shared/data [--beam 5] \
        [--length-penalties 0 0.2 0.4 0.6 0.8 1.0] [--metric bleu] [--record docs/benchmarks.md]

Every GNMT length penalty α is scored on the run's valid split (sacreBLEU or exact match of the
decoded outputs); the best is the choice. This script never loads the test split: it ends with the one
command that scores the choice on test, once.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from report import add_record_option, emit, machine

from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.translator import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    parser.add_argument("--metric", choices=["bleu", "exact_match"], default="bleu")
    add_record_option(parser)
    args = parser.parse_args()

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
    lines = [f"#### Length penalty for `{args.run_dir}`, beam {args.beam}, chosen on valid "
             f"({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Command: `python benchmarks/select_decoding.py {args.run_dir} --beam {args.beam} --length-penalties "
             f"{' '.join(map(str, args.length_penalties))} --metric {args.metric}`. {machine()}. "
             f"Valid split: {len(pairs):,} pairs.", "",
             "| α | valid BLEU | valid BLEU, lower-cased | valid exact match % | seconds |", "|---|---|---|---|---|"]
    for alpha, m, seconds in rows:
        mark = "**" if alpha == best else ""
        lines.append(f"| {mark}{alpha}{mark} | {m['bleu']:.2f} | {m['bleu_lowercase']:.2f} | {m['exact_match']:.2f} "
                     f"| {seconds:.1f} |")
    lines += ["", f"Chosen on valid: **α {best}**. Score it on test once: `seqlab eval {args.run_dir} --split test "
              f"--beam {args.beam} --length-penalty {best}`."]
    emit("\n".join(lines) + "\n", args.record)


if __name__ == "__main__":
    main()
