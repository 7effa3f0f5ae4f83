"""How long a language-model config takes to train on this machine, measured without its data (issue 18:
``configs/lm/ptb.yaml``'s time on 2 cores before anyone fetches PTB).

    python benchmarks/lm_time_estimate.py configs/lm/ptb.yaml --vocab 10005 --train-tokens 929589

The config's model is built for ``--vocab`` ids and trained, exactly as the trainer steps (carried and
detached state, the summed loss over the batch's tokens, backward, clipping, the optimizer, the schedule),
on ``--steps`` batches of ``train.streams`` × ``train.time_size`` random ids after ``--warmup`` untimed ones,
in each precision this CPU runs natively (fp32, and bf16 where ``seqlab.precision`` finds native bf16). The
time of an epoch is ``--train-tokens`` (PTB: 887,521 words + 42,068 line ends) over the tokens/s measured;
the run's is that times ``train.epochs``. Not counted: validation after each epoch (PTB's valid stream is
7.6 % of train, read forward only, so about 2.5 % more) and start-up. Random ids do not change the cost of
an LSTM step. Each precision runs in a process of its own. The table goes to the scoreboard (``--results``,
benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import report
from scoreboard import Result, Table, command


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The config's training steps on random ids in one precision, timed after the warm-up steps."""
    import numpy as np
    import torch

    from seqlab.config import load_config
    from seqlab.loss import token_nll_sum
    from seqlab.model import build_lm
    from seqlab.model.lm import LMConfig
    from seqlab.model.transformer_lm import TransformerLMConfig
    from seqlab.runtime import Runtime
    from seqlab.train.optimizer import build_optimizer, optimizer_step
    from seqlab.train.schedule import build_schedule

    config = load_config(spec["config"], [*spec.get("overrides", []), f"train.precision={spec['precision']}"])
    if not isinstance(config.model, (LMConfig, TransformerLMConfig)):
        raise SystemExit(f"{spec['config']}: not a language model (model.type lm or transformer_lm)")
    torch.manual_seed(config.seed)
    model = build_lm(config.model, spec["vocab"])
    optimizer = build_optimizer(model, config.train)
    scheduler = build_schedule(optimizer, config, 10_000)
    rows, steps = config.train.streams, config.train.time_size
    shape = (spec["warmup"] + spec["steps"], rows, steps + 1)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, spec["vocab"], shape))
    runtime = Runtime.for_training("cpu", config.train.precision)
    model.train()
    state = None
    started = 0.0
    for k, batch in enumerate(ids):
        if k == spec["warmup"]:
            started = time.perf_counter()
        with runtime.autocast():
            logits, state = model(batch[:, :-1], state)
        state = model.detach(state)
        loss = token_nll_sum(logits, batch[:, 1:])
        optimizer_step(model, optimizer, scheduler, loss / batch[:, 1:].numel(), config.train.clip_norm)
    seconds = time.perf_counter() - started
    tokens = spec["steps"] * rows * steps
    return dict(precision=runtime.precision, tokens_per_s=tokens / seconds,
                step_s=seconds / spec["steps"], epochs=config.train.epochs,
                parameters=sum(p.numel() for p in model.parameters()))


def main(argv: list[str] | None = None) -> None:
    """Time the config's training step in each native precision (a worker process each) print the table and record it."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 4 and argv[0] == "--worker":
        kind, spec_file, result_file = argv[1:]
        out = {"estimate": worker}[kind](json.loads(Path(spec_file).read_text(encoding="utf-8")))
        Path(result_file).write_text(json.dumps(out), encoding="utf-8")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--vocab", type=int, required=True)
    parser.add_argument("--train-tokens", type=int, required=True, help="tokens of one epoch's train stream")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    report.add_results_option(parser)
    args = parser.parse_args(argv)
    from seqlab import precision

    precisions = precision.native_precisions()
    work = Path(tempfile.mkdtemp(prefix="lm-estimate-"))
    table = Table(f"Training time of `{args.config}` on this machine",
                  ["precision", "parameters", "s / step", "tokens/s", "s / epoch", "epochs", "hours in all"], [])
    runs = []
    for name in precisions:
        spec = dict(config=str(Path(args.config).resolve()), vocab=args.vocab, precision=name, steps=args.steps,
                    warmup=args.warmup)
        r = report.run_worker(__file__, "estimate", spec, work)
        runs.append(r)
        epoch = args.train_tokens / r["tokens_per_s"]
        table.rows.append([r["precision"], f"{r['parameters']:,}", f"{r['step_s']:.3f}", f"{r['tokens_per_s']:,.0f}",
                           f"{epoch:,.0f}", str(r["epochs"]), f"{epoch * r['epochs'] / 3600:.1f}"])
    print(f"### {table.title} (`benchmarks/lm_time_estimate.py`)\n\n{report.machine()}. Command: "
          f"`{command(__file__, argv)}`\n\n{report.markdown(table)}\n")
    notes = [f"{args.train_tokens:,} tokens an epoch, random ids; validation and start-up not counted"]
    report.publish(Result(f"lm_time_estimate-{Path(args.config).stem}", table.title, command(__file__, argv), [table],
                          runs, notes), args.results)

if __name__ == "__main__":
    main()
