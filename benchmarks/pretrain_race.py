"""Does pretraining pay? BERT pretrained on ChatbotData, then fine-tuned on its labels, against the same encoder
trained on the labels from scratch for as long as pretraining and fine-tuning together.

    python benchmarks/pretrain_race.py --data-dir ../shared/data [--seeds 1 2 3] [--set KEY=VALUE ...] [--json FILE] \\
        [--results DIR]

For each seed, one after the other on one machine, as a user runs the commands:

1. ``seqlab pretrain configs/chatbot_ko_bert.yaml --set seed=N``: masked-LM pretraining on the questions and
   answers of the classifier's training split (its valid and test questions are not read);
2. ``seqlab train configs/chatbot_ko_labels_bert.yaml --set seed=N --set model.init_from=PRETRAINED``: fine-tuning;
3. ``seqlab train configs/chatbot_ko_labels_bert.yaml --set seed=N --set model.init_from=null --set
   train.epochs=E``: the same encoder from scratch, E epochs so that its training time is the pretraining's and
   the fine-tuning's together (E = the fine-tuning's epochs × (pretraining s + fine-tuning s) / fine-tuning s,
   rounded; both classifiers cost the same per epoch), its best epoch picked on valid as always.

``--set`` overrides both configs in every run (before the overrides above). Both classifiers are scored once on the
test split (``seqlab eval --split test --json``): macro-F1 and accuracy.
Training seconds are the runs' logged ones (validation excluded). A few ``seqlab fill-mask`` examples of the
first pretrained model close the report. The tables (each seed, then both classifiers' spreads over the seeds)
and every run go to the scoreboard (benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from report import add_results_option, machine, markdown, publish, seqlab, seqlab_train
from scoreboard import Result, Table, command, spread

from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
PRETRAIN = ROOT / "configs" / "chatbot_ko_bert.yaml"
CLASSIFY = ROOT / "configs" / "chatbot_ko_labels_bert.yaml"
FILL = ["오늘 [MASK] 너무 좋다", "[MASK] 싶어", "헤어진 지 [MASK] 됐어", "좋아하는 사람 [MASK] 생겼어", "[MASK] 먹을까?"]


def summary(run_dir: Path, data_dir: str) -> dict[str, Any]:
    """A run's training seconds, epochs, best epoch and valid scores; a classifier's test scores too."""
    run = RunDir(run_dir)
    log = run.log()
    out = {"run_dir": str(run_dir), "train_s": run.training_seconds(), "epochs": len(log),
           "best_epoch": run.model_info()["epoch"], "valid": run.model_info()["valid"]}
    if run.config().kind.name == "classifier":  # the pretraining itself has no test score
        out["test"] = json.loads(seqlab(["eval", run_dir, "--split", "test", "--json"], {"SEQLAB_DATA": data_dir},
                                        capture=True))
    return out


def race(seed: int, extra: list[str], data_dir: str, work: Path) -> dict[str, Any]:
    """Pretraining, fine-tuning and training from scratch for as long, for one seed."""
    sets, env = [*extra, f"seed={seed}"], {"SEQLAB_DATA": data_dir}
    pre_dir, fine_dir, scratch_dir = work / f"pretrain-{seed}", work / f"fine-{seed}", work / f"scratch-{seed}"
    seqlab(["pretrain", PRETRAIN, "--out", pre_dir, *(arg for item in sets for arg in ("--set", item))], env)
    pre = summary(pre_dir, data_dir)
    seqlab_train(CLASSIFY, fine_dir, [*sets, f"model.init_from={pre_dir}"], env)
    fine = summary(fine_dir, data_dir)
    epochs = max(fine["epochs"], round(fine["epochs"] * (pre["train_s"] + fine["train_s"]) / fine["train_s"]))
    seqlab_train(CLASSIFY, scratch_dir, [*sets, "model.init_from=null", f"train.epochs={epochs}"], env)
    return {"seed": seed, "pretrain": pre, "fine": fine, "scratch": summary(scratch_dir, data_dir)}


def tables(results: list[dict[str, Any]]) -> list[Table]:
    """Each seed's runs, then both classifiers' test scores and training seconds over the seeds."""
    seeds = Table(
        "Pretraining pays? BERT on ChatbotData, fine-tuned on its labels, against the same encoder from scratch",
        ["seed", "pretraining s (epochs; valid masked ppl, tokens right)", "fine-tuning s (best epoch)",
         "**fine-tuned test macro-F1** (accuracy)", "scratch s (epochs, best)", "**scratch test macro-F1** (accuracy)"],
        [])
    for r in results:
        pre, fine, scratch = r["pretrain"], r["fine"], r["scratch"]
        seeds.rows.append([
            str(r["seed"]), f"{pre['train_s']:.0f} ({pre['epochs']}; {pre['valid']['perplexity']:.1f}, "
            f"{pre['valid']['mlm_accuracy']:.1f} %)", f"{fine['train_s']:.0f} ({fine['best_epoch']})",
            f"**{fine['test']['macro_f1']:.2f}** ({fine['test']['accuracy']:.2f})",
            f"{scratch['train_s']:.0f} ({scratch['epochs']}, {scratch['best_epoch']})",
            f"**{scratch['test']['macro_f1']:.2f}** ({scratch['test']['accuracy']:.2f})"])
    spreads = Table(f"Over {len(results)} seeds", ["classifier", "test macro-F1", "test accuracy", "training s"], [
        [name, spread([r[kind]["test"]["macro_f1"] for r in results]),
         spread([r[kind]["test"]["accuracy"] for r in results]),
         spread([r[kind]["train_s"] + (r["pretrain"]["train_s"] if kind == "fine" else 0) for r in results], 0)]
        for name, kind in (("fine-tuned (pretraining included in its seconds)", "fine"), ("from scratch", "scratch"))])
    return [seeds, spreads]

def main(argv: list[str] | None = None) -> None:
    """Race each seed, print the tables and record them, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds chatbot_ko/ChatbotData.csv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--work", type=Path, help="where the runs go (default: a new temporary directory)")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override of both configs, every run")
    parser.add_argument("--json", help="also write every number here")
    add_results_option(parser)
    args = parser.parse_args(argv)

    data_dir = str(Path(args.data_dir).resolve())
    work = args.work or Path(tempfile.mkdtemp(prefix="pretrain-race-"))
    results = [race(seed, args.extra, data_dir, work) for seed in args.seeds]
    fill = seqlab(["fill-mask", results[0]["pretrain"]["run_dir"], *FILL, "--top", "5"], {"SEQLAB_DATA": data_dir},
                  capture=True)
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    made = tables(results)
    higher = sum(r["fine"]["test"]["macro_f1"] > r["scratch"]["test"]["macro_f1"] for r in results)
    verdict = f"fine-tuned higher in test macro-F1 for {higher} of {len(results)} seeds"
    print(f"#### {made[0].title}\n\n{time.strftime('%Y-%m-%d')}, {machine()}. Command: `{given}`\n\n"
          + "\n\n".join(markdown(table) for table in made)
          + f"\n\n{verdict[0].upper()}{verdict[1:]}.\n\n`seqlab fill-mask` with the first seed's pretrained model:\n\n"
          f"```\n{fill.rstrip()}\n```\n")
    publish(Result("pretrain_race", made[0].title, given, made, results,
                   notes=[verdict, "from scratch for as many epochs as pretraining and fine-tuning took together",
                          "training seconds from the runs' logs, validation excluded"]), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
