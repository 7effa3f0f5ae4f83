"""The Korean chatbot (configs/chatbot_ko.yaml) in several variants, compared on the valid split.

    python benchmarks/chatbot_variants.py --data-dir ../shared/data [--variants bpe wordpiece morphemes seed] [--samples 20]

Each variant is ``seqlab train configs/chatbot_ko.yaml --set ...`` (a subprocess; its wall time is
measured around it), then its best model is scored on the valid split (500 pairs, never trained on):

* perplexity per token, which depends on the tokenizer, and **perplexity per character**
  (``exp(total NLL / characters)``, one end of sentence counted per answer), which does not,
  so that BPE, WordPiece and BPE over morphemes (``morphemes``: words first cut at kiwipiepy's
  morpheme boundaries, ``pip install 'seqlab[korean]'``) can be compared;
* sacreBLEU of the greedy answers against the reference answers.

``seed`` is the recipe of seed 000: its ``small_transformer`` (4+4 layers, d_model 128, 4 heads,
d_ff 512, dropout 0.3) with its warm-up schedule (4,000 steps, no label smoothing), on plain BPE.
With ``--samples N``, the first N valid questions are answered by the variant with the lowest
perplexity per character and printed next to the reference answers.

The variant with the lowest valid perplexity per character is the choice. This script never loads the
test split: the chosen run is scored on it once, with ``seqlab eval RUN_DIR --split test``. The tables and every
variant's scores go to the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path
from typing import Any

from report import add_results_option, choose_on_valid, machine, markdown, publish, seqlab_train
from scoreboard import Result, Table, command

from seqlab.data import load_splits, resolve_data_dir
from seqlab.evaluate import EncodedSplit, evaluate
from seqlab.predictors.translator import load
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "chatbot_ko.yaml"
PLAIN = ["tokens.source.morphemes=false"]
VARIANTS = {  # overrides of configs/chatbot_ko.yaml, whose tokenizer is BPE over morphemes
    "bpe": PLAIN,
    "wordpiece": [*PLAIN, "tokens.source.level=wordpiece"],
    "char": [*PLAIN, "tokens.source.level=char"],
    "morphemes": [],
    "seed": [*PLAIN, "model.num_layers=4", "model.d_model=128", "model.num_heads=4", "model.d_ff=512",
             "model.dropout=0.3", "train.warmup=4000", "train.lr_scale=1.0", "train.label_smoothing=0.0"],
}


def train(variant: str, data_dir: str, extra: list[str]) -> tuple[Path, float]:
    """``seqlab train`` of one variant into a new temporary directory; the run and its wall seconds."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"seqlab-chatbot-{variant}-")) / "run"
    return run_dir, seqlab_train(CONFIG, run_dir, VARIANTS[variant] + extra, {"SEQLAB_DATA": data_dir})


def score(run_dir: Path, data_dir: str) -> dict[str, Any]:
    """The best model's scores on the valid split, its tokens per character, epochs and parameters."""
    translator = load(run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(data_dir))["valid"]
    split = EncodedSplit.build(translator, pairs, "valid")
    metrics = evaluate(translator, split, translator.config.train.batch_tokens)
    metrics["tokens_per_character"] = sum(len(t) + 1 for t in split.trg) / sum(len(r) + 1 for r in split.references)
    log = RunDir(run_dir).log()
    metrics["best_epoch"] = RunDir(run_dir).model_info()["epoch"]
    metrics["epochs"] = len(log)
    metrics["parameters"] = sum(p.numel() for p in translator.model.parameters())
    return metrics


def samples(run_dir: Path, data_dir: str, n: int, title: str) -> Table:
    """The model's answers to the first ``n`` valid questions."""
    translator = load(run_dir)
    pairs = load_splits(translator.config.data, resolve_data_dir(data_dir))["valid"][:n]
    answers = translator.translate([q for q, _ in pairs])
    return Table(title, ["#", "question (held out)", "reference answer", "seqlab's answer"],
                 [[str(i), q, a, m] for i, ((q, a), m) in enumerate(zip(pairs, answers), 1)])

def main(argv: list[str] | None = None) -> None:
    """Train each variant, score it on valid, print the table, the choice and its answers, and record them."""
    choose_on_valid()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["bpe", "wordpiece", "morphemes", "seed"])
    parser.add_argument("--set", dest="extra", action="append", default=[], help="an override for every variant")
    parser.add_argument("--samples", type=int, default=0, help="answer this many valid questions with the best variant")
    add_results_option(parser)
    args = parser.parse_args(argv)

    rows = []
    for variant in args.variants:
        run_dir, wall = train(variant, args.data_dir, args.extra)
        rows.append((variant, wall, score(run_dir, args.data_dir), run_dir))

    given = command(__file__, sys.argv[1:] if argv is None else argv)
    table = Table("Korean chatbot variants, valid split",
                  ["variant", "parameters", "training wall s", "best epoch / epochs", "tokens per character",
                   "perplexity per token", "perplexity per character", "BLEU"],
                  [[f"{variant} (`{run_dir}`)", f"{m['parameters']:,}", f"{wall:.0f}", f"{m['best_epoch']} / {m['epochs']}",
                    f"{m['tokens_per_character']:.3f}", f"{m['perplexity']:.2f}", f"{m['perplexity_per_character']:.3f}",
                    f"{m['bleu']:.2f}"] for variant, wall, m, run_dir in rows])
    best, _, _, best_dir = min(rows, key=lambda row: row[2]["perplexity_per_character"])
    choice = (f"Chosen on valid (the lowest perplexity per character): **{best}**. Score it on test once: "
              f"`seqlab eval {best_dir} --split test`.")
    made = [table]
    if args.samples:
        made.append(samples(best_dir, args.data_dir, args.samples,
                            f"Answers of `{best}` to the first {args.samples} valid questions, greedy"))
    print(f"### {table.title} ({datetime.date.today().isoformat()})\n\nCommand: `{given}`. {machine()}.\n\n"
          f"{markdown(table)}\n\n{choice}\n" + "".join(f"\n{t.title}:\n\n{markdown(t)}\n" for t in made[1:]))
    runs = [{"variant": variant, "run_dir": str(run_dir), "wall_s": wall, "valid": m} for variant, wall, m, run_dir in rows]
    publish(Result("chatbot_variants", table.title, given, made, runs, notes=[choice]), args.results)

if __name__ == "__main__":
    main()
