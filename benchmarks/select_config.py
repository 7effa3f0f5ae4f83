"""Choose a configuration on the valid split: train every variant of a search, rank them by valid score.

    python benchmarks/select_config.py benchmarks/searches/date.yaml [--precisions fp32 bf16] [--seeds 1 2 3] \
        [--data-dir ../shared/data] [--runs DIR] [--results DIR]

A search file (``benchmarks/searches/*.yaml``) names a base config and its variants, each a list of
``seqlab train --set`` overrides. Every variant is trained with ``seqlab train`` as a user runs it, once
per precision asked for (forced with SEQLAB_PRECISION) and, with ``--seeds``, once per seed; its best epoch's valid
scores come from the run's best model (``RunDir.model_info``), its training seconds from its log. Variants are
ranked by their worst valid score over the precisions and seeds (the search's ``metric``), so that a recipe wins
that learns from every start, then by their mean valid loss; a search that names a ``target`` score ranks the
variants that reach it in every run first, by their median training seconds; one that names a ``budget_s`` (the
training seconds a race allows) ranks a variant with any run over it after every variant whose runs kept to it.
With several seeds a cell is the spread over them (mean ± sd and range). ``--variants`` trains only those; the
finished runs of the others (an earlier invocation's) are ranked with them, a variant with fewer runs than asked for
by the ones it has, marked "(fewer runs)" (more runs can only lower its worst score). The table and every trial go
to the scoreboard (benchmarks/results/).

This script never loads the test split. It ends with the winner and the one command that scores it on
test; that score is reported as it comes, once per final choice.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from report import add_results_option, choose_on_valid, machine, markdown, publish, seqlab_train
from scoreboard import Result, Table, command, spread

from seqlab.config import load_config
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Trial:
    variant: str
    precision: str
    seed: int | None  # None: the config's own
    valid: dict[str, float]  # the best epoch's valid metrics
    train_s: float  # training seconds of all epochs, validation excluded


def _finished(run_dir: Path, config: Path, overrides: list[str]) -> bool:
    """The run trained all its epochs (a search that was stopped keeps its finished runs) with this variant's
    config (read by today's schema: keys added since the run, at their defaults, are the same config); a run of
    another config in its place is an error."""
    if not (run_dir / "config.yaml").exists():
        return False
    saved = load_config(run_dir / "config.yaml")  # a key added since, at its default, changes nothing
    if saved != load_config(config, overrides):
        raise SystemExit(f"{run_dir} holds a run of another config than this variant's: remove it first")
    run = RunDir(run_dir)
    return run.has_log() and len(run.log()) == saved.train.epochs


def trial_of(run_dir: Path, variant: str, precision: str, seed: int | None) -> Trial:
    """The best valid scores and training seconds of a finished run."""
    run = RunDir(run_dir)
    return Trial(variant, precision, seed, run.model_info()["valid"], run.training_seconds())


def earlier_trials(search: dict[str, Any], runs: Path, skip: list[str], precisions: list[str],
                   seeds: list[int] | None) -> list[Trial]:
    """The finished runs of the search's other variants (not in ``skip``), as an earlier invocation with
    ``--variants`` left them: a search trained in parts is ranked whole, a variant with fewer runs by the ones it
    has (more runs can only lower its worst)."""
    config = ROOT / search["config"]
    each_seed: list[int | None] = [*seeds] if seeds else [None]
    found = []
    for name, overrides in search["variants"].items():
        for p in precisions if name not in skip else []:
            for seed in each_seed:
                run_dir = runs / search["name"] / p / (name if seed is None else f"{name}-seed{seed}")
                if _finished(run_dir, config, overrides + ([] if seed is None else [f"seed={seed}"])):
                    found.append(trial_of(run_dir, name, p, seed))
    return found


def train(config: Path, variant: str, overrides: list[str], precision: str, seed: int | None, run_dir: Path,
          data_dir: str | None) -> Trial:
    """``seqlab train`` one variant in one precision and seed (resumed where a run was stopped); its best valid
    scores."""
    overrides = overrides + ([] if seed is None else [f"seed={seed}"])
    if not _finished(run_dir, config, overrides):
        options = (["--data-dir", data_dir] if data_dir else []) + (["--resume"] if run_dir.exists() else [])
        seqlab_train(config, run_dir, overrides, {"SEQLAB_PRECISION": precision}, options)
    return trial_of(run_dir, variant, precision, seed)


def rank(trials: list[Trial], metric: str, target: float | None = None, budget: float | None = None) -> list[str]:
    """Variant names, best first: the worst ``metric`` over precisions and seeds (higher is better, except loss),
    then the mean valid loss. With a search's ``target`` (a score every run must reach, e.g. 99.9 % exact match), the
    variants whose worst run reaches it come first, the fastest first (their median training seconds), since a
    valid split saturates and the race is then against the clock; the others follow as without a target. With a
    search's ``budget_s`` (the training seconds a race allows), a variant any of whose runs took longer comes after
    every variant whose runs all kept to it."""
    sign = 1 if metric == "loss" else -1
    by_variant: dict[str, list[Trial]] = {}
    for trial in trials:
        by_variant.setdefault(trial.variant, []).append(trial)

    def key(name: str) -> tuple[bool, bool, float, float]:
        runs = by_variant[name]
        over = over_budget(runs, budget)
        worst = max(sign * t.valid[metric] for t in runs)
        if target is not None and worst <= sign * target:
            return over, False, statistics.median(t.train_s for t in runs), 0.0
        return over, True, worst, sum(t.valid["loss"] for t in runs) / len(runs)

    return sorted(by_variant, key=key)


def over_budget(runs: list[Trial], budget: float | None) -> bool:
    """Whether any of a variant's runs trained for longer than the search's ``budget_s`` (none: no budget)."""
    return budget is not None and max(t.train_s for t in runs) > budget


def places(metric: str) -> int:
    """Decimal places a score is shown to: a loss (natural log, differences of 1e-3 matter) four, the rest two."""
    return 4 if metric == "loss" else 2


def cell(key: str, value: float) -> str:
    """A score as the tables show it, to ``places(key)``."""
    return f"{value:.{places(key)}f}"


def table(search: dict[str, Any], trials: list[Trial], order: list[str], precisions: list[str]) -> Table:
    """The ranked variants: per precision, the valid score, loss and training seconds (spreads over seeds)."""
    metric = search["metric"]
    seeds = len({t.seed for t in trials})
    shown = f"valid {metric}" + (f" over {seeds} seeds" if seeds > 1 else "")
    columns = ["rank", "variant", "overrides"]
    for p in precisions:  # the valid loss beside the metric, unless the metric is the loss
        columns += [f"{p} {shown}", *([] if metric == "loss" else [f"{p} valid loss"]), f"{p} training s"]
    cells: dict[tuple[str, str], list[Trial]] = {}
    for trial in trials:
        cells.setdefault((trial.variant, trial.precision), []).append(trial)
    rows = []
    for place, name in enumerate(order, 1):
        partial = sum(len(cells.get((name, p), [])) for p in precisions) < len(precisions) * seeds
        over = over_budget([t for p in precisions for t in cells.get((name, p), [])], search.get("budget_s"))
        shown_name = name + (" (fewer runs)" if partial else "") + (" (over the budget)" if over else "")
        row = [f"{place}", f"**{shown_name}**" if place == 1 else shown_name,
               ", ".join(f"`{o}`" for o in search["variants"][name]) or "(the base config)"]
        for p in precisions:
            runs = cells[name, p]
            scores = [t.valid[metric] for t in runs]
            score = cell(metric, scores[0]) if len(runs) == 1 else spread(scores, places(metric))
            seconds = [t.train_s for t in runs]
            loss = [] if metric == "loss" else [cell("loss", sum(t.valid["loss"] for t in runs) / len(runs))]
            row += [score, *loss, f"{seconds[0]:.1f}" if len(runs) == 1 else spread(seconds, 1)]
        rows.append(row)
    return Table(f"Search `{search['name']}`: {search['config']}, chosen on valid", columns, rows)

def main(argv: list[str] | None = None) -> None:
    """Train the search's variants, rank them on valid, print the table and the choice, and record them."""
    choose_on_valid()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("search", type=Path, help="a search file, e.g. benchmarks/searches/date.yaml")
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32"])
    parser.add_argument("--seeds", type=int, nargs="+", help="train every variant once per seed (default: the "
                        "config's seed); variants are ranked by their worst seed")
    parser.add_argument("--variants", nargs="+", help="only these variants (default: all)")
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--runs", type=Path, default=Path("runs/search"), help="where the runs are kept")
    add_results_option(parser)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)

    search = yaml.safe_load(args.search.read_text(encoding="utf-8"))
    names = args.variants or list(search["variants"])
    unknown = set(names) - set(search["variants"])
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}; the search has {', '.join(search['variants'])}")
    config = ROOT / search["config"]
    trials = []
    for name in names:
        for p in args.precisions:
            for seed in args.seeds or [None]:
                run_dir = args.runs / search["name"] / p / (name if seed is None else f"{name}-seed{seed}")
                trial = train(config, name, search["variants"][name], p, seed, run_dir, args.data_dir)
                trials.append(trial)
                print(f"{name} {p}{'' if seed is None else f' seed {seed}'}: valid {search['metric']} "
                      f"{trial.valid[search['metric']]}, {trial.train_s:.1f} s training", flush=True)
    trials += earlier_trials(search, args.runs, names, args.precisions, args.seeds)
    order = rank(trials, search["metric"], search.get("target"), search.get("budget_s"))
    winner = order[0]
    rerun = command(__file__, given)
    overrides = " ".join(f"--set {o}" for o in search["variants"][winner])
    ranked = table(search, trials, order, args.precisions)
    choice = (f"Chosen on valid: **{winner}**. Score it on test once: "
              f"`seqlab eval {args.runs / search['name'] / args.precisions[0] / winner}"
              f"{'' if not args.seeds else f'-seed{args.seeds[0]}'} --split test` "
              f"(the config: `{search['config']}` {overrides}).")
    print(f"#### {ranked.title} ({time.strftime('%Y-%m-%d %H:%M')})\n\nCommand: `{rerun}`. {machine()}.\n\n"
          f"{markdown(ranked)}\n\n{choice}\n")
    runs = [{"variant": t.variant, "precision": t.precision, "seed": t.seed, "valid": t.valid, "train_s": t.train_s}
            for t in trials]
    ranking = f"ranked by the worst valid {search['metric']} over precisions and seeds, then the mean valid loss"
    if "target" in search:
        ranking = (f"the variants whose every run reaches valid {search['metric']} {search['target']} first, by median "
                   f"training seconds; then the rest, {ranking.removeprefix('ranked ')}")
    if "budget_s" in search:
        ranking = (f"the variants whose every run trained within {search['budget_s']} s before the rest; in each group, "
                   f"{ranking}")
    notes = [ranking, choice]
    publish(Result(f"select_config-{search['name']}", ranked.title, rerun, [ranked], runs, notes), args.results)

if __name__ == "__main__":
    main()
