"""Benchmarks choose on valid: every script that selects makes itself a selection run, where the data has no test
split (seqlab.data.splits; tests/test_selection.py plants the ways a script could still ask for it)."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest

from seqlab.data.splits import SELECTION_ENV

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

# The scripts that choose a configuration, a decoding setting or a peer's recipe: each calls
# report.choose_on_valid() before it reads its arguments.
SELECTS = ["select_config", "select_decoding", "select_joeynmt", "select_tfidf", "chatbot_variants"]


def test_every_select_script_is_known_to_choose() -> None:
    assert {path.stem for path in BENCHMARKS.glob("select_*.py")} <= set(SELECTS)


@pytest.mark.parametrize("script", SELECTS)
def test_a_choosing_script_withholds_the_test_split_from_itself_and_its_processes(
        script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setenv(SELECTION_ENV, "0")
    module = importlib.import_module(script)
    with pytest.raises(SystemExit) as exit:
        module.main(["--help"])
    assert exit.value.code == 0 and "usage" in capsys.readouterr().out
    assert os.environ[SELECTION_ENV] == "1", f"{script}.main does not call report.choose_on_valid() first"


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


def test_a_search_with_a_target_ranks_the_variants_that_reach_it_by_their_time(monkeypatch):
    """select_config.py, a search's ``target``: of the variants whose every run reaches it, the fastest (median
    training seconds) wins; a faster variant that misses it in one run ranks below them all."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from select_config import Trial, rank

    def trials(variant, scores, seconds):
        return [Trial(variant, "fp32", seed, {"exact_match": s, "loss": 0.1}, t)
                for seed, (s, t) in enumerate(zip(scores, seconds, strict=True), 1)]

    slow = trials("slow", [100.0, 100.0, 100.0], [90.0, 80.0, 85.0])
    quick = trials("quick", [99.95, 100.0, 99.9], [40.0, 70.0, 45.0])  # median 45 s
    quicker_but_short = trials("short", [100.0, 99.85, 100.0], [20.0, 20.0, 20.0])
    runs = slow + quick + quicker_but_short
    assert rank(runs, "exact_match", 99.9) == ["quick", "slow", "short"]
    assert rank(runs, "exact_match") == ["slow", "quick", "short"]  # without a target: the worst score


def test_every_benchmark_script_has_a_smoke_test_in_the_suite() -> None:
    """Each script in benchmarks/ (helpers and peers' workers too) is run end to end by a test named
    ``test_<script>_runs_end_to_end``, so that none can rot; report.py is the scripts' shared library."""
    tests = {match for path in Path(__file__).parent.glob("test_*.py")
             for match in re.findall(r"^def (test_\w+_runs_end_to_end)\(", path.read_text(encoding="utf-8"), re.M)}
    scripts = {path.stem for path in BENCHMARKS.rglob("*.py") if "stand_ins" not in path.parts} - {"report"}
    missing = sorted(script for script in scripts if f"test_{script}_runs_end_to_end" not in tests)
    assert missing == [], f"benchmark scripts without a smoke test: {missing}"
