"""Reliability: training killed with SIGKILL (at a random time, inside a save before its rename, just after it)
resumes to bit-identical weights and training state (benchmarks/kill_trials.py, 3 trials here, 20 there); the
corpus readers and the config loader fail only with their one-line errors on generated input
(benchmarks/fuzz.py, ~100 examples a section here)."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def kill_trials():
    """benchmarks/kill_trials.py as a module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCHMARKS))
        import kill_trials

        yield kill_trials


@pytest.fixture(scope="module")
def two_epochs(kill_trials, tmp_path_factory):
    """The reference and control of a 2-epoch run with a checkpoint every 3 of its 39 steps an epoch, shared by
    the kill tests (each trial trains in a directory of its own, by its number)."""
    return kill_trials.prepare(tmp_path_factory.mktemp("two-epochs"), epochs=2, save_every=3)


@pytest.mark.slow
def test_killed_runs_resume_bit_identical(kill_trials, two_epochs):
    """Two kills of the 2-epoch run: at a random time, and after the rename of its 5th checkpoint; each resumed
    once (a kill before a rename: test_a_kill_after_the_epoch_log_record_...; the time kill may land between epoch
    1's log record and its end-of-epoch checkpoint, where that test kills on purpose)."""
    setup = two_epochs
    assert setup.control_differences == [], "two unkilled runs differ: training is not deterministic"
    census, Kill = setup.census, kill_trials.Kill
    # The time kill lands within the first half of the control's writing time: a trial can run a third faster
    # than the control (a neighbour's load that ends between them), and a later kill could miss the run's end.
    kills = [Kill("time", delay=random.Random(0).uniform(0.1, 0.5) * census.writing_seconds),
             Kill("replace:after", k=census.nth("replace", "checkpoint.safetensors", 5))]
    for index, kill in enumerate(kills, 1):
        trial = kill_trials.run_trial(setup, index, [kill])
        assert trial.kills and (trial.resumes == 1 or trial.fresh_starts), trial.line()
        assert trial.identical and trial.log_identical, trial.line()
    assert "checkpoint.safetensors" in trial.kills[-1] and "after replace" in trial.kills[-1]


@pytest.mark.slow
def test_a_kill_after_the_epoch_log_record_does_not_log_the_epoch_twice(kill_trials, two_epochs):
    """39 steps an epoch, a checkpoint every 3: the step-39 checkpoint holds the epoch's whole training, the log
    gets the epoch's record, the kill comes before the epoch-end checkpoint's rename; resumed from step 39 (its
    position still in epoch 1), ``RunDir.truncate_log(1)`` drops the record, which the epoch's end writes again
    (keeping the records up to the checkpoint's step, it was written twice)."""
    kill = kill_trials.Kill("replace:before", k=two_epochs.census.first_after(
        "replace", "checkpoint.safetensors", "fsync log.jsonl"))
    trial = kill_trials.run_trial(two_epochs, 4, [kill])
    assert trial.identical, trial.line()  # the weights and the training state are right
    assert trial.log_identical, trial.line()


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_can_go_on(kill_trials, two_epochs):
    """Killed after config.yaml is saved and before the first checkpoint, ``--resume`` starts the run again from
    its beginning (it used to be neither resumable, 'nothing to resume', nor to be started again in its directory,
    'already holds a run'), to the result of the run that was never killed."""
    kill = kill_trials.Kill("replace:after", k=two_epochs.census.nth("replace", "config.yaml", 1))
    trial = kill_trials.run_trial(two_epochs, 5, [kill])
    assert trial.identical and trial.log_identical, trial.line()
    assert trial.fresh_starts == [], trial.fresh_starts


@pytest.mark.slow
def test_kill_trials_runs_end_to_end(kill_trials, tmp_path):
    """The script as a user runs it, at toy size: one killed trial of a 1-epoch run, resumed to the same result;
    ``--prepared``: every run trains from ``seqlab data prepare``'s shards (5 chunks, batched 2 at a time; the
    tests above train from the corpus)."""
    out = tmp_path / "kill.json"
    kill_trials.main(["--trials", "1", "--epochs", "1", "--seed", "3", "--prepared", "--json", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["summary"]["trials"] == result["summary"]["identical"] == result["summary"]["logs_identical"] == 1
    assert result["summary"]["kills"] >= 1 and result["command"].endswith("--json " + str(out))
    assert result["config"]["data"]["prepared"].endswith("prepared") and result["config"]["train"]["batch_window"] == 2


# --- fuzzing (benchmarks/fuzz.py) -------------------------------------------------------------------------------


@pytest.fixture
def fuzz(monkeypatch: pytest.MonkeyPatch):
    """benchmarks/fuzz.py as a module."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import fuzz

    return fuzz


@pytest.mark.parametrize("section", ["readers", "configs", "api"])
def test_fuzzing_finds_no_crash(fuzz, tmp_path, section):
    """100 generated examples for each reader (book, TSV, aligned, CSV, JSON Lines, lines, SQuAD), 100 configs and 100
    requests to each route of the server: every error is the documented one-line one, every read gives the pairs
    the format's rules give, every answer is a 200 that answers the request or a 4xx/503 with a one-line error.
    What fuzzing found has its test below."""
    outcomes = fuzz.SECTIONS[section](100, 0, tmp_path)
    if section == "api":  # every route that answers a model
        assert [o.name for o in outcomes] == ["translate", "classify", "answer", "generate", "similar", "analogy"]
    for outcome in outcomes:
        assert outcome.examples == 100, outcome.line()
        assert outcome.kinds == {}, f"{outcome.line()}\n{outcome.kinds}\n{outcome.shrunk}"


def test_fuzz_runs_end_to_end(fuzz, tmp_path):
    """The script as a user runs it, at toy size: 20 configs, its JSON written, no crash."""
    import json

    out = tmp_path / "fuzz.json"
    fuzz.main(["--only", "configs", "--examples", "20", "--json", str(out)])
    numbers = json.loads(out.read_text(encoding="utf-8"))
    assert numbers["crashes"] == 0 and numbers["examples"] == 20


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _one_line_config_error(path: Path, overrides: list[str] | None = None) -> str:
    from seqlab.config import ConfigError, load_config

    with pytest.raises(ConfigError) as exc:
        load_config(path, overrides or [])
    return str(exc.value)


def test_a_set_value_that_is_not_yaml_is_a_config_error(tmp_path):
    """It was yaml's ParserError traceback: apply_override parsed the value outside load_config's try."""
    path = _config(tmp_path, "data: {corpus: {format: task, task: date}}\n")
    message = _one_line_config_error(path, ["train.lr=["])
    assert message.startswith("--set train.lr: not a YAML value (") and "\n" not in message, message


@pytest.mark.parametrize("text", ["[" * 5000, "seed: " + "[" * 5000 + "1" + "]" * 5000 + "\n"],
                         ids=["cut", "5,000 nested lists"])
def test_yaml_nested_too_deep_is_a_config_error(tmp_path, text):
    """It was the RecursionError of yaml.safe_load."""
    path = _config(tmp_path, text)
    assert _one_line_config_error(path) == f"{path}: nested too deep to be a config"


def test_an_integer_of_thousands_of_digits_is_a_config_error(tmp_path):
    """It was the ValueError of yaml's int() (Python's int_max_str_digits)."""
    path = _config(tmp_path, "seed: " + "9" * 5000 + "\n")
    limit = sys.get_int_max_str_digits()  # 4300 unless PYTHONINTMAXSTRDIGITS says otherwise
    assert _one_line_config_error(path) == f"{path}: not a usable YAML value (an integer of more than {limit} digits)"


def test_an_unknown_key_with_a_line_break_stays_on_its_line(tmp_path):
    """_describe put the key's name into the message as it is, so its line break split the problem line."""
    message = _one_line_config_error(_config(tmp_path, 'data: {corpus: {format: task, task: date}}\n? "a\\nb"\n: 1\n'))
    assert all(line.startswith("  ") for line in message.split("\n")[1:]), message
    assert message.split("\n")[1:] == ["  'a\\nb': unknown key"], message


# --- the SQuAD reader's fixes, found by fuzzing -------------------------------------------------------------------


def _squad_file(tmp_path: Path, content: bytes, name: str = "q.json") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("content", [b"[" * 100_000, b'{"data": [' + b"9" * 5000 + b"]}"],
                         ids=["nested 100,000 deep", "a number of 5,000 digits"])
def test_squad_json_the_parser_refuses_is_a_one_line_data_error(tmp_path, content):
    from seqlab.data.corpus import BadLines, DataError
    from seqlab.data.squad import read_squad

    path = _squad_file(tmp_path, content)
    with pytest.raises(DataError, match=f"^{re.escape(str(path))}: not SQuAD JSON: [^\n]*$"):
        read_squad(path, BadLines(False))


def test_a_truncated_gzipped_squad_file_is_a_data_error(tmp_path):
    import gzip

    from seqlab.data.corpus import BadLines, DataError
    from seqlab.data.squad import read_squad

    packed = gzip.compress(b'{"version": "1.1", "data": []}')
    path = _squad_file(tmp_path, packed[:-5], "q.json.gz")
    with pytest.raises(DataError, match=f"^{re.escape(str(path))}: cannot read: "):
        read_squad(path, BadLines(False))


def test_a_negative_answer_start_is_not_the_context_counted_from_its_end(tmp_path):
    """context[-4:0] would be empty, but context[-5:-1] is "1977" in "... born in 1977.": a position from the end
    is no position in the context."""
    import json

    from seqlab.data.corpus import BadLines, DataError
    from seqlab.data.squad import read_squad

    qa = {"id": "1", "question": "When?", "answers": [{"text": "1977", "answer_start": -5}]}
    data = {"data": [{"title": "t", "paragraphs": [{"context": "Anara was born in 1977.", "qas": [qa]}]}]}
    path = _squad_file(tmp_path, json.dumps(data).encode())
    with pytest.raises(DataError, match="answers\\[0\\]: '1977' is not the context's text at answer_start -5"):
        read_squad(path, BadLines(False))
