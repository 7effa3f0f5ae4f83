"""The code's own rules, checked by the tools the test extras install: layers that only point down
(import-linter, the contract in pyproject.toml), ruff and mypy on ``src/``, ``benchmarks/`` and ``tests/``, and
no path that leaves the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _run(*command: str) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(SRC)}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: install the test extras (pip install -e '.[test]')")
    return path


def test_layers_only_point_down():
    result = _run(_tool("lint-imports"))
    assert result.returncode == 0, result.stdout[-3000:]


def test_ruff_is_clean_on_src_benchmarks_and_tests():
    result = _run(_tool("ruff"), "check", "src", "benchmarks", "tests")
    assert result.returncode == 0, result.stdout[-3000:]


def test_mypy_is_clean_on_src_benchmarks_and_tests():
    """The trees are [tool.mypy] files in pyproject.toml; its incremental cache (.mypy_cache) keeps reruns short."""
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout[-3000:]


def test_no_source_file_points_outside_the_repository():
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in SRC.rglob("*.py")
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "../shared" in line]
    assert offenders == []


def test_the_command_line_starts_without_torch():
    """``seqlab --help`` and the commands' options cost no torch, fastapi or safetensors import."""
    result = _run(sys.executable, "-c", "import sys, seqlab.cli; "
                  "print(sorted({'torch', 'fastapi', 'safetensors'} & set(sys.modules)))")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_training_and_translating_start_without_scikit_learn():
    """The trainer and the translator load no scikit-learn, nor SciPy's sparse matrices and statistics (1.4 s of a
    process's start): only a classifier's n-gram head fits or reads them (``seqlab.model.ngrams``)."""
    result = _run(sys.executable, "-c", "import sys, seqlab.train, seqlab.predictors.translator; "
                  "print(sorted({'sklearn', 'scipy.sparse', 'scipy.stats'} & set(sys.modules)))")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_the_help_lists_each_command_in_one_sentence_printed_as_written():
    """``seqlab --help`` gives every command (and command group) the first sentence of its docstring, the whole of
    it being the command's own ``--help``; square brackets are text, not markup."""
    import typer
    from typer.testing import CliRunner

    from seqlab.cli import app, first_sentence

    runner = CliRunner()
    listed = runner.invoke(app, ["--help"], terminal_width=200).output
    entries = [line.split(None, 1) for line in listed.split("Commands:")[1].splitlines() if line.strip()]
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]  # a group's
    assert sorted(name for name, _ in entries) == sorted(commands)
    assert all(text.count(". ") == 0 and len(text) < 100 for _, text in entries), entries
    assert first_sentence("Pretrain BERT (model.type bert). Masked tokens.") == "Pretrain BERT (model.type bert)."
    export = runner.invoke(app, ["export", "--help"], terminal_width=200).output
    assert "pip install -e '.[export]'" in export and "Needs" in export
