"""A span-extraction run (``model.type: span``): ``POST /api/answer``, each question's answer cut out of the
context, its probability, and every token's probability of starting and of ending the answer; answered in
chunks on the worker thread."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from seqlab.predictors.answerer import Answerer
from seqlab.rundir import RunDir
from seqlab.server.app import Limits, RequestError, Worker, check_inputs, public_config


class AnswerRequest(BaseModel):
    """Questions about one context."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(min_length=1, description="questions about the context")
    context: str = Field(min_length=1, description="the text the answers are cut out of")


def add_routes(app: FastAPI, worker: Worker, answerer: Answerer) -> None:
    limits = worker.limits

    @app.post("/api/answer")
    async def api_answer(request: AnswerRequest) -> dict[str, Any]:
        check_inputs(request.inputs, limits)
        if len(request.context) > limits.max_context_chars:
            raise RequestError(413, f"the context has {len(request.context)} characters; at most "
                                    f"{limits.max_context_chars}")
        start = time.perf_counter()
        work = functools.partial(_answers, answerer, context=request.context)
        outputs = await worker.serve(lambda stop: worker.in_turns(request.inputs, work), "send fewer questions")
        return {"outputs": outputs, "seconds": round(time.perf_counter() - start, 4)}


def _answers(answerer: Answerer, questions: Sequence[str], context: str) -> list[dict[str, Any]]:
    """On the worker thread: the questions' answers, as the JSON answer gives them."""
    return [{"input": question, "answer": a.text, "start": a.start, "end": a.end, "probability": a.probability,
             "tokens": a.tokens, "start_probabilities": a.start_probabilities.round(4).tolist(),
             "end_probabilities": a.end_probabilities.round(4).tolist()}
            for question, a in zip(questions, answerer.answer(questions, [context] * len(questions)))]


def info(run_dir: Path, answerer: Answerer, limits: Limits) -> dict[str, Any]:
    """What the page shows of a span extractor: its shape, tokens and valid metrics (no data paths)."""
    return {
        "run": run_dir.name,
        "kind": "answer",
        "model": public_config(answerer.config)["model"],
        "shape": answerer.config.model.describe(),
        "parameters": sum(p.numel() for p in answerer.model.parameters()),
        "tokens": {"level": answerer.tokenizer.config.level, "vocab_size": answerer.tokenizer.vocab_size,
                   "lowercase": answerer.tokenizer.config.lowercase},
        "max_tokens": answerer.config.data.max_source_length,  # question and context together; the context is cut
        "metrics": RunDir(run_dir).model_info(),
        "limits": asdict(limits),
    }
