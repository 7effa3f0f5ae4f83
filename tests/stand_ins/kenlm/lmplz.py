"""A stand-in of KenLM's ``lmplz`` for the smoke tests (tests/test_bench_races.py), run as
``python lmplz.py -o N -S MEMORY -T DIR --text FILE --arpa FILE [--discount_fallback]``.

As lmplz does on a corpus this small, it fails (exit 1) without ``--discount_fallback``, saying so on stderr, and it
refuses ``<unk>`` in its text. With the flag it writes an ARPA file of order 1 whatever ``-o`` asks: the add-one
unigram model of the text's words, ``</s>`` (one per line) and ``<unk>``, with ``<s>`` as a context only."""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path


def arpa(counts: Counter[str]) -> str:
    """The ARPA text of the add-one unigram model of ``counts``."""
    words = sorted(counts) + ["<unk>"]
    total = sum(counts.values()) + len(words)
    rows = [f"{math.log10((counts[w] + 1) / total):.6f}\t{w}\t0" for w in words] + ["-99\t<s>\t0"]
    return "\n".join(["", "\\data\\", f"ngram 1={len(rows)}", "", "\\1-grams:", *rows, "", "\\end\\", ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-o", type=int, required=True)
    parser.add_argument("-S")
    parser.add_argument("-T")
    parser.add_argument("--text", required=True)
    parser.add_argument("--arpa", required=True)
    parser.add_argument("--discount_fallback", action="store_true")
    args = parser.parse_args(argv)
    lines = Path(args.text).read_text(encoding="utf-8").splitlines()
    if any("<unk>" in line.split() for line in lines):
        print("<unk> is reserved: lmplz does not read it in its text", file=sys.stderr)
        return 1
    if not args.discount_fallback:
        print("Could not calculate Kneser-Ney discounts for 1-grams with adjusted count 2 because we didn't observe "
              "any 1-grams with adjusted count 1; Is this small or artificial data?\nTry deduplicating the input. "
              "To override this error for e.g. a class-based model, rerun with --discount_fallback", file=sys.stderr)
        return 1
    counts = Counter(word for line in lines for word in [*line.split(), "</s>"])
    Path(args.arpa).write_text(arpa(counts), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
