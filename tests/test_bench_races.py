"""The races and their selections run end to end at toy size: each benchmark's ``main([...])`` in-process on tiny
corpora written into tmp_path in the formats the configs read (ChatbotData's CSV, Multi30k's gzipped lines), tiny
models through ``--set``, a few steps; what it printed, recorded or wrote is checked. The peers that are not
installed here run as stand-ins with their interface (tests/stand_ins/: gensim's package behind a "python", KenLM's
lmplz and query, the book's modules behind ``--book-repo``), so that every step of the orchestration runs; the real
peers run only in the real benchmarks. The workers that ``report.run_worker`` starts in a fresh interpreter (``python
SCRIPT --worker ...``) run here as the script's ``main`` (``in_process_workers``), and every ``seqlab`` command by the
command line's app (``seqlab_commands_here``), which spares each its imports."""

from __future__ import annotations

import csv
import gzip
import importlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml
from conftest import CLASS_TOPICS, ENDINGS, FILLERS
from sklearn.metrics import f1_score
from smoke import recorded, table_rows

from seqlab.data.splits import SELECTION_ENV
from seqlab.rundir import RunDir

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
STAND_INS = Path(__file__).resolve().parent / "stand_ins"
GENSIM_EVAL = STAND_INS / "gensim" / "gensim" / "test" / "test_data"
BOOK = STAND_INS / "dlfs2"

# Multi30k-like captions: English and its German, word for word, from the words of the stand-in evaluation files.
ADJECTIVES = {"young": "junger", "old": "alter", "little": "kleiner", "black": "schwarzer", "white": "weißer"}
SUBJECTS = {"man": "mann", "woman": "frau", "boy": "junge", "girl": "mädchen", "dog": "hund"}
VERBS = {"walking": "geht", "running": "rennt", "sitting": "sitzt", "playing": "spielt"}
PLACES = {"park": "park", "street": "straße", "beach": "strand", "snow": "schnee", "water": "wasser"}
# Small models of the Korean configs, for every seqlab run of a chatbot benchmark.
KOREAN_TOY = ["data.split.valid=30", "data.split.test=30", "model.d_model=32", "model.num_heads=2", "model.d_ff=64",
              "model.num_layers=1", "tokens.source.morphemes=false", "tokens.source.vocab_size=150"]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seqlab_commands_here: Any) -> Any:
    """``bench("x")``: benchmarks/x.py as a module (flat imports as the scripts use them). The directories the
    scripts make with ``tempfile`` go under tmp_path, ``seqlab`` is the one beside this python (its commands run in
    this process: ``seqlab_commands_here``), and the selection run that a choosing script makes of this process
    (``report.choose_on_valid``) ends with the test."""
    monkeypatch.setenv(SELECTION_ENV, "0")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return importlib.import_module


@pytest.fixture
def in_process_workers(bench: Any, monkeypatch: pytest.MonkeyPatch,
                       seqlab_commands_here: Callable[..., subprocess.CompletedProcess[Any]]) -> None:
    """``report.run_worker``'s ``python SCRIPT --worker KIND SPEC RESULT`` runs as SCRIPT's ``main([...])`` in this
    process, in the directory it names (``report.seqlab``'s commands too: ``seqlab_commands_here``); what a worker
    changes for the process is undone: ``sys.path``, the book's modules, the working directory, MPLBACKEND, and
    vectors_race's replacement of ``read_words``."""
    import seqlab.vectors.run as vectors_run

    monkeypatch.setattr(vectors_run, "read_words", vectors_run.read_words)
    monkeypatch.setenv("MPLBACKEND", "Agg")

    def run(command: list[str], check: bool, **options: Any) -> subprocess.CompletedProcess[Any]:
        if command[1:3] == ["-m", "seqlab"]:  # report.seqlab: a seqlab command
            return seqlab_commands_here(command, check=check, **options)
        python, script, *argv = command
        cwd = options["cwd"]
        assert python == sys.executable and check
        path, here = list(sys.path), Path.cwd()
        os.chdir(cwd)
        try:
            bench(Path(script).stem).main(argv)
        finally:
            os.chdir(here)
            sys.path[:] = path
            for name in [name for name, module in sys.modules.items()
                         if str(getattr(module, "__file__", None) or "").startswith(str(STAND_INS))]:
                del sys.modules[name]
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bench("report"), "subprocess",
                        SimpleNamespace(run=run, PIPE=subprocess.PIPE, DEVNULL=subprocess.DEVNULL))


def chatbot_data(data_dir: Path, n: int = 200) -> Path:
    """``data_dir/chatbot_ko/ChatbotData.csv``: ``n`` rows of ChatbotData's columns Q, A, label, where a question's
    topic word (conftest's CLASS_TOPICS) decides its label and its answer."""
    path = data_dir / "chatbot_ko" / "ChatbotData.csv"
    path.parent.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Q", "A", "label"])
        for _ in range(n):
            label = str(rng.integers(0, 3))
            topic = str(rng.choice(CLASS_TOPICS[label]))
            question = f"{rng.choice(FILLERS)} {topic} {rng.choice(ENDINGS)}"
            writer.writerow([question, f"{topic} 얘기 좋아요", label])
    return data_dir


def multi30k_data(data_dir: Path, train: int, valid: int, test: int) -> Path:
    """Multi30k's files under ``data_dir/multi30k/``: train.de.gz and train.en.gz (line i a German caption and its
    English), val.en.gz and test_2016_flickr.en.gz."""
    rng = np.random.default_rng(0)
    out = data_dir / "multi30k"
    out.mkdir(parents=True)
    for name, count in [("train", train), ("val", valid), ("test_2016_flickr", test)]:
        words = [[str(rng.choice(list(table))) for table in (ADJECTIVES, SUBJECTS, VERBS, PLACES)] for _ in range(count)]
        en = [f"A {a} {s} is {v} in the {p} ." for a, s, v, p in words]
        de = [f"Ein {ADJECTIVES[a]} {SUBJECTS[s]} {VERBS[v]} im {PLACES[p]} ." for a, s, v, p in words]
        for language, lines in [("en", en), ("de", de)]:
            (out / f"{name}.{language}.gz").write_bytes(gzip.compress("".join(f"{x}\n" for x in lines).encode()))
    return data_dir


def stand_in_command(path: Path, text: str) -> Path:
    """An executable at ``path`` that runs the shell command ``text`` with the arguments it is given."""
    path.write_text(f"#!/bin/sh\n{text} \"$@\"\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def stand_in_gensim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stand-in gensim importable in this process; forgotten afterwards."""
    monkeypatch.syspath_prepend(str(STAND_INS / "gensim"))
    yield
    for name in [m for m in sys.modules if m == "gensim" or m.startswith("gensim.")]:
        del sys.modules[name]


def test_gensim_word2vec_runs_end_to_end(bench: Any, stand_in_gensim: None, tmp_path: Path) -> None:
    sentences = ["a man is walking in the park", "", "a dog is running", "a man and a dog", "the park"]
    corpus = tmp_path / "words.txt"
    corpus.write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    bench("gensim_word2vec").main(["--corpus", str(corpus), "--out", str(tmp_path / "out"), "--sg", "0", "--dim", "8",
                                   "--min-count", "2", "--epochs", "3", "--eval-dir", str(GENSIM_EVAL)])
    vocabulary = json.loads((tmp_path / "out" / "vocabulary.json").read_text(encoding="utf-8"))
    counts = Counter(" ".join(sentences).split())
    kept = sorted((w for w in counts if counts[w] >= 2), key=lambda w: (-counts[w], w))
    assert vocabulary == {"words": kept, "counts": [counts[w] for w in kept]}
    vectors = np.load(tmp_path / "out" / "vectors.npy")
    assert vectors.shape == (len(kept), 8) and vectors.dtype == np.float32
    result = json.loads((tmp_path / "out" / "result.json").read_text(encoding="utf-8"))
    assert len(result["epoch_s"]) == 3 and result["corpus_words"] == sum(counts.values())
    assert result["vocab_size"] == len(kept) and result["gensim"] == "4.4.0.stand-in"
    own = result["gensim_own_scores"]  # of its 6 WordSim pairs only "dog park" has both words in the vocabulary
    assert own["wordsim353.tsv"]["oov_percent"] == pytest.approx(100 * 5 / 6) and "simlex999.txt" in own


def test_vectors_race_runs_end_to_end(bench: Any, in_process_workers: None, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    data = multi30k_data(tmp_path / "data", 300, 0, 0)
    config = tmp_path / "vectors.yaml"
    config.write_text(yaml.safe_dump({
        "data": {"corpora": [{"format": "aligned", "source": "multi30k/train.de.gz", "target": "multi30k/train.en.gz"}]},
        "words": {"lowercase": True}, "train": {"method": "skipgram", "dim": 8, "min_count": 2, "epochs": 2}}))
    python = stand_in_command(tmp_path / "python", f"PYTHONPATH={STAND_INS / 'gensim'} exec {sys.executable}")
    out = tmp_path / "race.json"
    bench("vectors_race").main(["--config", str(config), "--data-dir", str(data), "--gensim-python", str(python),
                                "--workers", "1", "--repeat", "2", "--book-repo", str(BOOK), "--book-epochs", "1",
                                "--seeds", "1", "--count-windows", "2", "--work-dir", str(tmp_path / "work"),
                                "--json", str(out),
                                "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    labels = [row[0] for row in rows]
    assert labels == ["seqlab skipgram * (1 workers)", "gensim 4.4.0.stand-in skipgram (1 workers)",
                      "seqlab cbow * (1 workers)",
                      "gensim 4.4.0.stand-in cbow (1 workers)",
                      "book NumPy CBOW (ch04, Adam, batch 100; book runs 10 epochs)",
                      "seqlab cbow, 1 epoch(s) as the book", "seqlab count (PPMI + SVD), window 2"]
    record = json.loads(out.read_text(encoding="utf-8"))
    corpus = record["corpus"]
    # 9 English and 7 German words a line, the corpus twice over
    assert corpus["sentences"] == 2 * 600 and corpus["words"] == 2 * 300 * (9 + 7)
    runs = [run for group in record["runs"].values() for run in group]
    assert {run["scores"]["vocab_size"] for run in runs} == {corpus["vocab_size"]}  # the same words for every system
    assert all(run["corpus_words"] == corpus["words"] for run in runs if run["system"] == "gensim")
    assert [len(run["epoch_s"]) for run in runs] == [2, 2, 2, 2, 1, 1, 0]
    # of the stand-in files' questions and pairs, those with a word outside the corpus are not covered
    assert {(run["scores"]["analogy_coverage"], run["scores"]["ws353_coverage"]) for run in runs} == {(75.0, 500 / 6)}
    result = recorded(tmp_path, "vectors_race-repeat2")  # a race over a repeated corpus is a record of its own
    assert result.runs == json.loads(json.dumps(runs, default=str)) and result.tables[0].rows == rows
    assert rows[0][6] == f"{runs[0]['train_s'] + runs[0].get('read_s', 0.0):.1f} (1 run)"  # seqlab skipgram's time
    assert rows[0][9] == f"{corpus['words'] * 2 / sum(runs[0]['epoch_s']):,.0f} (1 run)"  # words/s, training
    assert rows[0][10] == f"{corpus['words'] * 2 / (runs[0]['train_s'] + runs[0].get('read_s', 0.0)):,.0f} (1 run)"


def test_lm_time_estimate_runs_end_to_end(bench: Any, in_process_workers: None, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from seqlab import precision
    from seqlab.config import load_config
    from seqlab.model import build_lm, num_parameters
    from seqlab.model.lm import LMConfig

    config = ROOT / "configs" / "lm" / "multi30k_en.yaml"
    bench("lm_time_estimate").main([str(config), "--vocab", "50", "--train-tokens", "70000", "--steps", "1",
                                    "--warmup", "1", "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == precision.native_precisions()
    model = load_config(config).model
    assert isinstance(model, LMConfig)
    for _, parameters, step_s, tokens_per_s, epoch_s, epochs, hours in rows:
        assert int(parameters.replace(",", "")) == num_parameters(build_lm(model, 50))
        assert float(tokens_per_s.replace(",", "")) == pytest.approx(20 * 35 / float(step_s), rel=0.05)
        assert float(epoch_s.replace(",", "")) == pytest.approx(70000 / float(tokens_per_s.replace(",", "")), abs=1)
        assert epochs == "10" and float(hours) == pytest.approx(float(epoch_s.replace(",", "")) * 10 / 3600, abs=0.06)
    result = recorded(tmp_path, "lm_time_estimate-multi30k_en")
    assert result.tables[0].rows == rows and [run["precision"] for run in result.runs] == [row[0] for row in rows]
    assert [f"{run['step_s']:.3f}" for run in result.runs] == [row[2] for row in rows]


def small_config(path: Path, config: Path, model: dict[str, Any]) -> Path:
    """``config`` with the ``model`` keys changed, written to ``path``."""
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["model"] |= model
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_lm_race_runs_end_to_end(bench: Any, in_process_workers: None, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Every system but seqlab's Transformer LM, which takes the LSTM's path (``seqlab_system``) with another config
    and would cost three more ``seqlab`` processes."""
    data = multi30k_data(tmp_path / "data", 250, 40, 40)
    lstm = small_config(tmp_path / "lstm.yaml", ROOT / "configs" / "lm" / "multi30k_en.yaml",
                        {"embedding_size": 32, "hidden_size": 32})
    kenlm = tmp_path / "kenlm"
    kenlm.mkdir()
    for tool in ("lmplz", "query"):
        stand_in_command(kenlm / tool, f"exec {sys.executable} {STAND_INS / 'kenlm' / f'{tool}.py'}")
    out = tmp_path / "race.json"
    bench("lm_race").main(["--config", str(lstm), "--data-dir", str(data), "--systems", "kenlm", "rnnlm", "better",
                           "throughput", "--book-repo", str(BOOK), "--kenlm-bin", str(kenlm), "--quick",
                           "--work-dir", str(tmp_path / "work"), "--json", str(out), "--results", str(tmp_path),
                           "--plot", str(tmp_path / "curves.png")])
    printed = capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))
    tokens, per_line = result["tokens"], result["tokens"]["test"] // 40  # every caption is as long in tokens
    assert tokens == {"train": 250 * per_line, "valid": 40 * per_line, "test": 40 * per_line} and per_line >= 10
    assert result["seqlab"]["test"]["tokens"] == result["kenlm"]["test"]["tokens"] == tokens["test"]
    assert result["seqlab"]["wall_s"] > result["seqlab"]["train_s"] and len(result["seqlab"]["samples"]) == 10
    assert result["kenlm"]["discount_fallback"] and result["kenlm"]["ngrams"][0][0] == "1"
    for kind in ("rnnlm", "better"):  # the stand-in book models score every word alike
        book = result["book"][kind]
        assert book["test"]["perplexity"] == pytest.approx(result["vocab_size"]), kind
        assert book["test_ppl_book"] == pytest.approx(result["vocab_size"]) and len(book["epochs"]) == 1
        assert book["epochs"][0]["test_ppl_book"] == pytest.approx(result["vocab_size"])  # each point's test score
        kept = json.loads((tmp_path / "work" / f"book-{kind}" / "epochs.json").read_text(encoding="utf-8"))
        assert kept["epochs"] == book["epochs"]  # kept epoch by epoch as they end (``_keep_book``)
    assert [run["steps"] for run in result["throughput"]["runs"]][0] == 10
    rows = table_rows(printed)
    assert [row[0].split(" (")[0] for row in rows[:4]] == [
        "seqlab LSTM LM", "KenLM lmplz 5-gram, interpolated modified KN", "book NumPy Rnnlm", "book NumPy BetterRnnlm"]
    assert rows[0][-1] == f"**{result['seqlab']['test']['perplexity']:.2f}**"
    recorded_race = recorded(tmp_path, "lm_race")
    from seqlab import precision

    precisions = precision.native_precisions()  # its training step in each native precision
    assert [run["precision"] for run in result["throughput"]["runs"]] == precisions
    assert [run["system"] for run in recorded_race.runs] == [
        "seqlab", "kenlm", "book rnnlm", "book better", *["throughput"] * len(precisions)]
    assert recorded_race.runs[0]["test"] == result["seqlab"]["test"] and recorded_race.tables[0].rows == rows[:4]
    [fifth] = [t for t in recorded_race.tables if t.title.startswith("BetterRnnlm's curve")]
    better, ours = result["book"]["better"]["epochs"][0], result["seqlab"]["epochs"]
    within = [e for e, s in zip(ours, np.cumsum([e["train_s"] for e in ours])) if s <= better["fit_s"] / 5]
    assert fifth.rows[0][4] == (str(within[-1]["epoch"]) if within else "none")
    assert fifth.rows[0][-1] == ("yes" if within and within[-1]["valid_ppl"] < better["valid_ppl_book"] else "no")
    lines = bench("lm_race").curves_figure(recorded_race.runs).axes[0].get_lines()  # as --plot drew it
    assert [line.get_label() for line in lines] == [
        "seqlab LSTM LM", "KN-5 (lmplz)", "book Rnnlm (its eval_perplexity)", "book BetterRnnlm (its eval_perplexity)",
        "book BetterRnnlm at a fifth of its seconds"]
    assert list(lines[0].get_xdata()) == pytest.approx(np.cumsum([e["train_s"] for e in result["seqlab"]["epochs"]]))
    assert list(lines[3].get_ydata()) == list(lines[4].get_ydata()) == [
        e["valid_ppl_book"] for e in result["book"]["better"]["epochs"]]
    assert list(lines[4].get_xdata()) == pytest.approx(np.array(lines[3].get_xdata()) / 5)
    assert (tmp_path / "curves.png").stat().st_size > 0
    [record] = tmp_path.glob("lm_race.*.json")
    bench("lm_race").main(["--plot-record", str(record), "--plot", str(tmp_path / "again.png")])  # nothing run
    assert (tmp_path / "again.png").stat().st_size > 0
    work = tmp_path / "work"  # the race's own run taken as a --curve-runs run: scored the same, its tokens checked
    run, test_stream, quick = Path(result["seqlab"]["run_dir"]), np.load(work / "stream-test.npy"), work / "quick-data"
    test_lines = gzip.decompress((quick / "multi30k" / "test_2016_flickr.en.gz").read_bytes()).decode().splitlines()
    curve = bench("lm_race").curve_system(run, test_lines, test_stream, quick, work)
    assert (curve["name"], curve["test"], curve["epochs"]) == (run.name, result["seqlab"]["test"], result["seqlab"]["epochs"])
    with pytest.raises(SystemExit, match="its tokens differ"):
        bench("lm_race").curve_system(run, test_lines[1:], test_stream, quick, work)


def test_the_fifth_table_takes_the_lowest_of_seqlabs_runs_within_each_fifth(bench: Any) -> None:
    """Each BetterRnnlm epoch against the lowest valid perplexity among every seqlab run's epochs done within a
    fifth of the book's seconds so far (the config's run and ``--curve-runs``, recipes for longer budgets); a
    point where no seqlab epoch is done yet is lost."""
    def run(seconds: list[float], ppls: list[float]) -> dict[str, Any]:
        return {"epochs": [dict(epoch=k + 1, train_s=s, valid_ppl=p) for k, (s, p) in enumerate(zip(seconds, ppls))]}

    book = [dict(epoch=k + 1, fit_s=s, valid_ppl_book=p, test_ppl_book=p - 0.1, lr_after=20)
            for k, (s, p) in enumerate([(40, 35.0), (160, 24.5), (200, 21.0), (100, 19.0)])]
    result = {"seqlab": run([10, 10, 10], [30.0, 25.0, 24.0]), "curves": [{"name": "big", **run([40, 40], [26.0, 20.0])}],
              "book": {"better": {"epochs": book}}}
    race = bench("lm_race")
    table = race.fifth_table(result)
    assert [row[3:] for row in table.rows] == [  # the fifths: 8, 40, 80 and 100 s
        ["8", "none", "—", "—", "no"], ["40", "3 of seqlab", "30", "24.00", "yes"],
        ["80", "2 of big", "80", "20.00", "yes"], ["100", "2 of big", "80", "20.00", "no"]]
    assert table.rows[1][2] == "24.50 / 24.40"
    epochs = race.epochs_table(result)
    assert epochs.columns == ["epoch", "seqlab", "big", "better"]
    assert epochs.rows[2:] == [["3", "24.00", "", "21.00 (lr 20)"], ["4", "", "", "19.00 (lr 20)"]]


def test_a_runs_looks_inside_an_epoch_are_points_of_its_curve(bench: Any) -> None:
    """``train.valid_every``'s looks (log.jsonl's ``looks``) join the epochs' ends in a seqlab run's curve, placed by
    their steps and their seconds within the epoch; the fifth table takes a look where it is the last point done
    within a fifth."""
    looks = [[dict(step=2, train_s=6, valid_ppl=40.0)],
             [dict(step=5, train_s=2.5, valid_ppl=26.0), dict(step=7, train_s=7.5, valid_ppl=23.0)]]
    epochs = [dict(epoch=k + 1, step=4 * (k + 1), train_s=10, valid_ppl=p, looks=looks[k]) for k, p in enumerate([30.0, 22.0])]
    race = bench("lm_race")
    assert race.curve_points(epochs) == [("0.50", 6, 40.0), ("1", 10, 30.0), ("1.25", 12.5, 26.0), ("1.75", 17.5, 23.0),
                                         ("2", 20, 22.0)]
    book = [dict(epoch=1, fit_s=90, valid_ppl_book=24.0), dict(epoch=2, fit_s=60, valid_ppl_book=21.0)]
    rows = race.fifth_table({"seqlab": {"epochs": epochs}, "book": {"better": {"epochs": book}}}).rows
    assert [row[3:] for row in rows] == [["18", "1.75", "18", "23.00", "yes"], ["30", "2", "20", "22.00", "no"]]


@pytest.mark.parametrize("kind", ["rnnlm", "better"])
def test_the_books_epochs_go_on_from_where_they_were_kept(bench: Any, tmp_path: Path, kind: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """``book_worker`` keeps each epoch (``_keep_book``); run again with more epochs, it trains only the new ones,
    from the kept parameters, LSTM states and lr; what was kept for another seed is refused in one line."""
    rng = np.random.default_rng(0)
    streams = {}
    for name, size in (("train", 2000), ("valid", 1000), ("test", 1000)):
        np.save(tmp_path / f"{name}.npy", rng.integers(0, 30, size).astype(np.int32))
        streams[name] = str(tmp_path / f"{name}.npy")
    spec = dict(book_repo=str(BOOK), model=kind, streams=streams, vocab_size=30, seed=1, state=str(tmp_path / kind))
    first = bench("lm_race").book_worker(spec | {"epochs": 1})
    kept = np.load(tmp_path / kind / "params.npz")
    assert set(kept) == {f"p{i}" for i in range(len(kept))} and kept
    both = bench("lm_race").book_worker(spec | {"epochs": 2})
    assert both["epochs"][0] == first["epochs"][0] and [e["epoch"] for e in both["epochs"]] == [1, 2]
    assert f"book {kind}: resumed after epoch 1" in capsys.readouterr().err
    assert json.loads((tmp_path / kind / "epochs.json").read_text(encoding="utf-8"))["epochs"] == both["epochs"]
    with pytest.raises(SystemExit, match="holds the book's epochs of .* another --work-dir"):
        bench("lm_race").book_worker(spec | {"epochs": 3, "seed": 2})


def test_select_tfidf_runs_end_to_end(bench: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = chatbot_data(tmp_path / "data")
    bench("select_tfidf").main(["--data-dir", str(data), "--set", "data.split.valid=40", "--set", "data.split.test=40",
                                "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    rows = table_rows(printed)
    assert [row[0] for row in rows] == [str(rank) for rank in range(1, 11)]
    f1 = [float(row[3]) for row in rows]
    assert f1 == sorted(f1, reverse=True) and f1[0] >= 90  # the topic word gives the label away
    chosen = re.search(r"Chosen on valid: \*\*(.+), C (\S+)\*\*", printed)
    assert chosen and chosen.groups() == (rows[0][1], rows[0][2])
    assert f'--C {rows[0][2]} --set data.split.valid=40 --set data.split.test=40`' in printed
    result = recorded(tmp_path, "select_tfidf")
    assert result.tables[0].rows == rows and len(result.runs) == 30  # 6 feature sets × 5 values of C
    assert rows[0][3] == f"{max(run['valid_macro_f1'] for run in result.runs):.2f}"


def test_classify_race_runs_end_to_end(bench: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = chatbot_data(tmp_path / "data")
    out = tmp_path / "race.json"
    sets = [x for item in [*KOREAN_TOY, "train.epochs=2"] for x in ("--set", item)]
    bench("classify_race").main(["--data-dir", str(data), "--seeds", "3", *sets, "--json", str(out),
                                 "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    result = json.loads(out.read_text(encoding="utf-8"))
    sk, (ours,) = result["sklearn"], result["seqlab"]
    assert sk["features"] == "char 2-5 + word 1-2" and sk["C"] == 30.0 and sk["test"]["macro_f1"] >= 90
    assert ours["seed"] == 3 and ours["epochs"] == 2 and ours["texts_per_s"] > 0
    run = RunDir(ours["run_dir"])  # the config's n-gram head: its fit is training time too
    fit_s = run.ngrams()[1]["fit_seconds"]
    assert fit_s > 0 and ours["train_s"] == pytest.approx(sum(e["train_seconds"] for e in run.log()) + fit_s)
    assert sum(map(sum, ours["test"]["confusion"])) == 30  # the test split of the overrides, scored by seqlab eval
    assert [row[0] for row in rows[:4]] == ["scikit-learn TF-IDF + LR", "seqlab `configs/chatbot_ko_labels.yaml`, seed 3",
                                            "scikit-learn TF-IDF + LR", "seqlab `configs/chatbot_ko_labels.yaml`"]
    assert rows[1][3] == f"**{ours['test']['macro_f1']:.2f}**"
    assert len(ours["test_predicted"]) == 30 and ours["test_predicted_macro_f1"] == ours["test"]["macro_f1"]
    paired = result["paired"]
    assert paired["difference"] == pytest.approx(ours["test"]["macro_f1"] - sk["test"]["macro_f1"])
    assert paired["low"] <= paired["high"] and 0 <= paired["p"] <= 1
    assert rows[4] == [f"{paired['difference']:+.2f}", f"{paired['low']:+.2f} to {paired['high']:+.2f}",
                       f"{paired['p']:.4f}", "10,000"]
    recorded_race = recorded(tmp_path, "classify_race")
    assert recorded_race.runs == [{"system": "sklearn", **sk}, ours, {"system": "paired bootstrap", **paired}]
    assert recorded_race.tables[1].rows[1][2] == f"{ours['test']['macro_f1']:.2f} (1 run)" == rows[3][2]


def test_paired_bootstrap_scores_as_scikit_learn_and_tells_a_real_lead(bench: Any) -> None:
    race = bench("classify_race")
    rng = np.random.default_rng(3)
    true = rng.integers(0, 3, 400)
    good = np.where(rng.random(400) < 0.10, (true + 1) % 3, true)
    poor = np.where(rng.random(400) < 0.25, (true + 2) % 3, true)
    index = rng.integers(0, 400, (5, 400))
    for row in index:  # every resample's macro-F1 is scikit-learn's on that resample
        expected = 100 * f1_score(true[row], poor[row], average="macro", labels=[0, 1, 2], zero_division=0)
        assert race.resampled_macro_f1(true, poor, row[None], 3)[0] == pytest.approx(expected)
    lead = race.paired_bootstrap(true.tolist(), [good.tolist(), good.tolist()], poor.tolist(), 3, samples=2000)
    assert lead["p"] < 0.001 and 0 < lead["low"] < lead["difference"] < lead["high"]
    assert lead["difference"] == pytest.approx(100 * (f1_score(true, good, average="macro")
                                                      - f1_score(true, poor, average="macro")))
    same = race.paired_bootstrap(true.tolist(), [poor.tolist()], poor.tolist(), 3, samples=2000)
    assert same == {"difference": 0.0, "low": 0.0, "high": 0.0, "p": 1.0, "samples": 2000}  # never ahead
    behind = race.paired_bootstrap(true.tolist(), [poor.tolist()], good.tolist(), 3, samples=2000)
    assert behind["p"] > 0.999


def test_pretrain_race_runs_end_to_end(bench: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = chatbot_data(tmp_path / "data")
    out = tmp_path / "race.json"
    sets = [x for item in [*KOREAN_TOY, "train.epochs=1"] for x in ("--set", item)]
    bench("pretrain_race").main(["--data-dir", str(data), "--seeds", "2", *sets, "--work", str(tmp_path / "work"),
                                 "--json", str(out), "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    (race,) = json.loads(out.read_text(encoding="utf-8"))
    pre, fine, scratch = race["pretrain"], race["fine"], race["scratch"]
    assert race["seed"] == 2 and pre["epochs"] == fine["epochs"] == 1 and "test" not in pre
    # from scratch for as long as pretraining and fine-tuning together, in the fine-tuning's epochs
    assert scratch["epochs"] == max(1, round((pre["train_s"] + fine["train_s"]) / fine["train_s"]))
    assert sum(map(sum, fine["test"]["confusion"])) == sum(map(sum, scratch["test"]["confusion"])) == 30
    assert Path(fine["run_dir"]).parent == tmp_path / "work"
    (row, fine_row, scratch_row) = table_rows(printed)
    assert row[0] == "2" and row[3].startswith(f"**{fine['test']['macro_f1']:.2f}**")
    assert fine_row[1] == f"{fine['test']['macro_f1']:.2f} (1 run)" and scratch_row[0] == "from scratch"
    result = recorded(tmp_path, "pretrain_race")
    assert result.runs == [race] and result.tables[0].rows == [row] and result.tables[1].rows[1] == scratch_row
    assert printed.count("[MASK] 1:") == 5  # fill-mask's candidates for each of the five texts


def test_chatbot_variants_runs_end_to_end(bench: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from seqlab.config import load_config
    from seqlab.data import load_splits

    data = chatbot_data(tmp_path / "data")
    sets = [*KOREAN_TOY, "train.epochs=2", "train.warmup=10", "eval.max_output_length=8"]
    # one variant: a `seqlab train` each
    bench("chatbot_variants").main(["--data-dir", str(data), "--variants", "char", "--samples", "3",
                                    *(x for item in sets for x in ("--set", item)), "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    (variant, *samples) = table_rows(printed)
    assert variant[0].startswith("char (`") and re.fullmatch(r"[12] / 2", variant[3])  # best epoch / epochs
    tokens_per_character, per_token, per_character = map(float, variant[4:7])
    assert math.isclose(per_character, per_token ** tokens_per_character, rel_tol=0.01)  # both exp(the same NLL / n)
    assert "Chosen on valid (the lowest perplexity per character): **char**" in printed
    valid = load_splits(load_config(ROOT / "configs" / "chatbot_ko.yaml", sets).data, data)["valid"]
    assert [(row[1], row[2]) for row in samples] == valid[:3]
    result = recorded(tmp_path, "chatbot_variants")
    assert [run["variant"] for run in result.runs] == ["char"] and result.tables[0].rows == [variant]
    assert variant[7] == f"{result.runs[0]['valid']['bleu']:.2f}" and result.tables[1].rows == samples
