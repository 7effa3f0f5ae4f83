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
``/api/generate`` are those of :class:`seqlab.decoding.DecodeOptions`, the same as on the command line. A
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
``vectors``, ``classify`` and ``answer`` (each kind's routes and ``/api/info``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from seqlab.export import Engine, load_translator
from seqlab.predictors.answerer import load as load_answerer
from seqlab.predictors.classifier import load as load_classifier
from seqlab.predictors.language_model import load as load_lm
from seqlab.rundir import RunDir
from seqlab.server.answer import _add_answer_routes, _answer_info
from seqlab.server.app import Limits, RequestError, Worker, _app
from seqlab.server.classify import _add_classify_routes, _classify_info
from seqlab.server.lm import _add_lm_routes, _lm_info
from seqlab.server.translate import _add_translate_routes, _info
from seqlab.server.vectors import _add_vectors_routes, _vectors_info
from seqlab.vectors import load as load_vectors

__all__ = ["Limits", "RequestError", "create_app"]


def create_app(run_dir: str | Path, limits: Limits = Limits(),  # noqa: B008 (frozen)
               engine: Engine = "torch") -> FastAPI:
    """The app serving the run in ``run_dir``: a seq2seq model, a language model, a classifier, a span extractor or, for a
    ``seqlab vectors train`` run, its word vectors; each kind gets its own routes. ``engine: ct2`` or ``onnx``:
    ``run_dir`` is a ``seqlab export --to ctranslate2`` (no attention) or ``--to onnx`` directory, decoded by
    CTranslate2 or ONNX Runtime."""
    run_dir = Path(run_dir)
    worker = Worker(limits)
    if RunDir(run_dir).is_vectors():
        vectors = load_vectors(run_dir)
        app = _app(_vectors_info(run_dir, vectors, limits), worker)
        _add_vectors_routes(app, worker, vectors)
    elif (config := RunDir(run_dir).config()).is_language_model:
        lm = load_lm(run_dir)
        app = _app(_lm_info(run_dir, lm, limits), worker)
        _add_lm_routes(app, worker, lm)
    elif config.is_classifier:
        classifier = load_classifier(run_dir)
        app = _app(_classify_info(run_dir, classifier, limits), worker)
        _add_classify_routes(app, worker, classifier)
    elif config.is_span:
        answerer = load_answerer(run_dir)
        app = _app(_answer_info(run_dir, answerer, limits), worker)
        _add_answer_routes(app, worker, answerer)
    else:
        translator = load_translator(run_dir, engine)
        app = _app(_info(run_dir, translator, limits), worker)
        _add_translate_routes(app, worker, translator)
    return app
