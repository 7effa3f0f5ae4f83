"""The two attention paths, fused SDPA and the plain reference, in fp32 and bf16, forward and forward+backward.

Why ``MultiHeadAttention`` uses the fused kernel for float32 only: on this CPU
(torch 2.13) the fused kernel's bf16 backward pass is far slower than the plain
path's two bf16 matmuls and softmax.

    python benchmarks/attention_paths.py [--batch 320 --heads 4 --length 15 --depth 32] [--results DIR]

Prints the table of milliseconds per call and records it in the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from report import add_results_option, markdown, publish
from scoreboard import Result, Table, command

from seqlab.model.attention import MASK_VALUE, scaled_dot_product_attention


def timed(fn: Callable[[], object], repeats: int = 20) -> float:
    """Milliseconds per call of ``fn``, the mean of ``repeats`` calls after one warm-up call."""
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1000


def main(argv: list[str] | None = None) -> None:
    """Time each dtype's paths, forward and forward + backward; print the table in milliseconds and record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=320)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=15)
    parser.add_argument("--depth", type=int, default=32)
    add_results_option(parser)
    args = parser.parse_args(argv)

    shape = (args.batch, args.heads, args.length, args.depth)
    mask = torch.zeros(args.batch, 1, 1, args.length, dtype=torch.bool)
    mask[::2, ..., -3:] = True  # some padding
    runs: list[dict[str, Any]] = []
    for dtype in (torch.float32, torch.bfloat16):
        for name, path in attention_paths(shape, mask, dtype).items():
            runs.append({"dtype": str(dtype).removeprefix("torch."), "path": name, "forward_ms": timed(path),
                         "forward_backward_ms": timed(partial(forward_backward, path))})
    caption = f"q, k, v {tuple(shape)}, ms per call (mean of 20 after a warm-up)"
    table = Table("Attention paths", ["dtype", "path", "forward", "forward + backward"],
                  [[run["dtype"], run["path"], f"{run['forward_ms']:.2f}", f"{run['forward_backward_ms']:.2f}"]
                   for run in runs])
    print(f"{caption}, torch {torch.__version__}, {torch.get_num_threads()} threads\n\n{markdown(table)}")
    publish(Result("attention_paths", "Attention paths: fused SDPA and the reference, fp32 and bf16",
                   command(__file__, sys.argv[1:] if argv is None else argv), [table], runs, notes=[caption]),
            args.results)

def forward_backward(path: Callable[[], torch.Tensor]) -> None:
    """One forward and backward pass of a path, with a gradient as dense as training's: ``out.sum().backward()``
    would hand the backward pass a gradient of stride 0, on which the plain path's products ran 1.5-2.4× slower
    (torch 2.13, AMD EPYC Zen 4) and the fused kernel's did not."""
    out = path()
    out.backward(torch.ones_like(out))


def attention_paths(shape: tuple[int, int, int, int], mask: torch.Tensor,
                    dtype: torch.dtype) -> dict[str, Callable[[], torch.Tensor]]:
    """The two paths' calls on fresh random q, k, v of ``shape`` and ``dtype`` (leaves that take gradients)."""
    q, k, v = (torch.randn(shape, dtype=dtype, requires_grad=True) for _ in range(3))
    return {
        "fused SDPA": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(dtype) * MASK_VALUE),
        "reference": lambda: scaled_dot_product_attention(q, k, v, mask)[0],
    }


if __name__ == "__main__":
    main()
