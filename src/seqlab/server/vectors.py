"""A word-vector run (``seqlab vectors train``): ``POST /api/similar`` and ``POST /api/analogy``; no model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from seqlab.rundir import RunDir
from seqlab.server.app import Limits, RequestError, Worker
from seqlab.vectors import WordVectors
from seqlab.vectors.config import VectorsConfig

VECTORS_INFO = ("method", "dim", "vocab_size", "corpus_words", "seconds")  # what /api/info tells of the vectors


class SimilarRequest(BaseModel):
    """A word and how many of its nearest neighbours to return."""

    model_config = ConfigDict(extra="forbid")

    word: str = Field(min_length=1, description="the word, as typed (normalised and lowercased as the run was)")
    top: int = Field(10, ge=1, description="neighbours to return, nearest first (at most Limits.max_top)")


class AnalogyRequest(BaseModel):
    """a : b = c : ?, answered by the words nearest to b − a + c."""

    model_config = ConfigDict(extra="forbid")

    a: str = Field(min_length=1)
    b: str = Field(min_length=1)
    c: str = Field(min_length=1)
    top: int = Field(5, ge=1, description="answers to return, best first (at most Limits.max_top)")


def add_routes(app: FastAPI, worker: Worker, vectors: WordVectors) -> None:
    limits = worker.limits

    async def look_up(function: Callable[..., list[tuple[str, float]]], *args: Any) -> list[dict[str, Any]]:
        """``function(*args)`` on the worker thread, in time; a word not in the vocabulary is a 404."""
        try:
            found = await worker.serve(lambda stop: worker.run(function, *args), "ask for fewer words")
        except KeyError as exc:  # WordVectors names the word: "'xyz' is not in the vocabulary (6699 words)"
            raise RequestError(404, str(exc.args[0])) from None
        return [{"word": word, "cosine": cosine} for word, cosine in found]

    @app.post("/api/similar")
    async def api_similar(request: SimilarRequest) -> dict[str, Any]:
        _check_words(limits, request.top, request.word)
        neighbours = await look_up(vectors.most_similar, request.word, request.top)
        return {"word": vectors.key(request.word), "neighbours": neighbours}

    @app.post("/api/analogy")
    async def api_analogy(request: AnalogyRequest) -> dict[str, Any]:
        _check_words(limits, request.top, request.a, request.b, request.c)
        answers = await look_up(vectors.analogy, request.a, request.b, request.c, request.top)
        return {"a": vectors.key(request.a), "b": vectors.key(request.b), "c": vectors.key(request.c), "answers": answers}


def _check_words(limits: Limits, top: int, *words: str) -> None:
    """Raise a RequestError unless ``top`` and the words are within ``limits``."""
    if top > limits.max_top:
        raise RequestError(422, f"top {top}; at most {limits.max_top}")
    for word in words:
        if len(word) > limits.max_input_chars:
            raise RequestError(413, f"a word of {len(word)} characters; at most {limits.max_input_chars}")


def info(run_dir: Path, vectors: WordVectors, limits: Limits) -> dict[str, Any]:
    """What the page shows of word vectors: how they were made, their size and the limits."""
    return {
        "run": run_dir.name,
        "kind": "vectors",
        **{key: vectors.info[key] for key in VECTORS_INFO if key in vectors.info},
        "lowercase": vectors.lowercase,
        "train": RunDir(run_dir).read_config(VectorsConfig).train.model_dump(mode="json"),
        "limits": asdict(limits),
    }
