"""``seqlab serve``: one page and a JSON API to talk to a trained model from a browser.

    GET  /                 the page (seqlab/web/: plain HTML, CSS and JS, and its own Korean font)
    POST /api/translate    {"inputs": [...], "beam": 5, ..., "attention": true} -> outputs, scores, attention
    GET  /api/info         the model: its config, metrics, attention layers and heads, the limits
    GET  /healthz          {"status": "ok"}
    GET  /docs, /openapi.json

The decoding options of ``/api/translate`` are those of :class:`seqlab.decoding.DecodeOptions`, the same
as on the command line. Requests are checked against :class:`Limits` (input length, inputs per request,
beam size, output length) and a per-request timeout; whatever is wrong comes back as a 4xx with
``{"error": "..."}``.

Decoding runs on one worker thread (PyTorch already uses every core for one batch). A request's
inputs are decoded in chunks of ``Limits.chunk`` and every chunk queues anew, so concurrent users
take turns on the CPU instead of waiting for one large request to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fontTools.ttLib import TTFont
from pydantic import Field

from seqlab.config import Config, CsvCorpus, ModelConfig, TransformerConfig
from seqlab.decoding import DecodeOptions
from seqlab.fonts import font_path
from seqlab.rundir import RunDir
from seqlab.translator import Translation, Translator, load

WEB = resources.files("seqlab") / "web"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_input_chars: int = 1000
    max_inputs: int = 64
    max_beam: int = 16  # also the most samples per input
    max_output_length: int = 256
    timeout_s: float = 30.0
    chunk: int = 8  # inputs decoded at a time, between which other requests get their turn


class TranslateRequest(DecodeOptions):
    """The inputs, whether to return attention, and the decoding options of ``DecodeOptions``."""

    inputs: list[str] = Field(min_length=1, description="texts to translate (or, for a chatbot, to answer)")
    attention: bool = Field(False, description="also return each output's cross-attention weights")


class RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_app(run_dir: str | Path, limits: Limits = Limits()) -> FastAPI:
    """The app serving the model in ``run_dir``."""
    run_dir = Path(run_dir)
    translator = load(run_dir)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-decode")
    info = _info(run_dir, translator, limits)

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

    @app.post("/api/translate")
    async def api_translate(request: TranslateRequest) -> dict[str, Any]:
        options = _check(request, limits)
        start = time.perf_counter()
        try:
            outputs = await asyncio.wait_for(_decode(worker, translator, request, options, limits), limits.timeout_s)
        except asyncio.TimeoutError:  # the builtin TimeoutError only from Python 3.11 on
            raise RequestError(503, f"the request took longer than {limits.timeout_s:g} s; send fewer or "
                                    "shorter inputs, or a smaller beam") from None
        return {"outputs": outputs, "seconds": round(time.perf_counter() - start, 4)}

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


def _check(request: TranslateRequest, limits: Limits) -> DecodeOptions:
    """The request's DecodeOptions, once the request is within ``limits``."""
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
    return DecodeOptions(**request.model_dump(exclude={"inputs", "attention"}))


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
    has = model.attention != "none"
    return {"layers": int(has), "heads": int(has)}


def _explain(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's validation errors in one line: ``beam: Input should be greater than or equal to 1; ...``."""
    parts = []
    for e in errors:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
