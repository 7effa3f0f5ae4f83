"""Kill -9 trials: does a training run killed at any moment, then resumed, end exactly as one that was never killed?

    python benchmarks/kill_trials.py [--trials 20] [--seed 0] [--epochs 3] [--save-every 3] [--prepared] \
        [--json FILE] [--keep]

A small date Transformer (the shape of tests/conftest.py's ``small_date_config``: 1 layer of 32, character tokens,
850 generated training pairs, 3 epochs of 39 steps, a checkpoint every 3 steps and at every epoch's end; about
3 s a run, most of it Python and torch starting; ``train.precision: fp32`` and ``train.threads: 1`` in the
config, so no ``SEQLAB_PRECISION`` is needed) is trained as a user trains it,
``python -m seqlab train CONFIG --out DIR``:

* once straight: the reference;
* once through this script's tripwire with no kill point (the control: it counts the run directory's file
  events, and shows that two unkilled runs are bit-identical);
* ``--trials`` times killed with SIGKILL, then resumed with ``seqlab train CONFIG --out DIR --resume`` until it
  finishes (a trial is killed 1 to 3 times, the resumed runs too). The kill points: a random time after the run
  started writing (sent from this process, as an OOM killer or a user would), and, through a wrapper that
  monkeypatches ``os`` before it calls ``seqlab.cli.app`` (seqlab's source has no hooks), the k-th ``os.replace``
  into the run directory (just before or just after it), the k-th ``os.fsync`` of a run file or of the directory
  itself (before or after), or the k-th write of a run file cut in the middle (half its bytes written and
  flushed, then SIGKILL). Each trial's first kill point takes the next of these kinds in turn, so all are tried.

Each trial's final ``model.safetensors`` and ``checkpoint.safetensors`` are compared with the reference's: every
tensor ``torch.equal`` (same names, dtypes and shapes), their metadata equal once the timing fields
(``seconds``, ``train_seconds``, ``*_per_s``) are left out ("identical"); and, reported apart, ``log.jsonl``
record by record, timing fields aside ("log identical"). A run killed before its first checkpoint is started
again from its beginning by ``--resume``, once its config is saved; one killed before that is no run to resume
(``--resume``: nothing to resume): such a trial deletes the directory, starts afresh, and says so.

One line per trial (where it was killed, how many resumes, identical or not, temporary files left behind), a
summary, and every number in ``--json`` (default: seqlab-kill-trials.json in the system's temporary directory).
Exits 1 if a trial or the control is not identical or has another log, or a run failed.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
AT_ENV, NOTE_ENV, RUN_ENV = "KILL_TRIALS_AT", "KILL_TRIALS_NOTE", "KILL_TRIALS_RUN"  # the child's tripwire
EVENTS = ("replace", "fsync", "write")
KINDS = ("time", "replace:before", "replace:after", "fsync:before", "fsync:after", "write:during")
COMPARED = ("model.safetensors", "checkpoint.safetensors")
TIMING = re.compile(r"^(seconds|.*_seconds|.*_per_s)$")
SAVE_EVERY = 3  # 39 steps an epoch: the last mid-epoch checkpoint falls on the epoch's last step
PREPARED_CHUNK = 200  # rows of a chunk with --prepared: 950 training pairs in 5 chunks, batched in 3 windows


def trial_config(epochs: int = 3, precision: str = "fp32", save_every: int = SAVE_EVERY) -> dict[str, Any]:
    """The trained config: conftest's small date Transformer, ``epochs`` epochs, a checkpoint every ``save_every``
    steps, one thread (the same arithmetic in every run, and a core left to the machine's other work)."""
    return {
        "seed": 3,
        "data": {"corpus": {"format": "task", "task": "date", "size": 1000, "seed": 5},
                 "split": {"valid": 50, "seed": 1}, "max_source_length": 40},
        "tokens": {"source": {"level": "char"}},
        "model": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64, "dropout": 0.0, "norm": "pre",
                  "max_length": 40},
        "train": {"epochs": epochs, "batch_tokens": 600, "schedule": "cosine", "lr": 0.004, "precision": precision,
                  "best_metric": "exact_match", "save_every": save_every, "threads": 1},
        "eval": {"max_output_length": 12},
    }


# --- the child: seqlab train under a tripwire ------------------------------------------------------------------


def saved_name(path: str | os.PathLike[str]) -> str:
    """The run file a path stands for: ``.checkpoint.safetensors.ab12cd.tmp`` (files.atomic_open's temporary
    file) is ``checkpoint.safetensors``."""
    name = os.path.basename(os.fspath(path))
    return re.sub(r"^\.(.+)\.[^.]+\.tmp$", r"\1", name)


class Tripwire:
    """In the child process: counts the file events of the run directory (each ``os.replace`` into it, each
    ``os.fsync`` and each write of a file in it) and SIGKILLs its own process at the chosen one. ``at`` is
    ``count`` (no kill: the events are written to ``note`` at exit) or ``EVENT:K:PHASE``."""

    def __init__(self, run_dir: Path, at: str, note: Path) -> None:
        self.run_dir = str(run_dir.resolve())
        self.note = note
        self.counts = dict.fromkeys(EVENTS, 0)
        self.events: list[str] = []
        event, _, rest = at.partition(":")
        k, _, phase = rest.partition(":")
        self.target = (event, int(k), phase) if event in EVENTS else None

    def inside(self, path: str | os.PathLike[str] | int) -> bool:
        """Whether ``path`` (or an open descriptor's file) is the run directory or lies in it."""
        if isinstance(path, int):
            try:
                path = os.readlink(f"/proc/self/fd/{path}")
            except OSError:
                return False
        path = os.path.abspath(os.fspath(path))
        return path == self.run_dir or path.startswith(self.run_dir + os.sep)

    def name(self, path: str | os.PathLike[str]) -> str:
        """The run file ``path`` stands for (``saved_name``), or ``DIR`` for the run directory itself."""
        return "DIR" if os.path.abspath(os.fspath(path)) == self.run_dir else saved_name(path)

    def count(self, event: str, path: str | os.PathLike[str]) -> bool:
        """Count one ``event`` on ``path``; True when it is the one to die at."""
        self.counts[event] += 1
        self.events.append(f"{event} {self.name(path)}")
        return self.target is not None and self.target[:2] == (event, self.counts[event])

    def die(self, event: str, path: str | os.PathLike[str], phase: str) -> None:
        """Write where the process dies to ``note``, then SIGKILL it."""
        self.note.write_text(json.dumps({"event": event, "k": self.counts[event], "phase": phase,
                                         "file": self.name(path)}), encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)

    def check(self, event: str, path: str | os.PathLike[str], hit: bool, phase: str) -> None:
        if hit and self.target is not None and self.target[2] == phase:
            self.die(event, path, phase)

    def write_census(self) -> None:
        """At a normal exit: every counted event, in order."""
        self.note.write_text(json.dumps({"counts": self.counts, "events": self.events}), encoding="utf-8")

    def install(self) -> None:
        """Monkeypatch ``os.replace``, ``os.fsync``, ``os.fdopen`` and ``open`` (the calls seqlab.files and
        RunDir.append_log write through) to pass through ``count``."""
        real_replace, real_fsync, real_fdopen, real_open = os.replace, os.fsync, os.fdopen, builtins.open
        wire = self

        def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            hit = wire.inside(dst) and wire.count("replace", dst)
            wire.check("replace", dst, hit, "before")
            real_replace(src, dst, *args, **kwargs)
            wire.check("replace", dst, hit, "after")

        def fsync(fd: Any) -> None:
            name = os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}")
            hit = wire.inside(name) and wire.count("fsync", name)
            wire.check("fsync", name, hit, "before")
            real_fsync(fd)
            wire.check("fsync", name, hit, "after")

        class Torn:
            """A file of the run directory open for writing: the chosen write stops halfway."""

            def __init__(self, file: Any, name: str) -> None:
                self.file, self.name = file, name

            def write(self, data: Any) -> int:
                if wire.count("write", self.name) and wire.target is not None:
                    self.file.write(data[: len(data) // 2])
                    self.file.flush()
                    wire.die("write", self.name, "during")
                return self.file.write(data)

            def __enter__(self) -> Torn:
                return self

            def __exit__(self, *exc: Any) -> None:
                self.file.__exit__(*exc)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.file, name)

        def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            file = real_fdopen(fd, mode, *args, **kwargs)
            return Torn(file, os.readlink(f"/proc/self/fd/{fd}")) if "r" not in mode and wire.inside(fd) else file

        def open_(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            file = real_open(path, mode, *args, **kwargs)
            writing = not isinstance(path, int) and "r" not in mode and wire.inside(path)
            return Torn(file, os.fspath(path)) if writing else file

        os.replace, os.fsync, os.fdopen, builtins.open = replace, fsync, fdopen, open_  # type: ignore[assignment]


def child_main(argv: list[str]) -> None:
    """``kill_trials.py --child train CONFIG --out DIR [...]``: seqlab's command under the tripwire that the
    environment describes."""
    import atexit

    wire = Tripwire(Path(os.environ[RUN_ENV]), os.environ[AT_ENV], Path(os.environ[NOTE_ENV]))
    if wire.target is None:
        atexit.register(wire.write_census)
    wire.install()
    from seqlab.cli import app

    app(args=argv, prog_name="seqlab")


# --- the parent: runs, kills, comparisons ----------------------------------------------------------------------


@dataclass
class Kill:
    """Where to kill a run: ``kind`` is one of KINDS; ``k`` the event's number, or ``delay`` the seconds after the
    run's first write to its directory."""

    kind: str
    k: int = 0
    delay: float = 0.0

    def at(self) -> str:
        """The tripwire's ``at`` for this kill (``count`` for a time kill, which comes from outside)."""
        if self.kind == "time":
            return "count"
        event, phase = self.kind.split(":")
        return f"{event}:{self.k}:{phase}"

    def describe(self) -> str:
        if self.kind == "time":
            return f"{self.delay:.3f} s after its first write"
        event, phase = self.kind.split(":")
        return f"{phase} {event} #{self.k}"


@dataclass
class Child:
    """One ``seqlab train`` process: how it ended and, when killed, where."""

    returncode: int
    seconds: float
    first_write: float | None  # seconds from the start to its first write into the run directory
    where: str = ""  # where it was killed (the tripwire's file), "" when it was not
    error: str = ""  # the end of stderr, when it failed

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


@dataclass
class Census:
    """The control run's file events (``replace checkpoint.safetensors``, ...) and how long it wrote for."""

    events: list[str]
    counts: dict[str, int]
    writing_seconds: float

    def nth(self, event: str, name: str, occurrence: int) -> int:
        """The number k of ``event`` (its k-th of its kind) that is the ``occurrence``-th on file ``name``."""
        k, seen = 0, 0
        for entry in self.events:
            kind, _, file = entry.partition(" ")
            if kind == event:
                k += 1
                seen += file == name
                if seen == occurrence:
                    return k
        raise ValueError(f"no {event} #{occurrence} of {name} in the control run")

    def first_after(self, event: str, name: str, anchor: str) -> int:
        """The number k of the first ``event`` on file ``name`` after the first event ``anchor`` (e.g.
        ``fsync log.jsonl``)."""
        start = self.events.index(anchor)
        index = next(i for i in range(start, len(self.events)) if self.events[i] == f"{event} {name}")
        return sum(e.startswith(event + " ") for e in self.events[: index + 1])


@dataclass
class Setup:
    """What every trial needs: the config file, the reference run, the control's census, a scratch directory."""

    config: Path
    reference: Path
    census: Census
    work: Path
    control_differences: list[str] = field(default_factory=list)


def _first_write(run_dir: Path, since_ns: int) -> bool:
    """Whether a file in ``run_dir`` was written at or after ``since_ns``."""
    try:
        return any(p.stat().st_mtime_ns >= since_ns for p in run_dir.iterdir())
    except OSError:
        return False


def run_child(config: Path, out: Path, resume: bool, kill: Kill | None, note: Path) -> Child:
    """``seqlab train CONFIG --out OUT [--resume]`` through the tripwire; a time kill SIGKILLs it from here."""
    note.unlink(missing_ok=True)
    command = [sys.executable, str(SCRIPT), "--child", "train", str(config), "--out", str(out)]
    env = os.environ | {AT_ENV: kill.at() if kill else "count", NOTE_ENV: str(note), RUN_ENV: str(out)}
    started, started_ns = time.perf_counter(), time.time_ns()
    first: float | None = None
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(command + (["--resume"] if resume else []), env=env, cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
        while process.poll() is None:
            now = time.perf_counter()
            if first is None and _first_write(out, started_ns):
                first = now - started
            if kill is not None and kill.kind == "time" and first is not None and now - started >= first + kill.delay:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                break
            time.sleep(0.005)
        stderr.seek(0)
        tail = stderr.read().decode("utf-8", "replace")[-1500:]
    child = Child(process.returncode, time.perf_counter() - started, first)
    if child.killed:
        child.where = _where(kill, note)
    elif process.returncode != 0:
        child.error = tail
    return child


def _where(kill: Kill | None, note: Path) -> str:
    """Where a killed child died: its tripwire's note, or the time."""
    if kill is not None and kill.kind == "time":
        return f"time {kill.describe()}"
    info = json.loads(note.read_text(encoding="utf-8"))
    return f"{info['phase']} {info['event']} #{info['k']} ({info['file']})"


def prepare(work: Path, epochs: int = 3, precision: str = "fp32", save_every: int = SAVE_EVERY,
            prepared: bool = False) -> Setup:
    """Write the config, train the reference with ``python -m seqlab train``, then the control through the
    tripwire (its file events and writing time); the control must be bit-identical to the reference. ``prepared``:
    the config's data first made a prepared directory (``seqlab data prepare``) of chunks of ``PREPARED_CHUNK`` rows,
    which every run trains from, ``train.batch_window`` 2 of them at a time."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "date-small.yaml"
    raw = trial_config(epochs, precision, save_every)
    config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    if prepared:
        subprocess.run([sys.executable, "-m", "seqlab", "data", "prepare", str(config), "--out", str(work / "prepared"),
                        "--chunk-rows", str(PREPARED_CHUNK)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        raw["data"]["prepared"], raw["train"]["batch_window"] = str(work / "prepared"), 2
        config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    reference = work / "straight"
    subprocess.run([sys.executable, "-m", "seqlab", "train", str(config), "--out", str(reference)], check=True,
                   cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    control, note = work / "control", work / "control.note.json"
    child = run_child(config, control, False, None, note)
    if child.returncode != 0:
        raise RuntimeError(f"the control run failed:\n{child.error}")
    counted = json.loads(note.read_text(encoding="utf-8"))
    census = Census(counted["events"], counted["counts"], child.seconds - (child.first_write or 0.0))
    return Setup(config, reference, census, work,
                 differences(reference, control) + log_differences(reference, control))


def plan_kills(index: int, rng: random.Random, census: Census) -> list[Kill]:
    """1 to 3 kill points for trial ``index``: its first kind goes round KINDS (every kind is tried), the others
    are drawn; a resumed run has less left to do, so its points are drawn from the first half (a first time kill
    from the first 60 % of the control's writing time: a trial runs up to a third faster than the control, which
    counts its events, and a later kill would come after the end)."""
    kills = []
    for n in range(rng.choice((1, 1, 2, 3))):
        kind = KINDS[(index - 1) % len(KINDS)] if n == 0 else rng.choice(KINDS)
        share = (0.6 if kind == "time" else 1.0) if n == 0 else 0.5
        if kind == "time":
            kills.append(Kill(kind, delay=rng.uniform(0, share * census.writing_seconds)))
        else:
            total = census.counts[kind.split(":")[0]]
            kills.append(Kill(kind, k=rng.randint(1, max(1, int(share * total)))))
    return kills


@dataclass
class Trial:
    """One trial's story and verdict."""

    index: int
    planned: list[str]
    kills: list[str] = field(default_factory=list)  # where each run was actually killed
    resumes: int = 0
    fresh_starts: list[str] = field(default_factory=list)  # why a killed run had to start afresh
    not_reached: int = 0  # kill points a resumed run finished before
    errors: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # of COMPARED: weights, training state, metadata
    log_differences: list[str] = field(default_factory=list)
    leftover_tmp: int = 0
    seconds: float = 0.0

    @property
    def identical(self) -> bool:
        """model.safetensors and checkpoint.safetensors bit-identical to the reference's (timing fields aside)."""
        return not self.errors and not self.differences

    @property
    def log_identical(self) -> bool:
        return not self.errors and not self.log_differences

    def line(self) -> str:
        where = "; ".join(self.kills) or "nowhere"
        extra = f", {len(self.fresh_starts)} fresh start(s)" if self.fresh_starts else ""
        extra += f", {self.not_reached} kill point(s) not reached" if self.not_reached else ""
        verdict = "identical" if self.identical else f"NOT IDENTICAL: {(self.errors + self.differences)[0]}"
        verdict += "" if self.errors else "; log identical" if self.log_identical else f"; {self.log_differences[0]}"
        return (f"trial {self.index:2d}: killed {where}; {self.resumes} resume(s){extra}; {verdict}; "
                f"{self.leftover_tmp} temporary file(s) left; {self.seconds:.1f} s")


def run_trial(setup: Setup, index: int, kills: list[Kill], max_runs: int = 8) -> Trial:
    """Train into a fresh directory, killed at each of ``kills`` in turn, each time resumed with ``--resume``
    until a run finishes; then compare with the reference."""
    started = time.perf_counter()
    out, note = setup.work / f"trial-{index}", setup.work / f"trial-{index}.note.json"
    shutil.rmtree(out, ignore_errors=True)
    trial = Trial(index, [k.kind + (f" {k.describe()}" if k.kind == "time" else f" #{k.k}") for k in kills])
    pending, resume = list(kills), False
    for _ in range(max_runs):
        kill = pending.pop(0) if pending else None
        child = run_child(setup.config, out, resume, kill, note)
        if resume and not child.killed and "nothing to resume" in child.error:  # killed before its first checkpoint
            start_afresh(trial, out, child)
            pending, resume = ([kill] if kill else []) + pending, False
            continue
        trial.resumes += resume
        if child.killed:
            trial.kills.append(child.where)
            resume = True
            continue
        if child.returncode == 0:
            trial.not_reached += kill is not None
        else:
            trial.errors.append(f"run failed ({child.returncode}): {child.error.strip()[-600:]}")
        break
    else:
        trial.errors.append(f"not finished after {max_runs} runs")
    if not trial.errors:
        trial.differences = differences(setup.reference, out)
        trial.log_differences = log_differences(setup.reference, out)
    trial.leftover_tmp = len(list(out.glob(".*.tmp"))) if out.exists() else 0
    trial.seconds = time.perf_counter() - started
    return trial


def start_afresh(trial: Trial, out: Path, child: Child) -> None:
    """A run killed before its config was saved: ``--resume`` refused it; note why, and delete the directory
    (were its config saved, a fresh start would be refused too: it "already holds a run")."""
    refused = child.error.strip().splitlines()[-1]
    if RunDir(out).has_run():
        refused += "; and without --resume it 'already holds a run': directory deleted"
    trial.fresh_starts.append(refused)
    shutil.rmtree(out, ignore_errors=True)


# --- comparison --------------------------------------------------------------------------------------------------


def _untimed(value: Any) -> Any:
    """``value`` (JSON) without its timing fields, at any depth."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not TIMING.match(str(k))}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _metadata(path: Path) -> dict[str, Any]:
    """A safetensors file's metadata, each value parsed as JSON where it is JSON, without timing fields."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        raw = f.metadata() or {}
    parsed = {}
    for key, text in raw.items():
        try:
            parsed[key] = json.loads(text)
        except json.JSONDecodeError:
            parsed[key] = text
    return _untimed(parsed)


def tensor_differences(reference: Path, other: Path) -> list[str]:
    """How two safetensors files differ: names, dtypes, shapes, values (torch.equal), metadata."""
    import torch
    from safetensors.torch import load_file

    if not other.exists():
        return [f"{other.name} is missing"]
    a, b = load_file(str(reference)), load_file(str(other))
    found = [f"{other.name}: tensor names differ ({sorted(a.keys() ^ b.keys())[:3]})"] if a.keys() != b.keys() else []
    for name in sorted(a.keys() & b.keys()):
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
            found.append(f"{other.name}: tensor {name} differs")
    meta_a, meta_b = _metadata(reference), _metadata(other)
    found += [f"{other.name}: metadata {key} differs" for key in sorted(meta_a.keys() | meta_b.keys())
              if meta_a.get(key) != meta_b.get(key)]
    return found


def log_records(path: Path) -> list[Any]:
    """The records of a finished run's log.jsonl (every line whole JSON), without timing fields."""
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").split("\n")[:-1], 1):
        try:
            records.append(_untimed(json.loads(line)))
        except json.JSONDecodeError:
            records.append(f"line {n} is not JSON: {line[:60]!r}")
    return records


def differences(reference: Path, other: Path) -> list[str]:
    """How a run directory's final weights and training state differ from the reference's (COMPARED files)."""
    return [d for name in COMPARED for d in tensor_differences(reference / name, other / name)]


def log_differences(reference: Path, other: Path) -> list[str]:
    """How a run directory's log.jsonl differs from the reference's, timing fields aside."""
    mine, theirs = log_records(reference / "log.jsonl"), log_records(other / "log.jsonl")
    if mine == theirs:
        return []
    epochs = [r.get("epoch") if isinstance(r, dict) else r for r in theirs]
    return [f"LOG DIFFERS: {len(theirs)} records (epochs {epochs}), the reference has {len(mine)}"]


# --- the script --------------------------------------------------------------------------------------------------


def summary(trials: list[Trial], setup: Setup) -> dict[str, Any]:
    """The numbers of the whole run."""
    kinds: dict[str, int] = {}
    files: dict[str, int] = {}
    for trial in trials:
        for where in trial.kills:
            kind = "time" if where.startswith("time") else " ".join(where.split()[:2])
            kinds[kind] = kinds.get(kind, 0) + 1
            if "(" in where:
                file = where[where.index("(") + 1 : -1]
                files[file] = files.get(file, 0) + 1
    return {
        "trials": len(trials),
        "identical": sum(t.identical for t in trials),
        "logs_identical": sum(t.log_identical for t in trials),
        "kills": sum(len(t.kills) for t in trials),
        "resumes": sum(t.resumes for t in trials),
        "fresh_starts": sum(len(t.fresh_starts) for t in trials),
        "kills_by_kind": kinds,
        "kills_by_file": files,
        "leftover_tmp_files": sum(t.leftover_tmp for t in trials),
        "control_identical": not setup.control_differences,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="killed-and-resumed runs (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill points (default 0)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of the trained run (default 3)")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"),
                        help="the config's train.precision (default fp32)")
    parser.add_argument("--save-every", type=int, default=SAVE_EVERY,
                        help=f"the config's train.save_every (default {SAVE_EVERY})")
    parser.add_argument("--prepared", action="store_true",
                        help="train from a prepared directory of the config's data (seqlab data prepare), read and "
                             "batched a window of chunks at a time")
    parser.add_argument("--json", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-kill-trials.json",
                        help="write every number here (default: %(default)s)")
    parser.add_argument("--work", type=Path, help="the runs' directory (default: a temporary one, deleted after)")
    parser.add_argument("--keep", action="store_true", help="keep the runs' directory")
    return parser.parse_args(argv)


def run_trials(args: argparse.Namespace, work: Path) -> tuple[Setup, list[Trial]]:
    """The reference, the control, then ``args.trials`` trials, each printed as it ends."""
    from report import machine

    setup = prepare(work, args.epochs, args.precision, args.save_every, args.prepared)
    census = setup.census
    control = "identical" if not setup.control_differences else f"NOT IDENTICAL: {setup.control_differences}"
    data = "; trained from a prepared directory" if args.prepared else ""
    print(f"{machine()}; the config's train.precision {args.precision}{data}\ncontrol run: {census.counts} file events "
          f"in {census.writing_seconds:.2f} s of writing; {control} to the straight run", flush=True)
    rng = random.Random(args.seed)
    trials = []
    for index in range(1, args.trials + 1):
        trials.append(run_trial(setup, index, plan_kills(index, rng, census)))
        print(trials[-1].line(), flush=True)
    return setup, trials


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        child_main(argv[1:])
        return
    args = parse_args(argv)
    from report import machine

    work = args.work or Path(tempfile.mkdtemp(prefix="seqlab-kill-trials-"))
    started = time.perf_counter()
    try:
        setup, trials = run_trials(args, work)
        config = yaml.safe_load(setup.config.read_text(encoding="utf-8"))  # as trained, before its directory goes
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    seconds, numbers = time.perf_counter() - started, summary(trials, setup)
    print(f"{numbers['identical']}/{numbers['trials']} trials bit-identical to the straight run (model and "
          f"checkpoint), {numbers['logs_identical']}/{numbers['trials']} with the same log "
          f"({numbers['kills']} kills: {numbers['kills_by_kind']}; in files {numbers['kills_by_file']}; "
          f"{numbers['resumes']} resumes, {numbers['fresh_starts']} fresh starts, "
          f"{numbers['leftover_tmp_files']} temporary files left behind); {seconds:.0f} s")
    result = {"command": "python benchmarks/kill_trials.py " + " ".join(argv), "machine": machine(),
              "seed": args.seed, "config": config, "seconds": seconds,
              "census": asdict(setup.census), "control_differences": setup.control_differences, "summary": numbers,
              "trials": [asdict(t) | {"identical": t.identical, "log_identical": t.log_identical} for t in trials]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"written to {args.json}")
    if min(numbers["identical"], numbers["logs_identical"]) < numbers["trials"] or not numbers["control_identical"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
