"""``seqlab serve``: one page and a JSON API to use a trained run from a browser.

A seq2seq run (translation, chatbot):

    POST /api/translate    {"inputs": [...], "beam": 5, ..., "attention": true} -> {"outputs": [{"input",
                           "truncated", "hypotheses": [{"text", "score", "log_prob", "tokens", "attention"}, ...]},
                           ...], "seconds"}

A word-vector run (``seqlab vectors train``):

    POST /api/similar      {"word": "hund", "top": 10} -> {"word": "hund", "neighbours": [{"word", "cosine"}, ...]}
    POST /api/analogy      {"a": "man", "b": "king", "c": "woman", "top": 5} -> a : b = c : ?, {"answers": [...]}

A language-model run (``seqlab train`` with ``model.type: lm``):

    POST /api/generate     {"start": "a dog", "max_length": 20, "beam": 5, "nbest": 3, ...} -> {"outputs": [{"text",
                           "continuation", "log_prob", "ended", "tokens": [{"token", "probability"}, ...]}, ...]}

A classifier run (``seqlab train`` with ``model.type: encoder``):

    POST /api/classify     {"inputs": [...], "attention": true} -> {"outputs": [{"input", "label", "probabilities":
                           {label: p, ...}, "tokens": [...], "truncated", "attention": [layers][heads][tokens]},
                           ...], "seconds"}

A span-extraction run (``seqlab train`` with ``model.type: span``):

    POST /api/answer       {"inputs": [questions], "context": "..."} -> {"outputs": [{"input", "answer", "start", "end",
                           "probability", "tokens": [...], "start_probabilities": [...], "end_probabilities": [...]},
                           ...], "seconds"}

Every kind:

    GET  /                 the page (seqlab/web/: plain HTML, CSS and JS, and its own Korean font)
    GET  /api/info         the run: its kind ("translate", "chat", "lm", "vectors", "classify" or "answer"), what it
                           is, the limits
    GET  /healthz          {"status": "ok"}
    GET  /openapi.json     the API's schema (no /docs: Swagger's pages load their scripts from a CDN)

A run serves only its own kind's routes: a vectors run has no ``/api/translate`` (404) and loads no model; a
language model has ``/api/generate`` and neither ``/api/translate`` nor the vectors' routes; a classifier has
``/api/classify`` alone, a span extractor ``/api/answer`` alone. The decoding options of ``/api/translate`` and
``/api/generate`` are those of :class:`seqlab.decoding.DecodeOptions`, the same as on the command line; a request
that sets no ``beam`` or ``length_penalty`` gets the run's own (its config's ``eval.beam`` and
``eval.length_penalty``, given by ``/api/info`` as ``search``), whatever default the schema shows. A
continuation's ``tokens`` end with ``<eos>`` when it ended there; each token's probability is given the start and
the tokens before it, and their logs sum to ``log_prob``. A classification's ``tokens`` are the model's input,
``<sos>`` and ``<eos>`` included; its ``attention`` (only when asked) is, for each layer and head, the attention
row of the pooled position over those tokens (pooling ``cls``: the ``<sos>`` row; ``mean``: the mean of the rows),
each summing to 1. An answer's ``start`` and ``end`` are characters of the context as sent (``context[start:end]``
is the answer); ``tokens`` are the model's input (``<sos>`` question ``<eos>`` context ``<eos>``), and each
token's probabilities of starting and ending the answer are 0 outside the context. An empty or whitespace-only
input to ``/api/translate`` has one empty output, to ``/api/classify`` an empty label and no probabilities; an
input longer than the model reads is cut to its first tokens and marked ``"truncated": true``.

Requests are checked against :class:`Limits` before any work: the body's size at the ASGI layer (413), then
the number of inputs and their lengths, the context's length, beam size and samples, output length and
neighbours; the decoding options' own ranges (seed, temperature 0 or at least 0.01, no NaN or infinity) are
:class:`seqlab.decoding.DecodeOptions`'. Whatever is wrong comes back as a 4xx with ``{"error": "..."}`` on one
line naming the field, a word not in the vocabulary as a 404 naming it.

Decoding, classifying and look-ups run on one worker thread (PyTorch already uses every core for one batch),
:class:`Worker`. A request's inputs are decoded in chunks of ``Limits.chunk`` and every chunk queues anew, so
concurrent users take turns on the CPU instead of waiting for one large request to finish. At most
``Limits.max_queue`` requests are in work at a time; one more is a 503 with ``Retry-After``. A request still in
work after ``Limits.timeout_s`` is a 503; its decoding stops at the next step.

The modules: ``app`` (what every kind shares: the limits, the worker, the errors, the page), ``translate``, ``lm``,
``vectors``, ``classify`` and ``answer`` (each kind's routes and ``/api/info``, which the kind's ``Kind.serve``
puts together: ``seqlab.registry``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from seqlab.registry import InferenceOptions, kind_of_run
from seqlab.server.app import Limits, RequestError, Worker, make_app

__all__ = ["Limits", "RequestError", "create_app"]


def create_app(run_dir: str | Path, limits: Limits = Limits(),  # noqa: B008 (frozen)
               how: InferenceOptions = InferenceOptions()) -> FastAPI:  # noqa: B008 (frozen)
    """The app serving the run in ``run_dir`` with its kind's routes and ``/api/info`` (``Kind.serve``), run as
    ``how`` asks. ``how.engine`` ``ct2`` or ``onnx``: ``run_dir`` is a ``seqlab export --to ctranslate2`` (no
    attention) or ``--to onnx`` directory, decoded by CTranslate2 or ONNX Runtime."""
    run_dir = Path(run_dir)
    info, add_routes = kind_of_run(run_dir).serve(run_dir, limits, how)
    app = make_app(info, worker := Worker(limits))
    add_routes(app, worker)
    return app
