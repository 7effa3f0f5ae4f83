"""Shared fixtures."""

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The suite runs one worker per core (pytest-xdist, `-n logical` in pyproject.toml): each worker, and every
    # process a test starts from it, computes on one thread, so that the workers never ask for more threads than
    # there are cores (two PyTorch processes on two cores, each on both, slow each other 5-20x).
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from seqlab import precision as _precision  # noqa: E402 (after the thread count, which torch reads on import)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def small_date_config(**train: Any) -> dict[str, Any]:
    """A small date Transformer (1 layer of 32, character tokens, 800 generated training pairs) that trains an
    epoch in about a second: for what training does around the model (processes, kept epochs)."""
    return {
        "seed": 3,
        "data": {"corpus": {"format": "task", "task": "date", "size": 1000, "seed": 5},
                 "split": {"valid": 100, "test": 100, "seed": 1}, "max_source_length": 40},
        "tokens": {"source": {"level": "char"}},
        "model": {"d_model": 32, "num_layers": 1, "num_heads": 4, "d_ff": 64, "dropout": 0.0, "norm": "pre",
                  "max_length": 40},
        "train": {"epochs": 1, "batch_tokens": 600, "schedule": "cosine", "lr": 0.004, "precision": "fp32",
                  "best_metric": "exact_match", **train},
        "eval": {"max_output_length": 12},
    }


def give_search(run_dir: Path, beam: int, length_penalty: float) -> None:
    """The run's config made to say ``eval.beam`` and ``eval.length_penalty``, as a config that chose them on
    valid says them."""
    from seqlab.rundir import RunDir

    run = RunDir(run_dir)
    config = run.config()
    run.save_config(config.model_copy(update={"eval": config.eval.model_copy(
        update={"beam": beam, "length_penalty": length_penalty})}))


def counting_corpus(directory: Path, train: int, valid: int, test: int) -> dict[str, dict[str, str]]:
    """Counting sentences ("one two three ...", 3 to 6 words from a random start), where each word predicts the
    next, so a small language model learns them to a perplexity near 1: written as train / valid / test
    ``lines`` files in ``directory``; returns the config's ``data`` section."""
    import numpy as np

    numbers = "one two three four five six seven eight nine ten".split()
    rng = np.random.default_rng(0)
    lines = [" ".join(numbers[s : s + int(rng.integers(3, 7))]) for s in rng.integers(0, 5, size=train + valid + test)]
    data = {}
    for name, part in [("train", lines[:train]), ("valid", lines[train:train + valid]), ("test", lines[train + valid:])]:
        (directory / f"{name}.txt").write_text("\n".join(part) + "\n", encoding="utf-8")
        data[name] = {"format": "lines", "path": str(directory / f"{name}.txt")}
    return data


def pytest_report_header() -> str:
    """What the CPU offers and what ``auto`` resolves to, at the top of every test run."""
    return _precision.describe()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``each_precision`` runs once in fp32 and once in bf16 (emulated where the CPU has no
    bf16), or only in the precision that ``SEQLAB_PRECISION`` forces for the whole run."""
    if "each_precision" in metafunc.fixturenames:
        forced = _precision.forced()
        metafunc.parametrize("each_precision", [forced] if forced else list(_precision.PRECISIONS), indirect=True)


@pytest.fixture
def each_precision(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The precision ``auto`` resolves to in this test (set through SEQLAB_PRECISION)."""
    monkeypatch.setenv(_precision.ENV, request.param)
    return request.param


@pytest.fixture(autouse=True)
def _not_a_selection_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts outside a selection run, whatever an earlier test's in-process benchmark did
    (``report.choose_on_valid`` sets SEQLAB_SELECTION for its process); tests/test_selection.py sets it itself."""
    monkeypatch.setenv("SEQLAB_SELECTION", "0")


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """What a run keeps per machine (``auto``'s measured precision, whether oneDNN's products pay:
    ``seqlab.precision.choices_file``) goes to the test session's own directory, never the user's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def bf16_the_slower(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """``measure_precision``'s timing made bf16 twice fp32's time per unit, whatever the machine (each timed round
    still runs its step once); the precisions it timed, in order. Its choices kept in ``tmp_path``."""
    from seqlab import runtime

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    timed: list[str] = []

    def seconds_per_unit(step: Callable[[runtime.Runtime], int], each: runtime.Runtime, steps: int) -> float:
        timed.append(each.precision)
        step(each)
        return 2.0 if each.precision == "bf16" else 1.0

    monkeypatch.setattr(runtime, "_seconds_per_unit", seconds_per_unit)
    return timed


@pytest.fixture
def shared_data() -> Path:
    """The real corpora in ``../shared/data`` (dlfs2/, chatbot_ko/, multi30k/); skip loudly where absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent: data-bound acceptance test skipped")
    return SHARED_DATA


KOREAN_PAIRS = [("안녕하세요?", "반가워요!"), ("배고파", "뭐 좀 드세요."), ("잘 자", "좋은 꿈 꾸세요."),
                ("심심해", "같이 놀아요!"), ("고마워", "천만에요.")]


@pytest.fixture(scope="session")
def korean_chatbot(tmp_path_factory) -> Path:
    """The run directory of a tiny Transformer (1+1 layers, 4 heads, char tokens) that has learned
    KOREAN_PAIRS by heart: a few seconds of training, shared by the chat, plot and serve tests."""
    from seqlab.config import parse_config
    from seqlab.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("korean-chatbot")
    tsv = tmp / "pairs.tsv"
    tsv.write_text("".join(f"{q}\t{a}\n" for q, a in KOREAN_PAIRS * 24), encoding="utf-8")
    config = parse_config({
        "data": {"train": {"format": "tsv", "path": str(tsv)}, "valid": {"format": "tsv", "path": str(tsv)},
                 "max_source_length": 16, "max_target_length": 16},
        "tokens": {"shared": True, "source": {"level": "char"}},
        "model": {"d_model": 64, "num_layers": 1, "num_heads": 4, "d_ff": 128, "dropout": 0.0, "max_length": 32},
        "train": {"epochs": 12, "batch_tokens": 200, "warmup": 40, "lr_scale": 0.2, "precision": "fp32",
                  "best_metric": "exact_match"},
        "eval": {"max_output_length": 16},
    })
    run = tmp / "run"
    best = Trainer(config, run, progress=False).fit()
    assert best["valid"]["exact_match"] == 100.0
    return run



CLASS_TOPICS = {"0": ["밥", "날씨", "주말", "운동", "커피"], "1": ["이별", "헤어짐", "눈물"], "2": ["사랑", "설렘", "고백"]}
FILLERS = ["오늘", "정말", "너무", "그냥", "요즘", "또", "계속"]
ENDINGS = ["생각나", "좋다", "힘들어", "어때?", "궁금해"]


def labelled_csv(path: Path, n: int, seed: int) -> Path:
    """``n`` rows of ChatbotData's shape (Q, A, label): a question whose topic word (CLASS_TOPICS) decides its label
    "0", "1" or "2", before or after a filler word, then an ending."""
    import csv

    import numpy as np

    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Q", "A", "label"])
        for _ in range(n):
            label = str(rng.integers(0, 3))
            words = [str(rng.choice(FILLERS)), str(rng.choice(CLASS_TOPICS[label]))]
            rng.shuffle(words)
            writer.writerow([" ".join([*words, str(rng.choice(ENDINGS))]), "-", label])
    return path


PLACES = [f"{a}{b}land" for a in ("bor", "kel", "mir", "tas", "vun") for b in ("a", "o", "e", "i")]
CITIES = [f"{a}{b}ton" for a in ("har", "lin", "pel", "rud", "sov") for b in ("a", "u", "e", "y")]
PEOPLE = [f"{a}{b}" for a in ("Ana", "Bo", "Cy", "Dag", "Eli") for b in ("ra", "n", "mo", "sk")]
FOODS = ["apples", "bread", "cheese", "dates", "eggs", "figs", "grapes", "honey"]


def squad_json(path: Path, n: int, seed: int) -> Path:
    """``n`` SQuAD v1.1 questions, one per context of three facts in random order (a country's capital, a
    person's year of birth, what another person likes), so that only the question says which fact is asked
    for; the facts are joined by two spaces, which the tokenizer collapses and the answers' offsets keep."""
    import json
    import random

    rng = random.Random(seed)
    data = []
    for k in range(n):
        place, (born, likes) = rng.choice(PLACES), rng.sample(PEOPLE, 2)
        city, year, food = rng.choice(CITIES), str(rng.randint(1900, 2020)), rng.choice(FOODS)
        facts = [(f"The capital of {place} is {city}.", f"What is the capital of {place}?", city),
                 (f"{born} was born in {year}.", f"When was {born} born?", year),
                 (f"{likes} likes {food}.", f"What does {likes} like?", food)]
        rng.shuffle(facts)
        context = "  ".join(fact for fact, _, _ in facts)
        fact, question, answer = rng.choice(facts)
        start = context.index(fact) + fact.rindex(answer)
        data.append({"title": f"t{k}", "paragraphs": [{"context": context, "qas": [
            {"id": f"q{k}", "question": question, "answers": [{"text": answer, "answer_start": start}]}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")
    return path


def squad_config(directory: Path, train: int = 600, valid: int = 60, **train_keys: Any) -> dict[str, Any]:
    """A tiny span extractor's config (2 layers of 32, word tokens) on ``squad_json`` files written to
    ``directory``; ``train_keys`` override the train section."""
    squad_json(directory / "train.json", train, 0)
    squad_json(directory / "valid.json", valid, 1)
    return {
        "data": {"train": {"format": "squad", "path": str(directory / "train.json")},
                 "valid": {"format": "squad", "path": str(directory / "valid.json")}, "max_source_length": 48},
        "tokens": {"source": {"level": "word"}},
        "model": {"type": "span", "d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "max_length": 48},
        "train": {"epochs": 4, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32"}
        | train_keys,
    }


def resumes_exactly(config: Any, tmp_path: Path, killed_at: Callable, step: int) -> None:
    """Train ``config`` straight, and killed at ``step`` then resumed: both logs have the same train and valid
    losses, epoch by epoch."""
    from seqlab.rundir import RunDir
    from seqlab.train.trainer import Trainer

    Trainer(config, tmp_path / "straight", progress=False).fit()
    with killed_at(step):
        Trainer(config, tmp_path / "killed", progress=False).fit()
    Trainer(config, tmp_path / "killed", resume=True, progress=False).fit()
    straight, resumed = RunDir(tmp_path / "straight").log(), RunDir(tmp_path / "killed").log()
    assert [r["train_loss"] for r in resumed] == [r["train_loss"] for r in straight]
    assert [r["valid"]["loss"] for r in resumed] == [r["valid"]["loss"] for r in straight]


@pytest.fixture(scope="session")
def tiny_classifier(tmp_path_factory) -> Path:
    """The run directory of a tiny encoder classifier (2 layers, 2 heads, word tokens, pooling cls) trained on
    ``labelled_csv`` questions; a few seconds of training, shared by the serve tests."""
    from seqlab.config import parse_config
    from seqlab.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("tiny-classifier")
    labelled_csv(tmp / "train.csv", 400, 0)
    labelled_csv(tmp / "valid.csv", 60, 1)
    corpus = {"format": "csv", "source_column": "Q", "target_column": "label"}
    config = parse_config({
        "data": {"train": corpus | {"path": str(tmp / "train.csv")}, "valid": corpus | {"path": str(tmp / "valid.csv")},
                 "max_source_length": 16},
        "tokens": {"source": {"level": "word"}},
        "model": {"type": "encoder", "d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "max_length": 16, "pooling": "cls"},
        "train": {"epochs": 3, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32"},
    })
    run = tmp / "run"
    best = Trainer(config, run, progress=False).fit()
    assert best["valid"]["macro_f1"] == 100.0
    return run

@pytest.fixture(scope="session")
def tiny_reader(tmp_path_factory) -> Path:
    """The run directory of a tiny span extractor trained on ``squad_json`` questions (``squad_config``); a few
    seconds of training, shared by the span and serve tests."""
    from seqlab.config import parse_config
    from seqlab.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("tiny-reader")
    best = Trainer(parse_config(squad_config(tmp)), tmp / "run", progress=False).fit()
    assert best["valid"]["exact_match"] >= 90
    return tmp / "run"


@pytest.fixture
def killed_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], contextlib.AbstractContextManager[None]]:
    """``with killed_at(n): Trainer(...).fit()``: the training is killed (KeyboardInterrupt) at its n-th step,
    as a kill -9 would stop it; after the block, steps run normally again."""
    from seqlab.train.trainer import Trainer

    real_step = Trainer.train_step

    @contextlib.contextmanager
    def kill(call: int) -> Iterator[None]:
        calls = {"n": 0}

        def dying_step(self: Trainer, batch: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == call:
                raise KeyboardInterrupt
            return real_step(self, batch)

        monkeypatch.setattr(Trainer, "train_step", dying_step)
        try:
            with pytest.raises(KeyboardInterrupt):
                yield
        finally:
            monkeypatch.setattr(Trainer, "train_step", real_step)

    return kill


def seqlab_here(command: Sequence[str], check: bool = False, env: dict[str, str] | None = None,
                stdout: Any = None, **_: Any) -> subprocess.CompletedProcess[str]:
    """``python -m seqlab ARGS`` (a benchmark's ``report.seqlab``) run by the command line's app in this process, as
    tests/test_train.py runs the commands: the same command without a fresh interpreter's ~3 s of imports. It sees
    the environment it was given while it runs; torch's thread count (``train.threads`` sets it) is put back."""
    import torch
    from typer.testing import CliRunner

    from seqlab.cli import app

    changes = {name: value for name, value in (env or os.environ).items() if os.environ.get(name) != value}
    threads = torch.get_num_threads()
    try:
        result = CliRunner().invoke(app, list(command[3:]), env=changes, catch_exceptions=False)
    finally:
        torch.set_num_threads(threads)
    if check and result.exit_code:
        raise subprocess.CalledProcessError(result.exit_code, list(command), result.stdout, result.stderr)
    return subprocess.CompletedProcess(list(command), result.exit_code, result.stdout if stdout == subprocess.PIPE else None)


@pytest.fixture
def seqlab_commands_here(monkeypatch: pytest.MonkeyPatch) -> Callable[..., subprocess.CompletedProcess[Any]]:
    """The benchmarks' ``seqlab`` commands (``report.seqlab``, ``report.seqlab_train``) run in this process
    (``seqlab_here``); report's other processes (workers, servers) as they are. Returns report's ``subprocess.run``
    as it now is, for a fixture that takes over more of it."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import report

    def run(command: Sequence[str], *args: Any, **options: Any) -> subprocess.CompletedProcess[Any]:
        if list(command[1:3]) == ["-m", "seqlab"]:
            return seqlab_here(command, **options)
        return subprocess.run(command, *args, **options)

    module = SimpleNamespace(**{name: getattr(subprocess, name) for name in dir(subprocess) if not name.startswith("__")})
    module.run = run
    monkeypatch.setattr(report, "subprocess", module)
    return run
