"""A seq2seq run (translation, chatbot): ``POST /api/translate``, decoded in chunks on the worker thread."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import Field

from seqlab.config import Config
from seqlab.corpora import CsvCorpus
from seqlab.decoding import DecodeOptions
from seqlab.model import Seq2seqConfig
from seqlab.predictors.translator import Translation, Translator
from seqlab.rundir import RunDir
from seqlab.server.app import Limits, RequestError, Worker, check_decoding, check_inputs, public_config


class TranslateRequest(DecodeOptions):
    """The inputs, whether to return attention, and the decoding options of ``DecodeOptions``."""

    inputs: list[str] = Field(min_length=1, description="texts to translate (or, for a chatbot, to answer)")
    attention: bool = Field(False, description="also return each output's cross-attention weights")


def add_routes(app: FastAPI, worker: Worker, translator: Translator) -> None:
    @app.post("/api/translate")
    async def api_translate(request: TranslateRequest) -> dict[str, Any]:
        options = _check(request, worker.limits, translator)
        start = time.perf_counter()
        outputs = await worker.serve(lambda stop: worker.in_turns(request.inputs, functools.partial(
                                         _translations, translator, options=options, attention=request.attention,
                                         stop=stop)),
                                     "send fewer or shorter inputs, or a smaller beam")
        return {"outputs": outputs, "seconds": round(time.perf_counter() - start, 4)}


def _check(request: TranslateRequest, limits: Limits, translator: Translator) -> DecodeOptions:
    """The request's DecodeOptions, once the request is within ``limits`` and asks what the engine can do."""
    check_inputs(request.inputs, limits)
    options = check_decoding(request, limits, translator.decoding)
    try:
        translator.check_options(options, request.attention)
    except ValueError as exc:
        raise RequestError(422, str(exc)) from None
    return options


def _translations(translator: Translator, texts: Sequence[str], options: DecodeOptions, attention: bool,
                  stop: Callable[[], bool]) -> list[dict[str, Any]]:
    """On the worker thread: the texts' outputs, as the JSON answer gives them."""
    return [{"input": text, "truncated": hypotheses[0].truncated, "hypotheses": [_hypothesis(t) for t in hypotheses]}
            for text, hypotheses in zip(texts, translator.generate(texts, options, attention, stop))]


def _hypothesis(t: Translation) -> dict[str, Any]:
    out = {"text": t.text, "score": t.score, "log_prob": t.log_prob, "tokens": t.tokens,
           "source_tokens": t.source_tokens}
    if t.attention is not None:  # (output tokens + <eos>, layers, heads, source tokens) -> layers, heads, out, src
        out["attention"] = [[[[round(w, 4) for w in row] for row in head] for head in layer]
                            for layer in t.attention.permute(1, 2, 0, 3).tolist()]
    return out


def info(run_dir: Path, translator: Translator, limits: Limits) -> dict[str, Any]:

    config = translator.config
    return {
        "run": run_dir.name,
        "kind": "chat" if _is_chat(config) else "translate",
        "config": public_config(config),
        "shape": config.model.describe(),
        "metrics": RunDir(run_dir).model_info(),
        "attention": _attention_shape(config.model),
        "search": translator.run_search(),
        "limits": asdict(limits),
    }


def _is_chat(config: Config) -> bool:
    """A chatbot is trained on one CSV of questions and answers (ChatbotData); translators on parallel text."""
    corpus = config.data.corpus or config.data.train
    return isinstance(corpus, CsvCorpus)


def _attention_shape(model: object) -> dict[str, int]:
    """The layers and heads of cross-attention that ``attention: true`` returns (0 and 0: none)."""
    assert isinstance(model, Seq2seqConfig)  # a translator's
    layers, heads = model.cross_attention()
    return {"layers": layers, "heads": heads}
