"""Training throughput of a config in fp32 and bf16, and its model FLOP utilisation.

Builds the config's model and real batches (data, tokenizers and the token
budget of the config), runs the same training steps in fp32 and under bf16
autocast, and reports target tokens/s and the model FLOP utilisation: the
FLOPs of the matrix products a training step must do (forward + backward =
3 × forward; padded lengths, as the hardware computes them) divided by the time,
as a fraction of this machine's matmul peak measured by the same script.

    SEQLAB_DATA=../shared/data python benchmarks/throughput.py configs/book/date-transformer.yaml

Prints a markdown table; ``--record docs/benchmarks.md`` appends it there.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
from report import add_record_option, emit, machine

from seqlab.config import Config, load_config
from seqlab.data import load_splits, resolve_data_dir
from seqlab.data.batching import Batch, collate, length_batches, source_ids
from seqlab.model import build_model, num_parameters
from seqlab.tokenizer import Tokenizer
from seqlab.train.loss import token_nll_sum


def matmul_peak(dtype: torch.dtype, n: int = 1024, seconds: float = 1.0) -> float:
    """GFLOP/s of an n×n×n matmul, the best of repeated runs."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    c = torch.empty(n, n, dtype=dtype)
    for _ in range(3):
        torch.mm(a, b, out=c)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(5):
            torch.mm(a, b, out=c)
        best = max(best, 5 * 2 * n**3 / (time.perf_counter() - start) / 1e9)
    return best


def step_flops(cfg: Config, batch: Batch, trg_vocab: int) -> float:
    """Matmul FLOPs of one training step (forward + backward) on padded shapes."""
    d, ff, layers = cfg.model.d_model, cfg.model.d_ff, cfg.model.num_layers
    b, ls = batch.src.shape
    lt = batch.trg_in.size(1)
    src_tokens, trg_tokens = b * ls, b * lt
    forward = layers * (
        2 * src_tokens * (4 * d * d + 2 * d * ff)  # encoder: W_Q,K,V,O and the FFN
        + 2 * trg_tokens * (4 * d * d + 2 * d * d + 2 * d * ff)  # decoder: self W_QKVO, cross W_Q,O, FFN
        + 2 * src_tokens * 2 * d * d  # cross-attention W_K, W_V on the memory
        + 4 * b * d * (ls * ls + lt * lt + lt * ls)  # QK^T and weights·V of the three attentions
    ) + 2 * trg_tokens * d * trg_vocab  # output projection
    return 3.0 * forward


def make_batches(cfg: Config, steps: int) -> tuple[list[Batch], int, int]:
    pairs = load_splits(cfg.data, resolve_data_dir())["train"]
    source = Tokenizer.train([s for s, _ in pairs], cfg.tokens.source)
    target = Tokenizer.train([t for _, t in pairs], cfg.tokens.target)
    src = [source_ids(ids) for ids in source.encode([s for s, _ in pairs])]
    trg = target.encode([t for _, t in pairs])
    order = length_batches([len(s) for s in src], [len(t) for t in trg], cfg.train.batch_tokens, seed=0)[:steps]
    return [collate([src[i] for i in ix], [trg[i] for i in ix]) for ix in order], source.vocab_size, target.vocab_size


def measure(cfg: Config, batches: list[Batch], src_vocab: int, trg_vocab: int, bf16: bool) -> dict:
    torch.manual_seed(0)
    model = build_model(cfg.model, src_vocab, trg_vocab).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step(batch: Batch) -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(batch.src, batch.trg_in)
        (token_nll_sum(logits, batch.trg_out) / batch.num_target_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for batch in batches[:3]:  # warm-up
        step(batch)
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    seconds = time.perf_counter() - start
    tokens = sum(b.num_target_tokens for b in batches)
    flops = sum(step_flops(cfg, b, trg_vocab) for b in batches)
    return {"tokens_per_s": tokens / seconds, "gflops": flops / seconds / 1e9, "params": num_parameters(model)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    parser.add_argument("--steps", type=int, default=30)
    add_record_option(parser)
    args = parser.parse_args()

    cfg = load_config(args.config, args.overrides)
    batches, src_vocab, trg_vocab = make_batches(cfg, args.steps)
    peaks = {"fp32": matmul_peak(torch.float32), "bf16": matmul_peak(torch.bfloat16)}
    rows = {p: measure(cfg, batches, src_vocab, trg_vocab, p == "bf16") for p in ("fp32", "bf16")}
    m = cfg.model
    lines = [
        f"### Training throughput: `{args.config}` {' '.join(args.overrides)}",
        "",
        f"{datetime.date.today()}, {machine()}; d_model {m.d_model}, {m.num_layers}+{m.num_layers} layers, d_ff {m.d_ff}, "
        f"dropout {m.dropout}, {rows['fp32']['params']:,} parameters, {len(batches)} batches of "
        f"≤{cfg.train.batch_tokens} tokens. Command: `python benchmarks/throughput.py {args.config}`",
        "",
        "| precision | target tokens/s | model GFLOP/s | matmul peak GFLOP/s | MFU |",
        "|---|---|---|---|---|",
    ]
    for p, r in rows.items():
        lines.append(f"| {p} | {r['tokens_per_s']:,.0f} | {r['gflops']:.1f} | {peaks[p]:.0f} | {r['gflops'] / peaks[p]:.1%} |")
    lines.append(f"\nbf16 / fp32 speed: {rows['bf16']['tokens_per_s'] / rows['fp32']['tokens_per_s']:.2f}×\n")
    text = "\n".join(lines)
    emit(text, args.record)


if __name__ == "__main__":
    main()
