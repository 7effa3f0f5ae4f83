"""docs/seeds.md maps each seed item (S1–S107) to the tests that check it: every test it names must exist, and
every item must be there once, so that the map cannot rot as tests are renamed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (S\d+) \| [^|]* \| ([^|]*) \| ([^|]*) \|$")
TEST = re.compile(r"`([\w.]+)::(\w+)`")


def _rows() -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "seeds.md").read_text(encoding="utf-8")
    return [(m[1], m[2], m[3]) for line in text.splitlines() if (m := ROW.match(line))]


def _tests_in(file: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / file).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")}


def test_every_seed_item_is_mapped_once():
    assert [item for item, _, _ in _rows()] == [f"S{n}" for n in range(1, 108)]


def test_every_test_the_map_names_exists():
    named = [(item, file, test) for item, tests, _ in _rows() for file, test in TEST.findall(tests)]
    assert len(named) > 107
    missing = [f"{item}: {file}::{test}" for item, file, test in named if test not in _tests_in(file)]
    assert not missing, missing


def test_an_item_marked_done_names_a_test():
    assert [item for item, tests, status in _rows() if status == "done" and not TEST.search(tests)] == []
