"""The one text -> ids -> text path: truncation with a counted warning, batching that changes nothing."""

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import give_search

from seqlab import runtime as runtime_module
from seqlab.config import parse_config
from seqlab.decoding import DecodeOptions
from seqlab.model import build_model
from seqlab.predictors import translator as translator_module
from seqlab.predictors.base import PROBE_DECODING_STEPS
from seqlab.predictors.translator import Translator
from seqlab.runtime import PROBE_WARMUP, SEARCH_PROBE_ROUNDS, SMALL_SEARCH_ROWS, Runtime
from seqlab.specials import EOS
from seqlab.tokenizer import Tokenizer

FIXTURE_RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"


@pytest.fixture
def translator():
    config = parse_config({
        "data": {"corpus": {"format": "task", "task": "addition"}, "max_source_length": 6, "max_target_length": 4},
        "model": {"d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32, "max_length": 16},
        "train": {"precision": "fp32"},
        "eval": {"batch_size": 3, "max_output_length": 5},
    })
    source = Tokenizer.train(["0123456789+"], config.tokens.source)
    target = Tokenizer.train(["0123456789"], config.tokens.target)
    torch.manual_seed(0)
    return Translator(build_model(config.model, source.vocab_size, target.vocab_size).eval(), source, target, config)


def test_overlong_inputs_are_truncated_with_a_counted_warning(translator, caplog):
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        ids = translator.encode_sources(["1+2", "123+456", "999+999"], "test")
    assert [len(s) for s in ids] == [4, 6, 6] and all(s[-1] == EOS for s in ids)
    assert "2 of 3 test sources are longer than 5 tokens and were truncated" in caplog.text
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        assert [len(t) for t in translator.encode_targets(["12", "1234"], "test")] == [2, 3]
    assert "1 of 2 test targets" in caplog.text


def test_output_does_not_depend_on_batching_or_order(translator):
    texts = ["1+2", "12+5", "7+70", "99+1", "3+3", "5+555", "0+0"]
    together = translator.translate(texts)
    alone = [translator.translate([t])[0] for t in texts]
    assert together == alone
    assert translator.translate(texts[::-1]) == together[::-1]


def test_a_runs_config_gives_its_search_to_every_call_that_gives_none(translator, monkeypatch):
    """``eval.beam`` and ``eval.length_penalty`` (chosen on valid, as configs/multi30k_de_en.yaml's) are the
    search of ``translate``, ``generate`` and ``translate_ids`` where a call gives none; a call's own options
    win, field by field."""
    texts = ["1+2", "12+5", "7+70", "99+1", "3+3", "5+555", "0+0"]
    config = translator.config.model_copy(update={"eval": translator.config.eval.model_copy(
        update={"beam": 3, "length_penalty": 0.6})})
    own = Translator(translator.model, translator.source, translator.target, config)
    searched: list[DecodeOptions] = []
    real = translator_module.search

    def search(model: Any, src: torch.Tensor, options: DecodeOptions, *args: Any, **kwargs: Any) -> Any:
        searched.append(options)
        return real(model, src, options, *args, **kwargs)

    monkeypatch.setattr(translator_module, "search", search)

    def search_of(call: Callable[[], object]) -> tuple[int, float, bool]:
        searched.clear()
        call()
        (search,) = {(o.beam, o.length_penalty, o.sample) for o in searched}  # one search for every batch
        return search

    beam = translator.translate(texts, beam=3, length_penalty=0.6)
    assert own.translate(texts) == beam
    assert search_of(lambda: own.translate(texts)) == (3, 0.6, False)
    assert search_of(lambda: own.generate(texts)) == (3, 0.6, False)
    assert search_of(lambda: own.translate_ids(own.encode_sources(texts))) == (3, 0.6, False)
    assert search_of(lambda: own.translate(texts, DecodeOptions())) == (3, 0.6, False)
    assert own.translate(texts, beam=1) == translator.translate(texts)
    assert search_of(lambda: own.translate(texts, beam=1)) == (1, 0.0, False)
    assert search_of(lambda: own.translate(texts, beam=2)) == (2, 0.6, False)
    assert search_of(lambda: own.generate(texts, sample=True, seed=1)) == (1, 0.0, True)
    assert search_of(lambda: translator.translate(texts)) == (1, 0.0, False)  # a config that says nothing: greedy


def test_the_commands_search_as_the_runs_config_says_unless_told(tmp_path):
    """``seqlab translate`` and ``seqlab eval`` of a run whose config says ``eval.beam: 3`` and
    ``eval.length_penalty: 0.6`` give what ``--beam 3 --length-penalty 0.6`` gives for the same model without
    them; ``--beam 1`` is greedy again."""
    import json
    import shutil

    from typer.testing import CliRunner

    from seqlab.cli import app

    plain = FIXTURE_RUNS / "seq2seq-transformer"
    own = Path(shutil.copytree(plain, tmp_path / "run"))
    give_search(own, 3, 0.6)
    dates = ["september 27, 1994", "10/15/94", "tuesday, march 3, 2009", "1 jan 2000"]

    def output(*args: str) -> str:
        result = CliRunner().invoke(app, [*args])
        assert result.exit_code == 0, result.output
        return result.output

    assert output("translate", str(own), *dates) == output("translate", str(plain), "--beam", "3",
                                                           "--length-penalty", "0.6", *dates)
    assert output("translate", str(own), "--beam", "1", *dates) == output("translate", str(plain), *dates)
    scores = {name: json.loads(output("eval", str(run), "--split", "valid", "--json", *given))
              for name, run, given in [("own", own, []), ("asked", plain, ["--beam", "3", "--length-penalty", "0.6"])]}
    assert scores["own"]["bleu"] == scores["asked"]["bleu"]
    assert scores["own"]["exact_match"] == scores["asked"]["exact_match"]


def test_batches_decoded_side_by_side_give_what_one_after_another_gives(translator):
    texts = ["1+2", "12+5", "7+70", "99+1", "3+3", "5+555", "0+0"]  # three batches of at most 3
    one_by_one = [translator.translate(texts, beam=beam) for beam in (1, 3)]
    translator.runtime = replace(translator.runtime, workers=2)
    assert [translator.translate(texts, beam=beam) for beam in (1, 3)] == one_by_one


def test_a_search_of_few_rows_decodes_in_fp32_where_bf16_is_autos_choice(translator, monkeypatch):
    """``Runtime.autocast``: where ``auto`` chose bf16, a search of fewer than SMALL_SEARCH_ROWS rows (one sentence
    at beam 3: 3 rows) runs without autocast, its outputs and scores exactly fp32's, and measures nothing
    (``Runtime.searching``); every search where bf16 was asked for runs under bf16 autocast."""
    seen: list[bool] = []

    def search(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return real(*args, **kwargs)

    real = translator_module.search
    monkeypatch.setattr(translator_module, "search", search)
    monkeypatch.setattr(runtime_module, "measure_precision", None)  # called, it fails the test
    one, beam = translator.encode_sources(["12+5"]), DecodeOptions(beam=3)
    in_fp32 = translator.search_ids(one, beam)
    translator.runtime = Runtime(torch.device("cpu"), "bf16", auto=True)
    assert translator.search_ids(one, beam) == in_fp32
    translator.runtime = Runtime(torch.device("cpu"), "bf16")
    translator.search_ids(one, DecodeOptions(sample=True, num_samples=SMALL_SEARCH_ROWS, seed=1))
    assert seen == [False, False, True]


def test_autos_precision_for_a_search_of_many_rows_is_measured_for_that_search(translator, bf16_the_slower,
                                                                              monkeypatch):
    """``Runtime.searching``: where ``auto`` decides and a search has SMALL_SEARCH_ROWS rows a batch or more, the
    faster of fp32 and bf16 is measured for it (here bf16 is the slower, though training had chosen it), once per
    machine, model, strategy and size of batch (to the next power of two rows: 66 and 99 rows share one), with as
    many sources as ``eval.batch_size`` whatever the workers make of them, each timed search stopped after
    PROBE_DECODING_STEPS steps; the search then runs in fp32, its outputs fp32's. Fewer rows, or a precision asked
    for, measure nothing."""
    steps: list[int] = []  # per search: the steps it took

    def counting(model, *args, **kwargs):
        class Counted:  # the step contract, counting its steps
            def start(self, src):
                steps.append(0)
                return model.start(src)

            def step(self, *step_args, **step_kwargs):
                steps[-1] += 1
                return model.step(*step_args, **step_kwargs)

        return real(Counted(), *args, **kwargs)

    real = translator_module.search
    monkeypatch.setattr(translator_module, "search", counting)
    sources = translator.encode_sources(["12+5", "3+4", "40+2"])
    many = DecodeOptions(sample=True, num_samples=SMALL_SEARCH_ROWS // 2 + 1, seed=1)  # 2 sources: 66 rows
    in_fp32 = [translator.search_ids(sources[:n], many) for n in (2, 3)]
    assert bf16_the_slower == []
    translator.runtime = Runtime(torch.device("cpu"), "bf16", auto=True)
    translator.search_ids(sources[:1], many)
    assert bf16_the_slower == []
    steps.clear()
    assert translator.search_ids(sources[:2], many) == in_fp32[0]
    assert bf16_the_slower == ["fp32", "bf16"] * SEARCH_PROBE_ROUNDS
    probes = 2 * (PROBE_WARMUP + SEARCH_PROBE_ROUNDS)
    assert steps[:probes] == [PROBE_DECODING_STEPS] * probes and steps[probes] == 5  # the search: max_output_length
    bf16_the_slower.clear()
    assert translator.search_ids(sources, many) == in_fp32[1]
    assert bf16_the_slower == []
    translator.runtime = Runtime(torch.device("cpu"), "bf16", auto=True, workers=2)  # batches of one source here,
    translator.search_ids(sources, many)  # measured for a whole batch (eval.batch_size) all the same, as a call of
    assert bf16_the_slower == ["fp32", "bf16"] * SEARCH_PROBE_ROUNDS  # more sources would make them


def test_translate_wants_a_list(translator):
    with pytest.raises(TypeError, match="list of strings"):
        translator.translate("1+2")


def test_the_books_fixed_width_questions_are_padded_with_spaces_and_have_no_eos(caplog):
    """data.source_width / source_eos: what the book's date model reads (29 characters, space-padded, no <eos>)."""
    config = parse_config({
        "data": {"corpus": {"format": "task", "task": "date"}, "source_eos": False, "source_width": 8},
        "model": {"type": "rnn", "embedding_size": 4, "hidden_size": 8},
        "train": {"precision": "fp32", "schedule": "constant"},
    })
    source, target = Tokenizer.train(["may 1, 99"], config.tokens.source), Tokenizer.train(["1999-05-01"], config.tokens.target)
    translator = Translator(build_model(config.model, source.vocab_size, target.vocab_size).eval(), source, target, config)
    space = source.token_id(" ")
    with caplog.at_level(logging.WARNING, logger="seqlab"):
        short, long = translator.encode_sources(["may 1", "may 1, 99"], "test")
    assert short == source.encode(["may 1"])[0] + [space] * 3
    assert long == source.encode(["may 1, 9"])[0] and EOS not in long
    assert "1 of 2 test sources are longer than 8 tokens" in caplog.text
    assert len(translator.translate(["may 1"])) == 1
    no_space = Tokenizer.train(["may1"], config.tokens.source)
    translator.source = no_space
    with pytest.raises(ValueError, match="data.source_width pads sources with spaces, but the source vocabulary has no space"):
        translator.encode_sources(["may1"])
