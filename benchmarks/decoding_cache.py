"""Cached against uncached decoding: the same model, the same outputs, how much faster.

Builds a Transformer of the given size with random weights and ``<eos>``
disabled, so that every output is exactly ``--length`` words long, and times
greedy search and beam search through the model's step contract (incremental:
one new position per step, cached keys and values) and through
``PrefixDecoder`` (the seed's toy version: the decoder re-runs over the whole
prefix at every step). The outputs of both are checked equal before any time
is reported.

    python benchmarks/decoding_cache.py --length 50

Prints a markdown table and records it with the timings in the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from report import add_results_option, markdown, publish
from scoreboard import Result, Table, command

from seqlab.decoding import PrefixDecoder, beam_search, greedy_decode
from seqlab.decoding.step import StepDecoder
from seqlab.model import Transformer
from seqlab.model.transformer import TransformerConfig
from seqlab.specials import EOS, PAD


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` runs, in seconds (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    """Time both decoders on the same batch, check their outputs equal, print the table and record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=50, help="output words per sentence")
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch")
    parser.add_argument("--source-length", type=int, default=30)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    add_results_option(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=args.d_model, num_layers=args.layers, num_heads=args.heads,
                            d_ff=4 * args.d_model, dropout=0.0, max_length=args.length + args.source_length + 2)
    model = Transformer(cfg, args.vocab, args.vocab).eval()
    with torch.no_grad():
        model.generator.bias[EOS] = -1e4  # never end early: every output is --length words
    src = torch.randint(4, args.vocab, (args.batch, args.source_length))
    src[:, -1] = EOS
    src[: args.batch // 2, -4:] = PAD  # some padding, as real batches have
    src[: args.batch // 2, -5] = EOS
    limits = torch.full((args.batch,), args.length)
    uncached = PrefixDecoder(model)

    searches: dict[str, Callable[[StepDecoder[Any]], list[list[int]]]] = {
        "greedy": lambda m: [h.tokens for h in greedy_decode(m, src, limits)],
        f"beam {args.beam}": lambda m: [hs[0].tokens for hs in beam_search(m, src, limits, args.beam)],
    }
    rows = []
    for name, run in searches.items():
        if run(model) != run(uncached):
            raise SystemExit(f"{name}: cached and uncached outputs differ")
        fast = best_of(partial(run, model), args.repeats)
        slow = best_of(partial(run, uncached), args.repeats)
        rows.append((name, fast, slow))

    stamp = datetime.date.today().isoformat()
    given = sys.argv[1:] if argv is None else argv
    caption = (f"Transformer d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.heads} heads, vocab "
               f"{args.vocab}; {args.batch} sentences of {args.source_length} source tokens, {args.length} output "
               "words each, fp32")
    table = Table("Cached vs uncached decoding",
                  ["search", "cached s", "uncached (prefix re-run) s", "cached sentences/s", "speed-up"],
                  [[name, f"{fast:.3f}", f"{slow:.3f}", f"{args.batch / fast:.1f}", f"**{slow / fast:.2f}×**"]
                   for name, fast, slow in rows])
    print(f"\n### Cached vs uncached decoding ({stamp})\n\n{platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}; {caption}. Command: `{command(__file__, given)}`\n\n{markdown(table)}\n")
    runs = [{"search": name, "cached_s": fast, "uncached_s": slow, "sentences": args.batch} for name, fast, slow in rows]
    publish(Result("decoding_cache", "Cached vs uncached decoding", command(__file__, given), [table], runs,
                   notes=[caption, f"best of {args.repeats} runs each, after a warm-up; outputs checked equal"]),
            args.results)

if __name__ == "__main__":
    main()
