"""What every kind of run serves: the page and its files (with the Korean font), ``/healthz``, ``/api/info``,
the errors as JSON, the limits of a request and its timeout."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fontTools.ttLib import TTFont
from starlette.exceptions import HTTPException

from seqlab.decoding import DecodeOptions
from seqlab.fonts import font_path

WEB = resources.files("seqlab") / "web"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_input_chars: int = 1000  # also the longest word a vectors run looks up
    max_context_chars: int = 20000  # a span extractor's context
    max_inputs: int = 64
    max_beam: int = 16  # also the most samples per input
    max_output_length: int = 256
    max_top: int = 100  # word vectors: the most neighbours or analogy answers per request
    timeout_s: float = 30.0
    chunk: int = 8  # inputs decoded (or classified) at a time, between which other requests get their turn


class RequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _app(info: dict[str, Any], worker: ThreadPoolExecutor) -> FastAPI:
    """What every kind of run serves: the page, its files, the error handling, ``/healthz`` and ``/api/info``."""
    from seqlab import server  # the package's docstring describes the app (imported by now)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.shutdown(wait=False, cancel_futures=True)

    description = (server.__doc__ or "").split("\n\n")[0]
    app = FastAPI(title="seqlab", version=info["seqlab"], description=description, lifespan=lifespan)

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


async def _in_turns(worker: ThreadPoolExecutor, inputs: Sequence[str], limits: Limits,
                    work: Callable[[Sequence[str]], list[T]]) -> list[T]:
    """``work`` over ``inputs`` in chunks of ``limits.chunk``, each queued anew on the worker thread, so that
    concurrent requests take turns on the CPU."""
    loop = asyncio.get_running_loop()
    out: list[T] = []
    for start in range(0, len(inputs), limits.chunk):
        out += await loop.run_in_executor(worker, work, inputs[start : start + limits.chunk])
    return out


def _check_inputs(inputs: Sequence[str], limits: Limits) -> None:
    """Raise a RequestError unless a request's texts (``inputs``) are within ``limits``."""
    if len(inputs) > limits.max_inputs:
        raise RequestError(413, f"{len(inputs)} inputs; at most {limits.max_inputs} per request")
    for i, text in enumerate(inputs):
        if len(text) > limits.max_input_chars:
            raise RequestError(413, f"inputs[{i}] has {len(text)} characters; at most {limits.max_input_chars}")


def _check_decoding(request: DecodeOptions, limits: Limits) -> DecodeOptions:
    """The request's DecodeOptions, once its beam, samples and output length are within ``limits``."""
    if request.beam > limits.max_beam:
        raise RequestError(422, f"beam {request.beam}; at most {limits.max_beam}")
    if request.num_samples > limits.max_beam:
        raise RequestError(422, f"num_samples {request.num_samples}; at most {limits.max_beam}")
    if (request.max_length or 0) > limits.max_output_length:
        raise RequestError(422, f"max_length {request.max_length}; at most {limits.max_output_length}")
    return DecodeOptions(**request.model_dump(include=set(DecodeOptions.model_fields)))


def _explain(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's validation errors in one line: ``beam: Input should be greater than or equal to 1; ...``."""
    parts = []
    for e in errors:
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
