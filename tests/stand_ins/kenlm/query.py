"""A stand-in of KenLM's ``query`` for the smoke tests (tests/test_bench_races.py), run as
``python query.py -v summary ARPA < TEXT``: the perplexity of the text's lines (each word and one ``</s>`` per line
predicted) under the unigram ARPA file that the stand-in ``lmplz.py`` writes, a word it lacks read as ``<unk>`` and
counted as an OOV; printed as query's summary prints it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def unigrams(path: str) -> dict[str, float]:
    """log10 probabilities of the ARPA file's 1-grams."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    start, end = lines.index("\\1-grams:") + 1, lines.index("\\end\\")
    return {word: float(logp) for logp, word, _ in (line.split("\t") for line in lines[start:end] if line)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-v", choices=["summary"], required=True)
    parser.add_argument("arpa")
    args = parser.parse_args(argv)
    model = unigrams(args.arpa)
    total = excluding = 0.0
    tokens = oovs = 0
    for line in sys.stdin.read().splitlines():
        for word in [*line.split(), "</s>"]:
            known = word in model
            logp = model[word if known else "<unk>"]
            total += logp
            excluding += logp if known else 0.0
            tokens += 1
            oovs += not known
    print(f"Perplexity including OOVs:\t{10 ** (-total / tokens)}")
    print(f"Perplexity excluding OOVs:\t{10 ** (-excluding / max(tokens - oovs, 1))}")
    print(f"OOVs:\t{oovs}")
    print(f"Tokens:\t{tokens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
