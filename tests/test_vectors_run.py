"""``seqlab vectors``: a corpus file to a run directory and back, through Python and the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from typer.testing import CliRunner

from seqlab.cli import app
from seqlab.config import ConfigError, parse_config
from seqlab.rundir import VECTORS, VOCABULARY, RunDir
from seqlab.vectors import load
from seqlab.vectors import run as vectors_run
from seqlab.vectors.config import VectorsConfig
from seqlab.vectors.run import CORPUS, train_vectors

GROUPS = [[f"{g}{i}" for i in range(5)] for g in "abcd"]  # four topics of five words each


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    """Sentences whose words come from one group each, in upper case (the runs lowercase them)."""
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(GROUPS[rng.integers(4)], size=8)).upper() for _ in range(1500)]
    directory = tmp_path_factory.mktemp("corpus")
    (directory / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def _config(*, on_disk: bool = False, **train: object) -> VectorsConfig:
    raw = {"data": {"corpora": [{"format": "lines", "path": "corpus.txt"}], "on_disk": on_disk},
           "train": {"dim": 16, "window": 2, "min_count": 1, "sample": 0, "epochs": 3, "batch_size": 64, "seed": 3} | train}
    return parse_config(raw, schema=VectorsConfig)


def _group_hits(vectors) -> float:
    """The share of each word's 4 nearest neighbours that are in its group."""
    hits = sum(n[0] == w[0] for g in GROUPS for w in g for n, _ in vectors.most_similar(w, top=4))
    return hits / (20 * 4)


@pytest.mark.parametrize("method", ["count", "cbow", "skipgram"])
def test_every_method_finds_the_planted_groups(tmp_path, corpus_dir, method):
    cfg = _config(method=method, dim=4, window=8) if method == "count" else _config(method=method)  # 4 groups: 4 dims
    vectors = train_vectors(cfg, tmp_path / "run", corpus_dir, progress=False)
    assert len(vectors) == 20 and vectors.vectors.shape == (20, cfg.train.dim) and vectors.vectors.dtype == np.float32
    assert vectors.info["method"] == method and vectors.info["corpus_words"] == 1500 * 8
    assert _group_hits(vectors) >= 0.9
    again = load(tmp_path / "run")
    assert again.words == vectors.words and np.array_equal(again.vectors, vectors.vectors)
    assert "A0" in again and again.most_similar("A0", 3) == vectors.most_similar("a0", 3)
    log = RunDir(tmp_path / "run").log() if method != "count" else []
    assert [r["epoch"] for r in log] == ([1, 2, 3] if method != "count" else [])


def test_the_books_cbow_finds_the_planted_groups(tmp_path, corpus_dir):
    """recipe book: the book's CBOW (whole windows over one stream, Adam on the batch's mean loss)."""
    vectors = train_vectors(_config(method="cbow", recipe="book", alpha=0.01), tmp_path / "run", corpus_dir, progress=False)
    assert _group_hits(vectors) >= 0.9
    with pytest.raises(ConfigError, match="train.recipe book is the book's CBOW: it needs train.method cbow"):
        _config(method="skipgram", recipe="book")


@pytest.mark.parametrize(("recipe", "on_disk"), [("word2vec", False), ("book", False), ("word2vec", True)])
def test_a_killed_word2vec_run_resumes_to_the_same_vectors(tmp_path, corpus_dir, monkeypatch, recipe, on_disk):
    """data.on_disk: the resumed run reads the ids the killed one wrote, not the corpus again."""
    cfg = _config(on_disk=on_disk, method="cbow", recipe=recipe)
    whole = train_vectors(cfg, tmp_path / "whole", corpus_dir, progress=False)
    save = vectors_run._save_state

    def killed_after_two_epochs(run, state):
        save(run, state)
        if state.epochs_done == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(vectors_run, "_save_state", killed_after_two_epochs)
    with pytest.raises(KeyboardInterrupt):
        train_vectors(cfg, tmp_path / "killed", corpus_dir, progress=False)
    monkeypatch.setattr(vectors_run, "_save_state", save)
    with pytest.raises(FileNotFoundError, match="no vectors in this run directory yet"):
        load(tmp_path / "killed")
    with pytest.raises(ConfigError, match="already holds a run"):
        train_vectors(cfg, tmp_path / "killed", corpus_dir, progress=False)
    with pytest.raises(ConfigError, match="with a different train.dim"):
        train_vectors(_config(on_disk=on_disk, method="cbow", dim=8, recipe=recipe), tmp_path / "killed", corpus_dir,
                      resume=True, progress=False)
    if on_disk:
        assert (tmp_path / "killed" / CORPUS / "manifest.json").is_file()
        monkeypatch.setattr(vectors_run, "iter_sentences", None)  # the corpus is not read again
    resumed = train_vectors(cfg, tmp_path / "killed", corpus_dir, resume=True, progress=False)
    assert np.array_equal(resumed.vectors, whole.vectors)  # with the book's Adam, its moments were kept too
    assert not (tmp_path / "killed" / CORPUS).exists()
    assert [r["epoch"] for r in RunDir(tmp_path / "killed").log()] == [1, 2, 3]


@pytest.mark.parametrize("where", ["after its config", "after the first epoch's log record"])
def test_a_word2vec_run_killed_before_its_first_checkpoint_starts_again_on_resume(tmp_path, corpus_dir, monkeypatch,
                                                                                   where, caplog):
    """No epoch's state saved yet: --resume starts the run from its beginning (its log record, if written, is
    dropped), to the vectors of an unbroken run; without it the run is refused. Killed saves' temporary files go."""
    cfg = _config(method="cbow")
    whole = train_vectors(cfg, tmp_path / "whole", corpus_dir, progress=False)
    run = RunDir(tmp_path / "killed")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    if "log" in where:
        monkeypatch.setattr(vectors_run, "_save_state", killed)
    else:
        monkeypatch.setattr(RunDir, "save_vocabulary", killed)
    with pytest.raises(KeyboardInterrupt):
        train_vectors(cfg, run.path, corpus_dir, progress=False)
    monkeypatch.undo()
    assert run.has_run() and not run.has_checkpoint() and (run.path / VOCABULARY).exists() == ("log" in where)
    assert [r["epoch"] for r in run.log()] == [1] if "log" in where else not run.has_log()
    with pytest.raises(ConfigError, match="already holds a run: pass --resume to continue it"):
        train_vectors(cfg, run.path, corpus_dir, progress=False)
    (run.path / ".checkpoint.safetensors.k1ll3d_x.tmp").write_bytes(b"half a state")
    with caplog.at_level("INFO", logger="seqlab"):
        resumed = train_vectors(cfg, run.path, corpus_dir, resume=True, progress=False)
    assert any("starting it from its beginning" in m for m in caplog.messages), caplog.messages
    assert f"{run.path}: deleted 1 temporary file(s) of saves that were killed" in caplog.messages
    assert np.array_equal(resumed.vectors, whole.vectors)
    assert [r["epoch"] for r in run.log()] == [1, 2, 3] and not list(run.path.glob(".*.tmp"))


def test_a_word2vec_run_killed_between_an_epochs_record_and_its_state_logs_the_epoch_once(tmp_path, corpus_dir,
                                                                                           monkeypatch):
    cfg = _config(method="cbow")
    whole = train_vectors(cfg, tmp_path / "whole", corpus_dir, progress=False)
    save = vectors_run._save_state

    def killed_before_the_second_state(run, state):
        if state.epochs_done == 2:
            raise KeyboardInterrupt
        save(run, state)

    monkeypatch.setattr(vectors_run, "_save_state", killed_before_the_second_state)
    with pytest.raises(KeyboardInterrupt):
        train_vectors(cfg, tmp_path / "killed", corpus_dir, progress=False)
    assert [r["epoch"] for r in RunDir(tmp_path / "killed").log()] == [1, 2]
    monkeypatch.undo()
    resumed = train_vectors(cfg, tmp_path / "killed", corpus_dir, resume=True, progress=False)
    assert np.array_equal(resumed.vectors, whole.vectors)
    assert [r["epoch"] for r in RunDir(tmp_path / "killed").log()] == [1, 2, 3]


def test_a_count_run_resumed_is_made_again(tmp_path, corpus_dir):
    """count keeps no checkpoint: resumed (after a kill before its vectors, or not), it is computed again."""
    cfg = _config(method="count", dim=4)
    first = train_vectors(cfg, tmp_path / "run", corpus_dir, progress=False)
    again = train_vectors(cfg, tmp_path / "run", corpus_dir, resume=True, progress=False)
    assert np.array_equal(again.vectors, first.vectors)


def test_vectors_that_do_not_match_their_vocabulary_are_refused(tmp_path, corpus_dir):
    run = RunDir(tmp_path / "run")
    train_vectors(_config(method="count", dim=4), run.path, corpus_dir, progress=False)
    words, counts = run.vocabulary()
    run.save_vocabulary(words[::-1], counts[::-1])  # a vocabulary written by another run
    with pytest.raises(ValueError, match=r"vectors\.safetensors: the vectors do not belong to vocabulary\.json"):
        load(run.path)
    (run.path / VECTORS).write_bytes(b"\xff" * 100)
    with pytest.raises(ValueError, match=r"vectors\.safetensors: not a seqlab vectors file"):
        load(run.path)
    (run.path / VOCABULARY).write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocabulary\.json: not a seqlab vocabulary"):
        load(run.path)


def test_the_count_method_needs_fewer_dimensions_than_words(tmp_path, corpus_dir):
    with pytest.raises(ConfigError, match=r"train.dim \(32\) must be smaller than the vocabulary \(20 words\)"):
        train_vectors(_config(method="count", dim=32), tmp_path / "run", corpus_dir, progress=False)


def test_the_command_line(tmp_path, corpus_dir):
    runner = CliRunner()
    config = tmp_path / "groups.yaml"
    config.write_text("data:\n  corpora:\n    - {format: lines, path: corpus.txt}\n"
                      "train: {method: skipgram, dim: 16, window: 2, min_count: 1, sample: 0, epochs: 3, batch_size: 64}\n")
    run = tmp_path / "run"
    result = runner.invoke(app, ["vectors", "train", str(config), "--out", str(run), "--data-dir", str(corpus_dir)])
    assert result.exit_code == 0, result.output
    assert "skipgram: 20 words × 16 from 12000 words" in result.stderr

    result = runner.invoke(app, ["vectors", "similar", str(run), "a0", "b1", "--top", "4"])
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and lines[0] == "a0" and lines[5] == "b1" and len(lines) == 10
    assert sum(line.strip().startswith("a") for line in lines[1:5]) >= 3
    result = runner.invoke(app, ["vectors", "similar", str(run), "zebra"])
    assert result.exit_code == 2 and "error: 'zebra' is not in the vocabulary" in result.stderr

    result = runner.invoke(app, ["vectors", "analogy", str(run), "a0", "a1", "b0", "--top", "2"])
    assert result.exit_code == 0 and result.stdout.startswith("a0 : a1 = b0 : ?\n")
    assert "a0" not in result.stdout.splitlines()[1]

    questions = tmp_path / "questions.txt"
    questions.write_text(": groups\na0 a1 b0 b1\nA2 A3 C0 C1\na0 a1 zebra b1\n")
    similarities = tmp_path / "pairs.tsv"
    similarities.write_text("# word1\tword2\tscore\na0\ta1\t9\na0\tb0\t1\nc0\tc1\t8\nc0\tzebra\t5\n")
    result = runner.invoke(app, ["vectors", "eval", str(run), "--analogies", str(questions),
                                 "--similarities", str(similarities), "--json"])
    scores = json.loads(result.stdout)
    assert scores["coverage"] == {"analogies": pytest.approx(200 / 3), "similarities": 75.0}
    vectors = load(run)
    cosines = [vectors.similarity(a, b) for a, b in [("a0", "a1"), ("a0", "b0"), ("c0", "c1")]]
    assert scores["spearman"] == pytest.approx(spearmanr(cosines, [9, 1, 8]).statistic)
    assert scores["analogy_accuracy"] == 50.0 * sum(vectors.analogy(*q[:3], top=1)[0][0] == q[3].lower()
                                                    for q in [("a0", "a1", "b0", "b1"), ("A2", "A3", "C0", "C1")])
    result = runner.invoke(app, ["vectors", "eval", str(run), "--analogies", str(questions)])
    assert result.exit_code == 0 and "coverage 66.7% of 3 questions" in result.stdout
    result = runner.invoke(app, ["vectors", "eval", str(run)])
    assert result.exit_code == 2 and "--analogies FILE, --similarities FILE or both" in result.stderr

    exported = tmp_path / "vectors.txt"
    assert runner.invoke(app, ["vectors", "export", str(run), "--out", str(exported)]).exit_code == 0
    header, *rows = exported.read_text(encoding="utf-8").splitlines()
    assert header == "20 16" and [r.split()[0] for r in rows] == vectors.words
    assert np.allclose(np.array([r.split()[1:] for r in rows], dtype=np.float32), vectors.vectors, atol=1e-5)

    figure = tmp_path / "groups.png"
    result = runner.invoke(app, ["plot", "vectors", str(run), "a0", "a1", "b0", "b1", "--out", str(figure)])
    assert result.exit_code == 0 and figure.stat().st_size > 1000
    result = runner.invoke(app, ["plot", "vectors", str(run), "a0", "zebra", "--out", str(figure)])
    assert result.exit_code == 2 and "not in the vocabulary: zebra" in result.stderr
