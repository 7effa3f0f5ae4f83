"""Cached against uncached decoding: the same model, the same outputs, how much faster.

Builds a Transformer of the given size with random weights and ``<eos>``
disabled, so that every output is exactly ``--length`` words long, and times
greedy search and beam search through the model's step contract (incremental:
one new position per step, cached keys and values) and through
``PrefixDecoder`` (the seed's toy version: the decoder re-runs over the whole
prefix at every step). The outputs of both are checked equal before any time
is reported.

    python benchmarks/decoding_cache.py --length 50

Prints a markdown table; ``--record docs/benchmarks.md`` appends it there.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import torch
from report import add_record_option, emit

from seqlab.config import TransformerConfig
from seqlab.decoding import PrefixDecoder, beam_search, greedy_decode
from seqlab.model import build_model
from seqlab.specials import EOS, PAD


def best_of(fn, repeats: int) -> float:
    """The fastest of ``repeats`` runs, in seconds (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
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
    add_record_option(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=args.d_model, num_layers=args.layers, num_heads=args.heads,
                            d_ff=4 * args.d_model, dropout=0.0, max_length=args.length + args.source_length + 2)
    model = build_model(cfg, args.vocab, args.vocab).eval()
    with torch.no_grad():
        model.generator.bias[EOS] = -1e4  # never end early: every output is --length words
    src = torch.randint(4, args.vocab, (args.batch, args.source_length))
    src[:, -1] = EOS
    src[: args.batch // 2, -4:] = PAD  # some padding, as real batches have
    src[: args.batch // 2, -5] = EOS
    limits = torch.full((args.batch,), args.length)
    uncached = PrefixDecoder(model)

    rows = []
    for name, run in (
        ("greedy", lambda m: [h.tokens for h in greedy_decode(m, src, limits)]),
        (f"beam {args.beam}", lambda m: [hs[0].tokens for hs in beam_search(m, src, limits, args.beam)]),
    ):
        if run(model) != run(uncached):
            raise SystemExit(f"{name}: cached and uncached outputs differ")
        fast = best_of(lambda run=run: run(model), args.repeats)
        slow = best_of(lambda run=run: run(uncached), args.repeats)
        rows.append((name, fast, slow))

    stamp = datetime.date.today().isoformat()
    lines = [
        f"\n### Cached vs uncached decoding ({stamp})\n",
        (f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}; Transformer "
         f"d_model {args.d_model}, {args.layers}+{args.layers} layers, {args.heads} heads, vocab {args.vocab}; "
         f"{args.batch} sentences of {args.source_length} source tokens, {args.length} output words each, fp32. "
         f"Command: `python benchmarks/decoding_cache.py --length {args.length} --batch {args.batch}`\n"),
        "| search | cached s | uncached (prefix re-run) s | cached sentences/s | speed-up |",
        "|---|---|---|---|---|",
    ]
    for name, fast, slow in rows:
        lines.append(f"| {name} | {fast:.3f} | {slow:.3f} | {args.batch / fast:.1f} | **{slow / fast:.2f}×** |")
    text = "\n".join(lines) + "\n"
    emit(text, args.record)


if __name__ == "__main__":
    main()
