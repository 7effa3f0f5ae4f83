"""A word-vector run's files: the vocabulary, the vectors (checked to belong to it) and word2vec's state."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from safetensors.numpy import save as save_numpy

from seqlab.files import atomic_write
from seqlab.rundir.core import (
    CHECKPOINT,
    INFO_KEY,
    VECTORS,
    VOCABULARY,
    RunCore,
    RunFileError,
    check_shapes,
    damaged,
    header_json,
    is_int,
    read_json,
    read_safetensors,
    sha256,
)


class WordVectorFiles(RunCore):
    """The vocabulary, vectors and word2vec state of ``seqlab vectors train``."""

    def save_vocabulary(self, words: list[str], counts: np.ndarray) -> None:
        atomic_write(self.path / VOCABULARY, _vocabulary_json(words, counts))

    def save_vectors(self, vectors: np.ndarray, info: dict[str, Any]) -> None:
        """(V, dim) float32 rows, one per word of the saved vocabulary, whose checksum goes in the header."""
        words, _ = self.vocabulary()
        if len(vectors) != len(words):
            raise ValueError(f"{len(vectors)} vectors for a vocabulary of {len(words)} words")
        info = info | {"vocabulary_sha256": sha256(self.path / VOCABULARY)}
        tensors = {"vectors": np.ascontiguousarray(vectors, dtype=np.float32)}
        atomic_write(self.path / VECTORS, save_numpy(tensors, metadata={INFO_KEY: json.dumps(info)}))

    def vocabulary(self) -> tuple[list[str], np.ndarray]:
        """The words, most frequent first, and their counts (V,)."""
        path = self.path / VOCABULARY
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: not a word-vector run (no {VOCABULARY})")
        data = read_json(path, "vocabulary", dict)
        try:
            words, counts = list(data["words"]), np.asarray(data["counts"], dtype=np.int64)
        except (ValueError, KeyError, TypeError) as exc:
            raise damaged(path, "vocabulary", f"no words and counts: {exc!r}") from None
        if counts.ndim != 1 or len(words) != len(counts) or not all(isinstance(w, str) for w in words):
            raise damaged(path, "vocabulary", "words and counts do not match")
        return words, counts

    def vectors(self) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
        """(words, counts (V,), vectors (V, dim) float32, info), checked to belong together."""
        words, counts = self.vocabulary()
        path = self.path / VECTORS
        if not path.exists():
            raise FileNotFoundError(f"{path}: no vectors in this run directory yet (training has not finished)")
        tensors, metadata = read_safetensors(path, "vectors file", framework="numpy")
        info = header_json(path, "vectors file", metadata, INFO_KEY, dict)
        vectors = tensors.get("vectors")
        if vectors is None or vectors.ndim != 2:
            raise damaged(path, "vectors file", "no (words, dim) table named vectors")
        if info.get("vocabulary_sha256") != sha256(self.path / VOCABULARY) or len(vectors) != len(words):
            raise RunFileError(f"{path}: the vectors do not belong to {VOCABULARY} (a run was interrupted mid-save?)")
        return words, counts, vectors, info

    def save_word2vec_state(self, state: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        """word2vec's state at an epoch's end (``tensors``: tables and torch's generator state; ``info``:
        epochs done, numpy's generator state)."""
        atomic_write(self.path / CHECKPOINT, save_numpy(state, metadata={"state": json.dumps(info)}))

    def word2vec_state(self, shapes: dict[str, list[int]]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The state ``save_word2vec_state`` saved, whose tensors must have the names and ``shapes`` of a fresh
        state's (else a ``RunFileError`` naming the file)."""
        path = self.path / CHECKPOINT
        if not path.exists():
            raise FileNotFoundError(f"{path}: nothing to resume (no epoch has finished)")
        tensors, metadata = read_safetensors(path, "word2vec state", framework="numpy")
        check_shapes(path, shapes, tensors, "tensors", "this run's word2vec")
        info = header_json(path, "word2vec state", metadata, "state", dict)
        if not is_int(info.get("epochs_done")) or not isinstance(info.get("rng"), dict):
            raise damaged(path, "word2vec state", "no epochs_done and rng in its state")
        return tensors, info


def _vocabulary_json(words: list[str], counts: np.ndarray) -> str:
    return json.dumps({"words": words, "counts": [int(c) for c in counts]}, ensure_ascii=False)
