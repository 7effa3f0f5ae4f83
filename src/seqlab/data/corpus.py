"""Reading parallel corpora into ``(source, target)`` pairs.

Formats (see :mod:`seqlab.config`): the book's ``question_answer`` files, TSV,
two aligned line files, CSV with named columns, JSON Lines with named fields, and
Parquet with named columns. Any file but Parquet may be gzipped (``.gz``
suffix). Files are read as bytes and decoded as UTF-8 line by line,
so an undecodable byte is reported with its line; a UTF-8 BOM is tolerated.

Text: the line ending (``\\n`` or ``\\r\\n``) is removed and each side is
stripped of surrounding whitespace (the book's space padding, stray blanks
around a tab or comma); whitespace inside the text is kept.

A malformed line (wrong field count, empty side) raises :class:`DataError` at
the first one, or with ``skip_bad_lines`` is skipped and counted, and one
warning sums them up.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from seqlab.corpora import (
    AlignedCorpus,
    BookCorpus,
    Corpus,
    CsvCorpus,
    JsonlCorpus,
    LinesCorpus,
    ParquetCorpus,
    SquadCorpus,
    TaskCorpus,
    TextCorpus,
    TsvCorpus,
)
from seqlab.data.tasks import Pair, generate_task

DATA_ENV = "SEQLAB_DATA"
DEFAULT_DATA_DIR = Path("data")

logger = logging.getLogger("seqlab")


class DataError(ValueError):
    """Unusable data; the message starts with the file (``path:line:`` where there is a line) at fault."""


def resolve_data_dir(explicit: str | Path | None = None) -> Path:
    """The directory relative data paths are read from: ``explicit`` (--data-dir), else $SEQLAB_DATA, else ./data."""
    if explicit is not None and str(explicit):
        return Path(explicit).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    return DEFAULT_DATA_DIR


def locate(name: str, data_dir: Path) -> Path:
    """``name`` from a config: absolute as it is, relative under ``data_dir``; it must exist."""
    given = Path(name).expanduser()
    path = given if given.is_absolute() else data_dir / given
    if not path.exists():
        hint = "" if given.is_absolute() else (
            f" (relative data paths are read from the data directory {data_dir}, which --data-dir"
            f" or the {DATA_ENV} environment variable sets; default ./data)"
        )
        raise DataError(f"{path}: no such file{hint}")
    return path


BLOCK_BYTES = 1 << 20  # what decode_lines reads at a time


def open_file(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def decode_lines(stream: io.BufferedIOBase, name: str | Path, keep_ends: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` from 1 of a binary stream; bad UTF-8 names ``name`` and the line. Lines end
    at ``\n`` (a ``\r`` before it dropped too, unless ``keep_ends``); the stream is read and decoded a block of
    whole lines at a time (``read1``: a file's next MiB, or what a pipe holds, so lines typed in come at once)."""
    lineno, rest = 0, b""
    while block := stream.read1(BLOCK_BYTES):
        block = rest + block
        cut = block.rfind(b"\n") + 1
        rest = block[cut:]
        if cut:
            lines, error = _decoded(block[:cut], name, lineno, keep_ends)
            yield from zip(range(lineno + 1, lineno + len(lines) + 1), lines)
            lineno += len(lines)
            if error:
                raise error
    if rest:  # a last line without its newline
        lines, error = _decoded(rest + b"\n", name, lineno, keep_ends)
        if error:
            raise error
        yield lineno + 1, lines[0].removesuffix("\n")


def _decoded(block: bytes, name: str | Path, before: int, keep_ends: bool) -> tuple[list[str], DataError | None]:
    """The lines of ``block`` (whole lines, each ending with ``\n``) after line ``before``, decoded at once; where
    one is not UTF-8, the lines before it and the error naming it (raised after they are read, as line by line)."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        start, line = block.rfind(b"\n", 0, exc.start) + 1, before + block.count(b"\n", 0, exc.start) + 1
        lines = _decoded(block[:start], name, before, keep_ends)[0] if start else []
        return lines, DataError(f"{name}:{line}: not valid UTF-8 (byte 0x{block[exc.start]:02x} at byte "
                                f"{exc.start - start + 1} of the line)")
    if before == 0:
        text = text.removeprefix("\ufeff")
    lines = text.split("\n")[:-1]
    if keep_ends:
        return [line + "\n" for line in lines], None
    return ([line[:-1] if line.endswith("\r") else line for line in lines] if "\r" in text else lines), None


def _lines(path: Path, keep_ends: bool = False) -> Iterator[tuple[int, str]]:
    """``decode_lines`` of a (possibly gzipped) file."""
    try:
        with open_file(path) as f:
            yield from decode_lines(f, path, keep_ends)
    except (OSError, EOFError) as exc:  # unreadable, a directory, a broken or truncated gzip
        raise DataError(f"{path}: cannot read: {exc}") from None


class BadLines:
    """Raises at a bad line, or, when skipping, counts them and remembers the first."""

    def __init__(self, skip: bool) -> None:
        self.skip = skip
        self.count = 0
        self.first = ""

    def __call__(self, path: Path, lineno: int, reason: str) -> None:
        self.report(f"{path}:{lineno}: {reason}")

    def report(self, message: str) -> None:
        """A bad item, ``message`` naming its file and place."""
        if not self.skip:
            raise DataError(message)
        self.count += 1
        if self.count == 1:
            self.first = message

    def warn(self) -> None:
        if self.count:
            lines = "line" if self.count == 1 else "lines"
            logger.warning("skipped %d bad %s; the first: %s", self.count, lines, self.first)


def _empty_side(source: str, target: str) -> str | None:
    """Why a stripped pair is unusable, or None."""
    if not source:
        return "empty source"
    if not target:
        return "empty target"
    return None


def _book_pairs(path: Path, bad: BadLines) -> Iterator[Pair]:
    """``question_answer`` lines; split at the first ``_`` as the book does (``line.find('_')``)."""
    for lineno, line in _lines(path):
        idx = line.find("_")
        if idx < 0:
            bad(path, lineno, "no '_' between question and answer")
            continue
        source, target = line[:idx].strip(), line[idx + 1:].strip()
        if reason := _empty_side(source, target):
            bad(path, lineno, reason)
            continue
        yield source, target


def _tsv_pairs(path: Path, bad: BadLines) -> Iterator[Pair]:
    for lineno, line in _lines(path):
        fields = line.split("\t")
        if len(fields) != 2:
            bad(path, lineno, f"expected 2 tab-separated fields, found {len(fields)}")
            continue
        source, target = fields[0].strip(), fields[1].strip()
        if reason := _empty_side(source, target):
            bad(path, lineno, reason)
            continue
        yield source, target


def _aligned_pairs(source_path: Path, target_path: Path, bad: BadLines) -> Iterator[Pair]:
    """Line i of one file with line i of the other. Both files are read through once first (every line decoded,
    the lines counted), so that files of different lengths, or one that is not UTF-8, fail before any pair is
    read or bad line counted, as when they were read whole; then they are read side by side."""
    counts = [sum(1 for _ in _lines(path)) for path in (source_path, target_path)]
    if counts[0] != counts[1]:
        raise DataError(f"{source_path}: {counts[0]} lines, but {target_path}: {counts[1]} lines;"
                        " aligned files must have the same number of lines")
    for (lineno, source), (_, target) in zip(_lines(source_path), _lines(target_path)):
        source, target = source.strip(), target.strip()
        if reason := _empty_side(source, target):
            bad(source_path if not source else target_path, lineno, reason)
            continue
        yield source, target


def _csv_pairs(path: Path, source_column: str, target_column: str, bad: BadLines) -> Iterator[Pair]:
    """A header row, then records; a record may span lines (quoted newlines), reported at its first line."""
    reader = csv.reader(text for _, text in _lines(path, keep_ends=True))
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: empty file, expected a header row")
        columns = [name.strip() for name in header]
        for name in (source_column, target_column):
            if name not in columns:
                raise DataError(f"{path}:1: no column {name!r}; the columns are {', '.join(map(repr, columns))}")
        s, t = columns.index(source_column), columns.index(target_column)
        start = reader.line_num + 1
        for row in reader:
            if len(row) != len(columns):
                bad(path, start, f"expected {len(columns)} comma-separated fields, found {len(row)}")
            elif reason := _empty_side(row[s].strip(), row[t].strip()):
                bad(path, start, reason)
            else:
                yield row[s].strip(), row[t].strip()
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not valid CSV: {exc}") from None


def _jsonl_pairs(path: Path, source_field: str, target_field: str, bad: BadLines) -> Iterator[Pair]:
    """One JSON object a line, its two text fields the pair (other fields ignored)."""
    for lineno, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            bad(path, lineno, f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(record, dict):
            bad(path, lineno, f"expected a JSON object, found {type(record).__name__}")
            continue
        source, target = record.get(source_field), record.get(target_field)
        if not isinstance(source, str) or not isinstance(target, str):
            name = source_field if not isinstance(source, str) else target_field
            bad(path, lineno, f"no field {name!r}" if name not in record else f"field {name!r} is not a string")
            continue
        source, target = source.strip(), target.strip()
        if reason := _empty_side(source, target):
            bad(path, lineno, reason)
            continue
        yield source, target


def _parquet_pairs(path: Path, source_column: str, target_column: str, bad: BadLines) -> Iterator[Pair]:
    """Two text columns of a Parquet file, a record batch at a time; a bad row is named by its number (from 1)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    schema = table.schema_arrow
    for name in (source_column, target_column):
        if name not in schema.names:
            raise DataError(f"{path}: no column {name!r}; the columns are {', '.join(map(repr, schema.names))}")
        if not (pa.types.is_string(schema.field(name).type) or pa.types.is_large_string(schema.field(name).type)):
            raise DataError(f"{path}: column {name!r} holds {schema.field(name).type}, not text")
    row = 0
    for batch in table.iter_batches(batch_size=10_000, columns=[source_column, target_column]):
        for source, target in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            row += 1
            if source is None or target is None:
                bad.report(f"{path}: row {row}: no {'source' if source is None else 'target'} (null)")
            elif reason := _empty_side(source.strip(), target.strip()):
                bad.report(f"{path}: row {row}: {reason}")
            else:
                yield source.strip(), target.strip()


def _pairs(spec: Corpus, data_dir: Path, bad: BadLines) -> tuple[Path, Iterator[Pair]]:
    """A file corpus's first file and its pairs, read as they are asked for."""
    if isinstance(spec, BookCorpus):
        origin = locate(spec.path, data_dir)
        return origin, _book_pairs(origin, bad)
    if isinstance(spec, TsvCorpus):
        origin = locate(spec.path, data_dir)
        return origin, _tsv_pairs(origin, bad)
    if isinstance(spec, AlignedCorpus):
        origin = locate(spec.source, data_dir)
        return origin, _aligned_pairs(origin, locate(spec.target, data_dir), bad)
    if isinstance(spec, CsvCorpus):
        origin = locate(spec.path, data_dir)
        return origin, _csv_pairs(origin, spec.source_column, spec.target_column, bad)
    if isinstance(spec, JsonlCorpus):
        origin = locate(spec.path, data_dir)
        return origin, _jsonl_pairs(origin, spec.source_field, spec.target_field, bad)
    if isinstance(spec, ParquetCorpus):
        origin = locate(spec.path, data_dir)
        return origin, _parquet_pairs(origin, spec.source_column, spec.target_column, bad)
    raise TypeError(f"not a corpus spec: {spec!r}")


def _no_pairs(origin: Path, bad: BadLines) -> DataError:
    why = f"all {bad.count} were bad lines, skipped" if bad.count else "no data lines"
    return DataError(f"{origin}: no pairs ({why})")


def read_corpus(spec: Corpus | SquadCorpus, data_dir: Path, skip_bad_lines: bool = False) -> list[Pair]:
    """All pairs of one corpus, in file order; relative paths are read under ``data_dir``."""
    if isinstance(spec, TaskCorpus):
        return generate_task(spec.task, spec.size, spec.seed, **spec.options())
    if isinstance(spec, SquadCorpus):
        raise DataError(f"{spec.path}: a SQuAD file holds questions about contexts, which model.type span reads")
    bad = BadLines(skip_bad_lines)
    origin, stream = _pairs(spec, data_dir, bad)
    pairs = list(stream)
    bad.warn()
    if not pairs:
        raise _no_pairs(origin, bad)
    return pairs


class CorpusStream(Iterable[Pair]):
    """A file corpus read afresh from its files each time it is iterated, pair by pair, so that it is never in
    memory whole (``seqlab data prepare``): the pairs of ``read_corpus``, in the same order, with its errors (one
    without pairs at the end of a pass) and its count of skipped bad lines (once, after the first pass)."""

    def __init__(self, spec: Corpus, data_dir: Path, skip_bad_lines: bool = False) -> None:
        self.spec, self.data_dir, self.skip_bad_lines = spec, data_dir, skip_bad_lines
        self._warned = False

    def __iter__(self) -> Iterator[Pair]:
        bad = BadLines(self.skip_bad_lines)
        origin, stream = _pairs(self.spec, self.data_dir, bad)
        count = 0
        for pair in stream:
            count += 1
            yield pair
        if not self._warned:
            bad.warn()
            self._warned = True
        if not count:
            raise _no_pairs(origin, bad)


def read_sentences(spec: TextCorpus, data_dir: Path, skip_bad_lines: bool = False) -> list[str]:
    """The sentences of a monolingual corpus: each non-blank line of a ``lines`` file, stripped, or both
    sides of every pair of a pair corpus (sources first, then targets)."""
    return list(iter_sentences(spec, data_dir, skip_bad_lines))


def iter_sentences(spec: TextCorpus, data_dir: Path, skip_bad_lines: bool = False) -> Iterator[str]:
    """``read_sentences``'s sentences one at a time, as they are asked for (a corpus larger than memory): a
    ``lines`` file's; a pair corpus's files read twice, for the sources and then for the targets (a generated
    task's pairs made whole first)."""
    if isinstance(spec, TaskCorpus | SquadCorpus):
        pairs = read_corpus(spec, data_dir, skip_bad_lines)
        yield from (source for source, _ in pairs)
        yield from (target for _, target in pairs)
        return
    if not isinstance(spec, LinesCorpus):
        stream = CorpusStream(spec, data_dir, skip_bad_lines)
        yield from (source for source, _ in stream)
        yield from (target for _, target in stream)
        return
    path = locate(spec.path, data_dir)
    blank = True
    for _, line in _lines(path):
        if text := line.strip():
            blank = False
            yield text
    if blank:
        raise DataError(f"{path}: no sentences (every line is blank)")
