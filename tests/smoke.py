"""What the benchmark smoke tests (tests/test_bench_*.py) share: reading back the tables a script printed and the
result it recorded in the scoreboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def table_rows(text: str) -> list[list[str]]:
    """The cells of every body row (below the ``|---|`` line) of the markdown tables in ``text``."""
    rows, body = [], False
    for line in text.splitlines():
        body = line.startswith("|---") or (body and line.startswith("|"))
        if body and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def recorded(results: Path, race: str) -> Any:
    """The scoreboard result a race wrote into ``results`` (one JSON file: this machine's kind)."""
    import scoreboard

    [path] = results.glob(f"{race}.*.json")
    return scoreboard.Result.read(path)
