"""Data-parallel training: two processes under torchrun (gloo on loopback) take the steps of one process with
``train.accumulate: 2``; a killed process stops the job, and the run resumes under torchrun or in one process."""

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import small_date_config
from safetensors.torch import load_file

from seqlab.rundir import CHECKPOINT, LOG, MODEL, RunDir
from seqlab.train.distributed import EpochSteps, World

# torchrun beside the interpreter running the tests (the venv's)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
            "seqlab"]

# Tolerances of the two ways to the same step, in fp32: the sum of 2 gradients in one process against gloo's
# average of them round differently (about 1e-7); Adam (ε 1e-9) divides by each gradient's running size, so a
# weight whose gradient is that small moves by a different step. Losses stay within 1e-6, weights after one
# epoch (19-39 steps) within 2e-3 (the step size is 4e-3).
LOSS_RTOL, WEIGHT_ATOL = 1e-6, 2e-3


def _steps(streams: list[list[int]], parts: int, world: World | None = None, start: int = 0) -> list[list[int]]:
    epoch = EpochSteps([[np.array([i]) for i in s] for s in streams], parts, world or World())
    return [[int(b[0]) for b in g] for g in epoch.groups(start)]


def test_one_stream_is_stepped_parts_at_a_time_the_last_step_filled_from_the_epochs_first_batches():
    assert _steps([[0, 1, 2, 3, 4]], 2) == [[0, 1], [2, 3], [4, 0]]
    assert _steps([[0, 1, 2, 3, 4]], 1) == [[i] for i in range(5)]
    assert _steps([[0]], 3) == [[0, 0, 0]]
    assert _steps([[0, 1, 2, 3, 4]], 2, start=1) == [[2, 3], [4, 0]]  # resumed at step 1
    assert _steps([[0, 1, 2, 3, 4, 5]], 4, World(rank=1, size=2)) == [[2, 3], [0, 1]]  # rank 1's half of each step


def test_streams_of_a_steps_parts_give_one_batch_each_and_a_process_reads_its_own(monkeypatch):
    assert _steps([[0, 1, 2], [10, 11], [20]], 3) == [[0, 10, 20], [1, 11, 20], [2, 10, 20]]  # shorter ones again
    assert _steps([[0, 1, 2], [10, 11], [20]], 3, start=2) == [[2, 10, 20]]
    monkeypatch.setattr(World, "max", lambda self, value: 3)  # rank 0's longest stream: the other rank's has 3

    class Unread(list):
        def __iter__(self):
            raise AssertionError("rank 1 read rank 0's stream")

    epoch = EpochSteps([Unread([np.array([0])]), [np.array([10]), np.array([11])]], 2, World(rank=1, size=2))
    assert len(epoch) == 3 and [[int(b[0]) for b in g] for g in epoch.groups()] == [[10], [11], [10]]
    with pytest.raises(ValueError, match="^3 streams of batches for steps of 2: Family.batches returns one stream"):
        EpochSteps([[np.array([0])]] * 3, 2, World())  # e.g. a kind that returns its batches, not streams of them


def test_each_rank_takes_its_slice_of_a_step():
    group = [np.array([i]) for i in range(6)]  # 2 processes × accumulate 3
    assert [int(b[0]) for b in World(rank=0, size=2).share(group)] == [0, 1, 2]
    assert [int(b[0]) for b in World(rank=1, size=2).share(group)] == [3, 4, 5]
    assert World().share(group[:1]) == group[:1]


def _write(directory: Path, name: str, config: dict) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def _word_lines(path: Path, words: list[str], lines: int, length: int) -> dict:
    """``lines`` random sentences of ``length`` of ``words`` in ``path``, split 20/20: a config's data section."""
    rng = np.random.default_rng(len(words))
    path.write_text("".join(" ".join(rng.choice(words, length)) + "\n" for _ in range(lines)), encoding="utf-8")
    return {"corpus": {"format": "lines", "path": str(path)}, "split": {"valid": 20, "test": 20, "seed": 1},
            "max_source_length": 16}


def _date_config(directory: Path, **train: object) -> Path:
    config = small_date_config(**train)
    config["eval"]["valid_limit"] = 20
    return _write(directory, "date", config)


def _lm_config(directory: Path, **train: object) -> Path:
    """An LSTM LM: its stream's rows shared by the processes, each group of rows with its own state."""
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "it"]
    return _write(directory, "lm", {
        "seed": 2, "data": _word_lines(directory / "lm.txt", words, 300, 8), "tokens": {"source": {"level": "word"}},
        "model": {"type": "lm", "cell": "lstm", "embedding_size": 16, "hidden_size": 16, "num_layers": 2,
                  "dropout": 0.0},
        "train": {"epochs": 1, "streams": 4, "time_size": 5, "schedule": "constant", "lr": 0.01,
                  "precision": "fp32", **train}})


def _bert_config(directory: Path, **train: object) -> Path:
    """BERT's masked-LM pretraining (masks drawn per batch from the seed, whichever process trains the batch)."""
    words = ["고양이", "강아지", "집에서", "밖에서", "야옹", "멍멍", "운다", "잔다"]
    return _write(directory, "bert", {
        "seed": 4, "data": _word_lines(directory / "bert.txt", words, 200, 5), "tokens": {"source": {"level": "word"}},
        "model": {"type": "bert", "d_model": 32, "num_layers": 1, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "attention_dropout": 0.0, "max_length": 16},
        "train": {"epochs": 1, "batch_sentences": 8, "schedule": "constant", "lr": 3e-3, "precision": "fp32",
                  **train}})


def _run(command: list[str], env: dict[str, str] | None = None, **kwargs: object) -> subprocess.CompletedProcess:
    env = env or os.environ | {"OMP_NUM_THREADS": "1", "SEQLAB_PRECISION": "fp32"}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload]


def _train(command: list[str], config: Path, out: Path, *sets: str) -> None:
    verb = "pretrain" if "bert" in config.name else "train"
    done = _run([*command, verb, str(config), "--out", str(out), *[a for s in sets for a in ("--set", s)]])
    assert done.returncode == 0, done.stderr[-3000:]


def _train_here(config: Path, out: Path, *sets: str, resume: bool = False) -> None:
    """The one-process run, trained in this process (on one thread, as each process under torchrun: no
    interpreter to start; the configs' precision is fp32)."""
    from seqlab.config import load_config
    from seqlab.train.trainer import Trainer

    threads = torch.get_num_threads()
    try:
        Trainer(load_config(config, [*sets, "train.threads=1"]), out, resume=resume, progress=False).fit()
    finally:
        torch.set_num_threads(threads)


def _same_training(one: Path, two: Path, exact: bool = False) -> None:
    """The two runs' logs and final weights agree (bit for bit with ``exact``)."""
    log_one, log_two = RunDir(one).log(), RunDir(two).log()
    assert [r["step"] for r in log_one] == [r["step"] for r in log_two]
    for a, b in zip(log_one, log_two):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=0 if exact else LOSS_RTOL)
        assert b["valid"]["loss"] == pytest.approx(a["valid"]["loss"], rel=0 if exact else 1e-4)
    weights_one = load_file(one / CHECKPOINT)
    weights_two = load_file(two / CHECKPOINT)
    for name, value in weights_one.items():
        if name.startswith("model."):
            if exact:
                assert torch.equal(value, weights_two[name]), name
            else:
                torch.testing.assert_close(weights_two[name], value, atol=WEIGHT_ATOL, rtol=0, msg=name)


READING = '''
"""seqlab, each process writing which record batches of the training shards it reads to read-RANK.txt."""
import os
from pathlib import Path

from seqlab.cli import app
from seqlab.data import prepared

real_column = prepared._column


def column(chunk, name):
    if chunk.path.name.startswith("train-"):
        with open(Path(os.environ["READ_DIR"]) / f"read-{os.environ['RANK']}.txt", "a") as out:
            out.write(f"{chunk.batch}\\n")
    return real_column(chunk, name)


prepared._column = column
app(prog_name="seqlab")
'''


@pytest.fixture(scope="module")
def date_under_torchrun(tmp_path_factory) -> tuple[Path, Path]:
    """The date Transformer's config for 6 epochs with a checkpoint every 7 steps, trained from a prepared
    directory of 8 chunks read 2 at a time, and its run trained under torchrun, unbroken, each process recording
    the chunks it read (``READING``): shared by the seq2seq case of the accumulate test and the killed-rank test."""
    from seqlab.config import load_config
    from seqlab.train.family.seq2seq import Transduction

    tmp = tmp_path_factory.mktemp("date-torchrun")
    config = _date_config(tmp, epochs=6, save_every=7, batch_window=2)
    Transduction.prepare(load_config(config, []), None, tmp / "prepared", progress=False, chunk_rows=100)
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    config = _write(tmp, "date", raw | {"data": raw["data"] | {"prepared": str(tmp / "prepared")}})
    script = tmp / "reading.py"
    script.write_text(READING, encoding="utf-8")
    done = _run([*TORCHRUN[:-2], str(script), "train", str(config), "--out", str(tmp / "two")],
                env=os.environ | {"OMP_NUM_THREADS": "1", "SEQLAB_PRECISION": "fp32", "READ_DIR": str(tmp)})
    assert done.returncode == 0, done.stderr[-3000:]
    return config, tmp / "two"


@pytest.mark.slow
@pytest.mark.parametrize("family", ["seq2seq", "lm", "bert"])
def test_two_processes_take_the_steps_of_one_with_accumulate_2(tmp_path, family, request):
    if family == "seq2seq":
        config, two = request.getfixturevalue("date_under_torchrun")
        read = [set((two.parent / f"read-{rank}.txt").read_text().split()) for rank in (0, 1)]
        assert len(read[0]) == len(read[1]) == 4 and not read[0] & read[1]  # each process its half of the chunks
    else:
        config, two = {"lm": _lm_config, "bert": _bert_config}[family](tmp_path), tmp_path / "two"
        _train(TORCHRUN, config, two)
    _train_here(config, tmp_path / "one", "train.accumulate=2")
    _same_training(tmp_path / "one", two)
    assert (two / MODEL).exists() and not list(two.glob("*.tmp*"))


def _rank_pid(rank: int, out: Path) -> int | None:
    """The pid of torchrun's worker ``rank`` training into ``out``."""
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ and str(out).encode() in cmdline and b"seqlab" in cmdline:
            return int(proc.name)
    return None


@pytest.mark.slow
def test_a_killed_rank_stops_the_job_and_the_run_resumes(tmp_path, date_under_torchrun, caplog):
    config, whole = date_under_torchrun
    out = tmp_path / "killed"
    env = os.environ | {"OMP_NUM_THREADS": "1", "SEQLAB_PRECISION": "fp32"}
    job = subprocess.Popen([*TORCHRUN, "train", str(config), "--out", str(out)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / LOG).exists() or len(RunDir(out).log()) < 2:  # killed inside epoch 3
        assert job.poll() is None and time.monotonic() < deadline, "the job ended before it could be killed"
        time.sleep(0.05)
    pid = _rank_pid(1, out)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode != 0
    assert "rank      : 1" in stderr and "SIGKILL" in stderr  # torchrun names the lost process
    assert len(RunDir(out).log()) < 6

    shutil.copytree(out, tmp_path / "alone")
    resumed = _run([*TORCHRUN, "train", str(config), "--out", str(out), "--resume"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _same_training(whole, out, exact=True)

    with caplog.at_level(logging.INFO, logger="seqlab"):
        _train_here(config, tmp_path / "alone", "train.accumulate=2", resume=True)
    _same_training(whole, tmp_path / "alone")
    assert "resuming at epoch" in caplog.text and "takes" not in caplog.text  # 2 processes × 1 = 1 process × 2: no warning


def test_numpy_engine_and_accumulate_are_refused_together():
    from seqlab.config import ConfigError, parse_config

    with pytest.raises((ConfigError, ValueError), match="train.accumulate 1"):
        parse_config({"data": {"corpus": {"format": "task", "task": "date", "size": 100}},
                      "model": {"type": "rnn", "cell": "lstm", "dropout": 0.0},
                      "train": {"engine": "numpy", "accumulate": 2}})



def test_each_process_hands_on_the_rows_it_trains_and_their_sum_is_the_state(tmp_path):
    """A language model's rows are shared by the processes in groups; after a resume every process holds every
    group's state, but hands on (for the checkpoint's sum) only the groups it trains."""
    from seqlab.config import load_config
    from seqlab.train.family import StreamLM

    config = load_config(_lm_config(tmp_path), [])
    (tmp_path / "run").mkdir()
    whole = StreamLM.build(config, RunDir(tmp_path / "run"), None, False, parts=4)
    for batch in list(whole.batches(1)[0])[:8]:  # two steps of 4 groups
        whole.loss(batch)
    state = whole.carried()
    halves = []
    for share in (range(0, 2), range(2, 4)):
        process = StreamLM.build(config, RunDir(tmp_path / "run"), None, True, parts=4, share=share)
        process.restore(state)
        halves.append(process.carried())
        rows = slice(share.start * process.rows, share.stop * process.rows)
        other = slice(0, share.start * process.rows) if share.start else slice(share.stop * process.rows, None)
        for name, tensor in halves[-1].items():
            assert torch.equal(tensor[:, rows], state[name][:, rows]) and not tensor[:, other].any()
    for name in state:
        assert torch.equal(halves[0][name] + halves[1][name], state[name])


POISONING = '''
"""seqlab, with the third loss that rank 1 computes made NaN (rank 0's stay finite)."""
import os

from seqlab.cli import app
from seqlab.train.family.seq2seq import Transduction

real_loss, calls = Transduction.loss, [0]


def loss(self, indices):
    loss_sum, count = real_loss(self, indices)
    calls[0] += 1
    return (loss_sum * float("nan") if os.environ["RANK"] == "1" and calls[0] == 3 else loss_sum), count


Transduction.loss = loss
app(prog_name="seqlab")
'''


@pytest.mark.slow
@pytest.mark.parametrize("nonfinite", ["stop", "skip"])
def test_every_rank_takes_the_same_decision_on_a_nan_loss(tmp_path, nonfinite):
    script = tmp_path / "poisoned.py"
    script.write_text(POISONING, encoding="utf-8")
    config = _date_config(tmp_path, epochs=2, nonfinite=nonfinite)
    out = tmp_path / "run"
    done = _run([*TORCHRUN[:-2], str(script), "train", str(config), "--out", str(out)])
    if nonfinite == "stop":  # both ranks stop at the step (neither waits for the other), and say so
        assert done.returncode != 0
        assert done.stderr.count("error: training stopped at step 3 (epoch 1): its loss is nan") == 2, done.stderr[-3000:]
        assert not (out / CHECKPOINT).exists()
        return
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["skipped"] for r in RunDir(out).log()] == [1, 0]
    state = load_file(out / CHECKPOINT)
    assert all(torch.isfinite(t).all() for name, t in state.items() if name.startswith(("model.", "optim.")))


LEAVING = '''
"""A step of DDP between two processes, as training takes it, then World.close(): writes how many of gloo's
threads still run."""
import sys
from pathlib import Path

import numpy as np
import torch

from seqlab.train.distributed import World


def train(world):
    model = torch.nn.Linear(2, 2)
    step = world.wrap(model, lambda indices: (model(torch.ones(len(indices), 2)).sum(), len(indices)))
    step(np.zeros(3))[0].backward()


world = World.from_env()
train(world)
world.close()
threads = sum("gloo" in (task / "comm").read_text() for task in Path("/proc/self/task").iterdir())
sys.stdout.write(f"gloo threads: {threads}\\n")
'''


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc/self/task (Linux)")
def test_closing_the_world_stops_gloo_threads_before_the_interpreter_exits(tmp_path):
    """A process group that outlives destroy_process_group keeps gloo's threads running into the interpreter's
    teardown, where one can abort the process (SIGABRT after a finished run, seen in CI)."""
    script = tmp_path / "leaving.py"
    script.write_text(LEAVING, encoding="utf-8")
    done = _run([*TORCHRUN[:-2], str(script)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("gloo threads: 0") == 2, done.stdout
