"""Decoding speed of a trained run on a split of its data: sentences/s and exact match, greedy and beam.

    SEQLAB_DATA=../shared/data python benchmarks/decoding_speed.py runs/date-attention --beams 1 5

Decodes the whole split through ``Translator.translate_ids`` (length-sorted
batches of ``eval.batch_size``, the cache, the run's precision as resolved on this CPU),
once per beam size, after one warm-up batch, and prints a markdown table;
``--record docs/benchmarks.md`` appends it there.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import torch
from report import add_record_option, emit

from seqlab import precision
from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit
from seqlab.metrics import exact_match
from seqlab.translator import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=None)
    add_record_option(parser)
    args = parser.parse_args()
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
    lines = [
        f"\n### Decoding speed: `{args.run_dir}`, {args.split} split ({datetime.date.today().isoformat()})\n",
        (f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}; model "
         f"{cfg.model.type}, precision {precision.resolve(cfg.train.precision)}, {len(outputs)} sentences in batches of "
         f"{cfg.eval.batch_size}. Command: `python benchmarks/decoding_speed.py {args.run_dir} --beams "
         f"{' '.join(map(str, args.beams))}`\n"),
        "| search | seconds | sentences/s | exact match % |",
        "|---|---|---|---|",
    ]
    lines += [f"| {'greedy' if b == 1 else f'beam {b}'} | {s:.2f} | {r:.0f} | {m:.2f} |" for b, s, r, m in rows]
    text = "\n".join(lines) + "\n"
    emit(text, args.record)


if __name__ == "__main__":
    main()
