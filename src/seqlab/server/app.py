"""What every kind of run serves: the page and its files (with the Korean font), ``/healthz``, ``/api/info``,
the errors as JSON, the limits of a request (its body's size first, at the ASGI layer), and the worker thread
with its bounded queue and per-request deadline."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import math
import time
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
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seqlab.config import Config
from seqlab.decoding import Cancelled, DecodeOptions
from seqlab.fonts import font_path

WEB = resources.files("seqlab") / "web"
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """What one request may ask for, and how much work the server takes on at a time."""

    max_body_bytes: int = 1 << 20  # a request's JSON; a larger one is refused before it is read
    max_input_chars: int = 1000  # also the longest word a vectors run looks up
    max_context_chars: int = 20000  # a span extractor's context
    max_inputs: int = 64
    max_beam: int = 16  # also the most samples per input
    max_output_length: int = 256
    max_top: int = 100  # word vectors: the most neighbours or analogy answers per request
    max_queue: int = 64  # requests in work at a time (running or waiting for the worker); one more is a 503
    timeout_s: float = 30.0  # from admission; past it the request is a 503 and its decoding stops at its next step
    chunk: int = 8  # inputs decoded (or classified) at a time, between which other requests get their turn


class RequestError(Exception):
    """A request the server refuses: its status, a one-line message naming what is wrong, extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


class Worker:
    """The one thread that decodes, classifies and looks up (PyTorch already uses every core for one batch),
    with a bounded queue and a deadline for every request.

    ``serve`` admits a request while fewer than ``limits.max_queue`` are in work and refuses one more with a 503
    and ``Retry-After`` (the recent requests' mean time in work, the wait a new one would face). An admitted
    request has ``limits.timeout_s``; past it, it is a 503, its chunks not yet started are dropped, and the one
    on the thread stops at its next decoding step (the ``stop`` it is given)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqlab-worker")  # a thread on first use
        self.in_work = 0
        self.mean_seconds = 0.0  # an exponential average of the requests' time in work

    async def serve(self, work: Callable[[Callable[[], bool]], Awaitable[T]], advice: str) -> T:
        """``work(stop)``'s result, ``stop`` turning true at the request's deadline; a RequestError 503 when the
        queue is full or the deadline passes (``advice``: what to ask for instead)."""
        if self.in_work >= self.limits.max_queue:
            wait = max(1, math.ceil(self.mean_seconds))
            raise RequestError(503, f"the server is busy ({self.in_work} requests in work); retry in {wait} s",
                               headers={"Retry-After": str(wait)})
        self.in_work += 1
        start = time.monotonic()
        deadline = start + self.limits.timeout_s
        try:
            return await asyncio.wait_for(work(lambda: time.monotonic() > deadline), self.limits.timeout_s)
        except (asyncio.TimeoutError, Cancelled):  # the builtin TimeoutError only from Python 3.11 on
            raise RequestError(503, f"the request took longer than {self.limits.timeout_s:g} s; {advice}") from None
        finally:
            self.in_work -= 1
            self.mean_seconds += 0.2 * (time.monotonic() - start - self.mean_seconds)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on the worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def in_turns(self, inputs: Sequence[str], work: Callable[[Sequence[str]], list[T]]) -> list[T]:
        """``work`` over ``inputs`` in chunks of ``limits.chunk``, each queued anew on the worker thread, so that
        concurrent requests take turns on the CPU."""
        out: list[T] = []
        for start in range(0, len(inputs), self.limits.chunk):
            out += await self.run(work, inputs[start : start + self.limits.chunk])
        return out

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is a 413 before the app reads any of it, by its
    ``Content-Length`` or, for a body streamed without one, once the bytes received pass the limit (at most
    ``limit`` bytes are held)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:  # the HTTP server delivers no more than the declared length
            if not declared.isdigit() or int(declared) > self.limit:
                return await self._refuse(scope, receive, send, declared.decode("latin-1"))
            return await self.app(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            body += message.get("body", b"")
            if len(body) > self.limit:
                return await self._refuse(scope, receive, send, f"over {self.limit}")
            if not message.get("more_body", False):
                break
        return await self.app(scope, _replay(bytes(body), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: str) -> None:
        response = JSONResponse({"error": f"the request body has {size} bytes; at most {self.limit}"},
                                status_code=413, headers={"Connection": "close"})
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the app ``body`` whole, then what the client sends next (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def public_config(config: Config) -> dict[str, Any]:
    """A run's configuration as ``/api/info`` shows it: without the paths of its data and of the run it started
    from (the server's file system is nobody's business)."""
    return config.model_dump(mode="json", exclude={"data": {"corpus", "train", "valid", "test"},
                                                   "model": {"init_from"}})


def make_app(info: dict[str, Any], worker: Worker) -> FastAPI:
    """What every kind of run serves: the page, its files, the error handling, ``/healthz`` and ``/api/info``
    (the kind's ``info``, after seqlab's version).
    No ``/docs``: its pages load their scripts from a CDN, and the page promises nothing comes from the internet
    (``/openapi.json`` describes the API)."""
    from seqlab import __version__, server  # the package's docstring describes the app (imported by now)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.shutdown()

    description = (server.__doc__ or "").split("\n\n")[0]
    info = {"seqlab": __version__} | info
    app = FastAPI(title="seqlab", version=__version__, description=description, lifespan=lifespan,
                  docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, limit=worker.limits.max_body_bytes)

    @app.exception_handler(RequestError)
    async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=exc.headers)

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


def check_inputs(inputs: Sequence[str], limits: Limits) -> None:
    """Raise a RequestError unless a request's texts (``inputs``) are within ``limits``."""
    if len(inputs) > limits.max_inputs:
        raise RequestError(413, f"{len(inputs)} inputs; at most {limits.max_inputs} per request")
    for i, text in enumerate(inputs):
        if len(text) > limits.max_input_chars:
            raise RequestError(413, f"inputs[{i}] has {len(text)} characters; at most {limits.max_input_chars}")


def check_decoding(request: DecodeOptions, limits: Limits,
                   decoding: Callable[[DecodeOptions], DecodeOptions]) -> DecodeOptions:
    """The request's DecodeOptions, what it leaves open filled with the run's search (``decoding``:
    ``Predictor.decoding``), once their beam, samples and output length are within ``limits``."""
    try:
        options = decoding(DecodeOptions(**request.model_dump(include=set(DecodeOptions.model_fields),
                                                              exclude_unset=True)))
    except ValueError as exc:  # nbest above the run's beam (DecodeOptions.or_run_search)
        raise RequestError(422, str(exc)) from None
    if options.beam > limits.max_beam:
        raise RequestError(422, f"beam {options.beam}; at most {limits.max_beam}")
    if options.num_samples > limits.max_beam:
        raise RequestError(422, f"num_samples {options.num_samples}; at most {limits.max_beam}")
    if (options.max_length or 0) > limits.max_output_length:
        raise RequestError(422, f"max_length {options.max_length}; at most {limits.max_output_length}")
    return options


def _explain(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's validation errors in one line: ``beam: Input should be greater than or equal to 1; ...``."""
    parts = []
    for e in errors:
        where = ".".join(_printable(str(x)) for x in e.get("loc", ()) if x != "body")
        message = e["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _printable(key: str) -> str:
    """A field's name as an error shows it: quoted and escaped (``'a\\nb'``) unless every character prints."""
    return key if key.isprintable() else repr(key)
