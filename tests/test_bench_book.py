"""Smoke tests of the benchmarks against the book's NumPy code and JoeyNMT: each script's ``main`` runs end to end,
in this process, at toy size (tiny data written here, tiny models), and what it prints or writes is checked.

The peers that are not installed here are replaced at their boundary by the stand-ins in tests/stand_ins/: a copy
of ``dlfs2/`` is the book's checkout (``--book-repo``), and the peers' venv (``--peer-venv``) gets a ``python``
that is this interpreter with the stand-in ``joeynmt`` on its path. Everything else runs as in the real benchmark,
``book_numpy.py`` in processes of its own, JoeyNMT's commands in the venv's python, except the ``seqlab`` commands,
which run in this process by the command line's app (``seqlab_commands_here``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from conftest import small_date_config
from smoke import recorded, table_rows

from seqlab.config import parse_config
from seqlab.data import generate_task
from seqlab.data.splits import SELECTION_ENV
from seqlab.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
STAND_INS = Path(__file__).resolve().parent / "stand_ins"
BOOK_WIDTHS = {"date": (29, 10), "addition": (7, 4)}  # the book's files: widths of questions and of answers
PAIRS = 300  # per tiny book file: 270 training and 30 test pairs in the book's split


def book_file(directory: Path, task: str) -> None:
    """``directory/<task>.txt`` as the book writes it: PAIRS generated pairs, ``question_answer``, each side padded
    with spaces to the book's width."""
    question, answer = BOOK_WIDTHS[task]
    pairs = generate_task(task, PAIRS, seed=11)
    (directory / f"{task}.txt").write_text("".join(f"{s:<{question}}_{t:<{answer}}\n" for s, t in pairs),
                                           encoding="utf-8")


@pytest.fixture(autouse=True)
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seqlab_commands_here: Any) -> None:
    """The benchmarks importable as the flat modules they are; their temporary folders under ``tmp_path``; this
    interpreter's ``seqlab`` command first on the PATH, its commands from the benchmarks run in this process
    (``seqlab_commands_here``)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS / "peers"))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding a tiny ``dlfs2/date.txt``."""
    (tmp_path / "data" / "dlfs2").mkdir(parents=True)
    book_file(tmp_path / "data" / "dlfs2", "date")
    return tmp_path / "data"


def _forget_modules_under(folder: Path) -> None:
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(folder)):
            del sys.modules[name]


@pytest.fixture
def book_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the stand-in book checkout with tiny ``dataset/date.txt`` and ``addition.txt``. What a script run
    here changes for the book (sys.path, the working directory, MPLBACKEND, the book's modules) is undone after."""
    repo = tmp_path / "dlfs2"
    shutil.copytree(STAND_INS / "dlfs2", repo)
    for task in BOOK_WIDTHS:
        book_file(repo / "dataset", task)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    yield repo
    _forget_modules_under(repo)


@pytest.fixture
def peer_venv(tmp_path: Path) -> Path:
    """The peers' venv: its ``python`` is this interpreter with the stand-in JoeyNMT first on its path."""
    python = tmp_path / "peers" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{STAND_INS}" exec "{sys.executable}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    return tmp_path / "peers"


@pytest.fixture
def joeynmt_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stand-in JoeyNMT importable in this process, and forgotten after."""
    monkeypatch.syspath_prepend(str(STAND_INS))
    yield
    _forget_modules_under(STAND_INS / "joeynmt")


@pytest.fixture
def tiny_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``configs/book/date-fast.yaml`` at toy size (split, BPE vocabulary, model) where date_race.py and
    joeynmt_date.py read it: in a project root whose benchmarks/ is the real one. Returns the config."""
    import book_tasks
    import joeynmt_date

    cfg = yaml.safe_load((ROOT / "configs" / "book" / "date-fast.yaml").read_text(encoding="utf-8"))
    cfg["data"]["split"] |= {"test": 40, "valid": 20}
    cfg["tokens"]["source"]["vocab_size"] = 80
    cfg["model"] |= {"d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64}
    root = tmp_path / "root"
    (root / "configs" / "book").mkdir(parents=True)
    (root / "benchmarks").symlink_to(BENCHMARKS)
    config = root / "configs" / "book" / "date-fast.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    monkeypatch.setattr(book_tasks, "ROOT", root)
    monkeypatch.setattr(joeynmt_date, "CONFIG", config)
    return cfg


@pytest.fixture(scope="module")
def date_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny Transformer trained for an epoch on a tiny book ``date.txt``: (its run directory, the data directory)."""
    base = tmp_path_factory.mktemp("date-run")
    (base / "data" / "dlfs2").mkdir(parents=True)
    book_file(base / "data" / "dlfs2", "date")
    raw = small_date_config()
    raw["data"] |= {"corpus": {"format": "book", "path": "dlfs2/date.txt"}, "split": {"valid": 20, "test": 40, "seed": 1}}
    Trainer(parse_config(raw), base / "run", base / "data", progress=False).fit()
    return base / "run", base / "data"


# --- the book's NumPy code ------------------------------------------------------------------------------------------


def test_book_numpy_runs_end_to_end(book_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import book_numpy

    out = tmp_path / "book.json"
    book_numpy.main(["--book-repo", str(book_repo), "--task", "addition", "--variant", "peeky", "--epochs", "2",
                     "--seed", "5", "--json", str(out), "--quiet"])
    printed = capsys.readouterr().out
    record = json.loads(out.read_text(encoding="utf-8"))
    assert [row["epoch"] for row in record["rows"]] == [1, 2]
    assert record["data"] | {"vocab": None} == {"file": "addition.txt", "seed": 1984, "n_train": 270, "n_test": 30,
                                                "vocab": None}
    assert (record["variant"], record["seed"], record["hyperparams"]["reversed_input"]) == ("peeky", 5, True)
    assert record["total_train_s"] == pytest.approx(record["rows"][-1]["train_s_cum"])
    assert set(record["reach"]) == {"99", "99.9"}
    assert "variant=peeky train=270 test=30" in printed and "epoch   2  train" in printed
    assert "\nQ " not in printed  # --quiet: the book's own prints are hidden


def test_book_steps_runs_end_to_end(book_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stand-in book model is seqlab.scratch's: from the copied weights on the same batches, the two steps agree
    exactly, so any difference is the script's (weights not copied, other batches, another optimizer)."""
    import book_steps

    book_steps.main(["--book-repo", str(book_repo), "--steps", "2", "--every", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert "book loss" in lines[0]
    steps = [line.split() for line in lines[1:]]
    assert [int(step[0]) for step in steps] == [0, 1]
    assert all(step[1] == step[2] and float(step[3]) == 0.0 for step in steps), lines


def test_book_tasks_runs_end_to_end(book_repo: Path, data_dir: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    import book_tasks

    out = tmp_path / "results.json"
    book_tasks.main(["--task", "date", "--variants", "attention", "--seeds", "7", "--data-dir", str(data_dir),
                     "--book-repo", str(book_repo), "--book-epochs", "1", "--json", str(out), "--results", str(tmp_path),
                     "--set", "data.split.test=40", "--set", "data.split.valid=20", "--set", "model.hidden_size=16",
                     "--set", "train.epochs=2"])
    printed = capsys.readouterr().out
    ours, book = json.loads(out.read_text(encoding="utf-8"))["attention (seed 7)"]
    assert ours["config"] == "configs/book/date-attention.yaml" and len(ours["epochs"]) == 2
    assert 0 <= ours["test"]["exact_match"] <= 100 and ours["best_epoch"] in (1, 2)
    assert (book["seed"], book["epochs"], len(book["rows"]), book["data"]["n_test"]) == (7, 1, 1, 30)
    rows = {row[0]: row for row in table_rows(printed)}
    assert rows["attention (seed 7)"][1].startswith(f"**{ours['test']['exact_match']:.2f} %**")
    assert rows["book attention (seed 7)"][1:] == [f"{book['rows'][0]['acc'] * 100:.1f}"]
    assert "Command: `python benchmarks/book_tasks.py --task date --variants attention" in printed
    published = json.loads(out.read_text(encoding="utf-8"))["attention (book as published)"]
    assert published[0] is None and published[1]["seed"] is None and rows["attention (book as published)"][1] == "—"
    result = recorded(tmp_path, "book_tasks-date")
    assert result.runs == [{"run": "attention (seed 7)", "seqlab": ours, "book": book},
                           {"run": "attention (book as published)", "seqlab": None, "book": published[1]}]
    assert result.title == "Book task `date`: seqlab vs the book's NumPy code"
    assert result.tables[1].rows == [rows["attention"]] and rows["attention"][1] == f"{ours['test']['exact_match']:.2f} (1 run)"


# --- JoeyNMT on the date task ---------------------------------------------------------------------------------------


def test_joeynmt_date_runs_end_to_end(tiny_fast: dict[str, Any], data_dir: Path, peer_venv: Path,
                                      tmp_path: Path) -> None:
    """A recipe of three epochs trains until its first epoch at the target on valid, then JoeyNMT is stopped."""
    import joeynmt_date as joey

    splits = joey.date_splits(data_dir)
    tokenizer = joey.source_tokenizer(splits["train"])
    data = {"train": joey.write_split(tmp_path, "train", splits["train"], tokenizer),
            "dev": joey.write_split(tmp_path, "valid", splits["valid"], tokenizer)}
    variants, same = joey.recipes()
    run = joey.train(peer_venv / "bin" / "python", data, variants["K"], len(splits["train"]), "K")
    assert [epoch["epoch"] for epoch in run["epochs"]] == [1]  # not K's 3: stopped at 100 % valid
    assert (run["params"], run["seconds_to_target"], joey.rank_key(run)) == (1234, 0.5, (False, 0.5))
    train_targets = [t for _, t in splits["train"]]
    assert joey.tokens_per_second(run) == sum(map(len, train_targets)) / 0.5
    cfg = yaml.safe_load((Path(run["dir"]) / "config.yaml").read_text(encoding="utf-8"))
    assert cfg["training"]["epochs"] == 3 and cfg["model"]["encoder"]["hidden_size"] == tiny_fast["model"]["d_model"]
    assert cfg["training"]["validation_freq"] == math.ceil(len(splits["train"]) / cfg["training"]["batch_size"])


def test_select_joeynmt_runs_end_to_end(tiny_fast: dict[str, Any], data_dir: Path, peer_venv: Path,
                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import select_joeynmt

    monkeypatch.setenv(SELECTION_ENV, "0")  # a choosing script makes itself a selection run: undone after
    select_joeynmt.main(["--data-dir", str(data_dir), "--variants", "A", "S", "--peer-venv", str(peer_venv),
                         "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    rows = table_rows(printed)
    assert [row[0] for row in rows] == ["S (chosen)", "A"]  # S reaches 99.9 % valid (the stand-in: lr 2e-3)
    assert rows[0][1:4] == ["training.learning_rate=0.002, training.batch_size=122", "100.00", "0.5"]
    assert rows[1][2:4] == ["50.00", "not reached"]
    assert "Chosen on valid: **S**" in printed and "--joey-best S" in printed
    result = recorded(tmp_path, "select_joeynmt")
    assert [run["name"] for run in result.runs] == ["A", "S"] and result.tables[0].rows == rows
    assert rows[0][3] == f"{result.runs[1]['seconds_to_target']:.1f}"


def test_date_race_runs_end_to_end(tiny_fast: dict[str, Any], data_dir: Path, book_repo: Path, peer_venv: Path,
                                   tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """seqlab and JoeyNMT from each seed (seqlab's recipe is also JoeyNMT's best: one recipe), the book's code as
    published and reseeded, side by side: a row per system, a row per run."""
    import date_race

    monkeypatch.setenv("SEQLAB_PRECISION", "fp32")  # the rows below on every CPU kind: where auto is bf16, the race
    # adds an fp32 run per seed
    out = tmp_path / "race.json"
    date_race.main(["--data-dir", str(data_dir), "--book-repo", str(book_repo), "--book-epochs", "1",
                    "--seeds", "1", "2", "--peer-venv", str(peer_venv), "--json", str(out), "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))
    ours, joeys, books = result["seqlab"], result["joeynmt"], result["book"]
    assert [r["seed"] for r in ours] == [r["seed"] for r in joeys] == [1, 2]
    assert [r["seed"] for r in books] == [None, 1, 2]
    assert len(ours[0]["epochs"]) == 1 and ours[0]["params"] > 0
    assert {j["label"] for j in joeys} == {"same recipe = at its best (variant S)"}
    assert [j["test"] for j in joeys] == [75.0, 75.0]  # the stand-in leaves every 4th of the 40 test answers empty
    assert (books[0]["task"], books[0]["variant"], len(books[0]["rows"])) == ("date", "attention", 1)
    summary, runs = table_rows(printed)[:4], table_rows(printed)[4:]
    book = "book NumPy (ch08 AttentionSeq2seq, {}; on test after every epoch)"
    assert [row[0] for row in summary] == [
        f"seqlab (`date-fast.yaml`, {ours[0]['label']})", f"JoeyNMT 2.3.0, {joeys[0]['label']}",
        book.format("as published (its own seed)"), book.format("reseeded")]
    assert summary[1][1:4] == ["2 of 2", "0.5 ± 0.0 (0.5–0.5)", "75.00 ± 0.00 (75.00–75.00)"]
    assert [row[1] for row in runs] == ["1", "2", "1", "2", "the book's", "1", "2"]
    assert runs[2][2:6] == ["1,234", "100.00", "0.5", "75.00"]
    assert f"d_model {tiny_fast['model']['d_model']}" in printed
    race = recorded(tmp_path, "date_race")
    assert race.runs == ([{"system": "seqlab", **r} for r in ours] + [{"system": "joeynmt", **r} for r in joeys]
                         + [{"system": "book", **r} for r in books])
    assert [t.rows for t in race.tables] == [summary, runs]


def _aligned_config(tmp_path: Path) -> Path:
    """A toy Transformer config reading train/valid/test files of generated dates (in ``tmp_path/aligned``)."""
    folder = tmp_path / "aligned"
    folder.mkdir()
    pairs = generate_task("date", 80, seed=5)
    for name, rows in (("train", pairs[:60]), ("valid", pairs[60:70]), ("test", pairs[70:])):
        (folder / f"{name}.src").write_text("".join(s + "\n" for s, _ in rows), encoding="utf-8")
        (folder / f"{name}.trg").write_text("".join(t + "\n" for _, t in rows), encoding="utf-8")
    config = {
        "seed": 1,
        "data": {**{name: {"format": "aligned", "source": f"aligned/{name}.src", "target": f"aligned/{name}.trg"}
                    for name in ("train", "valid", "test")}, "max_source_length": 40, "max_target_length": 16},
        "tokens": {"shared": True, "source": {"level": "bpe", "vocab_size": 60}},
        "model": {"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32, "max_length": 64, "tie_output": True},
        "train": {"epochs": 3, "batch_tokens": 256, "label_smoothing": 0.1},
        "eval": {"max_output_length": 12},
    }
    path = tmp_path / "aligned.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_joeynmt_speed_runs_end_to_end(peer_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """seqlab and JoeyNMT take turns for one epoch of the first pairs on the same pieces and model sizes; the table
    gives each system's tokens/s and its ratio to JoeyNMT's."""
    import joeynmt_speed

    monkeypatch.setenv("SEQLAB_PRECISION", "fp32")  # one seqlab row on every CPU kind
    config = _aligned_config(tmp_path)
    joeynmt_speed.main([str(config), "--data-dir", str(tmp_path), "--pairs", "40", "--rounds", "2",
                        "--peer-venv", str(peer_venv), "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    own, theirs = "JoeyNMT 2.3.0 (float32, its own batches (random order))", \
        "JoeyNMT 2.3.0 (float32, seqlab's batches (the pairs in their order))"
    assert [row[:2] for row in rows] == [["seqlab (auto = fp32)", "2"], [own, "2"], [theirs, "2"]]
    [work] = (tmp_path / "tmp").glob("joeynmt-speed-*")
    for batches, shuffled in (("own", True), ("seqlab", False)):
        joey = yaml.safe_load((work / batches / "config.yaml").read_text(encoding="utf-8"))
        assert joey["model"]["encoder"]["hidden_size"] == 16 and joey["model"]["tied_softmax"] is True
        assert (joey["training"]["batch_type"], joey["training"]["epochs"]) == ("token", 1)
        assert joey["training"]["shuffle"] is shuffled
    own_targets = (work / "own" / "train.trg").read_text(encoding="utf-8").splitlines()
    assert len(own_targets) == 40  # --pairs
    assert sorted(own_targets) == sorted((work / "seqlab" / "train.trg").read_text(encoding="utf-8").splitlines())
    speed = sum(map(len, own_targets)) / 0.5  # the stand-in's log: its tokens (characters here) in 0.5 s
    assert rows[1][2] == f"{speed:,.0f} ± 0 ({speed:,.0f}–{speed:,.0f})"
    result = recorded(tmp_path, "joeynmt_speed-aligned")
    assert [run["system"] for run in result.runs] == ["seqlab (auto = fp32)", own, theirs] * 2
    ours = [run["tokens_per_s"] for run in result.runs[::3]]
    assert rows[0][3].startswith(f"{sum(ours) / len(ours) / speed:.2f}×")


def test_joeynmt_budget_matches_seqlabs_mean_target_tokens_per_batch() -> None:
    """The smallest JoeyNMT budget whose batches hold at least as many target tokens on average as seqlab's."""
    import joeynmt_speed

    from seqlab.data.batching import length_batches

    rng = torch.Generator().manual_seed(0)
    data = [(["s"] * int(torch.randint(3, 30, (), generator=rng)), ["t"] * int(torch.randint(3, 30, (), generator=rng)))
            for _ in range(500)]
    order = np.random.default_rng(0).permutation(len(data))
    budget = joeynmt_speed.joey_budget(data, 600, order)
    trg = [len(t) + 1 for _, t in data]
    ours = sum(trg) / len(length_batches([len(s) for s, _ in data], [len(t) for _, t in data], 600, seed=0))

    def mean(b: int) -> float:  # JoeyNMT's TokenBatchSampler over the same order
        batches, longest, size = 0, 0, 0
        for i in order:
            longest, size = max(longest, len(data[i][0]) + 1, trg[i]), size + 1
            if longest * size >= b:
                batches, longest, size = batches + 1, 0, 0
        return sum(trg) / (batches + (size > 0))

    assert mean(budget) >= ours > mean(budget - 1)


# --- decoding next to the peers -------------------------------------------------------------------------------------


def _export(date_run: tuple[Path, Path], out: Path) -> Sequence[Sequence[int]]:
    """peer_decoding.py's export of the tiny run and its test split (written to ``out``); the source ids."""
    import peer_decoding

    from seqlab.data import load_splits
    from seqlab.evaluate import EncodedSplit
    from seqlab.predictors.translator import load

    translator = load(date_run[0])
    split = EncodedSplit.build(translator, load_splits(translator.config.data, date_run[1])["test"], "test")
    out.mkdir()
    peer_decoding.export(translator, split.src, out)
    return split.src


def test_export_runs_end_to_end(date_run: tuple[Path, Path], tmp_path: Path) -> None:
    """What peer_decoding.py writes, export.py reads back: the sizes, every weight, the source ids."""
    import export

    src = _export(date_run, tmp_path / "export")
    sizes, weights, sources = export.load_export(tmp_path / "export")
    model = small_date_config()["model"]
    assert (sizes["d_model"], sizes["num_layers"], sizes["norm"]) == (model["d_model"], model["num_layers"], model["norm"])
    assert weights["positional_table"].shape == (40, sizes["d_model"])
    assert sources == src and all(s[-1] == export.EOS for s in sources)
    args = export.worker_arguments("worker").parse_args([str(tmp_path / "export"), "--max-length", "9"])
    seconds, outputs = export.repeated(args.repeats, lambda: [[4, 5]])
    line = json.loads(export.result("engine", "float32", 1, seconds, outputs))
    assert (len(line["seconds"]), line["outputs"], export.token_id(export.token(17))) == (2, [[4, 5]], 17)


def test_joeynmt_decode_runs_end_to_end(date_run: tuple[Path, Path], joeynmt_here: None, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The worker hands JoeyNMT the sources sorted by length and puts its outputs back in the export's order (the
    stand-in's ``predict`` echoes each source)."""
    src = _export(date_run, tmp_path / "export")
    import joeynmt_decode

    target_vocab = json.loads((tmp_path / "export" / "model.json").read_text())["target_vocab"]
    joeynmt_decode.main([str(tmp_path / "export"), "--beams", "1", "3", "--max-length", "5", "--batch-size", "8",
                         "--threads", str(torch.get_num_threads()), "--repeats", "2"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = [[min(i, target_vocab - 1) for i in s[:-1]][:5] for s in src]
    assert [(line["engine"], line["beam"], len(line["seconds"])) for line in lines] == [("JoeyNMT 2.3.0", 1, 2),
                                                                                       ("JoeyNMT 2.3.0", 3, 2)]
    assert all(line["outputs"] == expected for line in lines)


def test_peer_decoding_runs_end_to_end(date_run: tuple[Path, Path], peer_venv: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The script's own worker processes run as its ``main([...])`` in this process (what they print is their
    output), the peers' venv workers as processes: the same commands, without eight interpreters starting."""
    import contextlib
    import io
    import subprocess

    import peer_decoding

    spawn = subprocess.run

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        if command[1] != peer_decoding.__file__:
            return spawn(command, **options)
        threads, printed = torch.get_num_threads(), io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                peer_decoding.main(command[2:])
        finally:
            torch.set_num_threads(threads)
        return subprocess.CompletedProcess(command, 0, printed.getvalue())

    monkeypatch.setattr(peer_decoding.subprocess, "run", run)
    peer_decoding.main([str(date_run[0]), "--data-dir", str(date_run[1]), "--beams", "1", "2", "--repeats", "1",
                        "--peers", "ctranslate2", "joeynmt", "--peer-venv", str(peer_venv), "--latency", "3",
                        "--workers", "1", "2", "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    # seqlab in fp32, in bf16 where this CPU has it natively, and int8; then each export
    workers = [*(("seqlab", setting) for setting in peer_decoding.settings()), ("ctranslate2", "float32"),
               ("ctranslate2", "int8")]
    assert [setting for _, setting in workers[:2]] in (["fp32", "int8"], ["fp32", "bf16"])
    rows = table_rows(printed)[: -len(workers)]
    latencies = table_rows(printed)[-len(workers):]  # one sentence at a time, with one worker: each engine once
    assert [(row[0].split()[0], *row[1:3]) for row in latencies] == [(*worker, "3") for worker in workers]
    assert latencies[0][5] == "1.00×" and all(float(row[3]) > 0 for row in latencies)
    engines = [(row[0].split()[0], row[1], row[2], row[3]) for row in rows]
    settings = [(*worker, n) for n in ("1", "2") for worker in workers] + [("JoeyNMT", "float32", "1")]
    assert sorted(engines) == sorted((*setting, search) for setting in settings for search in ("greedy", "beam 2"))
    assert all(row[8] == "100.0" for row in rows if row[:2] == ["seqlab", "fp32"])  # batches side by side too
    assert all(re.fullmatch(r"[\d.]+ \(1 run\)", row[4]) for row in rows)  # one repeat (the spread: test_scoreboard)
    assert all(re.fullmatch(r"[\d.]+× \([\d.]+–[\d.]+×\) \((fp32|int8)\)", row[9]) for row in rows)
    assert "40 sentences in batches of" in printed and "### Decoding next to the peers" in printed
    result = recorded(tmp_path, f"peer_decoding-{date_run[0].name}")
    assert result.tables[0].rows == rows and result.tables[1].rows == latencies
    assert len(result.runs) == len(rows) + len(latencies) and "outputs" not in result.runs[0]
    assert [f"{run['exact_match']:.2f}" for run in result.runs[: len(rows)]] == [row[6] for row in rows]


def test_heldout_task_runs_end_to_end(date_run: tuple[Path, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import heldout_task

    heldout_task.main([str(date_run[0]), "--data-dir", str(date_run[1]), "--size", "50", "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    found = re.search(r": 50 fresh date problems \(seed 2026, none in the run's corpus\), beam 1: exact match "
                      r"([\d.]+) %; reweighted to the corpus's mix of shapes ([\d.]+) % \(shapes of ([\d.]+) %", printed)
    assert found, printed
    assert all(0 <= float(value) <= 100 for value in found.groups())
    assert float(found.group(3)) > 50  # the fresh problems' shapes cover most of the corpus
    (run,) = recorded(tmp_path, f"heldout_task-{date_run[0].name}").runs
    assert (run["task"], run["problems"], f"{run['exact_match']:.2f}") == ("date", 50, found.group(1))


def test_book_tasks_sets_the_book_as_published_against_the_seqlab_runs_that_reach_the_target() -> None:
    import book_tasks

    def ours(seconds: float, exact: float) -> dict[str, Any]:
        return {"train_s_to_best": seconds, "test": {"exact_match": exact}}

    published = (None, {"reach": {str(book_tasks.TARGET): {"train_s_cum": 240.0}}})
    runs = [ours(200.0, 99.95), ours(300.0, 99.9), ours(100.0, 99.5)]  # the last never reached 99.9 %
    assert book_tasks._published_ratio(published, runs) == "0.96× (0.80–1.20×) (2 of 3)"
    assert book_tasks._published_ratio(published, [ours(100.0, 99.5)]) == "— (not reached)"
    never = (None, {"reach": {str(book_tasks.TARGET): {"train_s_cum": None}}})
    assert book_tasks._published_ratio(never, runs) == "— (not reached)"
    assert book_tasks._published_ratio(None, runs) == "—"


def test_the_books_format_variants_race_the_books_own_scripts() -> None:
    """fixed-peeky (configs/book/addition-fixed-peeky.yaml, the book's format) races the book's peeky script."""
    import book_tasks

    assert [book_tasks.book_variant(v) for v in book_tasks.VARIANTS["addition"]] == [
        "baseline", "reverse", "peeky", "attention", None, "baseline", "reverse", "peeky"]
    root = Path(__file__).resolve().parents[1]
    assert all((root / "configs" / "book" / f"addition-{v}.yaml").is_file() for v in book_tasks.VARIANTS["addition"])
