"""The two attention paths, fused SDPA and the plain reference, in fp32 and bf16, forward and forward+backward.

Why ``MultiHeadAttention`` uses the fused kernel for float32 only: on this CPU
(torch 2.13) the fused kernel's bf16 backward pass is far slower than the plain
path's two bf16 matmuls and softmax.

    python benchmarks/attention_paths.py [--batch 320 --heads 4 --length 15 --depth 32]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from seqlab.model.attention import MASK_VALUE, scaled_dot_product_attention


def timed(fn, repeats: int = 20) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=320)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=15)
    parser.add_argument("--depth", type=int, default=32)
    args = parser.parse_args()

    shape = (args.batch, args.heads, args.length, args.depth)
    mask = torch.zeros(args.batch, 1, 1, args.length, dtype=torch.bool)
    mask[::2, ..., -3:] = True  # some padding
    print(f"q, k, v {tuple(shape)}, torch {torch.__version__}, {torch.get_num_threads()} threads (ms per call)\n")
    print("| dtype | path | forward | forward + backward |\n|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        q, k, v = (torch.randn(shape, dtype=dtype, requires_grad=True) for _ in range(3))
        paths = {
            "fused SDPA": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(dtype) * MASK_VALUE),
            "reference": lambda: scaled_dot_product_attention(q, k, v, mask)[0],
        }
        for name, path in paths.items():
            forward = timed(lambda: path())
            both = timed(lambda: path().sum().backward())
            print(f"| {str(dtype).removeprefix('torch.')} | {name} | {forward:.2f} | {both:.2f} |")


if __name__ == "__main__":
    main()
