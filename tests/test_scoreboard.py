"""The scoreboard: races record JSON, docs/results.md is made from it, and README quotes only what it holds."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
README_FIGURES = re.compile(r"<!-- scoreboard figures -->(.*?)<!-- end of scoreboard figures -->", re.S)
FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?(?:[–-]\d[\d,]*(?:\.\d+)?)?")


@pytest.fixture
def scoreboard(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import scoreboard

    return scoreboard


def test_docs_results_md_is_what_the_scoreboard_makes(scoreboard: ModuleType) -> None:
    assert (ROOT / "docs" / "results.md").read_text(encoding="utf-8") == scoreboard.render(), \
        "docs/results.md is generated: run python benchmarks/scoreboard.py"


def test_every_result_names_a_command_that_exists_and_every_run(scoreboard: ModuleType) -> None:
    for path in sorted(scoreboard.RESULTS.glob("*.json")):
        result = scoreboard.Result.read(path)
        script = result.command.split()[1]
        assert result.command.startswith("python benchmarks/") and (ROOT / script).is_file(), path
        assert path.name == f"{result.race}.{result.machine['kind']}.json"
        assert result.runs and result.tables and result.date and result.commit, path
        assert {"cpu", "flags", "threads", "torch", "precision_auto"} <= set(result.machine), path


def test_every_figure_the_readme_quotes_is_in_the_scoreboard(scoreboard: ModuleType) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = README_FIGURES.findall(readme)
    assert len(quoted) == 1, "README quotes its results between one pair of <!-- scoreboard figures --> markers"
    board = scoreboard.render()
    missing = [figure for block in quoted for figure in FIGURE.findall(block) if figure not in board]
    assert missing == [], "figures README quotes that no race in benchmarks/results/ holds"


def test_the_figure_check_sees_a_figure_the_scoreboard_lacks(scoreboard: ModuleType, tmp_path: Path) -> None:
    scoreboard.record(scoreboard.Result("race", "A race", "python benchmarks/race.py", [
        scoreboard.Table("times", ["system", "s"], [["seqlab", "12.5 ± 0.3 (12.2–12.8)"]])], [{"s": 12.5}]), tmp_path)
    board = scoreboard.render(tmp_path)
    assert all(figure in board for figure in FIGURE.findall("seqlab takes 12.5 s (12.2–12.8)"))
    assert "13.5" in FIGURE.findall("seqlab takes 13.5 s") and "13.5" not in board


def test_record_stamps_the_machine_and_commit_and_a_newer_run_replaces_it(scoreboard: ModuleType, tmp_path: Path) -> None:
    result = scoreboard.Result("toy", "A toy race", "python benchmarks/toy.py --runs 3",
                               [scoreboard.Table("t", ["a", "b"], [["x", "1.00"]])], [{"seed": 1}, {"seed": 2}],
                               notes=["the peer's recipe differs in one way"])
    path = scoreboard.record(result, tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    kinds = ("avx2", "avx512_bf16", "amx_bf16", scoreboard.EMULATED_AVX2)
    assert path.name == f"toy.{data['machine']['kind']}.json" and data["machine"]["kind"] in kinds
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?|unknown", data["commit"])
    assert data["runs"] == [{"seed": 1}, {"seed": 2}] and data["command"] == "python benchmarks/toy.py --runs 3"
    text = scoreboard.render(tmp_path)
    assert "## A toy race" in text and "`python benchmarks/toy.py --runs 3`" in text and "| x | 1.00 |" in text
    assert "- the peer's recipe differs in one way" in text and "2 runs." in text
    result.tables[0].rows = [["x", "2.00"]]
    scoreboard.record(result, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1 and "| x | 2.00 |" in scoreboard.render(tmp_path)


@pytest.mark.parametrize(("flags", "limits", "kind"), [
    (["avx2"], False, "avx2"), (["avx2", "avx512f", "avx512_bf16"], False, "avx512_bf16"),
    (["avx2", "avx512f", "avx512_bf16", "amx_bf16"], False, "amx_bf16"),
    (["avx2", "avx512f", "avx512_bf16", "amx_bf16"], True, "avx2_emulated"),
    (["avx2", "avx512f", "avx512_bf16"], True, "avx2_emulated")])
def test_cpu_kind_files_amx_apart_from_avx512_bf16_alone(scoreboard: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                        flags: list[str], limits: bool, kind: str) -> None:
    from seqlab import precision

    monkeypatch.setattr(precision, "cpu_flags", lambda wanted=(), cpuinfo=None: [f for f in flags if f in wanted])
    for limit in scoreboard.AVX2_LIMITS:
        if limits:
            monkeypatch.setenv(limit, "AVX2")
        else:
            monkeypatch.delenv(limit, raising=False)
    assert scoreboard.cpu_kind() == kind


def test_spread_and_ratio_are_the_runs_mean_sd_and_range(scoreboard: ModuleType) -> None:
    assert scoreboard.spread([10.0, 12.0, 14.0]) == "12.00 ± 2.00 (10.00–14.00)"
    assert scoreboard.spread([99.9], digits=1, unit=" %") == "99.9 % (1 run)"
    assert scoreboard.spread([9350.0, 10055.0], digits=0) == "9,702 ± 499 (9,350–10,055)"  # thousands marked, as in rows
    # means 20 and 10: 2×; the pairings give 18/11 .. 22/9
    assert scoreboard.ratio_range([18.0, 22.0], [9.0, 11.0]) == "2.00× (1.64–2.44×)"
    with pytest.raises(ValueError):
        scoreboard.spread([])


def test_scoreboard_runs_end_to_end(scoreboard: ModuleType, tmp_path: Path) -> None:
    """Writes a document from the results, and --check refuses one that differs from what they make."""
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nhand-edited\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="is not what"):
        scoreboard.main(["--check", "--doc", str(doc), "--results", str(tmp_path)])
    scoreboard.main(["--doc", str(doc), "--results", str(tmp_path)])
    scoreboard.main(["--check", "--doc", str(doc), "--results", str(tmp_path)])


def test_seeds_runs_end_to_end(scoreboard: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/seeds.py on a tiny date model, two seeds: a scoreboard entry with both runs and their spread."""
    import seeds
    import yaml
    from conftest import small_date_config

    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(small_date_config()), encoding="utf-8")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the runs' directory
    seeds.main([str(config), "--seeds", "1", "2", "--precisions", "fp32", "--race", "tiny", "--results",
                str(tmp_path)])
    result = scoreboard.Result.read(tmp_path / f"tiny.{scoreboard.machine()['kind']}.json")
    assert [(run["seed"], run["precision"]) for run in result.runs] == [(1, "fp32"), (2, "fp32")]
    assert all(run["valid"]["sentences"] == 100 and run["test"]["sentences"] == 100 for run in result.runs)
    assert all(run["test"]["unseen_sentences"] == 100 for run in result.runs)  # generated: no source in training
    row = dict(zip(result.tables[0].columns, result.tables[0].rows[0]))
    test = [run["test"]["exact_match"] for run in result.runs]
    assert row["test exact match %"] == scoreboard.spread(test) and row["seeds"] == "1 2"
    assert result.command.startswith("python benchmarks/seeds.py ") and result.command.endswith("--results " + str(tmp_path))
    assert "decoded greedily" in result.notes[-1]  # a config that gives no search
    assert seeds.described_search({"beam": 5, "length_penalty": 1.2}).endswith("beam 5, length penalty α 1.2")


def test_a_machine_held_to_avx2_keeps_its_results_apart(scoreboard: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch, oneDNN and MKL all held to AVX2 on a CPU with AVX-512 BF16 (an emulated machine of the AVX2 kind) file
    their results as ``avx2_emulated``, neither real kind's; two of the three limits emulate nothing."""
    from seqlab import precision

    real = scoreboard.machine()["kind"]
    for name in scoreboard.AVX2_LIMITS[:2]:
        monkeypatch.setenv(name, "AVX2")
    assert scoreboard.machine()["kind"] == real
    monkeypatch.setenv(scoreboard.AVX2_LIMITS[2], "AVX2")
    precision.native_bf16.cache_clear()
    held = scoreboard.machine()
    precision.native_bf16.cache_clear()
    assert held["kind"] == ("avx2" if real == "avx2" else "avx2_emulated")
    assert held["precision_auto"] == (precision.forced() or "fp32")  # bf16 emulated: auto trains in fp32
