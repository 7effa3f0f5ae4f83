"""``seqlab serve``: one page and a JSON API to use a trained run from a browser.

A seq2seq run (translation, chatbot):

    POST /api/translate    {"inputs": [...], "beam": 5, ..., "attention": true} -> outputs, scores, attention

A word-vector run (``seqlab vectors train``):

    POST /api/similar      {"word": "hund", "top": 10} -> {"word": "hund", "neighbours": [{"word", "cosine"}, ...]}
    POST /api/analogy      {"a": "man", "b": "king", "c": "woman", "top": 5} -> a : b = c : ?, {"answers": [...]}

A language-model run (``seqlab train`` with ``model.type: lm``):

    POST /api/generate     {"start": "a dog", "max_length": 20, "beam": 5, "nbest": 3, ...} -> {"outputs": [{"text",
                           "continuation", "log_prob", "ended", "tokens": [{"token", "probability"}, ...]}, ...]}

Every kind:

    GET  /                 the page (seqlab/web/: plain HTML, CSS and JS, and its own Korean font)
    GET  /api/info         the run: its kind ("translate", "chat", "lm" or "vectors"), what it is, the limits
    GET  /healthz          {"status": "ok"}
    GET  /docs, /openapi.json

A run serves only its own kind's routes: a vectors run has no ``/api/translate`` (404) and loads no model; a
language model has ``/api/generate`` and neither ``/api/translate`` nor the vectors' routes. The decoding
options of ``/api/translate`` and ``/api/generate`` are those of :class:`seqlab.decoding.DecodeOptions`, the
same as on the command line. A continuation's ``tokens`` end with ``<eos>`` when it ended there; each token's
probability is given the start and the tokens before it, and their logs sum to ``log_prob``. Requests are
checked against :class:`Limits` (input length, inputs per request, beam size and samples, output length,
neighbours) and a per-request timeout; whatever is wrong comes back as a 4xx with ``{"error": "..."}``, a word
not in the vocabulary as a 404 naming it.

Decoding and look-ups run on one worker thread (PyTorch already uses every core for one batch). A
request's inputs are decoded in chunks of ``Limits.chunk`` and every chunk queues anew, so concurrent
users take turns on the CPU instead of waiting for one large request to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fontTools.ttLib import TTFont
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from seqlab.config import Config, CsvCorpus, ModelConfig, RNNConfig, TransformerConfig
from seqlab.decoding import DecodeOptions
from seqlab.fonts import font_path
from seqlab.language_model import Generation, LanguageModel
from seqlab.language_model import load as load_lm
from seqlab.rundir import RunDir
from seqlab.translator import Translation, Translator, load
from seqlab.vectors import WordVectors
from seqlab.vectors import load as load_vectors

WEB = resources.files("seqlab") / "web"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
VECTORS_INFO = ("method", "dim", "vocab_size", "corpus_words", "seconds")  # what /api/info tells of the vectors
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_input_chars: int = 1000  # also the longest word a vectors run looks up
    max_inputs: int = 64
    max_beam: int = 16  # also the most samples per input
    max_output_length: int = 256
    max_top: int = 100  # word vectors: the most neighbours or analogy answers per request
    timeout_s: float = 30.0
    chunk: int = 8  # inputs decoded at a time, between which other requests get their turn


class TranslateRequest(DecodeOptions):
    """The inputs, whether to return attention, and the decoding options of ``DecodeOptions``."""

    inputs: list[str] = Field(min_length=1, description="texts to translate (or, for a chatbot, to answer)")
    attention: bool = Field(False, description="also return each output's cross-attention weights")


class GenerateRequest(DecodeOptions):
    """A start for a language model to continue, and the decoding options of ``DecodeOptions``."""

    start: str = Field(description="the text to continue (empty: a sentence from its beginning)")


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


class RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_app(run_dir: str | Path, limits: Limits = Limits()) -> FastAPI:
    """The app serving the run in ``run_dir``: a seq2seq model, a language model or, for a ``seqlab vectors
    train`` run, its word vectors; each kind gets its own routes."""
    run_dir = Path(run_dir)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-worker")  # no thread until first use
    if RunDir(run_dir).is_vectors():
        vectors = load_vectors(run_dir)
        app = _app(_vectors_info(run_dir, vectors, limits), worker)
        _add_vectors_routes(app, worker, vectors, limits)
    elif RunDir(run_dir).config().is_language_model:
        lm = load_lm(run_dir)
        app = _app(_lm_info(run_dir, lm, limits), worker)
        _add_lm_routes(app, worker, lm, limits)
    else:
        translator = load(run_dir)
        app = _app(_info(run_dir, translator, limits), worker)
        _add_translate_routes(app, worker, translator, limits)
    return app


def _app(info: dict[str, Any], worker: ThreadPoolExecutor) -> FastAPI:
    """What every kind of run serves: the page, its files, the error handling, ``/healthz`` and ``/api/info``."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="seqlab", version=info["seqlab"], description=__doc__.split("\n\n")[0], lifespan=lifespan)

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _explain(exc.errors())}, status_code=422)

    @app.exception_handler(HTTPException)  # no such route (e.g. /api/translate on a vectors run), wrong method
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": f"{exc.detail}: {request.method} {request.url.path}"},
                            status_code=exc.status_code, headers=exc.headers)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> Response:
        return HTMLResponse((WEB / "index.html").read_text(encoding="utf-8"))

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name == "font.ttf":
            return Response(_web_font(), media_type="font/ttf", headers={"Cache-Control": "max-age=86400"})
        if name not in STATIC:
            raise RequestError(404, f"no such file: {name}")
        return Response((WEB / name).read_text(encoding="utf-8"), media_type=STATIC[name])

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/info")
    async def api_info() -> dict[str, Any]:
        return info

    return app


@functools.cache
def _web_font() -> bytes:
    """NanumGothic for the page. Its TSI* tables (hinting sources of a font editor, one of them empty) make
    browsers reject the file ("OTS parsing error: TSI3: zero-length table"); they are dropped."""
    font = TTFont(str(font_path()))
    for tag in [tag for tag in font.keys() if tag.startswith("TSI")]:
        del font[tag]
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


async def _in_time(work: Awaitable[T], limits: Limits, advice: str) -> T:
    """``work``'s result, or a 503 once it has taken longer than ``limits.timeout_s``."""
    try:
        return await asyncio.wait_for(work, limits.timeout_s)
    except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11 on
        raise RequestError(503, f"the request took longer than {limits.timeout_s:g} s; {advice}") from None


# --- a seq2seq run: /api/translate ----------------------------------------------------------------------------


def _add_translate_routes(app: FastAPI, worker: ThreadPoolExecutor, translator: Translator, limits: Limits) -> None:
    @app.post("/api/translate")
    async def api_translate(request: TranslateRequest) -> dict[str, Any]:
        options = _check(request, limits)
        start = time.perf_counter()
        outputs = await _in_time(_decode(worker, translator, request, options, limits), limits,
                                 "send fewer or shorter inputs, or a smaller beam")
        return {"outputs": outputs, "seconds": round(time.perf_counter() - start, 4)}


def _check(request: TranslateRequest | GenerateRequest, limits: Limits) -> DecodeOptions:
    """The request's DecodeOptions, once the request is within ``limits``."""
    if isinstance(request, GenerateRequest):
        if len(request.start) > limits.max_input_chars:
            raise RequestError(413, f"start has {len(request.start)} characters; at most {limits.max_input_chars}")
    else:
        if len(request.inputs) > limits.max_inputs:
            raise RequestError(413, f"{len(request.inputs)} inputs; at most {limits.max_inputs} per request")
        for i, text in enumerate(request.inputs):
            if len(text) > limits.max_input_chars:
                raise RequestError(413, f"inputs[{i}] has {len(text)} characters; at most {limits.max_input_chars}")
    if request.beam > limits.max_beam:
        raise RequestError(422, f"beam {request.beam}; at most {limits.max_beam}")
    if request.num_samples > limits.max_beam:
        raise RequestError(422, f"num_samples {request.num_samples}; at most {limits.max_beam}")
    if (request.max_length or 0) > limits.max_output_length:
        raise RequestError(422, f"max_length {request.max_length}; at most {limits.max_output_length}")
    return DecodeOptions(**request.model_dump(include=set(DecodeOptions.model_fields)))


async def _decode(
    worker: ThreadPoolExecutor, translator: Translator, request: TranslateRequest, options: DecodeOptions,
    limits: Limits,
) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    outputs: list[dict[str, Any]] = []
    for start in range(0, len(request.inputs), limits.chunk):
        chunk = request.inputs[start : start + limits.chunk]
        results = await loop.run_in_executor(worker, translator.generate, chunk, options, request.attention)
        outputs += [{"input": text, "hypotheses": [_hypothesis(t) for t in hypotheses]}
                    for text, hypotheses in zip(chunk, results)]
    return outputs


def _hypothesis(t: Translation) -> dict[str, Any]:
    out = {"text": t.text, "score": t.score, "log_prob": t.log_prob, "tokens": t.tokens,
           "source_tokens": t.source_tokens}
    if t.attention is not None:  # (output tokens + <eos>, layers, heads, source tokens) -> layers, heads, out, src
        out["attention"] = [[[[round(w, 4) for w in row] for row in head] for head in layer]
                            for layer in t.attention.permute(1, 2, 0, 3).tolist()]
    return out


def _info(run_dir: Path, translator: Translator, limits: Limits) -> dict[str, Any]:
    from seqlab import __version__

    config = translator.config
    return {
        "seqlab": __version__,
        "run": run_dir.name,
        "kind": "chat" if _is_chat(config) else "translate",
        "config": config.model_dump(mode="json"),
        "metrics": RunDir(run_dir).model_info(),
        "attention": _attention_shape(config.model),
        "limits": asdict(limits),
    }


def _is_chat(config: Config) -> bool:
    """A chatbot is trained on one CSV of questions and answers (ChatbotData); translators on parallel text."""
    corpus = config.data.corpus or config.data.train
    return isinstance(corpus, CsvCorpus)


def _attention_shape(model: ModelConfig) -> dict[str, int]:
    """The layers and heads of cross-attention that ``attention: true`` returns (0 and 0: none)."""
    if isinstance(model, TransformerConfig):
        return {"layers": model.num_layers, "heads": model.num_heads}
    has = isinstance(model, RNNConfig) and model.attention != "none"
    return {"layers": int(has), "heads": int(has)}


# --- a language-model run: /api/generate ----------------------------------------------------------------------


def _add_lm_routes(app: FastAPI, worker: ThreadPoolExecutor, lm: LanguageModel, limits: Limits) -> None:
    @app.post("/api/generate")
    async def api_generate(request: GenerateRequest) -> dict[str, Any]:
        options = _check(request, limits)
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        try:
            found = await _in_time(loop.run_in_executor(worker, lm.generate, [request.start], options), limits,
                                   "ask for fewer or shorter continuations, or a smaller beam")
        except ValueError as exc:
            raise RequestError(422, str(exc)) from None
        return {"start": request.start, "outputs": [_generation(g) for g in found[0]],
                "seconds": round(time.perf_counter() - start, 4)}


def _generation(g: Generation) -> dict[str, Any]:
    """A continuation and its tokens, each with its probability given the start and the tokens before it."""
    tokens = [*g.tokens, "<eos>"] if g.ended else g.tokens
    return {"text": g.text, "continuation": g.continuation, "log_prob": g.log_prob, "ended": g.ended,
            "tokens": [{"token": token, "probability": math.exp(log_prob)}
                       for token, log_prob in zip(tokens, g.token_log_probs, strict=True)]}


def _lm_info(run_dir: Path, lm: LanguageModel, limits: Limits) -> dict[str, Any]:
    """What the page shows of a language model: its shape, its tokens and its valid metrics (no data paths)."""
    from seqlab import __version__

    return {
        "seqlab": __version__,
        "run": run_dir.name,
        "kind": "lm",
        "model": lm.config.model.model_dump(mode="json"),
        "parameters": sum(p.numel() for p in lm.model.parameters()),  # a tied weight once
        "tokens": {"level": lm.tokenizer.config.level, "vocab_size": lm.tokenizer.vocab_size,
                   "lowercase": lm.tokenizer.config.lowercase},
        "max_output_length": lm.config.eval.max_output_length,  # the default max_length
        "metrics": RunDir(run_dir).model_info(),
        "limits": asdict(limits),
    }


# --- a word-vector run: /api/similar, /api/analogy -------------------------------------------------------------


def _add_vectors_routes(app: FastAPI, worker: ThreadPoolExecutor, vectors: WordVectors, limits: Limits) -> None:
    async def look_up(function: Callable[..., list[tuple[str, float]]], *args: Any) -> list[dict[str, Any]]:
        """``function(*args)`` on the worker thread, in time; a word not in the vocabulary is a 404."""
        loop = asyncio.get_running_loop()
        try:
            found = await _in_time(loop.run_in_executor(worker, function, *args), limits, "ask for fewer words")
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


def _vectors_info(run_dir: Path, vectors: WordVectors, limits: Limits) -> dict[str, Any]:
    from seqlab import __version__

    return {
        "seqlab": __version__,
        "run": run_dir.name,
        "kind": "vectors",
        **{key: vectors.info[key] for key in VECTORS_INFO if key in vectors.info},
        "lowercase": vectors.lowercase,
        "train": RunDir(run_dir).vectors_config().train.model_dump(mode="json"),
        "limits": asdict(limits),
    }


def _explain(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's validation errors in one line: ``beam: Input should be greater than or equal to 1; ...``."""
    parts = []
    for e in errors:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
