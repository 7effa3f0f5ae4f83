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
