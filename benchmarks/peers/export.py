"""The exported model that the peer workers read: what ``benchmarks/peer_decoding.py`` writes.

Runs in the peers' virtual environment as well as in seqlab's, so it needs only the
standard library, numpy and safetensors.

An export directory holds

* ``weights.safetensors`` -- the seqlab Transformer's state dict in float32, plus
  ``positional_table`` (max_length, d_model), the sinusoidal table seqlab adds;
* ``model.json`` -- the sizes: d_model, num_layers, num_heads, d_ff, norm ("post"/"pre"),
  source_vocab, target_vocab;
* ``source.txt`` -- one sentence of source ids per line, ``<eos>`` (2) last, as seqlab feeds them.

Ids are seqlab's: ``<pad>`` 0, ``<sos>`` 1, ``<eos>`` 2, ``<unk>`` 3, ordinary tokens from 4. The peers
see every id as a token string ``t<id>``, so no tokenizer stands between the engines: the same ids go
in, and ids come out.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

PAD, SOS, EOS, UNK = 0, 1, 2, 3


def token(i: int) -> str:
    """The token string of id ``i`` for engines that look tokens up by name."""
    return f"t{i}"


def token_id(s: str) -> int:
    return int(s[1:])


def load_export(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], list[list[int]]]:
    """(sizes, weights, source ids) of an export directory."""
    sizes = json.loads((path / "model.json").read_text())
    weights = load_file(str(path / "weights.safetensors"))
    sources = [[int(x) for x in line.split()] for line in (path / "source.txt").read_text().splitlines()]
    return sizes, weights, sources


def worker_arguments(description: str) -> argparse.ArgumentParser:
    """The command line every worker takes (benchmarks/peer_decoding.py passes the run's settings)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path, help="an export directory")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--max-length", type=int, required=True, help="most output words")
    parser.add_argument("--batch-size", type=int, default=256, help="sentences per batch")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    return parser


def repeated(repeats: int, run: Callable[[], list[list[int]]]) -> tuple[list[float], list[list[int]]]:
    """Run ``repeats`` times; every run's seconds and the last run's outputs."""
    seconds, outputs = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        outputs = run()
        seconds.append(time.perf_counter() - start)
    return seconds, outputs


def result(engine: str, setting: str, beam: int, seconds: list[float], outputs: list[list[int]]) -> str:
    """One JSON line of a worker's answer."""
    return json.dumps({"engine": engine, "setting": setting, "beam": beam, "seconds": seconds, "outputs": outputs})
