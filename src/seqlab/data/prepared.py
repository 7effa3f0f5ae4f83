"""Prepared corpora (``seqlab data prepare``): a config's splits read and tokenised once, their token ids and texts
written to shards of Arrow IPC files that every later run reads memory-mapped, with a manifest that ties them to
the config sections and the tokenizers that made them.

    DIR/manifest.json              the format, the config's data and tokens sections and their hash, the
                                   tokenizers' hashes, per split its shards (their record batches' rows), rows
                                   and tokens per column
    DIR/source.json, target.json   the tokenizers (a run reads them from here instead of learning them)
    DIR/train-00000.arrow ...      per split, at most ``SHARD_ROWS`` rows each: columns of token ids (list<int32>)
                                   and of texts (string)

Arrow's IPC file format is made for this: a column of id lists is one flat array of ids and one of offsets, which a
memory-mapped file hands to NumPy without a copy; a shard is a sequence of record batches (``CHUNK_ROWS`` rows by
default), the chunks a run reads and batches a window at a time (``Rows``, ``batching.windowed_batches``), so that its
memory does not grow with the corpus; pyarrow is well kept and its files are read from every language. A
manifest's hash covers the data and tokens sections (``data.prepared`` left out), so a prepared directory never
pairs with another config's corpus or tokenizers: ``open_prepared`` refuses it in one line naming the directory
and the sections that differ.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import pickle
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any, Generic, TypeVar, overload

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from seqlab.config import Config
from seqlab.data.corpus import DataError
from seqlab.data.splits import SPLITS, selection_run
from seqlab.files import atomic_write

FORMAT = 1
MANIFEST = "manifest.json"
SHARD_ROWS = 1_000_000  # rows of one shard: a few hundred MB at most for sentence pairs
CHUNK_ROWS = 100_000  # rows of one record batch by default (``seqlab data prepare --chunk-rows``)
IDS = pa.list_(pa.int32())
T = TypeVar("T")


def prepared_sections(config: Config) -> dict[str, Any]:
    """What a prepared directory is made from: the kind of model (what its rows hold), the data section (but
    ``data.prepared`` itself) and the tokens section."""
    return {"kind": config.kind.name, "data": config.data.model_dump(mode="json", exclude={"prepared"}),
            "tokens": config.tokens.model_dump(mode="json")}


def sections_hash(sections: dict[str, Any]) -> str:
    """SHA-256 of the sections as canonical JSON (sorted keys): what a prepared directory was made from."""
    return hashlib.sha256(json.dumps(sections, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ShardWriter:
    """A split's rows appended (``write``) as record batches of at most ``chunk_rows`` rows, cut into shards of
    at most ``SHARD_ROWS`` rows: ``DIR/{split}-{i:05d}.arrow``. Columns named in ``schema``: token ids (lists of
    int) or texts."""

    def __init__(self, directory: Path, split: str, schema: dict[str, pa.DataType], chunk_rows: int = CHUNK_ROWS
                 ) -> None:
        self.directory, self.split, self.chunk_rows = directory, split, chunk_rows
        self.schema = pa.schema(list(schema.items()))
        self.shards: list[dict[str, Any]] = []
        self.tokens = dict.fromkeys((n for n, t in schema.items() if t == IDS), 0)
        self._writer: pa.ipc.RecordBatchFileWriter | None = None
        self._sink: Any = None

    def write(self, columns: Mapping[str, Sequence[Any]]) -> list[tuple[int, int]]:
        """Rows given column by column, each column as long as the others; returns the (shard, record batch) each
        part of them went to (one, unless a shard fills up or there are more than ``chunk_rows``)."""
        rows = len(next(iter(columns.values())))
        start, written = 0, []
        while start < rows:
            if self._writer is None or self.shards[-1]["rows"] == SHARD_ROWS:
                self._open_shard()
            take = min(rows - start, SHARD_ROWS - self.shards[-1]["rows"], self.chunk_rows)
            batch = pa.record_batch([pa.array(columns[name][start:start + take], type=field.type)
                                     for name, field in zip(self.schema.names, self.schema)], schema=self.schema)
            assert self._writer is not None
            self._writer.write_batch(batch)
            self.shards[-1]["rows"] += take
            self.shards[-1]["batches"].append(take)
            written.append((len(self.shards) - 1, len(self.shards[-1]["batches"]) - 1))
            for name in self.tokens:
                self.tokens[name] += sum(map(len, columns[name][start:start + take]))
            start += take
        return written

    @property
    def bytes(self) -> int:
        """Bytes written so far, every shard together."""
        return sum(s["bytes"] for s in self.shards[:-1]) + (self._sink.tell() if self._sink is not None else 0)

    def close(self) -> dict[str, Any]:
        """The split's part of the manifest: its shards, rows and tokens per id column."""
        self._close_shard()
        if not self.shards:  # an empty split still has its (empty) shard, so that its columns are known
            self._open_shard()
            self._close_shard()
        return {"shards": self.shards, "rows": sum(s["rows"] for s in self.shards), "tokens": self.tokens}

    def _open_shard(self) -> None:
        self._close_shard()
        name = f"{self.split}-{len(self.shards):05d}.arrow"
        self._sink = pa.OSFile(str(self.directory / name), "wb")
        self._writer = pa.ipc.new_file(self._sink, self.schema)
        self.shards.append({"file": name, "rows": 0, "batches": []})

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self.shards[-1]["bytes"] = self._sink.tell()
            self._sink.close()
            self._writer = self._sink = None


class Counted(Iterable[T]):
    """An iterable whose passes are counted: ``count``, the items of the last whole pass (None before one), so
    that a corpus read once to learn the tokenizers has a known length when it is read again to be written. Until
    then (with ``progress``) a bar counts the items read and their rate, as ``unit``."""

    def __init__(self, items: Iterable[T], unit: str = "rows", progress: bool = False) -> None:
        self.items, self.unit, self.progress = items, unit, progress
        self.count: int | None = len(items) if isinstance(items, Sized) else None

    def __iter__(self) -> Iterator[T]:
        n = 0
        with tqdm(desc="read train", unit=f" {self.unit}", disable=not self.progress or self.count is not None,
                  leave=False, dynamic_ncols=True) as bar:
            for item in self.items:
                n += 1
                if n % 10_000 == 0:
                    bar.update(10_000)
                yield item
        self.count = n


@dataclass(frozen=True)
class Preparation(Generic[T]):
    """How a kind writes its prepared directory (``seqlab data prepare``): its tokenizers' JSON by name, the
    columns of a row (``IDS`` or ``pa.string()``, ``pa.int32()``), ``encode``: a chunk of a split's items and the
    split's name -> those columns, ``unit``: what a row is (pairs, texts, sentences), and what else the manifest
    holds (a classifier's labels)."""

    tokenizers: dict[str, str]
    schema: dict[str, pa.DataType]
    encode: Callable[[list[T], str], Mapping[str, Sequence[Any]]]
    unit: str
    extra: dict[str, Any] = field(default_factory=dict)

    def write(self, config: Config, out: Path, train: Iterable[T], splits: Mapping[str, Iterable[T]],
              chunk_rows: int = CHUNK_ROWS, progress: bool = True, workers: int = 1) -> dict[str, Any]:
        """Write every split (``train``, as it may be read afresh at each pass, then ``splits``' valid and test; no
        test split in a selection run), the tokenizers and the manifest into the new directory ``out``, whole or not
        at all, a split's chunks encoded by ``workers`` processes; returns the manifest."""
        names = [name for name in SPLITS if not (name == "test" and selection_run())]
        manifest: dict[str, Any] = {}

        def write(directory: Path) -> None:
            written = {name: self._split(train if name == "train" else splits[name], name, directory, chunk_rows,
                                         progress, workers) for name in names}
            tokenizers = write_tokenizers(directory, self.tokenizers)
            sections = prepared_sections(config)
            manifest.update(sections=sections, hash=sections_hash(sections), unit=self.unit, splits=written,
                            tokenizers=tokenizers, **self.extra)
            write_manifest(directory, manifest)

        write_prepared(out, write)
        return manifest

    def _split(self, items: Iterable[T], name: str, directory: Path, chunk_rows: int, progress: bool, workers: int
               ) -> dict[str, Any]:
        """One split's items (a list, or a corpus read item by item) encoded a chunk at a time into its shards, by
        this process or by ``workers`` forked ones (fewer where there are fewer chunks), each taking every
        workers-th chunk into shards of its own; the manifest's ``order`` lists the record batches in the items'
        order. The bar counts rows (with their total and an ETA where the length is known) and the MiB written."""
        total = items.count if isinstance(items, Counted) else len(items) if isinstance(items, Sized) else None
        workers = workers if total is None else max(1, min(workers, -(-total // chunk_rows)))
        written = [0] * workers  # bytes, per worker
        with tqdm(total=total, desc=f"prepare {name}", unit=f" {self.unit}", disable=not progress, leave=False,
                  dynamic_ncols=True) as bar:

            def done(worker: int, rows: int, size: int) -> None:
                written[worker] = size
                bar.update(rows)
                bar.set_postfix_str(f"{sum(written) / 2**20:,.0f} MiB written", refresh=False)

            if workers == 1:
                parts = [self._part(items, name, directory, chunk_rows, 0, 1, done)]
            else:
                parts = _forked(functools.partial(self._part, items, name, directory, chunk_rows), workers, done)
        return _merged(parts)

    def _part(self, items: Iterable[T], name: str, directory: Path, chunk_rows: int, worker: int, workers: int,
              done: Callable[[int, int, int], None]) -> Part:
        """Every ``workers``-th chunk of the items from the ``worker``-th, encoded into shards of its own: their
        part of the manifest, and (chunk, shard, record batch) for each record batch written."""
        writer = ShardWriter(directory, name if workers == 1 else f"{name}.{worker}", self.schema, chunk_rows)
        where: list[tuple[int, int, int]] = []
        left = iter(items)
        for index in itertools.count():
            if not (chunk := list(itertools.islice(left, chunk_rows))):
                break
            if index % workers == worker:
                where += [(index, shard, batch) for shard, batch in writer.write(self.encode(chunk, name))]
                done(worker, len(chunk), writer.bytes)
        return writer.close(), where


Part = tuple[dict[str, Any], list[tuple[int, int, int]]]


def default_workers() -> int:
    """``seqlab data prepare``'s worker processes unless told: one per core where processes can fork, else 1."""
    return (os.cpu_count() or 1) if "fork" in multiprocessing.get_all_start_methods() else 1


def _forked(part: Callable[[int, int, Callable[[int, int, int], None]], Part], workers: int,
            done: Callable[[int, int, int], None]) -> list[Part]:
    """``part(worker, workers, done)`` in ``workers`` forked processes (one tokenizer thread each), their progress
    and results sent back through a queue; an error in one is raised here and the others stopped."""
    context = multiprocessing.get_context("fork")
    queue: Any = context.Queue()

    def run(worker: int) -> None:
        try:
            result = part(worker, workers, lambda w, rows, size: queue.put(("rows", w, (rows, size))))
            queue.put(("done", worker, result))
        except BaseException as exc:  # sent whole where it pickles (a DataError does), else as its text
            queue.put(("failed", worker, exc if _pickles(exc) else RuntimeError(f"{type(exc).__name__}: {exc}")))

    parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # each process one thread, and no warning about the fork
    processes = [context.Process(target=run, args=(worker,), daemon=True) for worker in range(workers)]
    try:
        for process in processes:
            process.start()
        return _gathered(queue, processes, done)
    finally:
        _restore("TOKENIZERS_PARALLELISM", parallelism)
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join()


def _gathered(queue: Any, processes: list[Any], done: Callable[[int, int, int], None]) -> list[Part]:
    """The workers' results in worker order, their progress passed to ``done`` as it comes."""
    parts: dict[int, Part] = {}
    while len(parts) < len(processes):
        try:
            kind, worker, payload = queue.get(timeout=1.0)
        except Empty:
            dead = [w for w, p in enumerate(processes) if p.exitcode not in (None, 0) and w not in parts]
            if dead:
                raise RuntimeError(f"preparing worker {dead[0]} died (exit code {processes[dead[0]].exitcode})") from None
            continue
        if kind == "rows":
            done(worker, *payload)
        elif kind == "done":
            parts[worker] = payload
        else:
            raise payload
    return [parts[worker] for worker in range(len(processes))]


def _merged(parts: list[Part]) -> dict[str, Any]:
    """A split's part of the manifest from its workers' parts: every shard, the rows and tokens summed, and
    ``order``: the record batches (shard, batch) in the order of the chunks they hold."""
    shards: list[dict[str, Any]] = []
    order: list[tuple[int, int, int]] = []
    for manifest, where in parts:
        order += [(chunk, len(shards) + shard, batch) for chunk, shard, batch in where]
        shards += manifest["shards"]
    tokens = {name: sum(manifest["tokens"][name] for manifest, _ in parts) for name in parts[0][0]["tokens"]}
    return {"shards": shards, "rows": sum(s["rows"] for s in shards), "tokens": tokens,
            "order": [[shard, batch] for _, shard, batch in sorted(order)]}


def _pickles(value: object) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 (whatever pickling raises)
        return False
    return True


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def write_prepared(out: Path, write: Callable[[Path], None]) -> None:
    """Make the prepared directory ``out`` whole or not at all: ``write(tmp)`` fills a temporary directory beside
    it (shards, tokenizers, manifest last), which is then renamed to ``out``. An existing ``out`` is refused."""
    if out.exists():
        raise DataError(f"{out}: already exists; prepare into a new directory (or remove it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # as a directory made by mkdir (mkdtemp's is the owner's only)
    try:
        write(tmp)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_tokenizers(directory: Path, tokenizers: dict[str, str]) -> dict[str, str]:
    """The tokenizers' JSON by name (``source``, ``target``) into ``directory``; returns their hashes."""
    for name, text in tokenizers.items():
        atomic_write(directory / f"{name}.json", text)
    return {name: text_hash(text) for name, text in tokenizers.items()}


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    atomic_write(directory / MANIFEST, json.dumps({"format": FORMAT, **manifest}, indent=1, ensure_ascii=False) + "\n")


@dataclass(frozen=True)
class Chunk:
    """One record batch of a shard: the unit a prepared split is read and batched in (``windowed_batches``)."""

    path: Path
    batch: int  # its index in the shard
    rows: int


class Rows(Sequence[list[int]]):
    """A column of token-id lists over a split's chunks, as Arrow lays it out (ids and offsets), read a chunk at a
    time from the shard's memory map and let go again: ``rows[i]`` is row i's ids as a list; the last ``cache``
    chunks read stay open, so memory holds a window of rows, not the split. ``lengths(chunks)`` those chunks'
    row lengths, from the offsets (``batching.Lengths``)."""

    def __init__(self, chunks: list[Chunk], column: str, cache: int) -> None:
        self.chunks, self.column, self.cache = chunks, column, cache
        self.starts = np.cumsum([0] + [chunk.rows for chunk in chunks])  # (chunks + 1,) each chunk's first row
        self._open: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()  # chunk -> ids, offsets

    def __len__(self) -> int:
        return int(self.starts[-1])

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        chunk = int(np.searchsorted(self.starts, index, side="right")) - 1
        values, offsets = self.read(chunk)
        row = index - int(self.starts[chunk])
        return list(values[offsets[row]:offsets[row + 1]].tolist())

    def chunk_rows(self) -> list[int]:
        return [chunk.rows for chunk in self.chunks]

    def lengths(self, chunks: np.ndarray) -> np.ndarray:
        """(rows of ``chunks``,) their rows' numbers of ids, from the offsets (the chunks read, as their rows are
        about to be)."""
        if len(chunks) == 0:
            return np.zeros(0, np.int32)
        return np.concatenate([np.diff(self.read(int(chunk))[1]) for chunk in chunks])

    def read(self, chunk: int) -> tuple[np.ndarray, np.ndarray]:
        """Chunk ``chunk``'s ids and offsets (views of its memory map); it stays open among the last ``cache``."""
        if chunk in self._open:
            self._open.move_to_end(chunk)
        else:
            self._open[chunk] = _column(self.chunks[chunk], self.column)
            while len(self._open) > self.cache:  # its map is closed once nothing holds a view of it
                self._open.popitem(last=False)
        return self._open[chunk]


def _column(chunk: Chunk, column: str) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's column of id lists: its ids and offsets, views of the shard's memory map."""
    try:
        batch = pa.ipc.open_file(pa.memory_map(str(chunk.path), "r")).get_batch(chunk.batch)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"{chunk.path}: unreadable shard ({exc}); prepare again") from None
    if batch.num_rows != chunk.rows:
        raise DataError(f"{chunk.path}: {batch.num_rows} rows in record batch {chunk.batch} where the manifest says "
                        f"{chunk.rows}; prepare again")
    array = batch.column(column)
    return array.values.to_numpy(zero_copy_only=True), array.offsets.to_numpy(zero_copy_only=True)


class Texts(Sequence[str]):
    """A column of texts over the shards, memory-mapped: ``texts[i]`` made a Python string when asked for, passed
    through ``change`` where one is given."""

    def __init__(self, column: pa.ChunkedArray, change: Callable[[str], str] = str) -> None:
        self.column = column
        self.change = change

    def __len__(self) -> int:
        return len(self.column)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self.change(text) for text in self.column[index].to_pylist()]
        return self.change(self.column[index].as_py())


class TokenStream:
    """A prepared split's id lists read as one stream (a language model's: ``<eos>``, then each sentence's ids and
    ``<eos>``): ``stream[a:b]`` (an array) reads the chunks that hold those positions, ``rows.cache`` chunks open
    at a time; each chunk's length is read from its offsets once, when the stream is opened."""

    def __init__(self, rows: Rows, first: int) -> None:
        self.rows, self.first = rows, first
        self.ends = np.cumsum([0] + [int(rows.lengths(np.array([c])).sum()) for c in range(len(rows.chunks))])

    def __len__(self) -> int:
        return 1 + int(self.ends[-1])

    def __getitem__(self, index: slice) -> np.ndarray:
        start, stop, step = index.indices(len(self))
        if step != 1:
            raise ValueError("a token stream is read in steps of 1")
        pieces = [np.array([self.first], np.int32)] if start == 0 < stop else []
        at = max(start, 1) - 1  # positions in the rows' ids, which start at stream position 1
        while at < stop - 1:
            chunk = int(np.searchsorted(self.ends, at, side="right")) - 1
            values, offsets = self.rows.read(chunk)
            take = min(stop - 1, int(self.ends[chunk + 1])) - at
            first = int(offsets[0]) + at - int(self.ends[chunk])
            pieces.append(values[first:first + take])
            at += take
        return np.concatenate(pieces) if pieces else np.zeros(0, np.int32)


@dataclass(frozen=True)
class Prepared:
    """An open prepared directory whose manifest matched the config (``open_prepared``)."""

    path: Path
    manifest: dict[str, Any]

    def tokenizer_json(self, name: str) -> str:
        """A tokenizer's JSON (``source`` or ``target``), checked against the manifest's hash."""
        path = self.path / f"{name}.json"
        text = path.read_text(encoding="utf-8")
        if text_hash(text) != self.manifest["tokenizers"].get(name):
            raise DataError(f"{path}: not the tokenizer the manifest names (its hash differs); prepare again")
        return text

    def ids(self, split: str, column: str, cache: int = 4) -> Rows:
        """A column of token ids, read ``cache`` chunks at a time."""
        shards = self._split(split)["shards"]
        chunks = [Chunk(self.path / shards[s]["file"], b, shards[s]["batches"][b]) for s, b in self._order(split)]
        return Rows(chunks, column, cache)

    def values(self, split: str, column: str) -> np.ndarray:
        """A column of numbers (a classifier's labels), whole in memory: (rows,)."""
        return np.concatenate([np.zeros(0, np.int32), *(chunk.to_numpy() for chunk in self._chunks(split, column))])

    def stream(self, split: str, column: str, first: int, cache: int) -> TokenStream:
        """A column of id lists read as one stream, ``first`` before them (``TokenStream``)."""
        return TokenStream(self.ids(split, column, cache), first)

    def texts(self, split: str, column: str, change: Callable[[str], str] = str) -> Texts:
        """A column of texts, memory-mapped, each passed through ``change`` when read."""
        return Texts(pa.chunked_array(self._chunks(split, column), type=pa.string()), change)

    def _split(self, split: str) -> dict[str, Any]:
        try:
            return dict(self.manifest["splits"][split])
        except KeyError:
            raise DataError(f"{self.path / MANIFEST}: no split {split!r}") from None

    def _order(self, split: str) -> list[tuple[int, int]]:
        """The split's record batches (shard, batch) in its rows' order: the manifest's ``order``, or shard after
        shard where it has none."""
        made = self._split(split)
        if "order" in made:
            return [(int(s), int(b)) for s, b in made["order"]]
        return [(s, b) for s, shard in enumerate(made["shards"]) for b in range(len(shard["batches"]))]

    def _chunks(self, split: str, column: str) -> list[pa.Array]:
        """A column's record batches, memory-mapped, in the rows' order."""
        tables = list(self._tables(split))
        return [tables[s].column(column).chunk(b) for s, b in self._order(split)]

    def _tables(self, split: str) -> Iterator[pa.Table]:
        for shard in self._split(split)["shards"]:
            path = self.path / shard["file"]
            try:
                table = pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
            except (OSError, pa.ArrowInvalid) as exc:
                raise DataError(f"{path}: unreadable shard ({exc}); prepare again") from None
            if table.num_rows != shard["rows"]:
                raise DataError(f"{path}: {table.num_rows} rows where the manifest says {shard['rows']}; prepare again")
            yield table


def open_prepared(path: str | Path, sections: dict[str, Any]) -> Prepared:
    """The prepared directory ``path``, made from these config ``sections`` (its manifest's hash); a DataError in
    one line where it is missing, of another format or made from other sections."""
    path = Path(path)
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{manifest_path}: missing; data.prepared names a directory of seqlab data prepare") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{manifest_path}: damaged ({exc}); prepare again") from None
    if manifest.get("format") != FORMAT:
        raise DataError(f"{manifest_path}: format {manifest.get('format')!r}, this seqlab reads format {FORMAT}")
    if manifest.get("hash") != sections_hash(sections):
        made = manifest.get("sections", {})
        differ = sorted(name for name in set(made) | set(sections) if made.get(name) != sections.get(name))
        raise DataError(f"{path}: prepared for another config ({', '.join(differ) or 'sections'} differ); prepare "
                        "it again for this one")
    return Prepared(path, manifest)
