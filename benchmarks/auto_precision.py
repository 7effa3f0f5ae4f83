"""Whether ``precision: auto`` trains each kind of model in the faster of fp32 and bf16 on this machine (issue 38's
"within 5 % of the faster precision").

    python benchmarks/auto_precision.py --data-dir ../shared/data [--configs C ...] [--steps 150] [--rounds 2] \\
        [--results DIR]

For each config (by default one of each kind of model ``seqlab train`` trains: the Transformer and the RNN with
attention for translation, the LSTM and the Transformer language models, the classifier), in
rounds that take turns (so that a slow spell of the machine falls on all of them), three runs of ``seqlab train CONFIG
--set train.max_steps=STEPS``, each in a process of its own: ``train.precision`` fp32, bf16, and ``auto`` with a cache
of measured choices of its own, empty at every round (``precision.choices_file``), so that each round's ``auto``
measures afresh, as on a machine it has not seen. Each run's speed is its log's training units per second (target
tokens, or texts for the classifier; validation excluded, and cut to a few valid pairs where the config decodes).
Where bf16 is not native (the AVX2 kind) ``auto`` is fp32 without measuring and the bf16 runs are left out: emulated
bf16 is many times slower. The table gives each precision's units/s (mean ± sd and range over the rounds), what
``auto`` chose in each round with the ratio its probe measured, and ``auto``'s speed over the faster forced
precision's (of the means, and over every pairing of runs); the runs go to the scoreboard (``--results``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from report import add_results_option, markdown, publish, seqlab_train
from scoreboard import Result, Table, command, ratio_range, spread

from seqlab import precision
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ["configs/book/date-fast.yaml", "configs/multi30k_de_en_rnn.yaml", "configs/lm/multi30k_en.yaml",
           "configs/lm/multi30k_en_transformer.yaml", "configs/chatbot_ko_labels.yaml"]
VALID_LIMIT = 20  # valid pairs decoded for exact match and BLEU at the end of a run (its loss covers them all)


def train(config: str, name: str, steps: int, work: Path, data_dir: str | None) -> dict[str, Any]:
    """One run of ``config`` in ``name`` (fp32, bf16 or auto, the last with an empty cache of choices): its units per
    training second, what it trained in and, for auto, the ratio its probe measured."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    cache = run_dir.parent / f"{run_dir.name}-cache"
    env = {"XDG_CACHE_HOME": str(cache), precision.ENV: ""} | ({"SEQLAB_DATA": data_dir} if data_dir else {})
    sets = [f"train.precision={name}", f"train.max_steps={steps}", "train.epochs=1", f"eval.valid_limit={VALID_LIMIT}"]
    seqlab_train(ROOT / config, run_dir, sets, env, quiet=True)  # SEQLAB_PRECISION empty: no run's precision forced
    log = RunDir(run_dir).log()[-1]
    unit = next(key for key in log if key.startswith("train_") and key.endswith("_per_s"))
    choices = cache / "seqlab" / "precision.json"
    reasons = [choice["reason"] for choice in json.loads(choices.read_text(encoding="utf-8")).values()] \
        if choices.exists() else []
    return {"config": config, "precision": name, "trained_in": RunDir(run_dir).model_info()["precision"],
            "unit": unit.removeprefix("train_").removesuffix("_per_s"), "per_s": log[unit],
            "train_s": log["train_seconds"], "probe": reasons[0] if reasons else ""}


def row(config: str, runs: list[dict[str, Any]]) -> list[str]:
    """A config's cells: units/s per precision, auto's choices, and auto's speed over the faster forced one's."""
    speeds = {name: [r["per_s"] for r in runs if r["precision"] == name] for name in ("fp32", "bf16", "auto")}
    forced = {name: speeds[name] for name in ("fp32", "bf16") if speeds[name]}
    faster = max(forced, key=lambda name: statistics.mean(forced[name]))
    chosen = [f"{r['trained_in']} ({r['probe'].split(' on ')[0]})" if r["probe"] else r["trained_in"]
              for r in runs if r["precision"] == "auto"]
    cells = [spread(speeds[name], 0) if speeds[name] else "— (bf16 not native)" for name in ("fp32", "bf16")]
    return [config, runs[0]["unit"], *cells, "; ".join(chosen), spread(speeds["auto"], 0),
            f"{ratio_range(speeds['auto'], forced[faster])} ({faster})"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=CONFIGS)
    parser.add_argument("--steps", type=int, default=150, help="training steps of each run (train.max_steps)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data-dir")
    add_results_option(parser)
    args = parser.parse_args(argv)
    names = ["fp32", "bf16", "auto"] if precision.native_bf16() else ["fp32", "auto"]
    work = Path(tempfile.mkdtemp(prefix="seqlab-auto-precision-"))
    runs = [train(config, name, args.steps, work, args.data_dir)
            for config in args.configs for _ in range(args.rounds) for name in names]
    table = Table(f"`precision: auto` against fp32 and bf16, {args.steps} training steps a run", [
        "config", "unit", "fp32 units/s", "bf16 units/s", "auto chose (its probe)", "auto units/s",
        "auto ÷ the faster"], [row(config, [r for r in runs if r["config"] == config]) for config in args.configs])
    print(markdown(table))
    publish(Result("auto_precision", table.title, command(__file__, sys.argv[1:] if argv is None else argv), [table],
                   runs, notes=[f"each config's runs take turns, {args.rounds} rounds; auto measures afresh each round"]),
            args.results)


if __name__ == "__main__":
    main()
