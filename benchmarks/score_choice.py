"""Score a search's choice on test, once: the runs that ``select_config.py`` trained for the variant it chose.

    python benchmarks/score_choice.py benchmarks/searches/date-attention-tokens.yaml --data-dir ../shared/data \
        [--beam N --length-penalty A] [--runs runs/search] [--results DIR]

The choice is read from the search's result on the scoreboard (``select_config-<name>.<kind>.json``, this
machine's kind): the variant that ranks first there, by the worst valid score over its precisions and seeds
(``select_config.rank``). Each of its runs is scored on test with ``seqlab eval RUN --split test --json`` as a user
scores it (greedy, or beam search with ``--beam`` and the length penalty that ``select_decoding.py`` chose on
valid for these runs), and the scores are reported as they come: per run, then their mean ± sd and range, beside
the valid score that chose them (BLEU also lower-cased, as sacreBLEU's ``-lc``). A choice is scored once: a second
scoring of the same choice is refused (delete its result to score a new choice of the same search).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import scoreboard
import yaml
from report import add_results_option, machine, markdown, publish, seqlab
from scoreboard import Result, Table, command, spread
from select_config import Trial, cell, places, rank


def choice(search: dict[str, Any], results: Path) -> tuple[str, list[dict[str, Any]]]:
    """The chosen variant of ``search`` and its runs, from the selection's result on this machine's kind."""
    path = results / f"select_config-{search['name']}.{scoreboard.cpu_kind()}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no selection of {search['name']!r} on this kind of CPU: run select_config.py first")
    runs = Result.read(path).runs
    trials = [Trial(r["variant"], r["precision"], r["seed"], r["valid"], r["train_s"]) for r in runs]
    winner = rank(trials, search["metric"], search.get("target"))[0]
    return winner, [r for r in runs if r["variant"] == winner]


def evaluate(run_dir: Path, data_dir: str | None, decoding: list[str]) -> dict[str, Any]:
    """``seqlab eval RUN_DIR --split test --json`` with the options ``decoding``: the run's test metrics."""
    output = seqlab(["eval", run_dir, "--split", "test", "--json", *decoding, *(["--data-dir", data_dir] if data_dir else [])],
                    capture=True)
    return dict(json.loads(output[output.index("{"):]))


def extra_columns(metric: str) -> list[str]:
    """What each run's test scores show beside the metric: BLEU lower-cased (sacreBLEU's -lc) beside the cased
    score; perplexity beside a loss (the metric); the test loss beside any other metric."""
    return {"bleu": ["bleu_lowercase", "loss"], "loss": ["perplexity"]}.get(metric, ["loss"])


def tables(config: str, winner: str, metric: str, scored: list[dict[str, Any]], decoded: str) -> tuple[Table, Table]:
    """The summary (mean ± sd over the runs) and the per-run table of a choice scored on test."""
    extra = extra_columns(metric)
    label = {"bleu_lowercase": "test bleu, lower-cased", "loss": "test loss", "perplexity": "test perplexity"}
    rows = [[str(r["seed"]), r["precision"], cell(metric, r["valid"][metric]), cell(metric, r["test"][metric]),
             *(cell(key, r["test"][key]) for key in extra)] for r in scored]
    per_run = Table(f"`{config}`, variant **{winner}** chosen on valid: each run on test, once ({decoded})",
                    ["seed", "precision", f"valid {metric}", f"test {metric}", *(label[key] for key in extra)], rows)
    summed = [key for key in extra if key != "loss"]  # the summary shows the metric and its companion
    summary = Table(f"`{config}`, variant **{winner}**: test over {len(scored)} runs ({decoded})",
                    ["variant", f"valid {metric}", f"**test {metric}**", *(label[key] for key in summed)],
                    [[winner, spread([r["valid"][metric] for r in scored], places(metric)),
                      spread([r["test"][metric] for r in scored], places(metric)),
                      *(spread([r["test"][key] for r in scored], places(key)) for key in summed)]])
    return summary, per_run


def described_decoding(metric: str, beam: int | None, length_penalty: float) -> str:
    """How the test scores came: a search's beam and α, or greedy; a loss (a language model's) decodes nothing."""
    if metric == "loss":
        return "the loss of each next token, nothing decoded"
    return f"beam {beam}, α {length_penalty}" if beam else "greedy"


def main(argv: list[str] | None = None) -> None:
    """Score the choice's runs on test, print the tables and record them (refused if this choice was scored)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("search", type=Path, help="the search file select_config.py chose from")
    parser.add_argument("--data-dir", help="the data directory (default: seqlab's)")
    parser.add_argument("--runs", type=Path, default=Path("runs/search"), help="where select_config.py kept the runs")
    parser.add_argument("--beam", type=int, help="beam search of this width (default: greedy)")
    parser.add_argument("--length-penalty", type=float, default=0.0,
                        help="the beam's length penalty α, chosen on valid by select_decoding.py")
    add_results_option(parser)
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    if os.environ.get("SEQLAB_SELECTION", "") not in ("", "0"):
        raise SystemExit("score_choice.py scores test: it does not run inside a selection (SEQLAB_SELECTION=1)")
    search = yaml.safe_load(args.search.read_text(encoding="utf-8"))
    winner, runs = choice(search, args.results)
    done = args.results / f"score_choice-{search['name']}.{scoreboard.cpu_kind()}.json"
    scored_before = Result.read(done).runs if done.exists() else []
    if scored_before and scored_before[0]["variant"] == winner:
        raise SystemExit(f"{done}: {winner!r} was scored on test already (once per final choice)")
    metric = search["metric"]
    decoding = ["--beam", str(args.beam), "--length-penalty", str(args.length_penalty)] if args.beam else ["--beam", "1"]
    decoded = described_decoding(metric, args.beam, args.length_penalty)
    scored = []
    for run in runs:
        name = winner if run["seed"] is None else f"{winner}-seed{run['seed']}"
        test = evaluate(args.runs / search["name"] / run["precision"] / name, args.data_dir, decoding)
        scored.append({"variant": winner, "precision": run["precision"], "seed": run["seed"], "valid": run["valid"],
                       "decoding": decoded, "test": test})
        print(f"{name}: test {metric} {test[metric]}", flush=True)
    summary, per_run = tables(search["config"], winner, metric, scored, decoded)
    print(f"{machine()}.\n\n{markdown(summary)}\n\n{markdown(per_run)}\n")
    notes = [f"the choice of select_config-{search['name']} (ranked on valid), scored on test once, as it came"]
    publish(Result(f"score_choice-{search['name']}", summary.title, command(__file__, given), [summary, per_run],
                   scored, notes), args.results)


if __name__ == "__main__":
    main()
