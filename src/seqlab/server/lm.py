"""A language-model run: ``POST /api/generate``, continuations of a start with each token's probability."""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import Field

from seqlab.decoding import DecodeOptions
from seqlab.predictors.language_model import Generation, LanguageModel
from seqlab.rundir import RunDir
from seqlab.server.app import Limits, RequestError, Worker, check_decoding, public_config


class GenerateRequest(DecodeOptions):
    """A start for a language model to continue, and the decoding options of ``DecodeOptions``."""

    start: str = Field(description="the text to continue (empty: a sentence from its beginning)")


def add_routes(app: FastAPI, worker: Worker, lm: LanguageModel) -> None:
    @app.post("/api/generate")
    async def api_generate(request: GenerateRequest) -> dict[str, Any]:
        options = _check(request, worker.limits, lm)
        start = time.perf_counter()
        try:
            found = await worker.serve(lambda stop: worker.run(lm.generate, [request.start], options, stop),
                                       "ask for fewer or shorter continuations, or a smaller beam")
        except ValueError as exc:
            raise RequestError(422, str(exc)) from None
        return {"start": request.start, "outputs": [_generation(g) for g in found[0]],
                "seconds": round(time.perf_counter() - start, 4)}


def _check(request: GenerateRequest, limits: Limits, lm: LanguageModel) -> DecodeOptions:
    """The request's DecodeOptions with the run's search where it leaves it open, once within ``limits``."""
    if len(request.start) > limits.max_input_chars:
        raise RequestError(413, f"start has {len(request.start)} characters; at most {limits.max_input_chars}")
    return check_decoding(request, limits, lm.decoding)


def _generation(g: Generation) -> dict[str, Any]:
    """A continuation and its tokens, each with its probability given the start and the tokens before it."""
    tokens = [*g.tokens, "<eos>"] if g.ended else g.tokens
    return {"text": g.text, "continuation": g.continuation, "log_prob": g.log_prob, "ended": g.ended,
            "tokens": [{"token": token, "probability": math.exp(log_prob)}
                       for token, log_prob in zip(tokens, g.token_log_probs, strict=True)]}


def info(run_dir: Path, lm: LanguageModel, limits: Limits) -> dict[str, Any]:
    """What the page shows of a language model: its shape, its tokens and its valid metrics (no data paths)."""
    return {
        "run": run_dir.name,
        "kind": "lm",
        "model": public_config(lm.config)["model"],
        "shape": lm.config.model.describe(),
        "parameters": sum(p.numel() for p in lm.model.parameters()),  # a tied weight once
        "tokens": {"level": lm.tokenizer.config.level, "vocab_size": lm.tokenizer.vocab_size,
                   "lowercase": lm.tokenizer.config.lowercase},
        "max_output_length": lm.config.eval.max_output_length,  # the default max_length
        "search": lm.run_search(),
        "metrics": RunDir(run_dir).model_info(),
        "limits": asdict(limits),
    }
