"""Benchmarks choose on valid: no script that selects a configuration reads the test split."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# Scripts that read the test split, and why that is not a choice made on it. Every other script, those that
# choose a configuration among them (SELECTS), must never name the split.
READS_TEST = {
    "book_tasks.py": "scores each final config once, after training chose its best epoch on valid",
    "date_race.py": "times each system to 99.9 % on valid, then scores each final run on test once",
    "decoding_speed.py": "times decoding of test sources; no choice depends on the outputs",
    "peer_decoding.py": "times decoding of test sources next to the peers and scores the outputs of one model",
    "profile_ops.py": "profiles decoding of test sources",
    "joeynmt_decode.py": "JoeyNMT decoding the test sources for peer_decoding.py",
    "lm_race.py": "scores each language model once on test after training; seqlab's best epoch and BetterRnnlm's "
                  "rate are chosen on valid",
    "classify_race.py": "scores the TF-IDF model select_tfidf.py chose and each seqlab run (best epoch on valid) "
                        "on test once",
    "pretrain_race.py": "scores each fine-tuned and scratch classifier (best epoch on valid) on test once",
    "checkpoint_average.py": "scores the best checkpoint (by valid) and the mean of the last N epochs (N fixed "
                             "before training) on test once each",
}
SELECTS = {"select_config.py", "select_decoding.py", "select_joeynmt.py", "chatbot_variants.py", "select_tfidf.py"}


def _names_the_test_split(path: Path) -> bool:
    """A string literal 'test' in the code (a split's key, ``split="test"``, ``--split test`` as an argument)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip() in
               ("test", "--split test") for node in ast.walk(tree))


def test_no_selecting_script_reads_the_test_split():
    scripts = {p.name: p for p in BENCHMARKS.rglob("*.py")}
    assert SELECTS <= set(scripts)
    readers = {name for name, path in scripts.items() if _names_the_test_split(path)}
    assert not readers & SELECTS
    assert readers == set(READS_TEST), "a script that reads test must say why here, and must not select"


def test_the_check_sees_a_test_split_read(tmp_path):
    script = tmp_path / "choose.py"
    script.write_text('"""Ranks on --split test."""\nsplits = {}\nscores = splits["test"]\n', encoding="utf-8")
    assert _names_the_test_split(script)
    script.write_text('"""Ranks on valid; then seqlab eval RUN --split test."""\nscores = {}["valid"]\n',
                      encoding="utf-8")
    assert not _names_the_test_split(script)


def test_a_search_ranks_a_variant_by_its_worst_seed(monkeypatch):
    """select_config.py --seeds: a recipe that fails from one start loses to one that learns from all of them."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from select_config import Trial, rank

    def trials(variant, scores, metric="exact_match"):
        return [Trial(variant, "fp32", seed, {"exact_match": 0.0, "loss": 0.1} | {metric: s}, 1.0)
                for seed, s in enumerate(scores, 1)]

    lucky, steady = trials("lucky", [100.0, 100.0, 40.0]), trials("steady", [99.0, 98.0, 99.0])
    assert rank(lucky + steady, "exact_match") == ["steady", "lucky"]  # lucky's mean is 80, its worst 40
    by_loss = trials("high-loss", [0.3, 0.1], "loss") + trials("low-loss", [0.2, 0.2], "loss")
    assert rank(by_loss, "loss") == ["low-loss", "high-loss"]  # the worst loss decides: 0.2 against 0.3
