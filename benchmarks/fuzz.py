"""Fuzzing what seqlab reads from its users: corpus files, configs and requests to its server, with Hypothesis.

    python benchmarks/fuzz.py [--only readers|configs|api] [--examples N] [--seed 0] [--json FILE]

Sections (``--only`` picks some; all by default):

* ``readers``: at least 10,000 generated lines for each reader of seqlab.data (the book's ``question_answer``
  files, plain and gzipped; TSV; aligned source/target files; CSV with quoting and quoted newlines; JSON Lines
  with other fields and wrong types among them; SQuAD JSON,
  about 1,000 documents; ``lines`` files through ``read_sentences``, which also reads both sides of a pair
  corpus): valid lines mixed with empty and blank ones, lines without the separator, any Unicode (no
  surrogates), NULs, CR, CRLF and LF endings, BOMs, raw bytes that are not UTF-8, lines of 50,000 to 300,000
  characters, truncated gzip. Each file is read with ``skip_bad_lines`` off and on. The pairs that come back must
  be those the format's documented rules give (so with ``skip_bad_lines`` the count of the valid lines written);
  else the error must be a DataError whose one-line message starts with ``FILE:LINE:`` (``FILE:`` for what
  concerns the whole file, ``FILE: data[i].paragraphs[j]...`` in SQuAD) at the place the rules name.
* ``configs``: 1,000 YAML configs made from configs/**/*.yaml by mutations (wrong types, unknown keys, negative
  numbers, missing sections and keys, 2**70, NaN and infinity, values nested 30 to 80 deep), by garbage (any
  text, bytes that are not UTF-8, YAML nested thousands deep, integers of thousands of digits, cut documents,
  YAML tags) and with ``--set`` overrides, through ``load_config`` (the schema ``seqlab train`` or ``seqlab
  vectors train`` reads them with; seqlab has no dry run that goes further without training). The error must be
  a ConfigError of one line naming the file (or the ``--set``), or ``invalid config FILE:`` followed by one
  ``  key: problem`` line per problem. A config that loads must come back equal from the run directory's
  ``config.yaml`` (``dump_config``, then the same keys compared as ``--resume`` compares them).

* ``api``: 1,000 request bodies POSTed to each route that answers a model (``/api/translate``, ``/api/classify``,
  ``/api/answer``, ``/api/generate``, ``/api/similar``, ``/api/analogy``), each on the server of a small run of
  its kind trained here (``create_app`` through FastAPI's test client: the body limit, the JSON parser, the
  checks, the worker thread): a valid request with fields replaced by any JSON value (integers past 2**64,
  1e-300, any Unicode, nesting), left out or added; any text in its text fields (empty, blank, too long, special
  tokens) and any list of texts as inputs, the rest left valid; any JSON document; NaN and Infinity literals;
  bytes that are not JSON or not UTF-8; a body over the size limit. The answer must be a 200 that answers the
  request (one output per input, in order; at most ``top`` words), or a 4xx or 503 with a one-line
  ``{"error": ...}``.

A crash is any other exception, an error message on several lines, or pairs other than the rules give. Each
section prints the examples tried, the crashes grouped by kind, and the first few failing inputs as Hypothesis
shrinks them;
every number goes to ``--json`` (default: seqlab-fuzz.json in the system's temporary directory). Exit 1 on any
crash. ``--examples N``: N examples per reader, N configs and N requests per route, for a quick run.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import logging
import random
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning

from seqlab.config import Config, ConfigError, changed_keys, dump_config, load_config, parse_config
from seqlab.corpora import AlignedCorpus, BookCorpus, CsvCorpus, JsonlCorpus, LinesCorpus, TsvCorpus
from seqlab.data.corpus import BadLines, DataError, read_corpus, read_sentences
from seqlab.data.squad import Question, read_squad
from seqlab.vectors.config import VectorsConfig

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
BOM = b"\xef\xbb\xbf"
LINES_PER_READER = 10_000
CONFIGS = 1_000
ROUND = 200  # examples per Hypothesis run; a reader runs rounds (seed, seed + 1, ...) until it has its lines
SHOWN = 3  # shrunk failing inputs shown per property
# What --resume compares (train/trainer.py's RESUMABLE_SECTIONS; vectors/run.py's for word vectors).
RESUMED: dict[type, tuple[str, ...]] = {Config: ("seed", "data", "tokens", "model"), VectorsConfig: ("data", "words", "train")}

class Crash(Exception):
    """seqlab got an input wrong: pairs other than its rules give, or an error that is not its one-line form."""


@dataclass
class Err:
    """The rules say: a DataError whose message matches ``pattern`` (re.match)."""

    pattern: str


@dataclass
class Outcome:
    """One property's run: examples tried, lines generated, crashes by kind, shrunk failing inputs."""

    section: str
    name: str
    examples: int = 0
    lines: int = 0
    crashes: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)  # what the reads gave, e.g. "error/items": skip off/on
    shrunk: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        lines = f", {self.lines:,} lines" if self.lines else ""
        results = ", ".join(f"{k} {v}" for k, v in sorted(self.results.items(), key=lambda item: -item[1]))
        return (f"{self.section}/{self.name}: {self.examples:,} examples{lines}, {self.crashes} crashes "
                f"({self.seconds:.0f} s; results: {results})")


# --- running properties -------------------------------------------------------------------------------------------


def kind_of(exc: BaseException) -> str:
    """A crash's kind: its type and first line, numbers and temporary paths masked, so that one bug is one kind."""
    text = str(exc).split("\n")[0][:160]
    text = re.sub(r"/\S*?seqlab-fuzz\S*?/[^\s:'\"]*", "FILE", text)
    text = re.sub(r"-?\d+", "N", text)
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, Crash) else text


def _settings(examples: int, phases: tuple[Phase, ...], multiple: bool = False) -> settings:
    return settings(max_examples=examples, deadline=None, database=None, phases=phases,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=multiple)


Check = Callable[[Any], tuple[int, str]]  # a case -> (lines generated, what the reads gave); raises on a crash


def explore(outcome: Outcome, strategy: st.SearchStrategy[Any], check: Check, examples: int, seed: int) -> None:
    """Run ``check`` on ``examples`` generated cases (no shrinking): count examples, lines and results (what
    ``check`` returns) and crashes (whatever it raises)."""

    @_settings(examples, (Phase.generate,))
    @given(strategy)
    def count(case: Any) -> None:
        outcome.examples += 1
        try:
            lines, result = check(case)
        except Exception as exc:
            outcome.crashes += 1
            kind = kind_of(exc)
            outcome.kinds[kind] = outcome.kinds.get(kind, 0) + 1
        else:
            outcome.lines += lines
            outcome.results[result] = outcome.results.get(result, 0) + 1

    hypothesis_seed(seed)(count)()


def shrink(strategy: st.SearchStrategy[Any], check: Check, examples: int, seed: int) -> list[str]:
    """The failing inputs Hypothesis finds again with the same seed and shrinks (one per distinct bug), each
    with its error."""

    @_settings(examples, (Phase.generate, Phase.shrink), multiple=True)
    @given(strategy)
    def fails(case: Any) -> None:
        check(case)

    try:
        hypothesis_seed(seed)(fails)()
    except Exception as error:  # an ExceptionGroup of the distinct failures, or the one
        errors = list(getattr(error, "exceptions", [error]))
        return [_shown(e) for e in errors[:SHOWN]]
    return []


def _shown(error: BaseException) -> str:
    notes = " ".join(getattr(error, "__notes__", []))
    example = re.sub(r"\s+", " ", notes.replace("Failing test case:", "").replace("Falsifying example:", "")).strip()
    if len(example) > 700:  # a config's text is long; its --set overrides come last
        example = f"{example[:340]} [...] {example[-340:]}"
    return f"{kind_of(error)}  <-  {example}"


@contextlib.contextmanager
def hushed() -> Iterator[None]:
    """No warning for each file with skipped lines (seqlab's logger), none for the repr of a 300,000-character line
    (Hypothesis's); both as they were after the block."""
    logger = logging.getLogger("seqlab")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=HypothesisWarning)
            yield
    finally:
        logger.setLevel(level)


def run_property(section: str, name: str, strategy: st.SearchStrategy[Any], check: Check, examples: int, seed: int,
                 lines: int = 0) -> Outcome:
    """``examples`` cases (or, with ``lines``, rounds of ROUND cases until that many lines were generated), then
    the failing ones shrunk."""
    outcome, started, round_ = Outcome(section, name), time.perf_counter(), 0
    with hushed():
        while round_ == 0 or outcome.lines < lines:
            explore(outcome, strategy, check, min(examples, ROUND) if lines else examples, seed + round_)
            round_ += 1
        if outcome.crashes:
            outcome.shrunk = shrink(strategy, check, min(examples, ROUND) if lines else examples, seed)
    outcome.seconds = time.perf_counter() - started
    return outcome


# --- what the readers' rules give ----------------------------------------------------------------------------------


def physical_lines(content: bytes, keep_ends: bool = False) -> list[bytes]:
    """A file's lines as the readers iterate them: cut after each b"\\n"; without ``keep_ends``, the b"\\n" and
    then one b"\\r" removed."""
    lines = re.findall(rb"[^\n]*\n|[^\n]+$", content)
    return lines if keep_ends else [line.removesuffix(b"\n").removesuffix(b"\r") for line in lines]


class Undecodable(Exception):
    """Raised by ``decoded`` where a line is not UTF-8; ``err`` is the error the rules give there."""

    def __init__(self, err: Err) -> None:
        self.err = err


def decoded(content: bytes, path: Path, keep_ends: bool = False) -> Iterator[str]:
    """The lines as text, the BOM of line 1 dropped, one by one as the readers decode them; Undecodable at the
    first line that is not UTF-8."""
    for n, raw in enumerate(physical_lines(content, keep_ends), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Undecodable(Err(re.escape(f"{path}:{n}: not valid UTF-8"))) from None
        yield text.removeprefix("\ufeff") if n == 1 else text


def line_error(path: Path, n: int) -> Err:
    return Err(re.escape(f"{path}:{n}: "))


def book_pair(text: str) -> tuple[str, str] | None:
    """The book's rule: split at the first '_', both sides stripped."""
    idx = text.find("_")
    return None if idx < 0 else (text[:idx].strip(), text[idx + 1:].strip())


def tsv_pair(text: str) -> tuple[str, str] | None:
    fields = text.split("\t")
    return (fields[0].strip(), fields[1].strip()) if len(fields) == 2 else None


def jsonl_pair(text: str) -> tuple[str, str] | None:
    """JSON Lines' rule: a JSON object whose "source" and "target" are strings, both stripped."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("source", "target")):
        return None
    return record["source"].strip(), record["target"].strip()


def expect_pairs(content: bytes, path: Path, skip: bool, split: Callable[[str], tuple[str, str] | None]) -> list | Err:
    """One pair a line, read line by line: ``split`` gives a line's two stripped sides, or None for a bad line;
    the first bad line (without ``skip``) or line that is not UTF-8 is the error."""
    pairs = []
    try:
        for n, text in enumerate(decoded(content, path), 1):
            pair = split(text)
            if pair is None or not pair[0] or not pair[1]:
                if not skip:
                    return line_error(path, n)
                continue
            pairs.append(pair)
    except Undecodable as bad:
        return bad.err
    return pairs or Err(re.escape(f"{path}: no pairs"))


def expect_aligned(source: bytes, target: bytes, paths: tuple[Path, Path], skip: bool) -> list | Err:
    """Line i of each file is a pair (each file decoded whole, the source first); both files must have as many
    lines; an empty side names its file."""
    try:
        sources, targets = list(decoded(source, paths[0])), list(decoded(target, paths[1]))
    except Undecodable as bad:
        return bad.err
    if len(sources) != len(targets):
        return Err(re.escape(f"{paths[0]}: {len(sources)} lines, but {paths[1]}: {len(targets)} lines"))
    pairs = []
    for n, (s, t) in enumerate(zip(sources, targets), 1):
        s, t = s.strip(), t.strip()
        if not s or not t:
            if not skip:
                return line_error(paths[0] if not s else paths[1], n)
            continue
        pairs.append((s, t))
    return pairs or Err(re.escape(f"{paths[0]}: no pairs"))


def expect_csv(content: bytes, path: Path, skip: bool, columns: tuple[str, str]) -> list | Err:
    """Python's csv over the lines as they are decoded (a record may span lines): a header row, then records of
    as many fields, each reported at its first line."""
    reader = csv.reader(decoded(content, path, keep_ends=True))
    try:
        header = next(reader, None)
        if header is None:
            return Err(re.escape(f"{path}: empty file"))
        names = [name.strip() for name in header]
        if any(c not in names for c in columns):
            return Err(re.escape(f"{path}:1: no column"))
        s, t, pairs, start = names.index(columns[0]), names.index(columns[1]), [], reader.line_num + 1
        for row in reader:
            if len(row) != len(names) or not row[s].strip() or not row[t].strip():
                if not skip:
                    return line_error(path, start)
            else:
                pairs.append((row[s].strip(), row[t].strip()))
            start = reader.line_num + 1
    except Undecodable as bad:
        return bad.err
    except csv.Error:
        return Err(re.escape(f"{path}:") + r"\d+: not valid CSV: ")
    return pairs or Err(re.escape(f"{path}: no pairs"))


def expect_sentences(content: bytes, path: Path) -> list | Err:
    """Each non-blank line, stripped (the file decoded whole)."""
    try:
        texts = list(decoded(content, path))
    except Undecodable as bad:
        return bad.err
    return [s for text in texts if (s := text.strip())] or Err(re.escape(f"{path}: no sentences"))


# --- checking a reader against the rules ---------------------------------------------------------------------------


def one_line(message: str) -> None:
    if "\n" in message or "\r" in message or "Traceback" in message:
        raise Crash(f"an error on several lines: {message[:200]!r}")


def verify(read: Callable[[], Any], expected: Any) -> str:
    """``read()`` gives the ``expected`` items, or the DataError ``expected`` (an Err) describes; returns which
    (``items`` or ``error``)."""
    try:
        got = read()
    except DataError as exc:
        message = str(exc)
        one_line(message)
        if not isinstance(expected, Err):
            raise Crash(f"DataError where the rules give {len(expected)} items: {message[:200]}") from None
        if not re.match(expected.pattern, message):
            raise Crash(f"the error {message[:200]!r} does not match the rules' {expected.pattern[:120]!r}") from None
        return "error"
    if isinstance(expected, Err):
        raise Crash(f"{len(got)} items where the rules give an error matching {expected.pattern[:120]!r}")
    if got != expected:
        first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        raise Crash(f"{len(got)} items where the rules give {len(expected)}; the first difference at item {first}")
    return "items"


# --- generated files -----------------------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=40)  # any Unicode but surrogates
BLANK = st.sampled_from(["", " ", "\t", "   \t ", "\r", "\x0b\x0c", "\u3000", "\xa0", "\u2028", "\x1c"])


def side(forbidden: str) -> st.SearchStrategy[str]:
    """One side of a valid pair: not blank, without ``forbidden`` characters or line breaks, maybe padded."""
    text = st.text(st.characters(codec="utf-8", exclude_characters=forbidden + "\n\r"), min_size=1, max_size=30)
    padded = st.tuples(st.sampled_from(["", " ", "   "]), text, st.sampled_from(["", " ", "\t"]))
    return padded.map("".join).filter(str.strip)


def book_samples() -> list[str]:
    """Lines of the book's date.txt (../shared/data/dlfs2), where it is there."""
    path = SHARED / "dlfs2" / "date.txt"
    return path.read_text(encoding="utf-8").splitlines()[:500] if path.exists() else ["september 27, 1994  _1994-09-27"]


def line_kinds(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A line of a file: mostly valid, else empty or blank, without the separator, any Unicode, with a NUL, a
    valid line with more after it."""
    return st.one_of(valid, valid, valid, valid, BLANK, st.text(st.characters(codec="utf-8", categories=("L", "N")),
                     min_size=1, max_size=20), TEXT, valid.map(lambda s: s.replace(" ", "\x00", 1) + "\x00"),
                     st.tuples(valid, TEXT).map("".join), valid.map(lambda s: "\ufeff" + s))


@st.composite
def text_file(draw: st.DrawFn, valid: st.SearchStrategy[str], max_lines: int = 40) -> bytes:
    """A file of generated lines with LF or CRLF endings (maybe none at the end), maybe a BOM: valid lines only
    (1 in 3), or every kind of line, a huge line (1 in 20), raw bytes (1 in 6, mostly not UTF-8)."""
    clean = draw(st.integers(0, 2)) == 0
    kinds = valid if clean else line_kinds(valid)
    lines = [line.encode("utf-8") for line in draw(st.lists(kinds, max_size=max_lines))]
    if draw(st.integers(0, 19)) == 0:
        char, size = draw(st.sampled_from("a _\té한😀,\"")), draw(st.integers(50_000, 300_000))
        lines.insert(draw(st.integers(0, len(lines))), (draw(valid) + char * size).encode("utf-8"))
    if not clean and draw(st.integers(0, 5)) == 0:
        lines.insert(draw(st.integers(0, len(lines))), draw(st.binary(min_size=1, max_size=30)))
    ends = draw(st.lists(st.sampled_from([b"\n", b"\n", b"\r\n"]), min_size=len(lines), max_size=len(lines)))
    content = b"".join(line + end for line, end in zip(lines, ends))
    if len(lines) > 0 and draw(st.booleans()):
        content = content.removesuffix(ends[-1])
    return (BOM if draw(st.integers(0, 9)) == 0 else b"") + content


@st.composite
def maybe_gzip(draw: st.DrawFn, files: st.SearchStrategy[bytes]) -> tuple[bytes, str]:
    """A file's content and how it is written: ``plain``, ``gz``, or ``broken`` (gzipped, then cut short)."""
    content, how = draw(files), draw(st.sampled_from(["plain"] * 6 + ["gz", "broken"]))
    return content, how


def write(directory: Path, name: str, content: bytes, how: str = "plain") -> Path:
    """``content`` as ``directory/name`` (``.gz`` added for ``gz`` and ``broken``)."""
    if how == "plain":
        path = directory / name
        path.write_bytes(content)
        return path
    path = directory / f"{name}.gz"
    packed = gzip.compress(content, mtime=0)
    path.write_bytes(packed[: max(10, len(packed) - 1 - len(packed) // 3)] if how == "broken" else packed)
    return path


# --- the readers' properties ---------------------------------------------------------------------------------------


def pair_check(directory: Path, spec: type, split: Callable[[str], tuple[str, str] | None]) -> Check:
    """The check of a one-pair-a-line format (book, TSV): read_corpus, and read_sentences of the same corpus."""

    def check(case: tuple[bytes, str]) -> tuple[int, str]:
        content, how = case
        path, results = write(directory, "corpus.txt", content, how), []
        for skip in (False, True):
            expected = expect_pairs(content, path, skip, split)
            if how == "broken":
                expected = Err(re.escape(f"{path}:"))
            results.append(verify(partial(read_corpus, spec(path=str(path)), directory, skip), expected))
            sentences = expected if isinstance(expected, Err) else [s for s, _ in expected] + [t for _, t in expected]
            verify(partial(read_sentences, spec(path=str(path)), directory, skip), sentences)
        path.unlink()
        return len(physical_lines(content)), "/".join(results)

    return check


def aligned_check(directory: Path) -> Check:
    def check(case: tuple[bytes, bytes]) -> tuple[int, str]:
        paths = (write(directory, "source.txt", case[0]), write(directory, "target.txt", case[1]))
        spec = AlignedCorpus(source=str(paths[0]), target=str(paths[1]))
        results = [verify(partial(read_corpus, spec, directory, skip), expect_aligned(*case, paths, skip))
                   for skip in (False, True)]
        return len(physical_lines(case[0])) + len(physical_lines(case[1])), "/".join(results)

    return check


@st.composite
def aligned_files(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two files, line i of each a side: as many lines, or (1 in 4) one file longer."""
    n, kinds = draw(st.integers(0, 30)), side("") if draw(st.integers(0, 2)) == 0 else line_kinds(side(""))
    sources = draw(st.lists(kinds, min_size=n, max_size=n))
    targets = draw(st.lists(kinds, min_size=n, max_size=n))
    if draw(st.integers(0, 3)) == 0:
        draw(st.sampled_from([sources, targets])).append(draw(side("")))
    if draw(st.integers(0, 7)) == 0:
        sources.insert(draw(st.integers(0, len(sources))), draw(st.binary(min_size=1, max_size=20)).decode("latin-1"))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return (end.join(sources) + end).encode("utf-8"), (end.join(targets) + end).encode("utf-8")


@st.composite
def csv_files(draw: st.DrawFn) -> bytes:
    """A header naming Q and A among other columns (or not), records written by csv.writer (quoting, commas,
    quotes and newlines in fields), bad records (too few or many fields, empty sides), garbage lines."""
    names = draw(st.permutations(["Q", "A", "label"]))
    if draw(st.integers(0, 9)) == 0:
        names = [" Q ", "B"] if draw(st.booleans()) else names[:2]
    width = len(names)
    field_ = st.one_of(side(""), side(""), TEXT, BLANK, st.text(st.sampled_from(',"\n\r ab'), max_size=8))
    rows = draw(st.lists(st.one_of(st.lists(field_, min_size=width, max_size=width),
                                   st.lists(field_, min_size=width, max_size=width),
                                   st.lists(field_, max_size=width + 2)), max_size=30))
    text = io.StringIO()
    writer = csv.writer(text, quoting=draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL])),
                        lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    writer.writerow(names)
    writer.writerows(rows)
    lines = text.getvalue().split("\n")
    for garbage in draw(st.lists(st.one_of(TEXT, st.just('"unclosed, quote'), st.just('a,"b"c,d')), max_size=3)):
        lines.insert(draw(st.integers(1, len(lines))), garbage)
    content = "\n".join(lines).encode("utf-8")
    if draw(st.integers(0, 19)) == 0:
        content += b"x," + b"y" * draw(st.integers(131_000, 200_000)) + b",1\n"
    if draw(st.integers(0, 9)) == 0:
        content += draw(st.binary(min_size=1, max_size=20))
    return (BOM if draw(st.integers(0, 9)) == 0 else b"") + content


def csv_check(directory: Path) -> Check:
    def check(content: bytes) -> tuple[int, str]:
        path = write(directory, "corpus.csv", content)
        spec = CsvCorpus(path=str(path), source_column="Q", target_column="A")
        results = [verify(partial(read_corpus, spec, directory, skip), expect_csv(content, path, skip, ("Q", "A")))
                   for skip in (False, True)]
        return len(physical_lines(content)), "/".join(results)

    return check


def lines_check(directory: Path) -> Check:
    def check(case: tuple[bytes, str]) -> tuple[int, str]:
        content, how = case
        path = write(directory, "sentences.txt", content, how)
        expected = Err(re.escape(f"{path}:")) if how == "broken" else expect_sentences(content, path)
        results = [verify(partial(read_sentences, LinesCorpus(path=str(path)), directory, skip), expected)
                   for skip in (False, True)]
        path.unlink()
        return len(physical_lines(content)), "/".join(results)

    return check


# --- SQuAD ----------------------------------------------------------------------------------------------------------

WRONG = st.one_of(st.integers(-5, 5), st.booleans(), st.none(), st.just([]), st.just({}), TEXT,
                  st.floats(allow_nan=True), st.just(float("nan")))


@st.composite
def squad_question(draw: st.DrawFn, context: str, k: int) -> Any:
    """A question about ``context``: valid, or with one thing wrong."""
    start = draw(st.integers(0, max(0, len(context) - 1)))
    text = context[start:start + draw(st.integers(1, 12))]
    answer: dict[str, Any] = {"text": text, "answer_start": start}
    qa: dict[str, Any] = {"id": f"q{k}", "question": draw(side("")), "answers": [answer]}
    fault = draw(st.integers(0, 14))
    if fault == 1:
        answer["answer_start"] = start - len(context) if context else -1  # the same text, counted from the end
    elif fault == 2:
        answer["answer_start"] = draw(st.sampled_from([start + 1, 2**70, -(2**70), float(start), True]))
    elif fault == 3:
        answer[draw(st.sampled_from(["text", "answer_start"]))] = draw(WRONG)
    elif fault == 4:
        qa[draw(st.sampled_from(["question", "answers", "id"]))] = draw(WRONG)
    elif fault == 5:
        del qa[draw(st.sampled_from(["question", "answers", "id"]))]
    elif fault == 6:
        qa["answers"], qa["question"] = [], draw(BLANK)
    elif fault == 7:
        return draw(WRONG)
    return qa


@st.composite
def squad_documents(draw: st.DrawFn) -> bytes:
    """A SQuAD v1.1 file: articles of paragraphs of questions, each part maybe wrong; or (1 in 8) not SQuAD JSON
    at all: any text or bytes, a BOM, nested thousands deep, a number of thousands of digits."""
    garbage = draw(st.integers(0, 31))
    if garbage < 4:
        return [draw(TEXT).encode("utf-8"), draw(st.binary(max_size=40)), b"[" * 100_000 + b"]" * 100_000,
                b'{"data": [' + b"9" * 5000 + b"]}"][garbage]
    data = []
    for a in range(draw(st.integers(0, 3))):
        paragraphs = []
        for _ in range(draw(st.integers(0, 3))):
            context = draw(st.text(st.characters(codec="utf-8"), max_size=60))
            paragraph: Any = {"context": context, "qas": [draw(squad_question(context, k)) for k in range(
                draw(st.integers(0, 4)))]}
            if draw(st.integers(0, 19)) == 0:
                paragraph[draw(st.sampled_from(["context", "qas"]))] = draw(WRONG)
            paragraphs.append(paragraph if draw(st.integers(0, 29)) else draw(WRONG))
        article: Any = {"title": f"t{a}", "paragraphs": paragraphs}
        data.append(article if draw(st.integers(0, 29)) else draw(st.one_of(WRONG, st.just({"title": "x"}))))
    root: Any = {"version": "1.1", "data": data} if draw(st.integers(0, 29)) else draw(WRONG)
    text = json.dumps(root, ensure_ascii=draw(st.booleans())).encode("utf-8")
    return (BOM if draw(st.integers(0, 19)) == 0 else b"") + text


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def expect_question(qa: Any, context: str, path: Path, where: str) -> Question | Err:
    """SQuAD's rules for one question: a non-blank question, one answer or more, each a non-blank text that is the
    context's text at its answer_start, a position in the context (0 <= answer_start <= len(context))."""
    bad = Err(re.escape(f"{path}: {where}"))
    if not isinstance(qa, dict) or not _is(qa.get("question"), str) or not qa["question"].strip():
        return bad
    if not _is(qa.get("answers"), list) or not qa["answers"]:
        return bad
    answers = []
    for answer in qa["answers"]:
        if not isinstance(answer, dict) or not _is(answer.get("text"), str) or not _is(answer.get("answer_start"), int):
            return bad
        text, start = answer["text"], answer["answer_start"]
        if not text.strip() or not 0 <= start <= len(context) or context[start:start + len(text)] != text:
            return bad
        answers.append((text, start))
    return Question(str(qa.get("id", where)), qa["question"].strip(), context, tuple(answers))


def expect_squad(content: bytes, path: Path, skip: bool) -> list | Err:
    """The questions of a SQuAD file by its rules; a file that is not SQuAD JSON, or whose data, paragraphs,
    context or qas are not what they must be, is an error naming the file (and the place) even when skipping."""
    try:
        root = json.loads(content.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return Err(re.escape(f"{path}: "))
    if not isinstance(root, dict) or not isinstance(root.get("data"), list):
        return Err(re.escape(f"{path}: data"))
    questions = []
    for a, article in enumerate(root["data"]):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            return Err(re.escape(f"{path}: data[{a}].paragraphs"))
        for p, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{a}].paragraphs[{p}]"
            if not isinstance(paragraph, dict) or not _is(paragraph.get("context"), str) or not _is(
                    paragraph.get("qas"), list):
                return Err(re.escape(f"{path}: {where}"))
            for q, qa in enumerate(paragraph["qas"]):
                question = expect_question(qa, paragraph["context"], path, f"{where}.qas[{q}]")
                if isinstance(question, Err) and not skip:
                    return question
                if isinstance(question, Question):
                    questions.append(question)
    return questions


def negative_starts(path: Path) -> None:
    """Crash if the reader keeps an answer whose answer_start is negative (not a position in the context)."""
    try:
        questions = read_squad(path, BadLines(True))
    except Exception:
        return  # verify judges the error
    starts = [start for q in questions for _, start in q.answers if start < 0]
    if starts:
        raise Crash(f"a negative answer_start ({starts[0]}) accepted as the context's text there")


def squad_check(directory: Path) -> Check:
    def check(case: tuple[bytes, str]) -> tuple[int, str]:
        content, how = case
        path = write(directory, "squad.json", content, how)
        negative_starts(path)
        results = [verify(partial(read_squad, path, BadLines(skip)),
                          Err(re.escape(f"{path}: ")) if how == "broken" else expect_squad(content, path, skip))
                   for skip in (False, True)]
        path.unlink()
        return 0, "/".join(results)

    return check


def fuzz_readers(scale: int | None, seed: int, directory: Path) -> list[Outcome]:
    """Every reader: ``scale`` examples each, or rounds until LINES_PER_READER lines (SQuAD: a tenth as many
    documents)."""
    samples = book_samples()
    book_valid = st.one_of(st.sampled_from(samples), st.tuples(side("_"), st.sampled_from(["_", " _", "_ "]),
                                                                 side("")).map("".join))
    tsv_valid = st.tuples(side("\t"), side("\t")).map("\t".join)
    jsonl_valid = st.builds(lambda s, t, more, ascii: json.dumps({"source": s, "target": t, **more}, ensure_ascii=ascii),
                            side(""), side(""), st.dictionaries(st.sampled_from(["id", "source", "x"]), WRONG,
                                                                max_size=2), st.booleans())
    lines = LINES_PER_READER if scale is None else 0
    examples = scale or ROUND
    return [
        run_property("readers", "book", maybe_gzip(text_file(book_valid)), pair_check(directory, BookCorpus, book_pair),
                     examples, seed, lines),
        run_property("readers", "tsv", maybe_gzip(text_file(tsv_valid)), pair_check(directory, TsvCorpus, tsv_pair),
                     examples, seed, lines),
        run_property("readers", "aligned", aligned_files(), aligned_check(directory), examples, seed, lines),
        run_property("readers", "csv", csv_files(), csv_check(directory), examples, seed, lines),
        run_property("readers", "jsonl", maybe_gzip(text_file(jsonl_valid)), pair_check(directory, JsonlCorpus, jsonl_pair),
                     examples, seed, lines),
        run_property("readers", "lines", maybe_gzip(text_file(side(""))), lines_check(directory), examples, seed,
                     lines),
        run_property("readers", "squad", maybe_gzip(squad_documents()), squad_check(directory), scale or LINES_PER_READER // 10,
                     seed),
    ]


# --- configs -------------------------------------------------------------------------------------------------------


def config_sources() -> list[tuple[str, dict[str, Any], type]]:
    """Every config of configs/ (relative name, parsed YAML, the schema its command reads it with)."""
    found: list[tuple[str, dict[str, Any], type]] = []
    for path in sorted((ROOT / "configs").rglob("*.yaml")):
        schema = VectorsConfig if path.parent.name == "vectors" else Config
        found.append((str(path.relative_to(ROOT)), yaml.safe_load(path.read_text(encoding="utf-8")), schema))
    return found


def _nested(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


VALUES = st.one_of(
    st.integers(-(2**80), 2**80), st.sampled_from([2**70, -(2**70), 0, -1, -100, 2**63, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    TEXT, st.booleans(), st.none(), st.lists(st.integers(-3, 3) | TEXT, max_size=3),
    st.dictionaries(TEXT, st.integers(), max_size=2), st.integers(30, 80).map(_nested),
)
KEYS = st.one_of(st.sampled_from(["type", "format", "path", "epochs", "d_model", "lr", "seed", "size", "level",
                                  "split", "corpus", "mask_split", "adam_betas", "preset", "source", "target"]), TEXT)


def _containers(node: Any, path: tuple = ()) -> list[tuple]:
    """The paths of every mapping and list in a parsed document."""
    found = [path] if isinstance(node, dict | list) else []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    return found + [p for key, child in children for p in _containers(child, (*path, key))]


def _at(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` after 0 to 3 mutations: a number set to another (negative, huge, NaN, infinite), a key set to
    a value of any type, deleted, added (unknown), a section replaced."""
    document = json.loads(json.dumps(document))  # a deep copy
    for _ in range(draw(st.integers(0, 3))):
        places = _containers(document)
        node = _at(document, draw(st.sampled_from(places)))
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        op = draw(st.integers(0, 4))
        numbers = [key for key in keys if isinstance(node[key], int | float) and not isinstance(node[key], bool)]
        if numbers and op == 4:
            key = draw(st.sampled_from(numbers))
            node[key] = draw(st.integers(-(2**70), 2**70) | st.sampled_from([0, -1, 2**70]) if isinstance(node[key], int)
                             else st.floats(allow_nan=True, allow_infinity=True))
        elif keys and op == 0:
            node[draw(st.sampled_from(keys))] = draw(VALUES)
        elif keys and op == 1:
            del node[draw(st.sampled_from(keys))]
        elif isinstance(node, dict):
            node[draw(KEYS)] = draw(VALUES)
        elif keys:
            node[draw(st.sampled_from(keys))] = draw(VALUES)
    return document


GARBAGE = [b"[" * 5000, b"a:" + b" {b:" * 3000 + b"}" * 3000, b"seed: " + b"9" * 5000, b"- 1\n- 2\n", b"42",
           b"!!python/object/apply:os.system [ls]", b"seed: !!binary AAAA", b"seed: 2001-12-14", b"&a [*a]",
           b"a: &x 1\nb: *y", b"\x00\x01", b"data: {corpus: {format: task, task: date}}\n\tmodel: 1",
           b"{a: 1, a: 2}", b"? [a]\n: 1", b"model: {type: [transformer]}", b"model: {type: {}}",
           b"data: {corpus: {format: [task]}}", b"data: {corpus: {format: 5}}"]


@st.composite
def config_cases(draw: st.DrawFn, sources: list[tuple[str, dict[str, Any], type]]) -> tuple[bytes, list[str], str]:
    """A config file's bytes, ``--set`` overrides and the name of the schema to read it with."""
    name, document, schema = draw(st.sampled_from(sources))
    kind = draw(st.integers(0, 11))
    if kind < 7:
        text = yaml.safe_dump(draw(mutated(document)), allow_unicode=draw(st.booleans()), sort_keys=False).encode()
    elif kind == 7:
        text = draw(st.one_of(TEXT.map(str.encode), st.binary(max_size=60)))
    elif kind == 8:
        text = draw(st.sampled_from(GARBAGE))
    else:  # a real config cut, or with a character put in
        text = yaml.safe_dump(document, sort_keys=False).encode()
        at = draw(st.integers(0, len(text)))
        text = text[:at] if kind == 9 else text[:at] + draw(st.sampled_from([b":", b"[", b"{", b"\t", b"'", b"- ",
                                                                              b"&", b"*", b"!", b"%", b"\xff"])) + text[at:]
    keys = st.sampled_from(["train.epochs", "model.d_model", "seed", "data.corpus.size", "model", "train.lr",
                            "data.split.valid", "a..b", "", "model.type", "data.corpus.format.x"]) | TEXT
    values = st.sampled_from(["[", "{a", "1", "-1", "2e999", ".nan", "'", "a: b: c", "*x", "!!binary x"]) | TEXT
    overrides = draw(st.lists(st.tuples(keys, values).map("=".join) | TEXT, min_size=1, max_size=2)
                     if draw(st.integers(0, 3)) == 0 else st.just([]))
    return text, overrides, "vectors" if schema is VectorsConfig else "config"


def config_error_problem(message: str, path: Path) -> str | None:
    """What is wrong with a ConfigError's message, or None: one line naming the file or the --set, or the header
    ``invalid config FILE:`` with one ``  key: problem`` line per problem."""
    first, *rest = message.split("\n")
    if "Traceback" in message:
        return "a traceback in the message"
    if first == f"invalid config {path}:" and rest:
        odd = [line for line in rest if not line.startswith("  ") or not line.strip() or "input_value" in line]
        return f"a problem line that is not '  key: problem': {odd[0][:100]!r}" if odd else None
    if rest:
        return f"several lines: {message[:160]!r}"
    return None if str(path) in first or first.startswith("--set") else f"names neither the file nor the key: {first!r}"


def config_check(directory: Path) -> Check:
    """load_config: a Config (or VectorsConfig) that reloads from its dump as --resume would compare it, or a
    well-formed ConfigError."""

    def check(case: tuple[bytes, list[str], str]) -> tuple[int, str]:
        text, overrides, kind = case
        schema: type[Any] = VectorsConfig if kind == "vectors" else Config  # load_config's type variable takes no union
        path = directory / "config.yaml"
        path.write_bytes(text)
        try:
            config = load_config(path, overrides, schema)
        except ConfigError as exc:
            problem = config_error_problem(str(exc), path)
            if problem:
                raise Crash(problem) from None
            return 0, "error"
        reloaded = parse_config(yaml.safe_load(dump_config(config)), "config.yaml", schema)
        changed = changed_keys(config, reloaded, RESUMED[schema])
        if changed:
            raise Crash(f"the saved config.yaml differs from the loaded config in {changed} ({kind})")
        return 0, "loaded"

    return check


def fuzz_configs(scale: int | None, seed: int, directory: Path) -> list[Outcome]:
    """CONFIGS generated configs (or ``scale``)."""
    return [run_property("configs", "load_config", config_cases(config_sources()), config_check(directory),
                         scale or CONFIGS, seed)]


# --- api -------------------------------------------------------------------------------------------------------------

REQUESTS = 1_000  # per route
# Small runs of every kind the server serves, trained for an epoch (seconds): the server's checks do not depend on
# their quality. Words of the generated corpora (WORDS) and SQuAD facts (_squad_facts) are made up here.
WORDS = ["cat", "dog", "sat", "ran", "on", "a", "the", "mat", "고양이", "강아지", "잔다", "운다"]
TRANSLATE_RUN = {
    "seed": 3,
    "data": {"corpus": {"format": "task", "task": "date", "size": 1000, "seed": 5},
             "split": {"valid": 100, "seed": 1}, "max_source_length": 40},
    "tokens": {"source": {"level": "char"}},
    "model": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64, "dropout": 0.0, "max_length": 40},
    "train": {"epochs": 1, "batch_tokens": 600, "precision": "fp32"},
    "eval": {"max_output_length": 12},
}
SMALL_ENCODER = {"d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.0}
SMALL_TRAIN = {"epochs": 1, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32"}
DECODING = {"beam": 3, "nbest": 1, "length_penalty": 0.6, "normalize": False, "sample": False, "temperature": 1.0,
            "top_k": 0, "top_p": 1.0, "num_samples": 1, "seed": 0, "max_length": 12}


@dataclass(frozen=True)
class Route:
    """A route of the server, a valid request to it, and the run whose server has it."""

    path: str
    valid: dict[str, Any]
    run: str  # the key of api_runs' run directories


ROUTES = {
    "translate": Route("/api/translate", {"inputs": ["september 27, 1994"], **DECODING, "length_ratio": 1.5,
                                          "length_extra": 10, "attention": True}, "translate"),
    "classify": Route("/api/classify", {"inputs": ["the cat sat", "강아지 운다"], "attention": True}, "classify"),
    "answer": Route("/api/answer", {"inputs": ["When was Bo born?"],
                                    "context": "Bo was born in 1990.  Cy likes figs."}, "answer"),
    "generate": Route("/api/generate", {"start": "the cat", **DECODING}, "lm"),
    "similar": Route("/api/similar", {"word": "cat", "top": 3}, "vectors"),
    "analogy": Route("/api/analogy", {"a": "cat", "b": "dog", "c": "고양이", "top": 3}, "vectors"),
}


def _sentences(path: Path, count: int) -> Path:
    """``count`` lines of 3 to 8 of WORDS."""
    rng = random.Random(0)
    path.write_text("".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) + "\n" for _ in range(count)),
                    encoding="utf-8")
    return path


def _labelled(path: Path, count: int) -> Path:
    """A CSV of ``count`` (Q, label) rows: the label is that of Q's first word (its index in WORDS, mod 3)."""
    rng = random.Random(1)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Q", "label"])
        for _ in range(count):
            words = rng.choices(WORDS, k=rng.randint(2, 6))
            writer.writerow([" ".join(words), str(WORDS.index(words[0]) % 3)])
    return path


def _squad_facts(path: Path, count: int) -> Path:
    """``count`` SQuAD v1.1 questions, each on a context of two facts: a year of birth and a liked food."""
    rng = random.Random(2)
    people, foods = ["Ana", "Bo", "Cy", "Dag", "Eli"], ["figs", "bread", "honey", "eggs"]
    data = []
    for k in range(count):
        born, likes, year, food = *rng.sample(people, 2), str(rng.randint(1900, 2020)), rng.choice(foods)
        context = f"{born} was born in {year}.  {likes} likes {food}."
        question, answer = rng.choice([(f"When was {born} born?", year), (f"What does {likes} like?", food)])
        data.append({"title": f"t{k}", "paragraphs": [{"context": context, "qas": [
            {"id": f"q{k}", "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return path


def api_runs(directory: Path) -> dict[str, Path]:
    """The run directory of each kind of server, trained in ``directory``."""
    from seqlab.train.trainer import Trainer
    from seqlab.vectors.config import VectorsConfig
    from seqlab.vectors.run import train_vectors

    sentences = _sentences(directory / "sentences.txt", 300)
    csv_corpus = {"format": "csv", "path": str(_labelled(directory / "labelled.csv", 300)), "source_column": "Q",
                  "target_column": "label"}
    configs = {
        "translate": TRANSLATE_RUN,
        "classify": {"data": {"corpus": csv_corpus, "split": {"valid": 30, "seed": 1}, "max_source_length": 16},
                     "tokens": {"source": {"level": "word"}},
                     "model": {"type": "encoder", **SMALL_ENCODER, "max_length": 16}, "train": SMALL_TRAIN},
        "answer": {"data": {"corpus": {"format": "squad", "path": str(_squad_facts(directory / "squad.json", 200))},
                            "split": {"valid": 20, "seed": 1}, "max_source_length": 32},
                   "tokens": {"source": {"level": "word"}},
                   "model": {"type": "span", **SMALL_ENCODER, "max_length": 32}, "train": SMALL_TRAIN},
        "lm": {"data": {"corpus": {"format": "lines", "path": str(sentences)}, "split": {"valid": 30, "seed": 1}},
               "tokens": {"source": {"level": "word"}},
               "model": {"type": "lm", "embedding_size": 16, "hidden_size": 16, "num_layers": 1, "dropout": 0.0},
               "train": {"epochs": 1, "streams": 4, "time_size": 5, "schedule": "constant", "lr": 0.01,
                         "precision": "fp32"}},
    }
    runs = {}
    with hushed():
        for name, raw in configs.items():
            runs[name] = directory / name
            Trainer(parse_config(raw, "fuzz"), runs[name], progress=False).fit()
        runs["vectors"] = directory / "vectors"
        vectors = {"data": {"corpora": [{"format": "lines", "path": str(sentences)}]},
                   "train": {"method": "skipgram", "dim": 8, "window": 2, "min_count": 1, "epochs": 1, "sample": 0}}
        train_vectors(parse_config(vectors, schema=VectorsConfig), runs["vectors"], directory, progress=False)
    return runs


@cache  # one strategy for every draw: Hypothesis validates a new recursive strategy at each draw of it
def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value: scalars of every type and size (integers past 2**64, tiny and huge floats, any Unicode,
    numbers at the edges of the limits), nested in lists and objects."""
    edges = st.sampled_from([0, 1, -1, 2, 16, 17, 2**31, 2**32, 2**63, 2**70, 1e-300, 1e300, 0.009, 0.01, "", " ",
                             "\x00", "\u200b", "가" * 1100, "<eos>", "<pad>", "<unk>", "[MASK]", "cat"])
    scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
               | st.text(max_size=60) | edges)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def api_requests(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """A request body: ``valid`` with fields replaced by any JSON value, left out or added; any text in its text
    fields and any list of texts as its ``inputs``; any JSON document; NaN and Infinity (which Python's json
    reads) in a number field (any field where there is none); bytes that are not JSON or not UTF-8; a body over
    the size limit."""
    kind = draw(st.sampled_from(["mutated", "mutated", "texts", "document", "literal", "bytes", "large"]))
    if kind == "document":
        return json.dumps(draw(json_values())).encode()
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    texts = [key for key, value in valid.items() if isinstance(value, str | list)]
    if kind == "large":
        return json.dumps({**valid, texts[0]: ["x" * 1000] * 80 if texts[0] == "inputs" else "x" * 80_000}).encode()
    if kind == "texts":  # the rest of the request left valid
        any_text = st.text(max_size=60) | st.sampled_from(["", "  ", "x" * 1001, "\n\t", "<unk> [MASK]"])
        key = draw(st.sampled_from(texts))
        return json.dumps({**valid, key: draw(st.lists(any_text, max_size=10)) if key == "inputs"
                           else draw(any_text)}).encode()
    body = {key: value for key, value in valid.items() if key in texts or draw(st.booleans())}
    for key in draw(st.lists(st.sampled_from(sorted(valid)), max_size=3, unique=True)):  # 0 to 3 changed
        body[key] = draw(json_values())
    if draw(st.integers(0, 4)) == 0:
        body[draw(st.text(max_size=12))] = draw(json_values())
    text = json.dumps(body)
    if kind == "literal":
        numbers = [key for key, value in valid.items() if isinstance(value, int | float) and not isinstance(value, bool)]
        key = draw(st.sampled_from(numbers or sorted(valid)))
        literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
        text = json.dumps({**body, key: "__literal__"}).replace('"__literal__"', literal)
    return text.encode()


def answered(sent: dict[str, Any], answer: dict[str, Any]) -> bool:
    """Whether a 200's JSON answers the request: one output per input, in order; at most ``top`` words; a list of
    continuations of the start."""
    if "inputs" in sent:
        return [o["input"] for o in answer["outputs"]] == sent["inputs"]
    if "start" in sent:
        return answer["start"] == sent["start"] and len(answer["outputs"]) >= 1
    found = answer["neighbours" if "word" in sent else "answers"]
    return len(found) <= sent.get("top", 10) and all(isinstance(f["cosine"], float) for f in found)


def api_check(client: Any, path: str) -> Check:
    """A request body -> the status; a crash unless it is a 200 that answers the request, or a 4xx or 503 whose
    JSON ``error`` is one line."""

    def check(body: bytes) -> tuple[int, str]:
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        status = response.status_code
        if status == 200:
            if not answered(json.loads(body), response.json()):
                raise Crash(f"a 200 that does not answer the request: {response.text[:200]}")
            return 0, "200"
        if not (400 <= status < 500 or status == 503):
            raise Crash(f"status {status}: {response.text[:200]}")
        error = response.json().get("error")
        if not isinstance(error, str) or not error or "\n" in error:
            raise Crash(f"status {status} without a one-line error: {response.text[:200]}")
        return 0, str(status)

    return check


def fuzz_api(scale: int | None, seed: int, directory: Path) -> list[Outcome]:
    """REQUESTS generated bodies (or ``scale``) POSTed to each route of ROUTES, on the server of a small run of
    its kind, through the whole ASGI stack (the body limit, the JSON parser, the checks, the worker); limits kept
    small so that a valid request is answered fast (the checks are the same whatever the numbers)."""
    from fastapi.testclient import TestClient

    from seqlab.server import Limits, create_app

    runs = api_runs(directory)
    limits = Limits(max_body_bytes=20_000, max_inputs=8, max_input_chars=100, max_context_chars=300, max_beam=4,
                    max_output_length=16, max_top=20)
    outcomes = []
    for name, route in ROUTES.items():
        with TestClient(create_app(runs[route.run], limits), raise_server_exceptions=False) as client:
            outcomes.append(run_property("api", name, api_requests(route.valid), api_check(client, route.path),
                                         scale or REQUESTS, seed))
    return outcomes


SECTIONS: dict[str, Callable[[int | None, int, Path], list[Outcome]]] = {"readers": fuzz_readers,
                                                                        "configs": fuzz_configs,
                                                                        "api": fuzz_api}



# --- the script ----------------------------------------------------------------------------------------------------


def report(outcome: Outcome) -> None:
    """Print one property's outcome: its numbers, its crashes by kind, shrunk inputs."""
    print(outcome.line(), flush=True)
    for kind, count in sorted(outcome.kinds.items(), key=lambda item: -item[1]):
        print(f"    {count:5d} x {kind}")
    for shown in outcome.shrunk:
        print(f"    shrunk: {shown}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="these sections (default: all)")
    parser.add_argument("--examples", type=int, help="examples per property, for a quick run (default: 10,000 "
                        "lines per reader, 1,000 SQuAD documents, 1,000 configs, 1,000 requests per route)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis's seed (default 0)")
    parser.add_argument("--json", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-fuzz.json",
                        help="write every number here (default: %(default)s)")
    return parser.parse_args(argv)


def run(sections: list[str], scale: int | None, seed: int) -> list[Outcome]:
    """The chosen sections' outcomes, each printed as it ends; files are written to a temporary directory."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="seqlab-fuzz-") as tmp:
        for name in sections:
            directory = Path(tmp) / f"{name} é"
            directory.mkdir()
            for outcome in SECTIONS[name](scale, seed, directory):
                report(outcome)
                outcomes.append(outcome)
    return outcomes


def result(outcomes: list[Outcome], seed: int, seconds: float) -> dict[str, Any]:
    """Every number of the run, for --json."""
    from report import machine

    return {"command": "python benchmarks/fuzz.py " + " ".join(sys.argv[1:]), "machine": machine(), "seed": seed,
            "seconds": seconds, "examples": sum(o.examples for o in outcomes), "crashes": sum(o.crashes for o in outcomes),
            "outcomes": [asdict(o) for o in outcomes]}


def main(argv: list[str] | None = None) -> None:
    """Fuzz the sections asked for; exit 1 if anything crashed."""
    args = parse_args(argv)
    started = time.perf_counter()
    outcomes = run(args.only or list(SECTIONS), args.examples, args.seed)
    numbers = result(outcomes, args.seed, time.perf_counter() - started)
    print(f"{numbers['examples']:,} examples, {numbers['crashes']} crashes in {numbers['seconds']:.0f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(numbers, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"written to {args.json}")
    if numbers["crashes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
