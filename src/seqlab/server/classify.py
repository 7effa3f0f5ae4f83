"""A classifier run (``model.type: encoder``): ``POST /api/classify``, each text's label, every class's
probability and, if asked, which tokens the sentence vector was read from; classified in chunks on the worker
thread."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from seqlab.predictors.classifier import Classifier
from seqlab.rundir import RunDir
from seqlab.server.app import Limits, Worker, check_inputs, public_config


class ClassifyRequest(BaseModel):
    """Texts to classify, and whether to return the attention of the pooled position."""

    model_config = ConfigDict(extra="forbid")

    inputs: list[str] = Field(min_length=1, description="texts to classify")
    attention: bool = Field(False, description="also return, for every layer and head, the attention of the "
                                               "pooled position (the sentence vector) over the input tokens")


def add_routes(app: FastAPI, worker: Worker, classifier: Classifier) -> None:
    @app.post("/api/classify")
    async def api_classify(request: ClassifyRequest) -> dict[str, Any]:
        check_inputs(request.inputs, worker.limits)
        start = time.perf_counter()
        work = functools.partial(_predictions, classifier, attention=request.attention)
        outputs = await worker.serve(lambda stop: worker.in_turns(request.inputs, work), "send fewer or shorter inputs")
        return {"outputs": outputs, "seconds": round(time.perf_counter() - start, 4)}


def _predictions(classifier: Classifier, texts: Sequence[str], attention: bool) -> list[dict[str, Any]]:
    """On the worker thread: the texts' predictions, as the JSON answer gives them."""
    out = []
    for text, p in zip(texts, classifier.classify(texts, need_weights=attention)):
        item: dict[str, Any] = {"input": text, "label": p.label, "probabilities": p.probabilities, "tokens": p.tokens,
                                "truncated": p.truncated}
        if p.attention is not None:
            pooled = _pooled_attention(p.attention, classifier.model.cfg.pooling)
            item["attention"] = [[[round(w, 4) for w in head] for head in layer] for layer in pooled.tolist()]
        out.append(item)
    return out


def _pooled_attention(attention: torch.Tensor, pooling: str) -> torch.Tensor:
    """One text's self-attention (layers, heads, tokens, tokens) -> (layers, heads, tokens): how the pooled
    position reads the tokens at each layer. Pooling ``cls``: the <sos> row; ``mean`` (the sentence vector is
    the mean of every position's output): the mean of the rows. Either way each row sums to 1."""
    return attention[:, :, 0] if pooling == "cls" else attention.mean(2)


def info(run_dir: Path, classifier: Classifier, limits: Limits) -> dict[str, Any]:
    """What the page shows of a classifier: its shape, classes, tokens and valid metrics (no data paths)."""
    model = classifier.model.cfg
    return {
        "run": run_dir.name,
        "kind": "classify",
        "model": public_config(classifier.config)["model"],
        "shape": classifier.config.model.describe(),
        "parameters": sum(p.numel() for p in classifier.model.parameters()),
        "labels": classifier.labels,
        "tokens": {"level": classifier.tokenizer.config.level, "vocab_size": classifier.tokenizer.vocab_size,
                   "lowercase": classifier.tokenizer.config.lowercase},
        "max_tokens": classifier.max_tokens,  # a longer text is cut to its first tokens
        "metrics": RunDir(run_dir).model_info(),
        "attention": {"layers": model.num_layers, "heads": model.num_heads},
        "limits": asdict(limits),
    }
