"""Questions about contexts in SQuAD's JSON (v1.1; seed 002 §10.1's question answering, S102–S103):
``{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question", "answers": [{"text",
"answer_start"}]}]}]}]}``. Every answer must be the text found at its ``answer_start`` in the context. A
malformed entry is reported by its file and its place in the JSON (``data[3].paragraphs[0].qas[2]``); with
``data.skip_bad_lines`` a bad question is skipped and counted instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqlab.data.corpus import BadLines, DataError, open_file

Answer = tuple[str, int]  # the answer's text, where it starts in the context (characters)


@dataclass(frozen=True)
class Question:
    """One question about one context and its reference answers (the first one is what training learns)."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]


def _field(node: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}.{key}: expected {'a string' if kind is str else 'a number' if kind is int else 'a list'}")
    return value


def _question(qa: Any, context: str, where: str) -> Question:
    question = _field(qa, "question", str, where).strip()
    if not question:
        raise ValueError(f"{where}.question: empty")
    answers = []
    for k, answer in enumerate(_field(qa, "answers", list, where)):
        text = _field(answer, "text", str, f"{where}.answers[{k}]")
        start = _field(answer, "answer_start", int, f"{where}.answers[{k}]")
        if not text.strip() or start < 0 or context[start:start + len(text)] != text:  # -3 would count from the end
            raise ValueError(f"{where}.answers[{k}]: {text!r} is not the context's text at answer_start {start}")
        answers.append((text, start))
    if not answers:
        raise ValueError(f"{where}.answers: no answer (SQuAD v2's unanswerable questions are not read)")
    return Question(str(qa.get("id", where)), question, context, tuple(answers))


def read_squad(path: Path, bad: BadLines) -> list[Question]:
    """All questions of one SQuAD file, in file order."""
    try:
        with open_file(path) as stream:
            raw = stream.read()
    except (OSError, EOFError) as exc:  # unreadable, a directory, a broken or truncated gzip
        raise DataError(f"{path}: cannot read: {exc}") from None
    try:
        root = json.loads(raw.decode("utf-8-sig"))  # a BOM is tolerated, as by the line readers
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deep, a number of > 4,300 digits
        raise DataError(f"{path}: not SQuAD JSON: {exc}") from None
    questions = []
    try:
        articles = _field(root, "data", list, "")
    except ValueError as exc:
        raise DataError(f"{path}: {str(exc).lstrip('.')}") from None
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"{path}: data[{a}].paragraphs: expected a list")
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            try:
                context = _field(paragraph, "context", str, where)
                qas = _field(paragraph, "qas", list, where)
            except ValueError as exc:
                raise DataError(f"{path}: {exc}") from None
            for q, qa in enumerate(qas):
                try:
                    questions.append(_question(qa, context, f"{where}.qas[{q}]"))
                except ValueError as exc:
                    bad.report(f"{path}: {exc}")
    return questions
