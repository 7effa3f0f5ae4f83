"""Decoding speed of a trained run on a split of its data: sentences/s and exact match, greedy and beam.

    SEQLAB_DATA=../shared/data python benchmarks/decoding_speed.py runs/date-attention --beams 1 5

Decodes the whole split through ``Translator.translate_ids`` (length-sorted
batches of ``eval.batch_size``, the cache, the run's precision as resolved on this CPU),
once per beam size, after one warm-up batch, prints a markdown table and records it with the timings in the
scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time

import torch
from report import add_results_option, markdown, publish
from scoreboard import Result, Table, command

from seqlab import precision
from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit
from seqlab.metrics import exact_match
from seqlab.predictors.translator import load


def main(argv: list[str] | None = None) -> None:
    """Decode the split once per beam size and print the table and record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=None)
    add_results_option(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    translator = load(args.run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(args.data_dir))[args.split]
    split = EncodedSplit.build(translator, pairs, args.split)
    translator.translate_ids(split.src[: translator.config.eval.batch_size])  # warm-up
    rows = []
    for beam in args.beams:
        start = time.perf_counter()
        outputs = translator.translate_ids(split.src, DecodeOptions(beam=beam))
        seconds = time.perf_counter() - start
        rows.append((beam, seconds, len(outputs) / seconds, exact_match(outputs, split.references)))

    cfg = translator.config
    given = sys.argv[1:] if argv is None else argv
    caption = (f"model {cfg.model.type}, precision {precision.resolve(cfg.train.precision)}, {len(outputs)} sentences "
               f"in batches of {cfg.eval.batch_size}")
    title = f"Decoding speed: `{args.run_dir}`, {args.split} split"
    table = Table(title, ["search", "seconds", "sentences/s", "exact match %"],
                  [["greedy" if b == 1 else f"beam {b}", f"{s:.2f}", f"{r:.0f}", f"{m:.2f}"] for b, s, r, m in rows])
    print(f"\n### {title} ({datetime.date.today().isoformat()})\n\n{platform.machine()}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}; {caption}. Command: `{command(__file__, given)}`\n\n{markdown(table)}\n")
    runs = [{"beam": b, "seconds": s, "sentences_per_s": r, "exact_match": m, "sentences": len(outputs)}
            for b, s, r, m in rows]
    publish(Result("decoding_speed", title, command(__file__, given), [table], runs,
                   notes=[caption, "one pass over the split per search, after one warm-up batch"]), args.results)

if __name__ == "__main__":
    main()
