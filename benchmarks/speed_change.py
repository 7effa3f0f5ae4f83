"""Is a change of code faster? The same training steps of one config at two commits, timed side by side.

    SEQLAB_DATA=../shared/data python benchmarks/speed_change.py configs/multi30k_de_en.yaml --before 682c0cd \
        [--after HEAD] [--precision bf16] [--steps 20] [--rounds 6] [--set KEY=VALUE ...]

Each commit is checked out into a temporary git worktree (as ``same_training.py`` does). A round times each commit
once, in a process of its own that imports seqlab from that worktree's ``src/``: the config's model (seed 0) on the
first ``--steps`` batches of its training split (``throughput.make_batches``), one pass over them to warm up, then
the same steps timed (``throughput.training_step``: forward and the masked loss, backward, clipping, fused Adam), in
``--precision`` (fp32, or bf16 autocast); a language model's steps as the trainer takes them, on ``train.streams``
× ``train.time_size`` random ids of ``--vocab`` words (``lm_time_estimate.worker``). The rounds alternate which
commit goes first. On a shared machine the same
work's speed moves by tens of per cent within minutes, so only the ratio of two processes run one after the other
means anything, and only over several rounds: the table gives every round's tokens/s and ratio, and the median ratio
with its range. Seq2seq Transformer configs and language models; both commits must have the functions they call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from report import add_results_option, machine, markdown, publish
from same_training import ROOT, checked_out
from scoreboard import Result, Table, command

from seqlab.precision import native_bf16


def measure(config: str, overrides: list[str], steps: int, precision: str, vocab: int) -> float:
    """Target tokens/s of the timed pass (run in the child process, whose seqlab is the commit's)."""
    from throughput import make_batches
    from throughput import measure as timed

    from seqlab.config import load_config
    from seqlab.model.transformer import TransformerConfig

    cfg = load_config(config, overrides)
    if cfg.model.type in ("lm", "transformer_lm"):
        from lm_time_estimate import worker
        spec = {"config": config, "overrides": overrides, "precision": precision, "vocab": vocab, "warmup": 3,
                "steps": steps}
        return float(worker(spec)["tokens_per_s"])
    if not isinstance(cfg.model, TransformerConfig):
        raise SystemExit(f"{config}: model.type {cfg.model.type}; speed_change times a seq2seq Transformer's or a "
                         "language model's steps")
    batches, src_vocab, trg_vocab = make_batches(cfg, steps)
    return timed(cfg.model, batches, src_vocab, trg_vocab, precision == "bf16")["tokens_per_s"]


def child(tree: Path, args: argparse.Namespace) -> float:
    """One commit's tokens/s, measured by this script in a process whose seqlab is the worktree's."""
    command = [sys.executable, __file__, str(args.config), "--before", args.before, "--measure",
               "--steps", str(args.steps), "--precision", args.precision, "--vocab", str(args.vocab)]
    command += [arg for item in args.overrides for arg in ("--set", item)]
    env = os.environ | {"PYTHONPATH": str(tree / "src")}
    if args.data_dir:
        env["SEQLAB_DATA"] = str(Path(args.data_dir).resolve())
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise SystemExit(f"the steps at {tree.name} failed: {last[0]}")
    return float(json.loads(done.stdout.splitlines()[-1])["tokens_per_s"])


def rounds(args: argparse.Namespace, work: Path) -> list[tuple[float, float]]:
    """(before's, after's) tokens/s of every round, the order of the two alternating from round to round."""
    measured: list[tuple[float, float]] = []
    with checked_out(args.repo, args.before, work) as before, checked_out(args.repo, args.after, work) as after:
        for r in range(args.rounds):
            order = [("before", before), ("after", after)][:: 1 if r % 2 == 0 else -1]
            speeds = {name: child(tree, args) for name, tree in order}
            measured.append((speeds["before"], speeds["after"]))
            print(f"round {r + 1}: {speeds['before']:,.0f} before, {speeds['after']:,.0f} after, "
                  f"{speeds['after'] / speeds['before']:.3f}×", flush=True)
    return measured


def table(args: argparse.Namespace, measured: list[tuple[float, float]]) -> Table:
    """Every round's target tokens/s and ratio, then the median ratio and its range."""
    ratios = [a / b for b, a in measured]
    rows = [[str(r + 1), f"{b:,.0f}", f"{a:,.0f}", f"{a / b:.3f}×"] for r, (b, a) in enumerate(measured)]
    rows.append(["median (range)", f"{statistics.median(b for b, _ in measured):,.0f}",
                 f"{statistics.median(a for _, a in measured):,.0f}",
                 f"**{statistics.median(ratios):.3f}×** ({min(ratios):.3f}–{max(ratios):.3f}×)"])
    config = " ".join([f"`{args.config}`", *args.overrides])
    title = f"Training speed, {config} in {args.precision}: {args.after} against {args.before}"
    return Table(title, ["round", f"{args.before} target tokens/s", f"{args.after} target tokens/s",
                         "after ÷ before"], rows)


def main(argv: list[str] | None = None) -> None:
    """Time both commits round after round, print the table, record it."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--before", required=True, help="the commit before the change")
    parser.add_argument("--after", default="HEAD", help="the commit after it (default HEAD)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--steps", type=int, default=20, help="training steps timed per process")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--vocab", type=int, default=10_000, help="a language model's vocabulary (its random ids)")
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="a config override, for both")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the git repository (default: this one)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the child's part
    add_results_option(parser)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    if args.precision == "bf16" and not native_bf16():
        parser.error("--precision bf16: this CPU has no native bf16 (emulated, it would time the emulation); use fp32")
    if args.measure:
        print(json.dumps({"tokens_per_s": measure(str(args.config), args.overrides, args.steps, args.precision,
                                                   args.vocab)}))
        return
    with tempfile.TemporaryDirectory(prefix="speed-change-") as work:
        measured = rounds(args, Path(work))
    result = table(args, measured)
    print(f"### {result.title}\n\n{machine()}; {args.steps} steps a process. Command: "
          f"`{command(__file__, given)}`\n\n{markdown(result)}")
    runs = [{"round": r + 1, "before": b, "after": a} for r, (b, a) in enumerate(measured)]
    race = f"speed_change-{args.config.stem}-{args.precision}"
    publish(Result(race, result.title, command(__file__, given), [result], runs), args.results)


if __name__ == "__main__":
    main()
