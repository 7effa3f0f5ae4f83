"""Word vectors (seed 002 ch. 2–4): count-based (PPMI + SVD) or word2vec (CBOW, skip-gram), made by ``seqlab
vectors train`` and used by their nearest neighbours and analogies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.registry import InferenceOptions, Kind, register


class WordVectors(Kind):
    name = "vectors"
    noun = "a word-vector run"
    use = "seqlab vectors similar | analogy | eval | export"
    trained_by = "vectors train"

    def owns(self, run_dir: Path) -> bool:
        """A word-vector run: its vocabulary is written as soon as it is counted."""
        from seqlab.rundir import VOCABULARY

        return (run_dir / VOCABULARY).exists()

    def evaluate(self, run_dir: Path, split: str, data_dir: Path | None, options: Any = None,
                 how: InferenceOptions = InferenceOptions()) -> dict[str, Any]:  # noqa: B008 (frozen)
        raise ValueError(f"{run_dir}: {self.noun}; use {self.use}")

    def load(self, run_dir: Path, how: InferenceOptions = InferenceOptions()) -> Any:  # noqa: B008 (frozen)
        """The run's vectors (a table, not a network: no engine, int8 or workers to choose)."""
        from seqlab.vectors import load

        if how != InferenceOptions():
            raise ValueError(f"{run_dir}: {self.noun} is a table of vectors: it has no engine, int8 or workers")
        return load(run_dir)

    def page(self) -> Any:
        from seqlab.server import vectors

        return vectors

    def commands(self) -> list[tuple[str, Any]]:
        from seqlab.cli import vectors

        return [("vectors", vectors.app)]


register(WordVectors())
