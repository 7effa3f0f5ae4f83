"""Programs to execute (S104): seed 002's two examples evaluate to what it says, and every generated program's
target is what Python prints when it runs the program."""

from __future__ import annotations

import random
import re

import pytest

from seqlab.config import parse_config
from seqlab.corpora import TaskCorpus
from seqlab.data.programs import program, run
from seqlab.data.tasks import generate_task

SEED_PROGRAMS = [  # seed 002, the applications of seq2seq (Zaremba and Sutskever's Figure 1)
    ("j=8584;for x in range(8):j+=920;b=(1500+j);print((b+7567))", "25011"),
    ("i=8827;c=(i-5347);print(((c+8704)) if 2641<8500 else 5308)", "12184"),
]


@pytest.mark.parametrize(("source", "printed"), SEED_PROGRAMS)
def test_the_seeds_programs_print_what_it_says(source, printed):
    assert run(source) == printed


@pytest.mark.parametrize(("length", "nesting"), [(1, 1), (2, 2), (4, 3), (6, 6)])
def test_every_generated_target_is_what_python_prints(length, nesting):
    rng = random.Random(length * 10 + nesting)
    for _ in range(300):
        source, value = program(rng, length, nesting)
        assert run(source) == str(value), source
        numbers = [int(n) for n in re.findall(r"(?<![\w.])\d+", source)]
        assert max(numbers) < 10 ** max(length, len(str(4 * length)) + 1)  # digits: length (or a small count)


def test_nesting_composes_more_operations():
    rng = random.Random(0)
    sizes = {n: sum(len(program(rng, 4, n)[0]) for _ in range(200)) / 200 for n in (1, 3, 6)}
    assert sizes[1] < sizes[3] < sizes[6]


def test_the_task_is_deterministic_and_draws_no_program_twice(monkeypatch):
    from seqlab.data import tasks

    pairs = generate_task("execute", 500, 3, length=3, nesting=2)
    assert pairs == generate_task("execute", 500, 3, length=3, nesting=2)
    assert pairs != generate_task("execute", 500, 4, length=3, nesting=2)
    assert len({source for source, _ in pairs}) == 500
    monkeypatch.setattr(tasks, "GIVE_UP", 30)  # about 34,000 programs of length 1 and nesting 1 exist
    with pytest.raises(ValueError, match="then 30 repeats in a row"):
        generate_task("execute", 100_000, 1, length=1, nesting=1)


def test_a_config_reads_the_task_with_its_length_and_nesting():
    from seqlab.data import load_splits, resolve_data_dir

    config = parse_config({"data": {"corpus": {"format": "task", "task": "execute", "size": 300, "length": 2,
                                               "nesting": 3}, "split": {"valid": 50, "test": 50}},
                           "tokens": {"source": {"level": "char"}, "shared": True}})
    corpus = config.data.corpus
    assert isinstance(corpus, TaskCorpus) and corpus.options() == {"length": 2, "nesting": 3, "mix": False}
    splits = load_splits(config.data, resolve_data_dir(None))
    train = splits["train"]
    assert len(train) == 200 and all(run(source) == target for source, target in train)


def test_the_mix_strategy_draws_every_length_and_nesting_up_to_the_given():
    def longest_number(source: str) -> int:
        return max(len(n) for n in re.findall(r"(?<![\w.])\d+", source))

    mixed = generate_task("execute", 600, 2, length=3, nesting=3, mix=True)
    fixed = generate_task("execute", 600, 2, length=3, nesting=3)
    assert all(run(source) == target for source, target in mixed)
    assert {longest_number(source) for source, _ in mixed} == {1, 2, 3}  # programs of length 1, 2 and 3
    assert sum(longest_number(source) == 1 for source, _ in fixed) < 5  # only where every draw was below 10
    assert sum(len(s) for s, _ in mixed) < 0.8 * sum(len(s) for s, _ in fixed)  # shorter: less nesting too
